# SPDX-License-Identifier: Apache-2.0
# Helpers for the kpgpud-quota integration tests (sourced, not run). Needs
# lib_base.sh and lib_sync.sh first (sync_start, api, crd_install, mk_ns ...).
# Gives: quota_start, agent (create with any annotation), annotate, and
# probes of what kpgpud composed in a tenant namespace.

QUOTA_LOG=$T/quota.log
QUOTA_METRICS=$T/quota.prom

# quota_start NAME KUBECONFIG [ARGS...]: start one kpgpud-quota replica
# (QUOTA_PID_<NAME>), fast resync, a 3 s Lease in namespace default.
quota_start() {
	name=$1 kc=$2; shift 2
	t_bg "$KPGPUD_BIN/kpgpud-quota" --allow-root --kubeconfig "$kc" \
	    --cache "$SYNC_CACHE" --sync-socket "$SYNC_SOCK" \
	    --resync 2s --backoff-base 50ms --backoff-max 1s \
	    --lease-namespace default --lease-duration 3s --identity "$name" \
	    --metrics-file "$T/quota-$name.prom" --metrics-interval 200ms \
	    "$@" >>"$T/quota-$name.log" 2>&1
	eval "QUOTA_PID_$name=$!"
}

# agent NS NAME ANNOTATION-JSON: create an Agent with that annotation
# (the JSON given as is; it is escaped here).
agent() {
	ann=$(printf '%s' "$3" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
	api POST "/apis/kubeplus.io/v1alpha1/namespaces/$1/agents" "{\
\"apiVersion\":\"kubeplus.io/v1alpha1\",\"kind\":\"Agent\",\"metadata\":{\
\"name\":\"$2\",\"annotations\":{\"kubeplus.io/gpu-isolation\":$ann}},\
\"spec\":{\"x\":1}}" >/dev/null
}

# annotate NS NAME ANNOTATION-JSON|null: change or remove the annotation.
annotate() {
	if [ "$3" = null ]; then
		ann=null
	else
		ann=$(printf '%s' "$3" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
	fi
	api PATCH "/apis/kubeplus.io/v1alpha1/namespaces/$1/agents/$2" \
	    "{\"metadata\":{\"annotations\":{\"kubeplus.io/gpu-isolation\":$ann}}}" \
	    >/dev/null
}

# jq_api PATH EXPR: evaluate a Python expression on the object at PATH
# (bound to o; None when absent) and print the result.
jq_api() {
	api GET "$1" | python3 -c 'import json,sys
o=json.load(sys.stdin)
if o.get("kind")=="Status": o=None
r=eval(sys.argv[1])
print("" if r is None else (json.dumps(r) if isinstance(r,(dict,list)) else r))' "$2"
}

# ns_isolated NS: the label is "true" and the resolved annotation is set.
ns_isolated() {
	[ "$(jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("labels",{}).get("kubeplus.io/gpu-isolation-enabled")')" = true ] &&
	    [ -n "$(jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("annotations",{}).get("kubeplus.io/gpu-isolation-resolved")')" ]
}

# ns_clean NS: neither the label nor the annotation.
ns_clean() {
	[ -z "$(jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("labels",{}).get("kubeplus.io/gpu-isolation-enabled")')" ] &&
	    [ -z "$(jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("annotations",{}).get("kubeplus.io/gpu-isolation-resolved")')" ]
}

# resolved NS: the resolved annotation's value.
resolved() {
	jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("annotations",{}).get("kubeplus.io/gpu-isolation-resolved")'
}

# shared_claim NS: the name of the tenant's shared claim as kpgpud-quota
# put it on the Namespace (kubeplus.io/gpu-claim; "" when none). The name
# is derived from the claim's spec (<kind>-<name>-gpu-<8 hex>).
shared_claim() {
	jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("annotations",{}).get("kubeplus.io/gpu-claim")'
}

# planned_claim NAME ANNOTATION-JSON [KIND]: the shared claim name kpgpud
# plans for instance KIND/NAME (default Agent) with that annotation
# (kpgpuctl render).
planned_claim() {
	printf '%s' "$2" | python3 -c 'import json,sys
print(json.dumps({"apiVersion":"kubeplus.io/v1alpha1","kind":sys.argv[2],
    "metadata":{"name":sys.argv[1],"namespace":"default",
    "annotations":{"kubeplus.io/gpu-isolation":sys.stdin.read()}}}))' \
	    "$1" "${3:-Agent}" |
	    "$KPGPUD_BIN/kpgpuctl" render | python3 -c 'import json,sys
print([o["metadata"]["name"] for o in json.load(sys.stdin)["objects"]
    if o["kind"] == "ResourceClaim"][0])'
}

# qkey NS QUOTA KEY: a spec.hard value of a quota ("" when absent).
qkey() {
	jq_api "/api/v1/namespaces/$1/resourcequotas/$2" \
	    "o and o['spec'].get('hard',{}).get('$3')"
}

# owned_count NS: kpgpud's claims and templates in NS.
owned_count() {
	a=$(jq_api "/apis/resource.k8s.io/v1/namespaces/$1/resourceclaimtemplates?labelSelector=$MANAGED" 'len(o["items"])')
	b=$(jq_api "/apis/resource.k8s.io/v1/namespaces/$1/resourceclaims?labelSelector=$MANAGED" 'len(o["items"])')
	echo $((a + b))
}

# exists PATH: the object is there.
exists() {
	[ -n "$(jq_api "$1" 'o and o["metadata"]["name"]')" ]
}

# gone PATH: the object is not there.
gone_obj() {
	! exists "$1"
}

# event_with REASON TEXT [NS [TYPE]]: an event of that reason and TYPE
# (default Warning) whose message contains TEXT exists in NS (default:
# default).
event_with() {
	api GET "/api/v1/namespaces/${3:-default}/events" | python3 -c 'import json,sys
d=json.load(sys.stdin)
sys.exit(0 if any(e.get("reason")==sys.argv[1] and e.get("type")==sys.argv[3]
    and sys.argv[2] in e.get("message","") for e in d.get("items",[])) else 1)' "$1" "$2" "${4:-Warning}"
}

# object_writes ROLE: write requests of ROLE to anything but Events
# and Leases, as the simulator counted them.
object_writes() {
	stats | python3 -c 'import json,sys
r=json.load(sys.stdin).get("resources",{}).get(sys.argv[1],{})
print(sum(n for v,res in r.items() if v in ("create","update","patch","delete","deletecollection")
    for k,n in res.items() if k not in ("events","leases.coordination.k8s.io")))' "$1"
}

# metric FILE NAME: the value of a metric line (sum over series).
metric() {
	awk -v n="$2" '$1==n || index($1, n"{")==1 {s+=$2} END {print s+0}' "$1" 2>/dev/null
}

# claim_pod NS NAME FIELD CLAIM: a Pod whose one container uses a claim
# (FIELD resourceClaimName or resourceClaimTemplateName), as admit would
# write it.
claim_pod() {
	api POST "/api/v1/namespaces/$1/pods" "{\"apiVersion\":\"v1\",\
\"kind\":\"Pod\",\"metadata\":{\"name\":\"$2\"},\"spec\":{\"resourceClaims\":\
[{\"name\":\"gpu\",\"$3\":\"$4\"}],\"containers\":[{\"name\":\"main\",\
\"image\":\"busybox\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}]}}" \
	    >/dev/null
}

# ns_claim NS: the tenant's shared claim or template, as the Namespace names
# it (kubeplus.io/gpu-claim, else kubeplus.io/gpu-claim-template).
ns_claim() {
	jq_api "/api/v1/namespaces/$1" 'o["metadata"].get("annotations",{}).get("kubeplus.io/gpu-claim") or o["metadata"].get("annotations",{}).get("kubeplus.io/gpu-claim-template")'
}

# pod_phase NS NAME PHASE: the Pod is in that phase.
pod_phase() {
	[ "$(jq_api "/api/v1/namespaces/$1/pods/$2" 'o and o["status"].get("phase")')" = "$3" ]
}
