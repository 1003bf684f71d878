# SPDX-License-Identifier: Apache-2.0
# Helpers of scripts/bench (sourced). A private temp dir $B, cleanup of
# everything started here on exit, the stack pieces (simulator, sync,
# admit, quota, nginx), wrk runs and result records.
#   bg CMD...			start CMD, kill it at exit; sets $!
#   wait_for SECONDS CMD...	poll CMD every 50 ms; bounded (scripts/lib.sh)
#   cpu_s PID...			user+system CPU seconds of PIDs (threads in)
#   hwm_kb PID			peak RSS (VmHWM) in kB
#   machine_s			"IDLE STEAL" CPU seconds of the machine
#   rec JSON [KEY=VALUE...]	append one record to $RESULTS
set -u
: "${SRC:=$(cd "$(dirname "$0")/.." && pwd)}"
BIN=${BENCH_BIN:-$SRC/build/bin}
# wait_for, stop_pids, tls_ca, tls_cert (shared with tests/integration)
. "$SRC/scripts/lib.sh"
B=$(mktemp -d "${TMPDIR:-/tmp}/kpgpud-bench.XXXXXX")
RESULTS=$B/results.jsonl
: >"$RESULTS"
_pids=""
ROOT=""
[ "$(id -u)" = 0 ] && ROOT=--allow-root

bench_cleanup() {
	stop_pids $_pids
	for d in "$B"/sim*; do
		[ -f "$d/pid" ] || continue
		kill -CONT "$(cat "$d/pid")" 2>/dev/null	# if paused
		kill "$(cat "$d/pid")" 2>/dev/null
	done
	if [ -n "${BENCH_KEEP:-}" ]; then echo "kept $B"; else rm -rf "$B"; fi
}
trap bench_cleanup EXIT
trap 'exit 130' INT TERM

bg() {
	"$@" &
	_pids="$_pids $!"
}

cpu_s() {
	for p in "$@"; do cat "/proc/$p/stat" 2>/dev/null; done |
	    awk -v hz="$(getconf CLK_TCK)" '{ s += $14 + $15 }
	    END { printf "%.3f", s / hz }'
}

# machine_s: "IDLE STEAL" CPU seconds of the whole machine so far (all
# CPUs), from /proc/stat: time nothing ran, and time the hypervisor gave
# to someone else.
machine_s() {
	awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" {
	    printf "%.3f %.3f", ($5 + $6) / hz, $9 / hz }' /proc/stat
}

hwm_kb() {
	awk '/^VmHWM/ { print $2 }' "/proc/$1/status"
}

rec() {
	python3 "$SRC/bench/report.py" rec "$RESULTS" "$@"
}

# ---- the simulator ------------------------------------------------------

# sim_up DIR: a private API simulator in $B/DIR; sets SIM (its dir).
# BENCH_SIM_ARGS: more simulator options (e.g. --set quota-sync-delay=100ms).
sim_up() {
	SIM=$B/$1
	"$SRC/tests/kube-sim/run" "$SIM" --history 300000 ${BENCH_SIM_ARGS:-} \
	    >"$B/$1.out" 2>&1 || { cat "$B/$1.out"; return 1; }
}

# sim_idle: wait (bounded) until the simulator's controllers have caught up
# with what was just created: under 0.05 s of CPU over half a second. A
# busy simulator would steal the shared CPUs from what is measured.
sim_idle() {
	_sp=$(cat "$SIM/pid")
	for _i in $(seq 1 240); do
		_a=$(cpu_s "$_sp")
		sleep 0.5
		_b=$(cpu_s "$_sp")
		awk -v a="$_a" -v b="$_b" 'BEGIN { exit !(b - a < 0.05) }' &&
		    return 0
	done
	return 1
}

simload() {
	python3 "$SRC/bench/simload.py" "$@"
}

# ---- kpgpud-sync --------------------------------------------------------

