"""A small SPDY/3.1 client of the k8s streaming protocols (exec, attach,
port-forward) for the e2e tests: the HTTP Upgrade, frames, zlib header
blocks with the SPDY/3 dictionary.  Python stdlib only."""
import base64
import hashlib
import json
import os
import socket
import struct
import urllib.parse
import zlib

_WORDS = [
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location", "content-md5",
    "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host", "if-match",
    "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer", "retry-after",
    "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via", "warning",
    "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url", "public",
    "set-cookie", "keep-alive", "origin"]
_TAIL = (b"100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
         b"203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 "
         b"Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 "
         b"Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, "
         b"Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
         b"application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,"
         b"sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL

SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FIN = 1


class HTTPError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {body.strip()}")
        self.status, self.body = status, body


def upgrade_request(url, timeout, lines):
    """Sends the HTTP request LINES (an Upgrade) to URL's host and reads the
    answer's head: (socket, status, lower-cased headers) on 101; otherwise
    reads the body and raises HTTPError."""
    u = urllib.parse.urlsplit(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    status_line = head.split(b"\r\n", 1)[0].decode()
    status = int(status_line.split()[1]) if len(status_line.split()) > 1 else 0
    headers = {}
    for line in head.split(b"\r\n")[1:]:
        if b":" in line:
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if status != 101:
        body = b""
        try:
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                body += chunk
        except OSError:
            pass
        sock.close()
        raise HTTPError(status, body.decode(errors="replace"))
    return sock, status, headers


class Conn:
    """One upgraded connection.  Raises HTTPError when the server refuses."""

    def __init__(self, url, protocols, timeout=30, upgrade="SPDY/3.1"):
        u = urllib.parse.urlsplit(url)
        lines = [f"POST {u.path} HTTP/1.1", f"Host: {u.netloc}", "Connection: Upgrade", f"Upgrade: {upgrade}"]
        lines += [f"X-Stream-Protocol-Version: {p}" for p in protocols]
        self.sock, self.status, self.headers = upgrade_request(url, timeout, lines)
        self.protocol = self.headers.get("x-stream-protocol-version")
        self.deflate = zlib.compressobj(zdict=DICTIONARY)
        self.inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.next_id = 1
        self.buf = b""
        self.data = {}        # stream id -> bytes received
        self.fin = set()      # stream ids the server finished
        self.reset = {}       # stream id -> RST status
        self.replied = set()
        self.goaway = False
        self.eof = False
        self.pings = []

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _headers(self, headers):
        raw = struct.pack(">I", len(headers))
        for k, v in headers.items():
            raw += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def _control(self, ftype, flags, payload):
        return struct.pack(">HHI", 0x8003, ftype, (flags << 24) | len(payload)) + payload

    def open_stream(self, headers, fin=False):
        sid = self.next_id
        self.next_id += 2
        payload = struct.pack(">IIH", sid, 0, 0) + self._headers(headers)
        self.sock.sendall(self._control(SYN_STREAM, FIN if fin else 0, payload))
        return sid

    def send(self, sid, data, fin=False):
        for i in range(0, max(len(data), 1), 65536):
            chunk = data[i:i + 65536]
            last = i + 65536 >= len(data)
            self.sock.sendall(struct.pack(">II", sid, ((FIN if fin and last else 0) << 24) | len(chunk)) + chunk)

    def ping(self, pid):
        self.sock.sendall(self._control(PING, 0, struct.pack(">I", pid)))

    def raw(self, data):
        self.sock.sendall(data)

    def _read_more(self):
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buf += chunk

    def pump(self):
        """Reads and handles one frame; False at EOF."""
        while len(self.buf) < 8 or len(self.buf) < 8 + (struct.unpack(">I", self.buf[4:8])[0] & 0xffffff):
            if self.eof:
                return False
            self._read_more()
        first, second = struct.unpack(">II", self.buf[:8])
        flags, length = second >> 24, second & 0xffffff
        payload, self.buf = self.buf[8:8 + length], self.buf[8 + length:]
        if first & 0x80000000:
            ftype = first & 0xffff
            if ftype in (SYN_REPLY, HEADERS):
                sid = struct.unpack(">I", payload[:4])[0] & 0x7fffffff
                self.inflate.decompress(payload[4:])
                self.replied.add(sid)
                if flags & FIN:
                    self.fin.add(sid)
            elif ftype == SYN_STREAM:
                self.inflate.decompress(payload[10:])
            elif ftype == RST_STREAM:
                sid, status = struct.unpack(">II", payload[:8])
                self.reset[sid & 0x7fffffff] = status
            elif ftype == GOAWAY:
                self.goaway = True
            elif ftype == PING:
                self.pings.append(struct.unpack(">I", payload[:4])[0])
        else:
            sid = first & 0x7fffffff
            self.data[sid] = self.data.get(sid, b"") + payload
            if flags & FIN:
                self.fin.add(sid)
        return True

    def until(self, cond):
        while not cond():
            if not self.pump():
                return False
        return True


def exec_session(url, stdin=None, stdout=True, stderr=True, tty=False, resize=None,
                 protocols=("v4.channel.k8s.io",), close_stdin=True, timeout=30):
    """Runs an exec/attach session to its end: (stdout, stderr, status) where
    status is the error stream's text (JSON for v4)."""
    c = Conn(url, protocols, timeout=timeout)
    try:
        err = c.open_stream({"streamtype": "error"})
        sin = c.open_stream({"streamtype": "stdin"}) if stdin is not None else None
        sout = c.open_stream({"streamtype": "stdout"}) if stdout else None
        serr = c.open_stream({"streamtype": "stderr"}) if stderr and not tty else None
        rsz = c.open_stream({"streamtype": "resize"}) if tty else None
        if resize:
            c.send(rsz, json.dumps({"Width": resize[0], "Height": resize[1]}).encode())
        if sin is not None:
            c.send(sin, stdin, fin=close_stdin)
        c.until(lambda: err in c.fin and (sout is None or sout in c.fin) and (serr is None or serr in c.fin))
        return (c.data.get(sout, b""), c.data.get(serr, b""), c.data.get(err, b"").decode())
    finally:
        c.close()


def exit_code_of(status):
    """The exit code a v4 status says (0 for Success)."""
    s = json.loads(status)
    if s.get("status") == "Success":
        return 0
    for cause in s.get("details", {}).get("causes", []):
        if cause.get("reason") == "ExitCode":
            return int(cause["message"])
    return None


def port_forward(url, port, request, request_id="0", timeout=30):
    """Sends REQUEST to PORT through a port-forward session and returns
    (bytes back, error stream text)."""
    c = Conn(url, ("portforward.k8s.io",), timeout=timeout)
    try:
        hdr = {"streamtype": "error", "port": str(port), "requestid": request_id}
        err = c.open_stream(hdr)
        c.send(err, b"", fin=True)
        data = c.open_stream(dict(hdr, streamtype="data"))
        c.send(data, request, fin=True)
        c.until(lambda: data in c.fin and err in c.fin or data in c.reset)
        return c.data.get(data, b""), c.data.get(err, b"").decode()
    finally:
        c.close()


class WSConn:
    """A WebSocket connection with the k8s channel protocols (the first
    byte of each binary message is the channel).  Raises HTTPError when the
    server refuses."""

    def __init__(self, url, protocols, timeout=30, key="dGhlIHNhbXBsZSBub25jZQ=="):
        u = urllib.parse.urlsplit(url)
        lines = [f"GET {u.path} HTTP/1.1", f"Host: {u.netloc}", "Connection: Upgrade", "Upgrade: websocket",
                 "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Protocol: {', '.join(protocols)}"]
        if key:
            lines.append(f"Sec-WebSocket-Key: {key}")
        self.sock, self.status, self.headers = upgrade_request(url, timeout, lines)
        self.protocol = self.headers.get("sec-websocket-protocol")
        expect = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        if self.headers.get("sec-websocket-accept", "").encode() != expect:
            self.sock.close()
            raise HTTPError(self.status, f"bad Sec-WebSocket-Accept {self.headers.get('sec-websocket-accept')}")
        self.buf = b""
        self.channels = {}
        self.closed = False
        self.close_code = None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send_frame(self, opcode, payload, fin=True):
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([(0x80 if fin else 0) | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def send(self, channel, data):
        self.send_frame(2, bytes([channel]) + data)

    def close_channel(self, channel):
        self.send_frame(2, bytes([255, channel]))

    def pump(self):
        """Reads one frame; False at EOF or after the server's close."""
        def need(n):
            while len(self.buf) < n:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return False
                self.buf += chunk
            return True
        if self.closed or not need(2):
            return False
        b0, b1 = self.buf[0], self.buf[1]
        n, off = b1 & 0x7f, 2
        if n == 126:
            if not need(4):
                return False
            n, off = struct.unpack(">H", self.buf[2:4])[0], 4
        elif n == 127:
            if not need(10):
                return False
            n, off = struct.unpack(">Q", self.buf[2:10])[0], 10
        if not need(off + n):
            return False
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        opcode = b0 & 0x0f
        if opcode == 2 and payload:
            self.channels[payload[0]] = self.channels.get(payload[0], b"") + payload[1:]
        elif opcode == 8:
            self.closed = True
            self.close_code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
            try:
                self.send_frame(8, payload[:2])
            except OSError:
                pass
        return True

    def run_to_close(self):
        while self.pump():
            pass
        return self.channels


def ws_exec(url, stdin=None, protocol="v5.channel.k8s.io", resize=None, timeout=30):
    """An exec/attach session over WebSocket: (stdout, stderr, status)."""
    c = WSConn(url, (protocol,), timeout=timeout)
    try:
        if resize:
            c.send(4, json.dumps({"Width": resize[0], "Height": resize[1]}).encode())
        if stdin is not None:
            c.send(0, stdin)
            if protocol == "v5.channel.k8s.io":
                c.close_channel(0)
        ch = c.run_to_close()
        return ch.get(1, b""), ch.get(2, b""), ch.get(3, b"").decode()
    finally:
        c.close()
