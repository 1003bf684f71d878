# SPDX-License-Identifier: Apache-2.0
# Helpers of the simulator's shell tests; source after lib_base.sh. Each is a
# command, so it also works under check and wait_for.

export HOME="$T/home"
mkdir -p "$HOME"
FIX=$KPGPUD_SRCDIR/tests/kube-sim/fixtures

# mkns NAME [LABEL-KEY LABEL-VALUE]: create a namespace from YAML (kubectl
# create namespace would send protobuf).
mkns() {
	printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n' "$1" \
		>"$T/ns.yaml"
	[ $# -ge 3 ] && printf '  labels: {%s: "%s"}\n' "$2" "$3" >>"$T/ns.yaml"
	kubectl create -f "$T/ns.yaml" >/dev/null
}

# get ARGS...: kubectl get, errors silenced.
get() { kubectl get "$@" 2>/dev/null; }

# eq WANT ARGS...: kubectl get ARGS prints exactly WANT.
eq() {
	_want=$1; shift
	[ "$(get "$@")" = "$_want" ]
}

# has ERE ARGS...: kubectl get ARGS prints something matching ERE.
has() {
	_re=$1; shift
	get "$@" | grep -Eq -- "$_re"
}

# gone ARGS...: the object does not exist.
gone() { ! kubectl get "$@" >/dev/null 2>&1; }

# fails CMD...: CMD fails (for check).
fails() { ! "$@"; }

# kfails DESC TEXT [NS]: kubectl create -f - (stdin) fails and its error
# output contains TEXT (fixed string).
kfails() {
	cat >"$T/obj.yaml"
	if kubectl create -n "${3:-default}" -f "$T/obj.yaml" >"$T/out" 2>&1
	then fail "$1 (created)"; return; fi
	if grep -qF -- "$2" "$T/out"; then ok "$1"; else
		fail "$1"; sed 's/^/    /' "$T/out"; fi
}

# kcreates DESC [NS]: kubectl create -f - (stdin) succeeds.
kcreates() {
	cat >"$T/obj.yaml"
	if kubectl create -n "${2:-default}" -f "$T/obj.yaml" >"$T/out" 2>&1
	then ok "$1"; else fail "$1"; sed 's/^/    /' "$T/out"; fi
}

# jp KIND NAME JSONPATH [NS]: one jsonpath value of an object ('' if none).
jp() { kubectl get -n "${4:-default}" "$1" "$2" -o "jsonpath=$3" 2>/dev/null; }

# prunning NS POD: the Pod's phase is Running.
prunning() { [ "$(jp pod "$2" '{.status.phase}' "$1")" = Running ]; }

# punschedulable NS POD: PodScheduled=False/Unschedulable.
punschedulable() {
	[ "$(jp pod "$2" '{.status.conditions[?(@.type=="PodScheduled")].reason}' "$1")" = Unschedulable ]
}

# pclaim NS POD: the Pod's first generated claim.
pclaim() { jp pod "$2" '{.status.resourceClaimStatuses[0].resourceClaimName}' "$1"; }

# pdevices NS POD: the devices allocated to the Pod's first claim.
pdevices() {
	jp resourceclaim "$(pclaim "$1" "$2")" \
		'{.status.allocation.devices.results[*].device}' "$1"
}

# tpod NS NAME TEMPLATE [EXTRA-METADATA-FLOW]: a Pod with one claim from
# TEMPLATE used by its container.
tpod() {
	cat <<EOF | kubectl create -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1${4:+, $4}}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: $3}]
  containers:
  - {name: main, image: busybox, resources: {claims: [{name: gpu}]}}
EOF
}

# tmpl NS NAME CLASS [EXACTLY-EXTRA-FLOW]: a ResourceClaimTemplate of one
# request "gpu": exactly {deviceClassName: CLASS, EXTRA} (e.g.
# "selectors: [...], tolerations: [...]").
tmpl() {
	cat <<EOF | kubectl create -f - >/dev/null
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $2, namespace: $1}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: $3${4:+, $4}}
EOF
}