# sync_up NAME [ARGS...]: kpgpud-sync on $SIM with its own cache and
# runtime dir $B/NAME; sets SYNC_PID, SYNC_SOCK, SYNC_LOG; waits for
# "initial sync complete" (bounded).
sync_up() {
	_n=$1; shift
	mkdir -p "$B/$_n"
	SYNC_SOCK=$B/$_n/sync.sock
	SYNC_LOG=$B/$_n/sync.log
	SYNC_CACHE=$B/$_n/cache.db
	bg "$BIN/kpgpud-sync" $ROOT --kubeconfig "$SIM/kubeconfig-read-only" \
	    --cache "$SYNC_CACHE" --runtime-dir "$B/$_n" \
	    --instances kubeplus.io/v1alpha1/agents "$@" >"$SYNC_LOG" 2>&1
	SYNC_PID=$!
	wait_for 600 grep -q 'initial sync complete' "$SYNC_LOG" || {
		tail -5 "$SYNC_LOG"; return 1; }
}

# ---- kpgpud-admit -------------------------------------------------------

# tls_up: a CA and a server certificate for 127.0.0.1 in $B/tls (RSA 2048,
# what a cluster's cert-manager would typically issue).
tls_up() {
	mkdir -p "$B/tls"
	tls_ca "$B/tls" bench-ca
	tls_cert "$B/tls" server
}

# admit_up SYNC-SOCK [ARGS...]: kpgpud-admit on a free port; sets
# ADMIT_PID, ADMIT_URL; waits until /readyz answers 200.
admit_up() {
	_s=$1; shift
	ADMIT_LOG=$B/admit.log
	bg "$BIN/kpgpud-admit" $ROOT --listen 127.0.0.1:0 \
	    --tls-cert "$B/tls/server.pem" --tls-key "$B/tls/server.key" \
	    --sync-socket "$_s" --max-namespaces 1000000 "$@" \
	    >"$ADMIT_LOG" 2>&1
	ADMIT_PID=$!
	wait_for 20 grep -q 'listening address=' "$ADMIT_LOG" || {
		cat "$ADMIT_LOG"; return 1; }
	_p=$(sed -n 's/.*listening address=[^ ]* port=\([0-9]*\).*/\1/p' \
	    "$ADMIT_LOG" | tail -n 1)
	ADMIT_URL=https://127.0.0.1:$_p
	wait_for 60 admit_ready || { tail -5 "$ADMIT_LOG"; return 1; }
}

admit_ready() {
	[ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$B/tls/ca.pem" \
	    "$ADMIT_URL/readyz")" = 200 ]
}

# admit_metric NAME: one series of admit's /metrics.
admit_metric() {
	curl -s --max-time 10 --cacert "$B/tls/ca.pem" "$ADMIT_URL/metrics" |
	    awk -v k="$1" '$1 == k { print $2 }'
}

# admit_has_ns N: admit's map holds at least N namespaces.
admit_has_ns() {
	_c=$(admit_metric kpgpud_admit_cached_namespaces)
	[ -n "$_c" ] && [ "${_c%.*}" -ge "$1" ]
}

# mutate URL FILE OUT: POST a review; prints the HTTP status.
mutate() {
	curl -s --max-time 20 --cacert "$B/tls/ca.pem" -o "$3" \
	    -w '%{http_code}' -H 'Content-Type: application/json' \
	    --data-binary @"$2" "$1/mutate?timeout=10s"
}

# ---- nginx: the ceiling -------------------------------------------------

