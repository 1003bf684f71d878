#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Benchmark, not a test: figures, no assertions. Run after
# `make VARIANT=test test-build` with
#   bash bench/sync_bench.sh [NAMESPACES]
# Prints kpgpud-sync's initial sync time and peak RSS for NAMESPACES
# (default 100000) namespaces, the restart (resume) time, and the
# event-to-visible latency through sync.sock (create a namespace, time
# until a subscriber sees its CHANGE), as median and max of 50.
: "${KPGPUD_SRCDIR:=$(cd "$(dirname "$0")/.." && pwd)}"
. "$KPGPUD_SRCDIR/tests/integration/lib_base.sh"
. "$KPGPUD_SRCDIR/tests/integration/lib_sync.sh"
N=${1:-100000}

sim_start --history 200000 || exit 1
echo "creating $N namespaces in the simulator..."
i=0
while [ $i -lt "$N" ]; do
	python3 -c 'import json, sys
a, b = int(sys.argv[1]), int(sys.argv[2])
print(json.dumps({"items": [{"apiVersion": "v1", "kind": "Namespace",
    "metadata": {"name": "tenant-%06d" % k, "labels": {"team": "t%d" % (k % 50)}}}
    for k in range(a, b)]}))' $i $((i + 5000 > N ? N : i + 5000)) >"$T/bulk.json"
	api POST /sim/bulk "@$T/bulk.json" >/dev/null
	i=$((i + 5000))
done
# CPU seconds (user+sys) the sync process used so far
cpu() { awk '{printf "%.2f", ($14 + $15) / 100}' /proc/$SYNC_PID/stat; }
t0=$(date +%s%N)
sync_start --list-limit "${LIMIT:-500}" --qps 1000 --burst 1000
wait_for 600 sync_synced
t1=$(date +%s%N)
grep 'initial sync complete' "$SYNC_LOG"
echo "initial sync (process start to synced=true via sync.sock, list limit ${LIMIT:-500}): $(( (t1 - t0) / 1000000 )) ms wall, $(cpu) s CPU in kpgpud-sync"
echo "peak RSS after initial sync: $(awk '/VmHWM/{print $2, $3}' /proc/$SYNC_PID/status)"
echo "cache file: $(du -h "$SYNC_CACHE" | cut -f1) (+ WAL $(du -h "$SYNC_CACHE-wal" 2>/dev/null | cut -f1))"
echo "namespaces cached: $(db 'SELECT count(*) FROM namespaces')"

# event-to-visible latency through sync.sock
t_bg $KPGPUD_BIN/kpgpuctl cache --socket "$SYNC_SOCK" watch >"$T/w" 2>&1
wait_for 60 grep -q '^SNAPSHOT_END' "$T/w"
: >"$T/lat"
for k in $(seq 1 50); do
	s=$(date +%s%N)
	mk_ns "lat-$k"
	m=$(date +%s%N)
	while ! grep -q " Namespace lat-$k lat-$k present" "$T/w"; do :; done
	e=$(date +%s%N)
	echo "$(( (e - m) / 1000 )) $(( (m - s) / 1000 ))" >>"$T/lat"
done
sort -n "$T/lat" | awk '{a[NR]=$1; c+=$2} END {printf "event-to-visible latency (API create returned -> CHANGE printed by a sync.sock subscriber, busy-polled): median %.1f ms, max %.1f ms over %d; the create call itself averaged %.1f ms\n", a[int((NR+1)/2)]/1000, a[NR]/1000, NR, c/NR/1000}'
echo "peak RSS with a full subscriber: $(awk '/VmHWM/{print $2, $3}' /proc/$SYNC_PID/status)"

sync_stop TERM
t0=$(date +%s%N)
sync_start
t1=$(date +%s%N)
echo "restart with stored resourceVersions: $(( (t1 - t0) / 1000000 )) ms to synced"
