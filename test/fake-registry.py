#!/usr/bin/env python3
"""A tiny misbehaving registry for husk's registry client tests.

    test/fake-registry.py PORTFILE [CERT KEY]

Listens on 127.0.0.1 (a free port, written to PORTFILE once serving; HTTPS
with CERT and KEY, HTTP otherwise) and
answers the distribution API for one blob and one manifest, with behaviour
chosen by the repository name:

  ok               plain, correct answers
  corrupt          the blob has the right length but one wrong byte
  flaky            the first request for each path gets 503
  ratelimit        the first request for each path gets 429 (Retry-After: 0)
  partial          the first blob request sends half the bytes, then hangs up;
                   later ones honour Range with 206
  bearer           needs a Bearer token from /token (anonymous is fine;
                   answered as `token`)
  private          needs a token from /token with Basic alice:secret
                   (answered as `access_token`)
  schema1          the manifest is Docker schema 1
  notype           the manifest comes as application/json (type in the body)
  baddigest        Docker-Content-Digest disagrees with the bytes
  index            the tag is a Docker manifest list (amd64, arm64/v8)
  trickle          the blob comes one byte every 0.2 s until the client
                   hangs up (a stalled or hostile registry)
  endless          the manifest is a 404 and the blob a 500 whose error
                   body never ends (sent as fast as the client reads)
  drip             the manifest is a 404 whose error body comes one byte
                   every 0.5 s, never ending
  silent           the manifest is a 404 and the blob a 500 whose body
                   never comes (headers, then nothing for 120 s)

GET /stats returns {"PATH": count, "range PATH": count} of the requests
seen so far (the second counts those with a Range header).
The blob is BLOB below; the C test builds the same bytes.
"""
import base64
import hashlib
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BLOB = b"husk fake registry blob\n" * 4096
BLOB_DIGEST = "sha256:" + hashlib.sha256(BLOB).hexdigest()
CONFIG = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                     "rootfs": {"type": "layers", "diff_ids": []}}).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+prettyjws"


def digest_of(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


MANIFEST = json.dumps({
    "schemaVersion": 2, "mediaType": OCI_MANIFEST,
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": CONFIG_DIGEST,
               "size": len(CONFIG)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": BLOB_DIGEST,
                "size": len(BLOB)}]}, indent=1).encode()
