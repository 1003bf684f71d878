# SPDX-License-Identifier: Apache-2.0
"""A small single-threaded HTTP/2 client for the simulator's tests and
bench (python3-h2): several streams on one TLS connection, request bodies
sent within the server's windows, received data acknowledged, streams
cancelled with RST_STREAM, GOAWAY observed."""

import json
import os
import socket
import ssl
import sys
import time
import urllib.parse

try:
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.settings
except ImportError:  # Debian's python3-h2 under another interpreter
    sys.path.append("/usr/lib/python3/dist-packages")
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events
    import h2.settings


STREAM_WINDOW = 1 << 24     # stream receive window we grant (16 MiB)
CONN_WINDOW = 1 << 26       # added to the connection's receive window
MAX_FRAME = (1 << 24) - 1   # largest DATA frame we accept (RFC 9113 cap)


class Stream:
    """What arrived on one stream."""

    def __init__(self, sid):
        self.sid = sid
        self.status = None
        self.headers = {}
        self.data = bytearray()
        self.ended = False
        self.reset = None       # error code of RST_STREAM
        self.pending = b""      # request body not yet sent


class H2Client:
    """One h2 connection to the simulator in DIR (role's token)."""

    def __init__(self, d, role="admin", timeout=30, window=None):
        with open(os.path.join(d, "url")) as f:
            u = urllib.parse.urlsplit(f.read().strip())
        with open(os.path.join(d, "tokens")) as f:
            self.token = dict(x.split() for x in f if x.strip())[role]
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection((u.hostname, u.port), timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = ctx.wrap_socket(raw, server_hostname=u.hostname)
        self.alpn = self.sock.selected_alpn_protocol()
        self.authority = "%s:%d" % (u.hostname, u.port)
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8"))
        # Large frames and windows (as curl and Go ask for): a page of a
        # list arrives in one DATA frame without waiting for WINDOW_UPDATE.
        # A small stream window (window=N) tests the server's flow control.
        self.h2.local_settings = h2.settings.Settings(
            client=True, initial_values={
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE:
                    STREAM_WINDOW if window is None else window,
                h2.settings.SettingCodes.MAX_FRAME_SIZE: MAX_FRAME})
        self.h2.initiate_connection()
        # h2 checks frame sizes against the setting in force when a read
        # begins: the server's SETTINGS ack and its first large frame may
        # come in one read, so accept large frames from the start.
        self.h2.max_inbound_frame_size = MAX_FRAME
        if window is None:
            self.h2.increment_flow_control_window(CONN_WINDOW)
        self.streams = {}
        self.goaway = None      # (error code, last stream id)
        self.closed = False
        self.settings = {}
        self._send()

    def _send(self):
        """Write what h2 queued."""
        data = self.h2.data_to_send()
        if data:
            self.sock.sendall(data)

    def start(self, method, path, body=None, ctype="application/json"):
        """Open a stream; returns its id."""
        sid = self.h2.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "https"),
                (":authority", self.authority),
                ("authorization", "Bearer " + self.token),
                ("accept", "application/json")]
        if body is not None:
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
            hdrs += [("content-type", ctype),
                     ("content-length", str(len(body)))]
        st = self.streams[sid] = Stream(sid)
        self.h2.send_headers(sid, hdrs, end_stream=body is None)
        st.pending = body or b""
        self._push(st)
        self._send()
        return sid

    def _push(self, st):
        """Send as much of a request body as the windows allow."""
        if st.reset is not None or st.pending is None:
            return
        while st.pending:
            n = min(self.h2.local_flow_control_window(st.sid),
                    self.h2.max_outbound_frame_size, len(st.pending))
            if n <= 0:
                return
            last = n == len(st.pending)
            self.h2.send_data(st.sid, st.pending[:n], end_stream=last)
            st.pending = st.pending[n:]
            if last:
                st.pending = None
                return

    def pump(self, timeout=5.0):
        """Read once (up to timeout) and handle events; False on EOF."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return True
        if not data:
            self.closed = True
            return False
        # A TLS read returns one record (16 KiB): take every record
        # already decrypted or in the socket before parsing frames.
        self.sock.setblocking(False)
        parts = [data]
        try:
            while True:
                more = self.sock.recv(1 << 20)
                if not more:
                    break
                parts.append(more)
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        finally:
            self.sock.settimeout(timeout)
        if len(parts) > 1:
            data = b"".join(parts)
        for ev in self.h2.receive_data(data):
            self._event(ev)
        for st in self.streams.values():
            if st.pending:
                self._push(st)
        self._send()
        return True

    def _event(self, ev):
        """Record one h2 event."""
        E = h2.events
        st = self.streams.get(getattr(ev, "stream_id", 0) or 0)
        if isinstance(ev, E.ResponseReceived) and st is not None:
            st.headers = dict(ev.headers)
            st.status = int(st.headers.get(":status", 0))
        elif isinstance(ev, E.DataReceived):
            self.h2.acknowledge_received_data(ev.flow_controlled_length,
                                              ev.stream_id)
            if st is not None:
                st.data += ev.data
        elif isinstance(ev, E.StreamEnded) and st is not None:
            st.ended = True
        elif isinstance(ev, E.StreamReset) and st is not None:
            st.reset = ev.error_code
        elif isinstance(ev, E.ConnectionTerminated):
            self.goaway = (ev.error_code, ev.last_stream_id)
        elif isinstance(ev, E.RemoteSettingsChanged):
            for k, v in ev.changed_settings.items():
                self.settings[k] = v.new_value

    def wait(self, cond, timeout=30.0):
        """Pump until cond() or timeout; returns cond()."""
        end = time.monotonic() + timeout
        while not cond() and time.monotonic() < end and not self.closed:
            self.pump(min(1.0, max(0.01, end - time.monotonic())))
        return cond()

    def request(self, method, path, body=None, ctype="application/json",
                timeout=60.0):
        """(status, body bytes) of one request."""
        sid = self.start(method, path, body, ctype)
        st = self.streams[sid]
        self.wait(lambda: st.ended or st.reset is not None, timeout)
        del self.streams[sid]
        if not st.ended:
            raise OSError("stream %d not ended (reset %r)" % (sid, st.reset))
        return st.status, bytes(st.data)

    def req(self, method, path, body=None):
        """(status, decoded JSON or text)."""
        status, data = self.request(method, path, body)
        try:
            return status, json.loads(data)
        except ValueError:
            return status, data.decode(errors="replace")

    def lines(self, sid):
        """Complete lines received on a stream so far (consumed)."""
        st = self.streams[sid]
        i = st.data.rfind(b"\n")
        if i < 0:
            return []
        out = bytes(st.data[:i]).split(b"\n")
        del st.data[:i + 1]
        return out

    def cancel(self, sid):
        """RST_STREAM(CANCEL) as a client closing a watch does."""
        self.h2.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
        self._send()

    def close(self):
        """Close the connection politely."""
        try:
            self.h2.close_connection()
            self._send()
        except Exception:
            pass
        self.sock.close()
