# SPDX-License-Identifier: Apache-2.0
# Helpers of the end-to-end tests (sourced after lib_base.sh; not a test): the
# whole dev stack (scripts/kpgpud-dev: simulator, kpgpud-sync, -quota and
# -admit under their own uids when root, the webhook registered from
# deploy/) in $T/dev, driven with real kubectl.
#   e2e_up			start it (KUBECONFIG etc. from DIR/env)
#   e2e_finish			stop it; no sanitizer report in a daemon log
#   tenant NS NAME JSON		namespace + Agent with that isolation
#   mkpod NS NAME [FIXTURE]	a pod from tests/fixtures/demo (renamed)
#   claim_of / device_of / allocated / isolated / ns_clean / q / jp /
#   exists / gone
#   admit_metric NAME		a series of admit's /metrics
#   sim_stats			the simulator's request counts (JSON)

E2E=$T/dev
# bound of every wait for the stack to converge (seconds; a loaded CI
# machine with sanitizers is slow, success returns at once)
W=${E2E_WAIT:-90}
DEMOFIX=$KPGPUD_SRCDIR/tests/fixtures/demo
DEVCTL=$KPGPUD_SRCDIR/scripts/kpgpud-dev
MIGSLICE=gpu-node-mig-gpu.nvidia.com-fx01
MANAGED=app.kubernetes.io/managed-by=kpgpud
export HOME=$T/home
mkdir -p "$HOME"
# the release the dev stack's simulator is: KPGPUD_K8S_VERSION (as
# sim_start), unless KPGPUD_DEV_K8S_VERSION says otherwise
: "${KPGPUD_DEV_K8S_VERSION:=${KPGPUD_K8S_VERSION:-}}"
export KPGPUD_DEV_K8S_VERSION
# the daemons' own uids must be able to enter the stack directory
chmod 0711 "$T"

# e2e_exit: the EXIT trap: stop the stack, then lib_base.sh's summary.
e2e_exit() {
	_e2e_rc=$?
	"$DEVCTL" down "$E2E" >/dev/null 2>&1
	(exit $_e2e_rc)
	t_finish
}
trap e2e_exit EXIT