ARM_MANIFEST = MANIFEST.replace(b'"schemaVersion": 2', b'"schemaVersion":  2')
LIST = json.dumps({"schemaVersion": 2, "mediaType": DOCKER_LIST, "manifests": [
    {"mediaType": OCI_MANIFEST, "digest": digest_of(MANIFEST), "size": len(MANIFEST),
     "platform": {"architecture": "amd64", "os": "linux"}},
    {"mediaType": OCI_MANIFEST, "digest": digest_of(ARM_MANIFEST), "size": len(ARM_MANIFEST),
     "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
    {"mediaType": OCI_MANIFEST, "digest": "sha256:" + "0" * 64, "size": 1,
     "platform": {"architecture": "unknown", "os": "unknown"}}]}).encode()
NOTYPE = MANIFEST.replace(b'"mediaType": "%s",' % OCI_MANIFEST.encode(), b"")
SCHEMA1_BODY = json.dumps({"schemaVersion": 1, "name": "schema1", "tag": "latest", "fsLayers": []}).encode()
MANIFESTS = {digest_of(m): m for m in (MANIFEST, ARM_MANIFEST, LIST, NOTYPE)}
TOKENS = {"anon-token": {"bearer"}, "alice-token": {"bearer", "private"}}

counts = {}
lock = threading.Lock()


def error_doc(code, message):
    return json.dumps({"errors": [{"code": code, "message": message, "detail": None}]}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, body=b"", headers=None, length=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def count(self):
        with lock:
            if "Range" in self.headers:
                key = "range " + self.path
                counts[key] = counts.get(key, 0) + 1
            counts[self.path] = counts.get(self.path, 0) + 1
            return counts[self.path]

    def do_GET(self):
        seen = self.count()
        path = self.path.split("?")[0]
        if path == "/stats":
            with lock:
                return self.send(200, json.dumps(counts).encode(), {"Content-Type": "application/json"})
        if path == "/token":
            return self.token()
        if path == "/v2/":
            return self.send(200, b"{}", {"Content-Type": "application/json"})
        parts = path[len("/v2/"):].split("/") if path.startswith("/v2/") else []
        if len(parts) != 3 or parts[1] not in ("manifests", "blobs"):
            return self.send(404, error_doc("NAME_UNKNOWN", "repository name not known to registry"))
        repo, kind, ref = parts
        if repo in ("bearer", "private") and not self.authorized(repo):
            return
        if repo == "flaky" and seen == 1:
            return self.send(503, error_doc("UNAVAILABLE", "try again later"), {"Content-Type": "application/json"})
        if repo in ("endless", "drip"):
            return self.endless_error(404 if kind == "manifests" else 500, repo == "drip")
        if repo == "silent":
            self.send_response(404 if kind == "manifests" else 500)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.flush()
            time.sleep(120)
            self.close_connection = True
            return
        if repo == "ratelimit" and seen == 1:
            return self.send(429, error_doc("TOOMANYREQUESTS", "slow down"), {"Retry-After": "0"})
        if kind == "blobs":
            return self.blob(repo, ref, seen)
        return self.manifest(repo, ref)

    def authorized(self, repo):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer ") and repo in TOKENS.get(auth[7:], ()):
            return True
        host, port = self.server.server_address
        challenge = 'Bearer realm="%s://%s:%d/token",service="fake-registry",scope="repository:%s:pull"' % (
            self.server.scheme, host, port, repo)
        self.send(401, error_doc("UNAUTHORIZED", "authentication required"),
                  {"WWW-Authenticate": challenge, "Content-Type": "application/json"})
        return False

    def token(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            if base64.b64decode(auth[6:]) != b"alice:secret":
                return self.send(401, error_doc("UNAUTHORIZED", "incorrect username or password"),
                                 {"Content-Type": "application/json"})
            return self.send(200, json.dumps({"access_token": "alice-token", "expires_in": 300}).encode())
        return self.send(200, json.dumps({"token": "anon-token"}).encode())

    def blob(self, repo, ref, seen):
        data = {BLOB_DIGEST: BLOB, CONFIG_DIGEST: CONFIG}.get(ref)
        if data is None:
            return self.send(404, error_doc("BLOB_UNKNOWN", "blob unknown to registry"))
        if repo == "corrupt":
            data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
        if repo == "trickle" and ref == BLOB_DIGEST:
            return self.trickle(data)
        if repo == "partial" and ref == BLOB_DIGEST and seen == 1:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            return self.send(206, data[start:], {"Content-Range": "bytes %d-%d/%d" % (start, len(data) - 1,
                                                                                     len(data))})
        return self.send(200, data, {"Content-Type": "application/octet-stream"})

    def endless_error(self, status, drip):
        """STATUS with a body (no length: it ends when the connection
        does) that goes on until the client hangs up."""
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        chunk = b"." if drip else b"<p>error</p>" * 5000
        try:
            while True:
                self.wfile.write(chunk)
                self.wfile.flush()
                if drip:
                    time.sleep(0.5)
        except OSError:
            pass
        self.close_connection = True

    def trickle(self, data):
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass
        self.close_connection = True

    def manifest(self, repo, ref):
        body, media_type = MANIFEST, OCI_MANIFEST
        if ref.startswith("sha256:"):
            body = MANIFESTS.get(ref)
            if body is None:
                return self.send(404, error_doc("MANIFEST_UNKNOWN", "manifest unknown"))
            media_type = json.loads(body).get("mediaType", "application/json")
        elif ref != "latest":
            return self.send(404, error_doc("MANIFEST_UNKNOWN", "manifest unknown"))
        elif repo == "schema1":
            body, media_type = SCHEMA1_BODY, SCHEMA1
        elif repo == "notype":
            body, media_type = NOTYPE, "application/json"
        elif repo == "index":
            body, media_type = LIST, DOCKER_LIST
        digest = digest_of(body)
        if repo == "baddigest":
            digest = "sha256:" + "1" * 64
        self.send(200, body, {"Content-Type": media_type, "Docker-Content-Digest": digest})


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    scheme = "http"

    def handle_error(self, request, client_address):
        pass  # clients hang up on purpose (the partial blob); not news


def main():
    portfile = sys.argv[1]
    server = QuietServer(("127.0.0.1", 0), Handler)
    if len(sys.argv) == 4:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        server.socket = ctx.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
        server.scheme = "https"
    with open(portfile + ".tmp", "w") as fh:
        fh.write("%d\n" % server.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    server.serve_forever()


if __name__ == "__main__":
    main()
