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