# e2e_up: the stack; exits the test when it does not come up.
e2e_up() {
	if ! "$DEVCTL" up "$E2E" >"$T/up.log" 2>&1; then
		cat "$T/up.log"
		for f in "$E2E"/log/*.log; do
			echo "--- $f"; tail -n 20 "$f"
		done
		fail "dev stack up"
		exit 1
	fi
	# shellcheck disable=SC1091
	. "$E2E/env"
	ok "dev stack up (Kubernetes $(kubectl get --raw /version 2>/dev/null |
	    python3 -c 'import json, sys; print(json.load(sys.stdin)["gitVersion"])' \
	    2>/dev/null))"
}

# e2e_finish: stop the stack, then look for sanitizer reports.
e2e_finish() {
	check "dev stack down" "$DEVCTL" down "$E2E"
	if grep -l 'Sanitizer\|runtime error:' "$E2E"/log/sync.log \
	    "$E2E"/log/quota.log "$E2E"/log/admit.log 2>/dev/null; then
		grep -A30 'Sanitizer\|runtime error:' "$E2E"/log/*.log | head -80
		fail "no sanitizer report in the daemon logs"
	else
		ok "no sanitizer report in the daemon logs"
	fi
}

# q ARGS...: kubectl get, errors silenced.
q() { kubectl get "$@" 2>/dev/null; }

# exists ARGS... / gone ARGS...: kubectl get ARGS finds it / does not.
exists() { kubectl get "$@" >/dev/null 2>&1; }
gone() { ! kubectl get "$@" >/dev/null 2>&1; }

# jp NS POD JSONPATH: one jsonpath of a pod.
jp() { q pod -n "$1" "$2" -o jsonpath="$3"; }

# tenant NS NAME JSON: create namespace NS and an Agent NAME in it with
# that kubeplus.io/gpu-isolation annotation ("" for none).
tenant() {
	q ns "$1" >/dev/null || kubectl create namespace "$1" >/dev/null ||
	    return 1
	{
		printf 'apiVersion: platform.kubeplus.io/v1alpha1\nkind: Agent\n'
		printf 'metadata:\n  name: %s\n  namespace: %s\n' "$2" "$1"
		[ -n "$3" ] && printf "  annotations:\n    kubeplus.io/gpu-isolation: '%s'\n" "$3"
		printf 'spec:\n  model: llama-3-8b\n'
	} | kubectl apply -f - >/dev/null
}

# mkpod NS NAME [FIXTURE]: create a pod from a demo fixture (default the
# plain one), renamed to NAME; kubectl's output in $T/out.
mkpod() {
	_fx=$DEMOFIX/${3:-pod-plain.yaml}
	python3 -c 'import sys
out = []
done = False
for line in open(sys.argv[1]):
    if not done and line.startswith("  name: "):
        line = "  name: %s\n" % sys.argv[2]
        done = True
    out.append(line)
sys.stdout.write("".join(out))' "$_fx" "$2" |
	    kubectl create -n "$1" -f - >"$T/out" 2>&1
}

LABEL='{.metadata.labels.kubeplus\.io/gpu-isolation-enabled}'
RESOLVED='{.metadata.annotations.kubeplus\.io/gpu-isolation-resolved}'

# isolated NS: kpgpud-quota labelled and annotated the namespace.
isolated() {
	[ "$(q ns "$1" -o jsonpath="$LABEL")" = true ] &&
	    [ -n "$(q ns "$1" -o jsonpath="$RESOLVED")" ]
}

# ns_clean NS: the namespace exists without kpgpud's label or annotation.
ns_clean() {
	q ns "$1" >/dev/null &&
	    [ -z "$(q ns "$1" -o jsonpath="$LABEL")" ] &&
	    [ -z "$(q ns "$1" -o jsonpath="$RESOLVED")" ]
}

# claim_of NS POD: the claim generated for the pod's kubeplus-gpu entry.
claim_of() {
	jp "$1" "$2" '{.status.resourceClaimStatuses[?(@.name=="kubeplus-gpu")].resourceClaimName}'
}

# device_of NS CLAIM: the device allocated to a claim.
device_of() {
	q resourceclaim -n "$1" "$2" -o jsonpath='{.status.allocation.devices.results[*].device}'
}

# allocated NS POD: the pod's kubeplus-gpu claim exists and has a device.
allocated() {
	_c=$(claim_of "$1" "$2")
	[ -n "$_c" ] && [ -n "$(device_of "$1" "$_c")" ]
}

# slice_attr DEVICE ATTR: a string attribute of a device of the MIG node.
slice_attr() {
	q resourceslice "$MIGSLICE" -o jsonpath="{.spec.devices[?(@.name==\"$1\")].attributes.$2.string}"
}

# quota_refused NS POD: a FailedResourceClaimCreation event for the pod
# that says the quota was exceeded.
quota_refused() {
	q events -n "$1" --field-selector "reason=FailedResourceClaimCreation,involvedObject.name=$2" \
	    -o jsonpath='{.items[*].message}' | grep -q 'exceeded quota'
}

# admit_metric SERIES: the value of one admit metric series (0 if absent).
admit_metric() {
	curl -s --max-time 5 --cacert "$KPGPUD_ADMIT_CA" \
	    "$KPGPUD_ADMIT_URL/metrics" |
	    awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'
}

# sim_stats: the simulator's request counts per role, verb and resource.
sim_stats() {
	"$KPGPUD_SRCDIR/tests/kube-sim/simctl" "$E2E/sim" stats
}

# sim_stats_reset: zero them.
sim_stats_reset() {
	"$KPGPUD_SRCDIR/tests/kube-sim/simctl" "$E2E/sim" stats-reset >/dev/null
}
