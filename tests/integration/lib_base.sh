# SPDX-License-Identifier: Apache-2.0
# Shared helpers for shell integration tests. Source it first thing:
#   . "$(dirname "$0")/../integration/lib_base.sh"
# It makes a private temp dir ($T), removes it and kills what the test
# started (register pids with t_bg) on exit, and prints the closing line
# "N passed, N failed, N skipped". A check that cannot run on this machine
# is counted with skip, never as passed.
set -u
: "${KPGPUD_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${KPGPUD_BIN:=$KPGPUD_SRCDIR/build/test/bin}"
: "${KPGPUD_TESTBIN:=$KPGPUD_SRCDIR/build/test/tests}"
# KPGPUD_TOOLS: kubectl v1.35.2 and helm v4.1.4 (scripts/deps --install
# puts them there), for tests where a newer client matters; the kubectl on
# PATH (the 1.32 dispatcher) serves the others
: "${KPGPUD_TOOLS:=$KPGPUD_SRCDIR/tools}"
export KPGPUD_SRCDIR KPGPUD_BIN KPGPUD_TESTBIN KPGPUD_TOOLS
# wait_for, stop_pids, tls_ca, tls_cert (shared with bench/lib.sh)
. "$KPGPUD_SRCDIR/scripts/lib.sh"
# Debian's python3, with the modules scripts/deps installs (python3-yaml,
# python3-h2); the python3 first on PATH may be another one without them.
PY_DEB=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/kpgpud-test.XXXXXX")
_t_pass=0
_t_fail=0
_t_skip=0
_t_pids=""

t_cleanup() {
	stop_pids $_t_pids
	[ -f "$T/sim/pid" ] && kill "$(cat "$T/sim/pid")" 2>/dev/null
	if [ -n "${KEEP_TMP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
# t_stored_check: the simulator, if still up, found no stored object that
# a reader (its controllers share them) changed in place.
t_stored_check() {
	[ -f "$T/sim/pid" ] && kill -0 "$(cat "$T/sim/pid")" 2>/dev/null ||
	    return 0
	_n=$(curl -s --max-time 60 --cacert "$T/sim/ca.crt" -H \
	    "Authorization: Bearer $(awk '$1 == "admin" {print $2}' \
	    "$T/sim/tokens")" "$(cat "$T/sim/url")/sim/stored-check" |
	    python3 -c 'import json, sys
o = json.load(sys.stdin)
print(o["changed_count"] if o.get("verify") else "off")' 2>/dev/null)
	case $_n in
	0) ok "simulator: no stored object changed in place" ;;
	off|"") ;;
	*) fail "simulator: $_n stored objects changed in place" ;;
	esac
}
t_finish() {
	rc=$?
	t_stored_check
	t_cleanup
	[ $rc -ne 0 ] && [ $_t_fail -eq 0 ] && _t_fail=1
	echo "$_t_pass passed, $_t_fail failed, $_t_skip skipped"
	# the exit status too (an EXIT trap's own status is not the
	# script's): make image-check and deb-check run the script alone
	exit $((_t_fail != 0))
}
trap t_finish EXIT
trap 'exit 130' INT TERM

# t_bg CMD...: start CMD in the background and kill it at exit; sets $!.
t_bg() {
	"$@" &
	_t_pids="$_t_pids $!"
}

# free_ports [N]: N (default 1) distinct loopback TCP ports nothing uses
# now, one per line, taken below the kernel's ephemeral range so that no
# outgoing connection made meanwhile (kubectl, a watch) can occupy one
# before the daemon that is told to listen on it binds it.
free_ports() {
	python3 - "${1:-1}" <<'EOF'
import random, socket, sys
want = int(sys.argv[1])
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 32768
got = []
while len(got) < want:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", random.randrange(10000, lo) if lo > 11000 else 0))
        port = s.getsockname()[1]
    except OSError:
        port = 0
    s.close()
    if port and port not in got:
        got.append(port)
print("\n".join(map(str, got)))
EOF
}

ok()   { echo "ok   $*"; _t_pass=$((_t_pass + 1)); }
fail() { echo "FAIL $*"; _t_fail=$((_t_fail + 1)); }
# skip WHY: a check this machine cannot run (say why); counted as skipped.
skip() { echo "skip $*"; _t_skip=$((_t_skip + 1)); }

# check DESC CMD...: ok when CMD succeeds, FAIL otherwise.
check() {
	desc=$1; shift
	if "$@"; then ok "$desc"; else fail "$desc"; fi
}

# sim_start [ARGS...]: start a private API simulator in $T/sim; sets
# KUBECONFIG and SIM_URL. KPGPUD_K8S_VERSION (1.34 ... 1.37), if set, is
# the Kubernetes release it behaves as (default: the newest); an ARGS
# --set k8s-version= given after it wins.
sim_start() {
	"$KPGPUD_SRCDIR/tests/kube-sim/run" "$T/sim" --set verify-stored=on \
	    ${KPGPUD_K8S_VERSION:+--set "k8s-version=$KPGPUD_K8S_VERSION"} \
	    "$@" >"$T/sim.out" 2>&1 || {
		cat "$T/sim.out"; return 1; }
	KUBECONFIG=$T/sim/kubeconfig
	SIM_URL=$(cat "$T/sim/url")
	export KUBECONFIG SIM_URL
}
