# SPDX-License-Identifier: Apache-2.0
# Benchmark client, not a test (bench/admit_calls.sh runs it):
#   admit_conns.py PORT REVIEW NCONN WARM N
# opens NCONN TLS keep-alive connections, POSTs the REVIEW file WARM times
# on each, prints "warm", waits for a line on stdin, POSTs it N more times
# on each (all connections at once), prints "done COUNT-OF-200s".
import asyncio
import ssl
import sys

port, review = int(sys.argv[1]), sys.argv[2]
nconn, warm, n = map(int, sys.argv[3:6])
body = open(review, "rb").read()
req = (b"POST /mutate?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: "
       b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE


async def one(r, w):
    """One review; whether it was answered 200."""
    w.write(req)
    await w.drain()
    head = await r.readuntil(b"\r\n\r\n")
    cl = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            cl = int(line.split(b":")[1])
    await r.readexactly(cl)
    return head.startswith(b"HTTP/1.1 200")


async def run(r, w, count):
    ok = 0
    for _ in range(count):
        ok += await one(r, w)
    return ok


async def main():
    conns = [await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
             for _ in range(nconn)]
    await asyncio.gather(*(run(r, w, warm) for r, w in conns))
    print("warm", flush=True)
    await asyncio.get_running_loop().run_in_executor(None,
                                                     sys.stdin.readline)
    res = await asyncio.gather(*(run(r, w, n) for r, w in conns))
    print("done", sum(res), flush=True)
    for _, w in conns:
        w.close()

asyncio.run(main())
