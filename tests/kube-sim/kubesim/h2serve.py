# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 (h2 over TLS, negotiated by ALPN) for the simulated API server.

One connection thread owns the TLS socket: it reads frames, feeds them to
python3-h2's state machine and writes whatever the machine has queued.
Each request stream runs the ordinary request handler (server.Handler) in a
worker thread of its own (workers are reused: no thread start per request),
so lists and watches are concurrent streams on one connection; a handler
writes its response to the socket itself when the socket takes it. Response bytes honour the peer's flow-control windows (a writer
waits for WINDOW_UPDATE); request bodies are acknowledged as they arrive.
A stream reset by the client (RST_STREAM) closes its watch at once; a
dropped watch (fault) resets its stream; shutdown sends GOAWAY."""

import email.utils
import http.client
import io
import queue
import select
import socket
import ssl
import sys
import threading
import time

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings
except ImportError:  # Debian's python3-h2 under another interpreter
    sys.path.append("/usr/lib/python3/dist-packages")
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.exceptions
    import h2.settings

from .server import MAX_BODY, Handler

MAX_STREAMS = 1000          # kube-apiserver's --http2-max-streams-per-connection
MAX_HEADER_LIST = 1 << 20   # Go's http2 default (1 MiB)
RECV_WINDOW = 1 << 24       # connection receive window we grant
HIGH_WATER = 4 << 20        # queued bytes before writers wait for the socket
KICK_BYTES = 256 << 10      # queued bytes before the socket is woken anyway
HOP_BY_HOP = {"connection", "transfer-encoding", "keep-alive",
              "proxy-connection", "upgrade"}


WORKER_IDLE = 30.0          # seconds an idle stream worker waits for work


class Workers:
    """Threads that run request streams, kept for reuse: handing a stream
    to an idle worker is one queue put, where starting a thread makes the
    connection thread wait until the new thread runs (a GIL round trip,
    milliseconds on a loaded machine). A worker idle for WORKER_IDLE
    seconds ends; there are as many as streams running at once (watches
    hold theirs)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.q = queue.SimpleQueue()
        self.idle = 0   # waiting workers not yet promised a job

    def submit(self, fn, stats):
        """Run fn() in a worker thread (counted in stats when new)."""
        with self.lock:
            if self.idle:
                self.idle -= 1
                self.q.put(fn)
                return
        stats.add("workers_started")
        threading.Thread(target=self._work, args=(fn,), name="h2-stream",
                         daemon=True).start()

    def _work(self, fn):
        """Run jobs until idle for WORKER_IDLE seconds."""
        while True:
            try:
                fn()
            except Exception:  # H2Request.run logs its own errors
                pass
            fn = None
            with self.lock:
                self.idle += 1
            try:
                fn = self.q.get(timeout=WORKER_IDLE)
            except queue.Empty:
                with self.lock:
                    try:  # a job promised to the idle ones just came
                        fn = self.q.get_nowait()
                    except queue.Empty:
                        self.idle -= 1
                        return


WORKERS = Workers()


