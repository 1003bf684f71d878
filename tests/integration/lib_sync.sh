# SPDX-License-Identifier: Apache-2.0
# Helpers for the kpgpud-sync integration tests (sourced, not run).
# Needs lib_base.sh first. Gives: sync_start/sync_stop, api (admin REST calls),
# faults, stats, crd_install, and cmp_* that compare the cache file with
# the simulator object by object (name and resourceVersion).

SYNC_CACHE=$T/cache.db
SYNC_SOCK=$T/run/sync.sock
SYNC_LOG=$T/sync.log
SYNC_GVR=kubeplus.io/v1alpha1/agents
CTL="$KPGPUD_BIN/kpgpuctl cache --socket $SYNC_SOCK"
MANAGED=app.kubernetes.io/managed-by=kpgpud

# sync_start [ARGS...]: start kpgpud-sync with the read-only kubeconfig.
sync_start() {
	mkdir -p "$T/run"
	t_bg "$KPGPUD_BIN/kpgpud-sync" --allow-root \
	    --kubeconfig "$T/sim/kubeconfig-read-only" --cache "$SYNC_CACHE" \
	    --runtime-dir "$T/run" --instances "$SYNC_GVR" \
	    --backoff-base 50ms --backoff-max 1s "$@" >>"$SYNC_LOG" 2>&1
	SYNC_PID=$!
	wait_for 20 sync_synced
}

# Whether sync answers STATUS with synced=true.
sync_synced() {
	$CTL status 2>/dev/null | grep -qx 'synced=true'
}

# sync_stop [SIGNAL]: stop sync and wait until it is gone.
sync_stop() {
	kill -"${1:-TERM}" "$SYNC_PID" 2>/dev/null
	wait_for 10 sh -c "! kill -0 $SYNC_PID"
}

# Whether the sync process is still running.
sync_alive() {
	kill -0 "$SYNC_PID" 2>/dev/null
}

ADMIN_TOKEN=
# api METHOD PATH [JSON]: one REST call as admin; prints the body.
api() {
	[ -n "$ADMIN_TOKEN" ] ||
	    ADMIN_TOKEN=$(awk '/token:/{print $2; exit}' "$T/sim/kubeconfig-admin")
	ct=application/json
	[ "$1" = PATCH ] && ct=application/merge-patch+json
	if [ $# -ge 3 ]; then
		curl -sS --cacert "$T/sim/ca.crt" -H "Authorization: Bearer \
$ADMIN_TOKEN" -H "Content-Type: $ct" -X "$1" -d "$3" \
		    "$SIM_URL$2"
	else
		curl -sS --cacert "$T/sim/ca.crt" -H "Authorization: Bearer \
$ADMIN_TOKEN" -X "$1" "$SIM_URL$2"
	fi
}

# faults JSON: set simulator faults.
faults() {
	api POST /sim/faults "$1" >/dev/null
}

# stats: the /sim/stats document.
stats() {
	api GET /sim/stats
}

# stat_count ROLE VERB RESOURCE: requests counted by the simulator.
stat_count() {
	stats | python3 -c 'import json,sys
d=json.load(sys.stdin)
print(d.get("resources",{}).get(sys.argv[1],{}).get(sys.argv[2],{}).get(sys.argv[3],0))' "$@"
}

# crd_install: the Agent custom resource definition.
crd_install() {
	api POST /apis/apiextensions.k8s.io/v1/customresourcedefinitions '{
	  "apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
	  "metadata":{"name":"agents.kubeplus.io"},
	  "spec":{"group":"kubeplus.io","scope":"Namespaced",
	    "names":{"plural":"agents","singular":"agent","kind":"Agent"},
	    "versions":[{"name":"v1alpha1","served":true,"storage":true,
	      "schema":{"openAPIV3Schema":{"type":"object",
	        "x-kubernetes-preserve-unknown-fields":true}}}]}}' >/dev/null
}

# mk_ns NAME [LABELS-JSON]: create a namespace.
mk_ns() {
	api POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\
\"Namespace\",\"metadata\":{\"name\":\"$1\",\"labels\":${2:-{\}}}}" >/dev/null
}

# mk_agent NS NAME [ISOLATION]: create an Agent with the annotation.
mk_agent() {
	api POST "/apis/kubeplus.io/v1alpha1/namespaces/$1/agents" "{\
\"apiVersion\":\"kubeplus.io/v1alpha1\",\"kind\":\"Agent\",\"metadata\":{\
\"name\":\"$2\",\"annotations\":{\"kubeplus.io/gpu-isolation\":\
\"${3:-{\\\"sharing\\\":\\\"mig\\\"\}}\"}},\"spec\":{\"x\":1}}" >/dev/null
}

