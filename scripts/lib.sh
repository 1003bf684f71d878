# SPDX-License-Identifier: Apache-2.0
# Shell helpers shared by the integration tests (tests/integration/lib_base.sh)
# and the benchmarks (bench/lib.sh); sourced, defines functions only.
#   wait_for SECONDS CMD...	poll CMD every 50 ms until it succeeds; bounded
#				by SECONDS times KPGPUD_TIMEOUT_SCALE
#   tscale SECONDS		SECONDS times KPGPUD_TIMEOUT_SCALE (default 1),
#				for a bound a test hands to a daemon or tool
#   stop_pids PID...		SIGTERM each, give each 5 s (scaled) to exit,
#				then SIGKILL
#   tls_ca DIR [CN]		a CA in DIR/ca.{pem,key} (RSA 2048, 2 days)
#   tls_cert DIR NAME [CN]	DIR/NAME.{pem,key} for localhost and 127.0.0.1,
#				signed by DIR's CA

tscale() {
	case "${KPGPUD_TIMEOUT_SCALE:-1}" in
	1) echo "$1" ;;
	*) awk -v t="$1" -v s="$KPGPUD_TIMEOUT_SCALE" \
	    'BEGIN { v = t * s; if (v == int(v)) printf "%d\n", v;
		else printf "%.2f\n", v }' ;;
	esac
}

wait_for() {
	_wf_limit=$(tscale "$1"); shift
	case "$_wf_limit" in	# whole seconds, rounded up
	*.*) _wf_limit=$(( ${_wf_limit%.*} + 1 )) ;;
	esac
	_wf_end=$(( $(date +%s) + _wf_limit ))
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_wf_end" ] && return 1
		sleep 0.05
	done
	return 0
}

stop_pids() {
	for _sp_p in "$@"; do kill "$_sp_p" 2>/dev/null; done
	_sp_n=$(tscale 100); _sp_n=${_sp_n%.*}
	for _sp_p in "$@"; do
		_sp_i=0
		while kill -0 "$_sp_p" 2>/dev/null && [ $_sp_i -lt "$_sp_n" ]; do
			sleep 0.05; _sp_i=$((_sp_i + 1))
		done
		kill -9 "$_sp_p" 2>/dev/null
	done
	return 0
}

tls_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 \
	    -subj "/CN=${2:-test-ca}" \
	    -keyout "$1/ca.key" -out "$1/ca.pem" >/dev/null 2>&1
}

tls_cert() {
	_tc_dir=$1 _tc_name=$2 _tc_cn=${3:-localhost}
	openssl req -newkey rsa:2048 -nodes -subj "/CN=$_tc_cn" \
	    -keyout "$_tc_dir/$_tc_name.key" -out "$_tc_dir/$_tc_name.csr" \
	    >/dev/null 2>&1
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' \
	    >"$_tc_dir/$_tc_name.ext"
	openssl x509 -req -in "$_tc_dir/$_tc_name.csr" -CA "$_tc_dir/ca.pem" \
	    -CAkey "$_tc_dir/ca.key" -CAcreateserial -days 2 \
	    -extfile "$_tc_dir/$_tc_name.ext" -out "$_tc_dir/$_tc_name.pem" \
	    >/dev/null 2>&1
}
