# SPDX-License-Identifier: Apache-2.0
# Helpers for the kpgpud-admit integration tests (sourced after lib_base.sh; not
# a test itself, so not executable).
#   admit_start NAME ARGS...		start kpgpud-admit, set NAME_URL, NAME_PID
#   review NS FIXTURE [OP] [KIND]	an AdmissionReview for a pod fixture
#   post URL FILE			POST it; prints the HTTP code, body in $T/body
#   verdict				summarise $T/body (see admit.py)

ADMIT_PY=$T/admit.py
cat >"$ADMIT_PY" <<'EOF'
import base64, json, sys, os

def review(ns, fixture, op="CREATE", kind="Pod"):
    with open(fixture) as f:
        pod = json.load(f)
    pod["metadata"]["namespace"] = ns
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "uid-" + ns + "-" + os.path.basename(fixture),
                        "kind": {"group": "", "version": "v1", "kind": kind},
                        "resource": {"group": "", "version": "v1",
                                     "resource": "pods"},
                        "namespace": ns, "operation": op,
                        "userInfo": {"username": "test"},
                        "object": pod, "oldObject": None, "dryRun": False}}

def verdict(path):
    # "allowed patched <claim source>", "allowed nopatch", "denied CODE"
    with open(path) as f:
        r = json.load(f)["response"]
    if not r["allowed"]:
        return "denied %d" % r["status"]["code"]
    if "patch" not in r:
        return "allowed nopatch"
    ops = json.loads(base64.b64decode(r["patch"]))
    src = ""
    for op in ops:
        v = op.get("value")
        for c in (v if isinstance(v, list) else [v]):
            if isinstance(c, dict) and c.get("name") == "kubeplus-gpu":
                src = c.get("resourceClaimTemplateName") or \
                    c.get("resourceClaimName") or src
    return "allowed patched " + src

if __name__ == "__main__":
    if sys.argv[1] == "review":
        print(json.dumps(review(*sys.argv[2:])))
    elif sys.argv[1] == "verdict":
        print(verdict(sys.argv[2]))
EOF

# admit_start NAME ARGS...: a private kpgpud-admit on a free port.
admit_start() {
	_n=$1; shift
	: >"$T/$_n.log"
	_root=""
	[ "$(id -u)" = 0 ] && _root=--allow-root
	t_bg "$KPGPUD_BIN/kpgpud-admit" $_root --listen 127.0.0.1:0 \
	    --tls-cert "$T/tls/server.pem" --tls-key "$T/tls/server.key" \
	    --tls-reload-interval 100ms "$@" >>"$T/$_n.log" 2>&1
	eval "${_n}_PID=$!"
	wait_for 10 grep -q 'listening address=' "$T/$_n.log" || {
		cat "$T/$_n.log"; return 1; }
	_p=$(sed -n 's/.*listening address=[^ ]* port=\([0-9]*\).*/\1/p' \
	    "$T/$_n.log" | tail -n 1)
	eval "${_n}_URL=https://127.0.0.1:$_p"
}

review() {
	python3 "$ADMIT_PY" review "$1" "$KPGPUD_SRCDIR/tests/fixtures/pods/$2" \
	    "${3:-CREATE}" "${4:-Pod}"
}

# post URL FILE [CURL-ARGS...]: prints the status code; body in $T/body.
post() {
	_u=$1 _f=$2; shift 2
	curl -s --max-time 20 --cacert "$T/tls/ca.pem" -o "$T/body" \
	    -w '%{http_code}' -H 'Content-Type: application/json' \
	    --data-binary @"$_f" "$@" "$_u/mutate?timeout=10s"
}

verdict() {
	python3 "$ADMIT_PY" verdict "$T/body" 2>/dev/null || echo "unparsable"
}

# get URL PATH: the status code; body in $T/body.
get() {
	curl -s --max-time 10 --cacert "$T/tls/ca.pem" -o "$T/body" \
	    -w '%{http_code}' "$1$2"
}

# metric URL NAME-AND-LABELS: the value of one series ("" if absent).
metric() {
	curl -s --max-time 10 --cacert "$T/tls/ca.pem" "$1/metrics" |
	    awk -v k="$2" '$1 == k { print $2 }'
}

# expect_verdict DESC URL NS FIXTURE WANT: one review, one check.
expect_verdict() {
	_d=$1 _u=$2 _ns=$3 _fx=$4 _want=$5
	review "$_ns" "$_fx" >"$T/req.json"
	_c=$(post "$_u" "$T/req.json")
	_v=$(verdict)
	if [ "$_c" = 200 ] && [ "$_v" = "$_want" ]; then
		ok "$_d"
	else
		fail "$_d: got $_c $_v, want 200 $_want"
	fi
}

mkdir -p "$T/tls"
tls_ca "$T/tls"
tls_cert "$T/tls" server

# admit_stop NAME: SIGTERM, a clean exit (status 0) within 15 s, and no
# sanitizer report in its log.
admit_stop() {
	eval "_pid=\$${1}_PID"
	kill -TERM "$_pid" 2>/dev/null
	_i=0
	while kill -0 "$_pid" 2>/dev/null && [ $_i -lt 300 ]; do
		sleep 0.05; _i=$((_i + 1))
	done
	wait "$_pid"
	_rc=$?
	if [ "$_rc" = 0 ] && ! grep -q 'Sanitizer\|runtime error' "$T/$1.log"
	then
		ok "$1 stops cleanly"
	else
		fail "$1 stops cleanly (exit $_rc)"
		grep -A20 'Sanitizer\|runtime error' "$T/$1.log" | head -40
	fi
}