# nginx_up RESPONSE-FILE: nginx with as many workers as admit has threads
# (one per CPU), the same certificate, answering every POST /mutate with
# the fixed body; sets NGINX_PID (master), NGINX_URL.
nginx_up() {
	mkdir -p "$B/nginx"
	_port=$(python3 -c 'import socket; s=socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	_body=$(cat "$1")
	case $_body in *"'"*|*'$'*)
		echo "nginx_up: response has a quote or a dollar" >&2; return 1;;
	esac
	_user=""
	[ "$(id -u)" = 0 ] && _user="user root;"
	sed -e "s|@DIR@|$B/nginx|g" -e "s|@PORT@|$_port|g" \
	    -e "s|@TLS@|$B/tls|g" -e "s|@USER@|$_user|" \
	    -e "s|@WORKERS@|$(nproc)|" "$SRC/bench/nginx.conf.in" \
	    >"$B/nginx/nginx.conf.head"
	python3 - "$B/nginx/nginx.conf.head" "$1" >"$B/nginx/nginx.conf" <<'PY'
import sys
conf = open(sys.argv[1]).read()
body = open(sys.argv[2]).read().strip()
print(conf.replace("@BODY@", body))
PY
	bg nginx -c "$B/nginx/nginx.conf" -p "$B/nginx" -e "$B/nginx/error.log"
	NGINX_PID=$!
	NGINX_URL=https://127.0.0.1:$_port
	wait_for 20 sh -c "curl -s -o /dev/null --cacert $B/tls/ca.pem \
	    -d x $NGINX_URL/mutate" || { cat "$B/nginx/error.log"; return 1; }
}

# nginx_pids: the master and its workers.
nginx_pids() {
	echo "$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')"
}

# ---- wrk ----------------------------------------------------------------

# load NAME SERVER URL BODY CONNS [close] [KEY=VALUE...]: one wrk run of
# $DUR with CONNS keep-alive connections (or a new connection per request
# with "close"); records wrk's figures, the CPU the server used per request
# and anything given as KEY=VALUE.
load() {
	_name=$1 _srv=$2 _url=$3 _body=$4 _c=$5; shift 5
	_close=0
	if [ "${1:-}" = close ]; then _close=1; shift; fi
	_t=$(( _c < $(nproc) ? _c : $(nproc) ))
	case $_srv in
	admit) _sp=$ADMIT_PID ;;
	nginx) _sp=$(nginx_pids) ;;
	esac
	_simp=$(cat "$SIM/pid" 2>/dev/null)
	_syncp=$(printf '%s\n' ${MAIN_SYNC_PID:-} ${SYNC_PID:-} | sort -u)
	_c0=$(cpu_s $_sp) _o0=$(cpu_s $_simp) _y0=$(cpu_s $_syncp)
	_m0=$(machine_s)
	# Nothing the servers do during a run needs the simulator, whose
	# controllers resync every 30 s (1-1.5 CPU s over 110,000 objects):
	# pause it so the two cores hold only wrk and the server.
	[ "${BENCH_PAUSE_SIM:-1}" = 1 ] && [ -n "$_simp" ] &&
	    kill -STOP "$_simp" 2>/dev/null
	BENCH_BODY=$_body BENCH_CLOSE=$_close wrk -t"$_t" -c"$_c" -d"$DUR" \
	    --timeout 5s -s "$SRC/bench/post.lua" "$_url" >"$B/wrk.out" 2>&1
	[ -n "$_simp" ] && kill -CONT "$_simp" 2>/dev/null
	_c1=$(cpu_s $_sp) _o1=$(cpu_s $_simp) _y1=$(cpu_s $_syncp)
	_m1=$(machine_s)
	_j=$(sed -n 's/^BENCH_JSON //p' "$B/wrk.out")
	[ -n "$_j" ] || { cat "$B/wrk.out"; return 1; }
	rec "$_j" name="$_name" server="$_srv" conns="$_c" \
	    new_conn_per_request="$_close" \
	    body_bytes="$(stat -c %s "$_body")" \
	    server_cpu_s="$(awk -v a="$_c0" -v b="$_c1" \
	    'BEGIN { printf "%.3f", b - a }')" \
	    sim_s="$(awk -v a="$_o0" -v b="$_o1" \
	    'BEGIN { printf "%.3f", b - a }')" \
	    sync_s="$(awk -v a="$_y0" -v b="$_y1" \
	    'BEGIN { printf "%.3f", b - a }')" \
	    steal_s="$(awk -v a="${_m0#* }" -v b="${_m1#* }" \
	    'BEGIN { printf "%.3f", b - a }')" \
	    idle_s="$(awk -v a="${_m0% *}" -v b="${_m1% *}" \
	    'BEGIN { printf "%.3f", b - a }')" "$@"
	python3 "$SRC/bench/report.py" last "$RESULTS"
}
