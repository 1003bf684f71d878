#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark, not a test: figures, no assertions. After `make` (release
# build/bin) and `make VARIANT=test test-build` (for fake_sync), run
#   bash bench/admit_calls.sh [callgrind|strace] [BIN] [REVIEWS]
# It measures kpgpud-admit's cost per agent review through TLS and HTTP
# with steady counts rather than time: BIN (default build/bin/kpgpud-admit)
# with --threads 1 and fake_sync holding the bench-agent namespace; 32 TLS
# keep-alive connections (bench/admit_conns.py), each warmed with 2
# reviews; then REVIEWS (default 20) more on each. callgrind: instructions
# (counters zeroed after the warm-up, dumped after the last review) per
# review; strace: system calls per review by name (strace -c -f attached
# for the measured reviews only).
set -u
S=$(cd "$(dirname "$0")/.." && pwd)
MODE=${1:-callgrind} BIN=${2:-$S/build/bin/kpgpud-admit} N=${3:-20}
D=$(mktemp -d /tmp/admit-calls.XXXXXX)
trap 'kill $AP $SP 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/key.pem" \
    -out "$D/cert.pem" -days 1 -subj /CN=localhost >/dev/null 2>&1
echo 'bench-agent isolated {"claimTemplateName":"agent-bench-agent-gpu","instance":"Agent/bench-agent","sharing":"mig"}' >"$D/ns"
: >"$D/api"
"$S/build/test/tests/fake_sync" "$D/sync.sock" "$D/ns" "$D/api" \
    >"$D/sync.log" 2>&1 &
SP=$!
for _ in $(seq 100); do [ -S "$D/sync.sock" ] && break; sleep 0.1; done
ROOT=""
[ "$(id -u)" = 0 ] && ROOT=--allow-root
ARGS="$ROOT --listen 127.0.0.1:0 --tls-cert $D/cert.pem --tls-key $D/key.pem
    --sync-socket $D/sync.sock --threads 1 --first-request-timeout 60s"
case $MODE in
callgrind) valgrind --tool=callgrind --callgrind-out-file="$D/cg.%p" \
    "$BIN" $ARGS >"$D/admit.log" 2>&1 & ;;
strace) "$BIN" $ARGS >"$D/admit.log" 2>&1 & ;;
*) echo "usage: $0 [callgrind|strace] [BIN] [REVIEWS]" >&2; exit 2 ;;
esac
AP=$!
for _ in $(seq 600); do
	grep -q 'listening address=' "$D/admit.log" && break; sleep 0.1
done
PORT=$(sed -n 's/.*listening address=[^ ]* port=\([0-9]*\).*/\1/p' \
    "$D/admit.log" | head -1)
for _ in $(seq 600); do
	curl -sk "https://127.0.0.1:$PORT/readyz" | grep -q ok && break
	sleep 0.1
done
coproc CL { python3 "$S/bench/admit_conns.py" "$PORT" \
    "$S/tests/fixtures/bench/review-agent.json" 32 2 "$N"; }
read -r line <&"${CL[0]}"
[ "$line" = warm ] || { echo "client: $line"; exit 1; }
case $MODE in
callgrind) callgrind_control -z $AP >/dev/null 2>&1 ;;
strace) strace -c -f -p $AP -o "$D/strace.out" 2>/dev/null & STP=$!
	sleep 1 ;;
esac
echo go >&"${CL[1]}"
read -r line <&"${CL[0]}"
echo "reviews answered 200: ${line#done }"
R=$((32 * N))
case $MODE in
callgrind) callgrind_control -d $AP >/dev/null 2>&1; sleep 1
	f=$(ls -t "$D"/cg.*.1 | head -1)
	tot=$(sed -n 's/^\(summary\|totals\): *\([0-9]*\).*/\2/p' "$f" | tail -1)
	echo "instructions: $tot for $R reviews, $((tot / R)) per review" ;;
strace) kill -INT $STP; wait $STP 2>/dev/null
	awk -v n=$R 'NR > 2 && $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ {
	    printf "%-14s %.2f per review\n", $NF, $4 / n }' \
	    "$D/strace.out" | sort -k2 -nr | head -8 ;;
esac
