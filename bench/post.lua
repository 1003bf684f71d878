-- wrk script: POST one AdmissionReview (the file named by BENCH_BODY) to
-- /mutate?timeout=10s on every request (with "Connection: close" when
-- BENCH_CLOSE=1, so each request is a new TLS handshake), and print one
-- JSON line of figures at the end, prefixed "BENCH_JSON ". Non-2xx/3xx
-- answers show up in errors.status. No response() hook: it would make wrk
-- parse every body and load the shared CPUs for nothing.
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.path = "/mutate?timeout=10s"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
if os.getenv("BENCH_CLOSE") == "1" then
	wrk.headers["Connection"] = "close"
end

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format('BENCH_JSON {"requests":%d,"duration_us":%d,' ..
	    '"bytes":%d,"rps":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,' ..
	    '"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f,' ..
	    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,' ..
	    '"timeout":%d}}\n',
	    summary.requests, summary.duration, summary.bytes,
	    summary.requests / (summary.duration / 1e6),
	    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
	    latency:percentile(99) / 1000, latency.max / 1000,
	    latency.mean / 1000, e.connect, e.read, e.write,
	    e.status, e.timeout))
end