# mk_quota NS NAME N: an owned ResourceQuota.
mk_quota() {
	api POST "/api/v1/namespaces/$1/resourcequotas" "{\"apiVersion\":\
\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":\"$2\",\"labels\":\
{\"app.kubernetes.io/managed-by\":\"kpgpud\"}},\"spec\":{\"hard\":{\
\"count/resourceclaims.resource.k8s.io\":\"$3\"}}}" >/dev/null
}

# API side lists: "ns/name rv" (or "name rv"), sorted.
api_ns()     { kubectl get ns -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}' | sort; }
api_agents() { kubectl get agents.kubeplus.io -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}' | sort; }
api_quotas() { kubectl get resourcequotas -A -l "$MANAGED" -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.metadata.resourceVersion}{"\n"}{end}' | sort; }

# Cache side, read straight from the file (read-only).
db()         { sqlite3 -readonly "$SYNC_CACHE" "$1"; }
db_ns()      { db "SELECT name || ' ' || rv FROM namespaces" | sort; }
db_agents()  { db "SELECT ns || '/' || name || ' ' || rv FROM instances WHERE gvr = '$SYNC_GVR'" | sort; }
db_quotas()  { db "SELECT ns || '/' || name || ' ' || rv FROM owned WHERE kind = 'ResourceQuota'" | sort; }

# cmp_all: every collection matches, object by object.
cmp_all() {
	[ "$(api_ns)" = "$(db_ns)" ] && [ "$(api_agents)" = "$(db_agents)" ] &&
	    [ "$(api_quotas)" = "$(db_quotas)" ]
}

# show_diff: what differs (for a failure message).
show_diff() {
	diff <(api_ns) <(db_ns) | head -5
	diff <(api_agents) <(db_agents) | head -5
	diff <(api_quotas) <(db_quotas) | head -5
}

# churn N TAG: N rounds of creates, label changes, agents, quotas, deletes.
churn() {
	i=0
	while [ $i -lt "$1" ]; do
		n=$2-$i
		mk_ns "$n" '{"team":"a"}'
		mk_agent "$n" "a-$i"
		mk_quota "$n" "q" $((i + 1))
		api PATCH "/api/v1/namespaces/$n" '{"metadata":{"labels":{"kubeplus.io/gpu-isolation-enabled":"true"},"annotations":{"kubeplus.io/gpu-isolation-resolved":"{\"claimTemplateName\":\"gpu\"}"}}}' >/dev/null
		if [ $((i % 3)) -eq 2 ]; then
			kubectl delete agents.kubeplus.io -n "$n" "a-$i" --wait=false >/dev/null
			kubectl delete resourcequota -n "$n" q --wait=false >/dev/null
			kubectl delete ns "$n" --wait=false >/dev/null
		fi
		i=$((i + 1))
	done
}

# only_reads ROLE: the role made no write request at all.
only_reads() {
	stats | python3 -c 'import json,sys
r=json.load(sys.stdin)["roles"].get(sys.argv[1],{})
bad=[v for v in r if v not in ("get","list","watch","nonresource")]
sys.exit(1 if bad or not r else 0)' "$1"
}

# sync_finish: stop sync with SIGTERM (its leak check runs at exit under
# ASan) and check that its log has no sanitizer report.
sync_finish() {
	sync_stop TERM
	if grep -q 'Sanitizer\|runtime error:' "$SYNC_LOG"; then
		grep -A30 'Sanitizer\|runtime error:' "$SYNC_LOG" | head -60
		fail "no sanitizer report in the sync log"
	else
		ok "no sanitizer report in the sync log"
	fi
}

# cmp_ctl: kpgpuctl cache list (over sync.sock) shows every namespace and
# exactly the isolated ones the API has.
cmp_ctl() {
	[ "$($CTL list | awk '{print $1}' | sort)" = \
	    "$(kubectl get ns -o name | sed 's|^namespace/||' | sort)" ] &&
	[ "$($CTL list | awk '$2 == "true" {print $1}' | sort)" = \
	    "$(kubectl get ns -l kubeplus.io/gpu-isolation-enabled=true -o name |
	    sed 's|^namespace/||' | sort)" ]
}