class H2Stats:
    """HTTP/2 counters for /sim/stats."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        """Zero every counter."""
        with self.lock:
            self.c = {"connections": 0, "streams": 0, "resets_received": 0,
                      "resets_sent": 0, "goaway_sent": 0,
                      "goaway_received": 0, "workers_started": 0}

    def add(self, key, n=1):
        """Count n of key."""
        with self.lock:
            self.c[key] += n

    def snapshot(self):
        """A copy of the counters."""
        with self.lock:
            return dict(self.c)


class StreamGone(BrokenPipeError):
    """The stream or the connection is gone: stop writing."""


class H2Request(Handler):
    """One request stream, served by the HTTP/1.1 handler's code with its
    response plumbing (status line, headers, body, chunks) mapped to h2
    HEADERS and DATA frames."""

    def __init__(self, conn, stream_id, headers):
        self.conn = conn
        self.sid = stream_id
        self.server = conn.server
        self.client_address = conn.addr
        self.request = None
        self.request_version = "HTTP/2.0"
        self.close_connection = False
        self.truncated = False
        self.watcher = None
        self.gone = False
        self.ended = False
        self.sent_headers = False
        self.body = bytearray()
        self.body_len = 0
        self._resp = None
        self.out_headers = None     # HEADERS not yet sent
        self.out_body = bytearray()  # DATA not yet sent
        msg = http.client.HTTPMessage()
        pseudo = {}
        for k, v in headers:
            if k.startswith(":"):
                pseudo[k] = v
            else:
                msg[k] = v
        if pseudo.get(":authority") and "Host" not in msg:
            msg["Host"] = pseudo[":authority"]
        self.headers = msg
        self.command = pseudo.get(":method", "GET")
        self.path = pseudo.get(":path", "/")
        self.requestline = "%s %s HTTP/2.0" % (self.command, self.path)
        self.wfile = self
        self.rfile = io.BytesIO()

    # --- request body ------------------------------------------------------

    def add_body(self, data):
        """Buffer request bytes up to just over the cap (the rest is
        counted and dropped; the handler answers 413)."""
        self.body_len += len(data)
        if len(self.body) <= MAX_BODY:
            self.body += data

    def _read_body(self):
        """The request body (capped), or b''."""
        if self._body_done:
            return b""
        self._body_done = True
        if self.body_len > MAX_BODY:
            from .hooks import ApiError
            raise ApiError(413, "RequestEntityTooLarge", "Request entity "
                           "too large: limit is 3145728")
        return bytes(self.body)

    # --- response ----------------------------------------------------------

    def send_response(self, code, message=None):
        """Start the response headers."""
        self.log_request(code)
        self._resp = [(":status", str(code)),
                      ("date", email.utils.formatdate(usegmt=True))]

    def send_header(self, keyword, value):
        """Add one header (connection-specific ones do not exist in h2)."""
        k = keyword.lower()
        if k not in HOP_BY_HOP and self._resp is not None:
            self._resp.append((k, str(value)))

    def end_headers(self):
        """Keep the HEADERS frame until the body is known (one flush for
        a whole response: fewer wake-ups of the connection thread)."""
        self.out_headers, self._resp = self._resp, None
        self.sent_headers = True

    def write(self, data):
        """Body bytes (wfile.write): kept until the response ends or a
        streamed piece follows."""
        self.out_body += data

    def _flush(self, data=b"", end=False):
        """Send what is kept, then data; END_STREAM when end."""
        hdrs, self.out_headers = self.out_headers, None
        if self.out_body:
            data, self.out_body = bytes(self.out_body) + data, bytearray()
        self.conn.send(self, hdrs, data, end)

    def flush(self):
        """Nothing is buffered here."""

    def send_chunk(self, data):
        """One piece of a streamed (watch) body; b'' ends the stream."""
        if data:
            self._flush(data)
        else:
            self.end_watch(False)

    def end_watch(self, dropped):
        """End a watch stream: cleanly, or by RST_STREAM when the watch
        was dropped (what a failing server or proxy does to a stream)."""
        if dropped:
            self.conn.reset(self, h2.errors.ErrorCodes.INTERNAL_ERROR)
        else:
            self._flush(b"", True)

    def on_watch(self, w):
        """The watch this stream serves (closed when the stream goes)."""
        self.watcher = w
        if self.gone:
            w.close()

    def run(self):
        """Serve the request, then end or reset the stream."""
        try:
            self._dispatch()
            if self.truncated:
                self._flush()
                self.conn.reset(self, h2.errors.ErrorCodes.INTERNAL_ERROR)
            elif not self.ended and self.sent_headers:
                self._flush(b"", True)
            elif not self.sent_headers and not self.gone:
                self.conn.reset(self, h2.errors.ErrorCodes.INTERNAL_ERROR)
        except (StreamGone, OSError):
            pass
        except Exception as e:  # a bug: log, reset the stream
            self.server.sim.log("h2 stream %d: %r" % (self.sid, e))
            try:
                self.conn.reset(self, h2.errors.ErrorCodes.INTERNAL_ERROR)
            except (StreamGone, OSError):
                pass
        finally:
            self.conn.stream_done(self)


class H2Connection:
    """One h2 connection: the frame loop and the writers' side."""

    def __init__(self, server, sock, addr):
        self.server = server
        self.sock = sock
        self.addr = addr
        self.lock = threading.Condition(threading.Lock())
        cfg = h2.config.H2Configuration(client_side=False,
                                        header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=cfg)
        self.streams = {}
        self.out = bytearray()
        self.closed = False
        self.broken = False
        self.goaway = False
        self.wake_r, self.wake_w = socket.socketpair()
        self.wake_r.setblocking(False)
        self.wake_w.setblocking(False)
        self.kicked = False
        self.ready = []     # complete requests to hand to workers

    # --- writers (any thread) ------------------------------------------------

    def _kick(self):
        """Wake the connection thread to flush (lock held)."""
        if not self.kicked:
            self.kicked = True
            try:
                self.wake_w.send(b"x")
            except OSError:
                pass

    def _check(self, st):
        """Raise StreamGone when st can no longer be written (lock held)."""
        if self.closed or self.broken or st.gone or st.ended:
            raise StreamGone()

    def _out(self, io=False):
        """Write what h2 queued, as far as the socket takes it now (lock
        held: every TLS read and write happens under it, so any thread
        may write); what is left waits for the connection thread, woken
        unless io. True when all was written."""
        data = self.h2.data_to_send()
        if data:
            self.out += data
        while self.out:
            try:
                n = self.sock.send(bytes(self.out[:262144]))
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError,
                    BlockingIOError):
                if not io:
                    self._kick()
                return False
            except OSError:
                self.broken = True
                self.out.clear()
                if not io:
                    self._kick()
                return False
            del self.out[:n]
        self.lock.notify_all()
        return True

    def send(self, st, hdrs, data, end):
        """Queue HEADERS (if hdrs) and DATA within the peer's flow-control
        windows, END_STREAM when end; waits for WINDOW_UPDATE (or for the
        socket) when the windows are exhausted. One wake-up of the
        connection thread per call, unless it has to wait."""
        view = memoryview(data)
        sent = 0
        with self.lock:
            try:
                self._check(st)
                if hdrs is not None:
                    self.h2.send_headers(st.sid, hdrs,
                                         end_stream=end and not len(view))
                    if end and not len(view):
                        self._ended(st)
                        self._out()
                        return
                while True:
                    self._check(st)
                    if not len(view):
                        if end:
                            self.h2.end_stream(st.sid)
                            self._ended(st)
                        self._out()
                        return
                    win = min(self.h2.local_flow_control_window(st.sid),
                              self.h2.max_outbound_frame_size, len(view))
                    if win <= 0 or len(self.out) > HIGH_WATER:
                        self._out()
                        self.lock.wait(5.0)
                        continue
                    last = end and win == len(view)
                    self.h2.send_data(st.sid, view[:win].tobytes(),
                                      end_stream=last)
                    view = view[win:]
                    if last:
                        self._ended(st)
                        self._out()
                        return
                    sent += win
                    if sent >= KICK_BYTES:  # start writing a long body
                        sent = 0
                        self._out()
            except (h2.exceptions.StreamClosedError,
                    h2.exceptions.ProtocolError):  # stream or conn closed
                st.gone = True
                raise StreamGone()

    def reset(self, st, code):
        """Reset a stream (RST_STREAM)."""
        with self.lock:
            if self.closed or st.gone or st.ended:
                return
            try:
                self.h2.reset_stream(st.sid, code)
            except (h2.exceptions.StreamClosedError,
                    h2.exceptions.ProtocolError):
                pass
            st.gone = True
            self.streams.pop(st.sid, None)
            self.server.h2stats.add("resets_sent")
            self._out()

    def _ended(self, st):
        """st's END_STREAM is queued: it is done here (lock held; saves
        the handler taking the lock again when it returns)."""
        st.ended = True
        self.streams.pop(st.sid, None)

    def stream_done(self, st):
        """A stream's handler finished."""
        if self.streams.get(st.sid) is st:
            with self.lock:
                self.streams.pop(st.sid, None)

    def send_goaway(self, close_after=True):
        """GOAWAY (NO_ERROR) naming the last stream we accepted, then end
        the connection once it is flushed (shutdown, fault)."""
        with self.lock:
            if self.closed or self.goaway:
                return
            self.goaway = True
            self.close_after = close_after
            try:
                self.h2.close_connection(h2.errors.ErrorCodes.NO_ERROR)
            except h2.exceptions.ProtocolError:
                pass
            self.server.h2stats.add("goaway_sent")
            if close_after:  # the streams die with the connection
                for st in list(self.streams.values()):
                    self._stream_gone(st)
            self._out()

    # --- the connection thread ---------------------------------------------

    def _gone_all(self):
        """The connection ended: every stream is gone (lock held)."""
        self.closed = True
        for st in list(self.streams.values()):
            self._stream_gone(st)
        self.lock.notify_all()

    def _stream_gone(self, st):
        """A stream ended under its handler: release its watch."""
        st.gone = True
        if st.watcher is not None:
            st.watcher.close()

    def _on_event(self, ev):
        """Handle one h2 event (lock held)."""
        E = h2.events
        if isinstance(ev, E.RequestReceived):
            st = H2Request(self, ev.stream_id, ev.headers)
            self.streams[ev.stream_id] = st
            self.server.h2stats.add("streams")
            if ev.stream_ended is not None:
                self._start(st)
        elif isinstance(ev, E.DataReceived):
            self.h2.acknowledge_received_data(ev.flow_controlled_length,
                                              ev.stream_id)
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.add_body(ev.data)
                if ev.stream_ended is not None:
                    self._start(st)
        elif isinstance(ev, E.StreamEnded):
            st = self.streams.get(ev.stream_id)
            if st is not None and not getattr(st, "started", False):
                self._start(st)
        elif isinstance(ev, E.StreamReset):
            self.server.h2stats.add("resets_received")
            st = self.streams.get(ev.stream_id)
            if st is not None:
                self._stream_gone(st)
            self.lock.notify_all()
        elif isinstance(ev, (E.WindowUpdated, E.RemoteSettingsChanged)):
            self.lock.notify_all()
        elif isinstance(ev, E.ConnectionTerminated):
            self.server.h2stats.add("goaway_received")
            self._gone_all()

    def _start(self, st):
        """Queue a complete request to run in a worker once the lock is
        released (lock held)."""
        if getattr(st, "started", False):
            return
        st.started = True
        st.rfile = io.BytesIO(bytes(st.body))
        self.ready.append(st)

    def _flush(self):
        """Move h2's output to our buffer and write what the socket takes;
        True when everything was written."""
        with self.lock:
            self.kicked = False
            return self._out(io=True)

    def _read(self):
        """Read what the socket has; False when the peer is gone. The
        requests that became complete go to workers after the lock is
        released (a worker's first act is to take it)."""
        try:
            return self._read_locked()
        finally:
            ready, self.ready = self.ready, []
            for st in ready:
                WORKERS.submit(st.run, self.server.h2stats)

    def _read_locked(self):
        """_read's socket and h2 part."""
        while True:
            with self.lock:
                try:
                    data = self.sock.recv(65536)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError,
                        BlockingIOError):
                    self._out(io=True)
                    return True
                if not data:
                    return False
                if self.goaway:  # we said GOAWAY: what follows is moot
                    if not self.sock.pending():
                        return True
                    continue
                try:
                    events = self.h2.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    self.server.sim.log("h2 protocol error from %s: %r" %
                                        (self.addr, e))
                    self.goaway = True
                    self.close_after = True
                    return True
                for ev in events:
                    self._on_event(ev)
                if not self.sock.pending():
                    self._out(io=True)  # SETTINGS acks, WINDOW_UPDATEs
                    return True

    def serve(self):
        """Run the connection until the peer leaves or GOAWAY is done."""
        st = self.server.h2stats
        st.add("connections")
        self.close_after = False
        with self.lock:
            self.h2.local_settings = h2.settings.Settings(
                client=False, initial_values={
                    h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS:
                        MAX_STREAMS,
                    h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE:
                        MAX_HEADER_LIST})
            self.h2.initiate_connection()
            self.h2.increment_flow_control_window(RECV_WINDOW)
        self.server.h2_add(self)
        self.sock.setblocking(False)
        try:
            self._loop()
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self.lock:
                self._gone_all()
            self.server.h2_remove(self)
            for s in (self.wake_r, self.wake_w):
                s.close()
            try:
                self.sock.close()
            except OSError:
                pass

    def _loop(self):
        """poll() the socket and the wake-up pair (poll, not select: a
        busy simulator has descriptors above FD_SETSIZE)."""
        p = select.poll()
        sfd, wfd = self.sock.fileno(), self.wake_r.fileno()
        p.register(wfd, select.POLLIN)
        drained = False
        while True:
            # The lock only when there is something to write: writers
            # write themselves and kick us only for what the socket did
            # not take; reads write their own answers.
            if self.kicked or self.out or not drained or self.goaway:
                drained = self._flush()
            if self.broken:
                return
            if self.goaway and self.close_after and drained:
                time.sleep(0.05)  # let the peer read GOAWAY before FIN
                return
            p.register(sfd, select.POLLIN | (0 if drained else
                                             select.POLLOUT))
            ready = dict(p.poll(1000))
            if wfd in ready:
                try:
                    while self.wake_r.recv(4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
            ev = ready.get(sfd, 0)
            if ev & select.POLLIN and not self._read():
                return
            if ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) \
                    and not ev & select.POLLIN:
                return
