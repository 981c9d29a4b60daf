#!/usr/bin/env bash
# husk's image side end to end: `husk image pull/ls/inspect/rm/import/export`
# against a docker-registry started here (hack/registry.sh), the misbehaving
# test/fake-registry.py, and a small fault-injecting proxy in front of the
# real registry.  Every failure must be one stderr line and leave the store
# as it was: no blob, no ingest file, no snapshot, no record.
# Each test gets its own store; the registries are stopped and every temp
# dir removed by the trap, even on failure.
# Run alone: ./test/integration/test_image.sh   (HUSK=path/to/husk to override)
. "$(dirname "$0")/lib.sh"

HUSK=${HUSK:-$BUILD_DIR/husk}
IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
# Seconds one husk command may take (the registry retries back off).
HUSK_TIMEOUT=${HUSK_IMAGE_TIMEOUT:-60}
SKOPEO=(skopeo --insecure-policy)

# ---------------------------------------------------------------- helpers

husk_cmd() { # ARGS...: husk with our runtime --root and a timeout
	timeout -k 5 "$HUSK_TIMEOUT" "$HUSK" --root "$ROOT" "$@"
}

# Runs a command, setting OUT, RC and ERR (stderr without the progress
# lines a non-tty pull prints).  Call it directly, never inside $( ).
capture() { # COMMAND...
	OUT=$("$@" 2>"$WORK/err" </dev/null)
	RC=$?
	ERR=$(grep -v -E '^([0-9a-f]{12}  (done|already exists)|unpacking [0-9]+ layers?$)' "$WORK/err")
}

img() { # STORE ARGS...: capture `husk image --root STORE ARGS...`
	local store=$1
	shift
	capture husk_cmd image --root "$store" "$@"
}

# A fresh image store; containers left in it are removed at cleanup.
new_store() {
	local d
	d=$(new_tmpdir store) || return 1
	defer "remove_store_containers '$d'"
	echo "$d"
}

remove_store_containers() { # STORE
	local id
	for id in $("$HUSK" --root "$ROOT" container --root "$1" ls -a -q 2>/dev/null); do
		timeout 20 "$HUSK" --root "$ROOT" container --root "$1" rm -f "$id" >/dev/null 2>&1
	done
}

# Prints a JSON document's value for a Python expression over `d`
# (strings bare, everything else as compact sorted JSON).
json_expr() { # EXPR < JSON
	"$PY" -c '
import json, sys
d = json.load(sys.stdin)
try:
    v = eval(sys.argv[1])
except (KeyError, IndexError, TypeError):
    sys.exit(1)
print(v if isinstance(v, str) else json.dumps(v, sort_keys=True, separators=(",", ":")))' "$1"
}

layout_blob() { # LAYOUT-DIR DIGEST -> prints the blob
	cat "$1/blobs/sha256/${2#sha256:}"
}

layout_manifest_digest() { # NAME -> the digest index.json tags latest
	json_expr 'd["manifests"][0]["digest"]' <"$IMAGES/$1/index.json"
}

layout_config_digest() { # NAME [MANIFEST-DIGEST] -> the image id
	local manifest=${2:-$(layout_manifest_digest "$1")}
	layout_blob "$IMAGES/$1" "$manifest" | json_expr 'd["config"]["digest"]'
}

layout_blobs_of() { # NAME [MANIFEST-DIGEST] -> manifest, config and layer digests
	local manifest=${2:-$(layout_manifest_digest "$1")}
	echo "$manifest"
	layout_blob "$IMAGES/$1" "$manifest" |
		json_expr '"\n".join([d["config"]["digest"]] + [l["digest"] for l in d["layers"]])'
}

# The multiarch index's manifest for an architecture.
multiarch_manifest() { # ARCH
	layout_blob "$IMAGES/multiarch" "$(layout_manifest_digest multiarch)" |
		json_expr "[m['digest'] for m in d['manifests'] if m['platform']['architecture'] == '$1'][0]"
}

blob_names() { # STORE -> the blob files, one a line (sorted)
	ls -A "$1/blobs/sha256" 2>/dev/null | sort
}

ingest_files() { # STORE
	ls -A "$1/ingest" 2>/dev/null
}

# Snapshot dirs (chain ids and tmp- leftovers), without the short-link dir.
snapshot_names() { # STORE
	local entry
	for entry in "$1"/snapshots/* "$1"/snapshots/.[!.]*; do
		[ -e "$entry" ] && [ "${entry##*/}" != l ] && echo "${entry##*/}"
	done | sort
}

record_ids() { # STORE -> the ids in images.json
	[ -f "$1/images.json" ] || return 0
	json_expr '"\n".join(i["id"] for i in d["images"])' <"$1/images.json"
}

# Checks that a failed command left the store as empty as it was.
assert_store_empty() { # NAME STORE
	local what="" line
	line=$(blob_names "$2" | tr '\n' ' ')
	[ -n "$line" ] && what="$what blobs: $line;"
	line=$(ingest_files "$2" | tr '\n' ' ')
	[ -n "$line" ] && what="$what ingest: $line;"
	line=$(snapshot_names "$2" | tr '\n' ' ')
	[ -n "$line" ] && what="$what snapshots: $line;"
	line=$(record_ids "$2" | tr '\n' ' ')
	[ -n "$line" ] && what="$what records: $line;"
	if [ -z "$what" ]; then
		ok "$1"
	else
		not_ok "$1" "left behind:$what"
	fi
}

# A failure: non-zero, one stderr line "husk: ...", matching REGEX.
assert_one_line_error() { # NAME REGEX
	assert_fails "$1: fails" "$RC" || return 1
	local lines
	lines=$(printf '%s\n' "$ERR" | grep -c .)
	if [ "$lines" -eq 1 ] && [ "${ERR#husk: }" != "$ERR" ]; then
		ok "$1: one-line error"
	else
		not_ok "$1: one-line error" "got $lines lines:" "$ERR"
	fi
	if printf '%s' "$ERR" | grep -Eiq -- "$2"; then
		ok "$1: the error says what went wrong"
	else
		not_ok "$1: the error says what went wrong" "expected to match: $2" "got: $ERR"
	fi
}

assert_pulled() { # NAME EXPECTED-ID
	if [ "$RC" -eq 0 ] && [ "$OUT" = "$2" ]; then
		ok "$1"
	else
		not_ok "$1" "exit status $RC, printed: $OUT (want $2)" "${ERR:+stderr: $ERR}"
	fi
}

# Every blob file is named by the sha256 of its content.
assert_blobs_verified() { # NAME STORE
	local f bad=""
	for f in "$2"/blobs/sha256/*; do
		[ -f "$f" ] || continue
		[ "$(sha256sum "$f" | cut -d' ' -f1)" = "$(basename "$f")" ] || bad="$bad $(basename "$f")"
	done
	assert_eq "$1" "" "$bad"
}

# ---------------------------------------------------------------- servers

SERVERS=$WORK/servers
mkdir -p "$SERVERS"

stop_servers() {
	local pid
	for pid in "$SERVERS"/*.pid; do
		[ -f "$pid" ] || continue
		kill "$(cat "$pid")" 2>/dev/null
		rm -f "$pid"
	done
	[ -d "$SERVERS/registry" ] && "$REPO_DIR/hack/registry.sh" stop "$SERVERS/registry"
	return 0
}
trap 'stop_servers; cleanup_all' EXIT

# Starts a python server that writes its port to PORTFILE; prints the port.
start_python_server() { # NAME SCRIPT ARGS...
	local name=$1
	shift
	setsid "$PY" "$@" </dev/null >"$SERVERS/$name.log" 2>&1 &
	echo $! >"$SERVERS/$name.pid"
	for _ in $(seq 1 100); do
		[ -s "$SERVERS/$name.port" ] && cat "$SERVERS/$name.port" && return 0
		sleep 0.05
	done
	echo "# $name did not start: $(head -c 500 "$SERVERS/$name.log")" >&2
	return 1
}

# A fault-injecting proxy in front of the real registry.  The first path
# component after /v2/ picks the fault; the rest is the upstream name:
#   pass   forwards everything
#   flaky  the first request for each path gets 503
#   cut    the first GET of each blob sends half its bytes and hangs up
#   slow   blobs go out in 64 KiB pieces, 40 ms apart
# GET /stats: {"PATH": count, "range PATH": count}.
write_proxy() {
	cat >"$SERVERS/proxy.py" <<'EOF'
import http.client, json, os, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

portfile, upstream = sys.argv[1], sys.argv[2]
counts, lock = {}, threading.Lock()
KEEP = ("Content-Type", "Docker-Content-Digest", "Content-Range", "Docker-Distribution-Api-Version",
        "WWW-Authenticate", "Etag")

class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def count(self):
        with lock:
            if "Range" in self.headers:
                counts["range " + self.path] = counts.get("range " + self.path, 0) + 1
            counts[self.path] = counts.get(self.path, 0) + 1
            return counts[self.path]
    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_HEAD(self):
        self.do_GET()
    def do_GET(self):
        if self.path == "/stats":
            with lock:
                return self.reply(200, json.dumps(counts).encode())
        seen = self.count()
        parts = self.path.split("/")
        if self.path.rstrip("/") == "/v2":
            mode, upath = "pass", "/v2/"
        elif len(parts) > 3 and parts[1] == "v2":
            mode, upath = parts[2], "/v2/" + "/".join(parts[3:])
        else:
            return self.reply(404)
        if mode == "flaky" and seen == 1:
            return self.reply(503, b'{"errors":[{"code":"UNAVAILABLE","message":"try later"}]}')
        conn = http.client.HTTPConnection(upstream, timeout=30)
        headers = {k: self.headers[k] for k in ("Accept", "Range", "Authorization") if k in self.headers}
        conn.request(self.command, upath, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        kept = [(k, resp.getheader(k)) for k in KEEP if resp.getheader(k)]
        is_blob = "/blobs/" in upath and self.command == "GET" and resp.status in (200, 206)
        if mode == "cut" and is_blob and seen == 1 and len(body) > 1:
            self.send_response(resp.status)
            for k, v in kept:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "slow" and is_blob:
            self.send_response(resp.status)
            for k, v in kept:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(0, len(body), 65536):
                self.wfile.write(body[i:i + 65536])
                self.wfile.flush()
                time.sleep(0.04)
            return
        self.reply(resp.status, body, kept)

class Server(ThreadingHTTPServer):
    daemon_threads = True
    def handle_error(self, *a):
        pass

server = Server(("127.0.0.1", 0), Proxy)
with open(portfile + ".tmp", "w") as fh:
    fh.write("%d\n" % server.server_address[1])
os.rename(portfile + ".tmp", portfile)
server.serve_forever()
EOF
}

stats_of() { # ADDR KEY -> how many requests the fake registry or proxy saw
	curl -s "http://$1/stats" | json_expr "d.get('$2', 0)"
}

setup_servers() {
	local port
	if [ ! -x "$HUSK" ]; then
		echo "not ok - husk $HUSK is not an executable (make build, or set HUSK)"
		exit 1
	fi
	start_test_registry "$SERVERS/registry"
	port=$(start_python_server fake "$REPO_DIR/test/fake-registry.py" "$SERVERS/fake.port") || {
		echo "not ok - start test/fake-registry.py"
		exit 1
	}
	FAKE=127.0.0.1:$port
	write_proxy
	port=$(start_python_server proxy "$SERVERS/proxy.py" "$SERVERS/proxy.port" "$REG") || {
		echo "not ok - start the fault-injecting proxy"
		exit 1
	}
	PROXY=127.0.0.1:$port
	BUSYBOX_ID=$(layout_config_digest busybox)
	BUSYBOX_MANIFEST=$(layout_manifest_digest busybox)
	echo "# $TEST_NAME: husk $HUSK, registry $REG, fake registry $FAKE, proxy $PROXY"
}

# The fake registry's blob (test/fake-registry.py BLOB).
FAKE_BLOB=sha256:$("$PY" -c 'import hashlib, sys; sys.stdout.write(hashlib.sha256(b"husk fake registry blob\n" * 4096).hexdigest())')

# ---------------------------------------------------------------- tests

t_pull_by_tag() {
	local store blobs
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	assert_pulled "pull by tag prints the image id (the config digest)" "$BUSYBOX_ID" || return 1
	blobs=$(layout_blobs_of busybox | sed 's/^sha256://' | sort)
	assert_eq "pull by tag: the store holds the manifest, config and 3 layers" "$blobs" "$(blob_names "$store")"
	assert_blobs_verified "pull by tag: every blob matches its digest" "$store"
	assert_eq "pull by tag: one snapshot per layer" 3 "$(snapshot_names "$store" | grep -c '^[0-9a-f]\{64\}$')"
	assert_eq "pull by tag: no ingest file left" "" "$(ingest_files "$store")"
	img "$store" ls
	assert_match "image ls lists repository, tag and the short id" "$OUT" \
		"^$REG/test/busybox +latest +${BUSYBOX_ID:7:12} "
	img "$store" ls -q
	assert_eq "image ls -q prints the short id (as podman)" "${BUSYBOX_ID:7:12}" "$OUT"
	img "$store" ls -q --no-trunc
	assert_eq "image ls -q --no-trunc prints the id" "$BUSYBOX_ID" "$OUT"
	img "$store" pull "$REG/test/busybox:latest"
	assert_pulled "a second pull of the same tag succeeds" "$BUSYBOX_ID"
	assert_eq "a second pull adds no record" "$BUSYBOX_ID" "$(record_ids "$store")"
}

t_pull_by_digest() {
	local store digest
	store=$(new_store)
	digest=$("${SKOPEO[@]}" inspect --tls-verify=false "docker://$REG/test/busybox:latest" | json_expr 'd["Digest"]')
	assert_eq "skopeo sees the layout's manifest digest" "$BUSYBOX_MANIFEST" "$digest"
	img "$store" pull "$REG/test/busybox@$digest"
	assert_pulled "pull by digest" "$BUSYBOX_ID" || return 1
	img "$store" inspect "$REG/test/busybox@$digest"
	assert_eq "inspect by digest: manifestDigest" "$digest" "$(json_expr 'd["manifestDigest"]' <<<"$OUT")"
	assert_eq "inspect by digest: repoDigests" "[\"$REG/test/busybox@$digest\"]" \
		"$(json_expr 'd["repoDigests"]' <<<"$OUT")"
	assert_eq "a digest pull gives no tag" "[]" "$(json_expr 'd["repoTags"]' <<<"$OUT")"
	img "$store" ls
	assert_contains "image ls lists the digest-pulled image (its id)" "$OUT" "${BUSYBOX_ID:7:12}"
	# docker shows the repository with tag <none>; containerd shows name@digest.
	assert_contains "image ls names the digest-pulled image's repository" "$OUT" "$REG/test/busybox"
	img "$store" pull "$REG/test/busybox@sha256:$(printf '0%.0s' $(seq 64))"
	assert_one_line_error "pull of an unknown digest" "manifest unknown|not found|404"
}

t_inspect_config() {
	local store
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	[ "$RC" -eq 0 ] || {
		not_ok "pull busybox for inspect" "$ERR"
		return 1
	}
	img "$store" inspect "$REG/test/busybox:latest"
	assert_rc "inspect succeeds" 0 "$RC" || return 1
	echo "$OUT" >"$WORK/inspect.json"
	ins() { json_expr "$1" <"$WORK/inspect.json"; }
	assert_eq "inspect: id" "$BUSYBOX_ID" "$(ins 'd["id"]')"
	assert_eq "inspect: Env" \
		'["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HUSK_TEST=busybox","GREETING=hello world"]' \
		"$(ins 'd["config"]["Env"]')"
	assert_eq "inspect: Entrypoint" '["/bin/sh","-c"]' "$(ins 'd["config"]["Entrypoint"]')"
	assert_eq "inspect: Cmd" '["echo hello from husk"]' "$(ins 'd["config"]["Cmd"]')"
	assert_eq "inspect: User" tester "$(ins 'd["config"]["User"]')"
	assert_eq "inspect: WorkingDir" /home/tester "$(ins 'd["config"]["WorkingDir"]')"
	assert_eq "inspect: ExposedPorts" '["53/udp","8080/tcp"]' "$(ins 'sorted(d["config"]["ExposedPorts"])')"
	assert_eq "inspect: Volumes" '["/data/vol"]' "$(ins 'sorted(d["config"]["Volumes"])')"
	assert_eq "inspect: Labels" '{"org.husk.test":"busybox","org.opencontainers.image.title":"husk test busybox"}' \
		"$(ins 'd["config"]["Labels"]')"
	assert_eq "inspect: StopSignal" SIGTERM "$(ins 'd["config"]["StopSignal"]')"
	assert_eq "inspect: the layers' diffIDs are the config's rootfs.diff_ids" \
		"$(layout_blob "$IMAGES/busybox" "$BUSYBOX_ID" | json_expr 'd["rootfs"]["diff_ids"]')" \
		"$(ins '[l["diffID"] for l in d["layers"]]')"
	img "$store" inspect "${BUSYBOX_ID:7:12}"
	assert_eq "inspect by short id" "$BUSYBOX_ID" "$(json_expr 'd["id"]' <<<"$OUT")"
	img "$store" inspect "$REG/test/nothere:latest"
	assert_one_line_error "inspect of an unknown image" "not found"
}

# The architecture the image config says, as inspect shows it (top level,
# as docker does, or next to the runtime config).
inspect_arch() { # INSPECT-JSON
	json_expr 'd.get("architecture") or d.get("Architecture") or d["config"].get("architecture") or d["config"]["Architecture"]' <<<"$1"
}

t_multiarch() {
	local store amd64 arm64
	store=$(new_store)
	amd64=$(multiarch_manifest amd64)
	arm64=$(multiarch_manifest arm64)
	img "$store" pull "$REG/test/multiarch:latest"
	assert_rc "multiarch: default pull succeeds" 0 "$RC" || return 1
	img "$store" inspect "$OUT"
	assert_eq "multiarch: default picks the amd64 manifest" "$amd64" "$(json_expr 'd["manifestDigest"]' <<<"$OUT")"
	assert_eq "multiarch: default picks the amd64 config (label)" amd64 \
		"$(json_expr 'd["config"]["Labels"]["arch"]' <<<"$OUT")"
	assert_eq "multiarch: inspect shows architecture amd64" amd64 "$(inspect_arch "$OUT")"
	img "$store" pull --platform linux/arm64 "$REG/test/multiarch:latest"
	assert_rc "multiarch: --platform linux/arm64 pull succeeds" 0 "$RC" || return 1
	img "$store" inspect "$OUT"
	assert_eq "multiarch: --platform linux/arm64 picks the arm64 manifest" "$arm64" \
		"$(json_expr 'd["manifestDigest"]' <<<"$OUT")"
	assert_eq "multiarch: --platform linux/arm64 picks the arm64 config (label)" arm64 \
		"$(json_expr 'd["config"]["Labels"]["arch"]' <<<"$OUT")"
	assert_eq "multiarch: inspect shows architecture arm64" arm64 "$(inspect_arch "$OUT")"
	store=$(new_store)
	img "$store" pull --platform linux/s390x "$REG/test/multiarch:latest"
	assert_one_line_error "multiarch: --platform linux/s390x" "s390x"
	assert_store_empty "multiarch: a platform not in the index writes nothing" "$store"
}

t_basic_auth() {
	local store dir addr
	dir=$(new_tmpdir authreg)
	defer "'$REPO_DIR/hack/registry.sh' stop '$dir'"
	addr=$("$REPO_DIR/hack/registry.sh" start "$dir" --htpasswd alice:s3cret) || return 1
	(
		OUTDIR=$IMAGES
		. "$REPO_DIR/hack/test-images.sh"
		push_test_images "$addr" --creds alice:s3cret busybox
	) >"$WORK/authpush.log" 2>&1 || {
		not_ok "push busybox to the htpasswd registry" "$(cat "$WORK/authpush.log")"
		return 1
	}
	store=$(new_store)
	img "$store" pull "$addr/test/busybox:latest"
	assert_one_line_error "auth: pull without credentials" "unauthorized"
	assert_store_empty "auth: a refused pull writes nothing" "$store"
	img "$store" pull --creds alice:wrong "$addr/test/busybox:latest"
	assert_one_line_error "auth: pull with a wrong password" "unauthorized|authentication|password"
	img "$store" pull --creds alice:s3cret "$addr/test/busybox:latest"
	assert_pulled "auth: pull with --creds succeeds" "$BUSYBOX_ID"
	img "$store" pull --creds nocolon "$addr/test/busybox:latest"
	assert_one_line_error "auth: --creds without a colon" "USER:PASS|creds"
}

t_corrupt_blob() {
	local store
	store=$(new_store)
	img "$store" pull "$FAKE/corrupt:latest"
	assert_one_line_error "corrupt blob" "digest mismatch"
	assert_contains "corrupt blob: the error names the blob" "$ERR" "$FAKE_BLOB"
	assert_eq "corrupt blob: nothing in ROOT/blobs" "" "$(blob_names "$store")"
	assert_eq "corrupt blob: nothing in ROOT/ingest" "" "$(ingest_files "$store")"
	assert_store_empty "corrupt blob: no snapshot or record" "$store"
}

# test/fake-registry.py's image has a config without diff_ids, so a pull
# from it ends there; what matters is that the blob got fetched (it is
# verified as it is stored, before the config is read) and that the failed
# pull's blob is then collected.
t_flaky_fake() {
	local store
	store=$(new_store)
	img "$store" pull "$FAKE/flaky:latest"
	assert_not_contains "503 once (fake): the 503 is retried, not reported" "$ERR" "503"
	assert_eq "503 once (fake): the manifest was asked for twice" 2 "$(stats_of "$FAKE" /v2/flaky/manifests/latest)"
	assert_eq "503 once (fake): the blob was asked for twice" 2 "$(stats_of "$FAKE" "/v2/flaky/blobs/$FAKE_BLOB")"
	assert_contains "503 once (fake): the pull got as far as the (empty) diff_ids" "$ERR" "diff_ids"
	assert_store_empty "503 once (fake): the failed pull's blob is collected" "$store"
}

t_flaky_proxy() {
	local store
	store=$(new_store)
	img "$store" pull "$PROXY/flaky/test/busybox:latest"
	assert_pulled "503 once (proxy): the pull succeeds" "$BUSYBOX_ID"
	assert_eq "503 once (proxy): the manifest was asked for twice" 2 \
		"$(stats_of "$PROXY" /v2/flaky/test/busybox/manifests/latest)"
	assert_eq "503 once (proxy): no ingest file left" "" "$(ingest_files "$store")"
	assert_blobs_verified "503 once (proxy): every blob matches its digest" "$store"
}

t_parallel_pulls() {
	local store round rc1 rc2 p1 p2 want_blobs
	want_blobs=$(layout_blobs_of big | sed 's/^sha256://' | sort)
	for round in 1 2 3; do
		store=$(new_store)
		husk_cmd image --root "$store" pull "$REG/test/big:latest" >"$WORK/par1.out" 2>"$WORK/par1.err" </dev/null &
		p1=$!
		husk_cmd image --root "$store" pull "$REG/test/big:latest" >"$WORK/par2.out" 2>"$WORK/par2.err" </dev/null &
		p2=$!
		wait "$p1"
		rc1=$?
		wait "$p2"
		rc2=$?
		assert_eq "parallel pulls (round $round): both succeed" "0 0" "$rc1 $rc2" ||
			diag "$(grep -h '^husk' "$WORK/par1.err" "$WORK/par2.err")"
		assert_eq "parallel pulls (round $round): one file per blob" "$want_blobs" "$(blob_names "$store")"
		assert_eq "parallel pulls (round $round): one snapshot per layer, no tmp- left" 5/5 \
			"$(snapshot_names "$store" | grep -c '^[0-9a-f]\{64\}$')/$(snapshot_names "$store" | wc -l)"
		assert_eq "parallel pulls (round $round): both print the same id" "$(cat "$WORK/par1.out")" \
			"$(cat "$WORK/par2.out")"
		assert_eq "parallel pulls (round $round): no ingest file left" "" "$(ingest_files "$store")"
		assert_eq "parallel pulls (round $round): one record" 1 "$(record_ids "$store" | wc -l)"
	done
}

t_whiteouts() {
	local store script
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	[ "$RC" -eq 0 ] || {
		not_ok "pull busybox for the rootfs checks" "$ERR"
		return 1
	}
	# One line per check: NAME=VALUE.
	script='
		t() { if [ $2 "$3" ]; then echo "$1=yes"; else echo "$1=no"; fi; }
		t removed -e /data/remove-me.txt
		t kept -f /data/keep.txt
		t new -f /data/new.txt
		t opaque_old1 -e /opaque/old1.txt
		t opaque_sub -e /opaque/sub
		t opaque_new -f /opaque/new.txt
		echo "opaque_ls=$(ls -A /opaque | tr "\n" " ")"
		echo "wh_files=$(find / -xdev -name ".wh.*" 2>/dev/null | tr "\n" " ")"
		echo "link=$(cat /data/link-to-keep)"
		echo "hardlinks=$(stat -c %h /data/new.txt)"
		echo "long=$(find /data -name file-with-a-long-name.txt | wc -l)"
		echo "owner=$(stat -c %u:%g:%a /data/tester-only)"'
	capture husk_cmd container --root "$store" run --rm --network none "$REG/test/busybox:latest" "$script"
	assert_rc "rootfs checks ran in a container" 0 "$RC" || return 1
	val() { printf '%s\n' "$OUT" | sed -n "s/^$1=//p"; }
	assert_eq "whiteout: /data/remove-me.txt is gone" no "$(val removed)"
	assert_eq "whiteout: its neighbour /data/keep.txt stays" yes "$(val kept)"
	assert_eq "whiteout: layer 3's /data/new.txt is there" yes "$(val new)"
	assert_eq "opaque dir: /opaque/old1.txt from below is hidden" no "$(val opaque_old1)"
	assert_eq "opaque dir: /opaque/sub from below is hidden" no "$(val opaque_sub)"
	assert_eq "opaque dir: only layer 3's new.txt is left" "new.txt " "$(val opaque_ls)"
	assert_eq "no .wh. marker files show in the rootfs" "" "$(val wh_files)"
	assert_eq "relative symlink resolves" kept "$(val link)"
	assert_eq "hardlink shares the inode (2 links)" 2 "$(val hardlinks)"
	assert_eq "long (pax) path unpacked" 1 "$(val long)"
	assert_eq "owner and mode kept (tester-only 1000:1000 600)" 1000:1000:600 "$(val owner)"
}

# Stat of a path or "absent", to see that the host was not touched.
host_mark() { # PATH
	stat -c '%i %s %Y %h' "$1" 2>/dev/null || echo absent
}

evil_case() { # NAME ENTRY-REGEX HOST-PATH...
	local name=$1 entry=$2 store p
	shift 2
	local -A before
	store=$(new_store)
	for p in "$@" "$store/escape" "$store/snapshots/escape" "$store/etc/passwd" "$(dirname "$store")/escape"; do
		before[$p]=$(host_mark "$p")
	done
	img "$store" pull "$REG/test/evil-$name:latest"
	assert_one_line_error "evil $name: refused" "entry.*$entry|$entry.*entry|$entry"
	for p in "${!before[@]}"; do
		assert_eq "evil $name: host path $p untouched" "${before[$p]}" "$(host_mark "$p")"
	done
	assert_eq "evil $name: no snapshot left (not even tmp-)" "" "$(snapshot_names "$store")"
	assert_eq "evil $name: no ingest file left" "" "$(ingest_files "$store")"
	assert_eq "evil $name: no image record" "" "$(record_ids "$store")"
	assert_eq "evil $name: no blob left (the failed pull's are collected)" "" "$(blob_names "$store")"
}

t_evil_traversal() { evil_case traversal '"\.\./\.\./escape"' /escape /tmp/escape; }
t_evil_absolute() { evil_case absolute '"/etc/evil"' /etc/evil; }
t_evil_symlink() { evil_case symlink-escape '"link/pwned"' /tmp/pwned /tmp/link; }
t_evil_hardlink() { evil_case hardlink-escape 'passwd-link' /etc/passwd; }

t_rm_gc() {
	local store bb_only shared multi
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	img "$store" pull "$REG/test/multiarch:latest"
	assert_rc "pull busybox and multiarch (they share the base layer)" 0 "$RC" || return 1
	multi=$OUT
	shared=$(comm -12 <(layout_blobs_of busybox | sort) <(layout_blobs_of multiarch "$(multiarch_manifest amd64)" | sort))
	bb_only=$(comm -23 <(layout_blobs_of busybox | sort) <(echo "$shared"))
	img "$store" rm "$REG/test/busybox:latest"
	assert_rc "image rm busybox" 0 "$RC"
	assert_contains "image rm says deleted with the id" "$OUT" "$BUSYBOX_ID"
	img "$store" inspect "$REG/test/busybox:latest"
	assert_fails "image rm: the record is gone (inspect fails)" "$RC"
	img "$store" ls
	assert_not_contains "image rm: ls no longer lists it" "$OUT" "test/busybox"
	local left="" d
	for d in $bb_only; do
		[ -e "$store/blobs/sha256/${d#sha256:}" ] && left="$left $d"
	done
	assert_eq "GC: busybox's own blobs are gone" "" "$left"
	left=""
	for d in $shared; do
		[ -e "$store/blobs/sha256/${d#sha256:}" ] || left="$left $d"
	done
	assert_eq "GC: the base layer multiarch still uses is kept" "" "$left"
	assert_eq "GC: only multiarch's one snapshot is left" 1 "$(snapshot_names "$store" | wc -l)"
	img "$store" rm "$multi"
	assert_rc "image rm by id" 0 "$RC"
	assert_eq "GC: ROOT/blobs/sha256 is empty after the last rm" "" "$(blob_names "$store")"
	assert_eq "GC: no snapshot is left after the last rm" "" "$(snapshot_names "$store")"
	img "$store" rm "$REG/test/busybox:latest"
	assert_one_line_error "image rm of a missing image" "not found"
}

t_import_dir() {
	local store
	store=$(new_store)
	img "$store" import "$IMAGES/busybox" imported/busybox:v1
	assert_rc "import an OCI layout dir" 0 "$RC" || return 1
	assert_contains "import prints the image id" "$OUT" "$BUSYBOX_ID"
	assert_contains "import prints the name it was given" "$OUT" "imported/busybox:v1"
	img "$store" ls
	assert_match "ls lists the imported image" "$OUT" "imported/busybox +v1 "
	assert_blobs_verified "import: every blob matches its digest" "$store"
	img "$store" import "$IMAGES/busybox" imported/busybox:v2
	assert_contains "a second name for the same image: import prints the new name" "$OUT" "imported/busybox:v2"
	capture husk_cmd container --root "$store" run --rm --network none imported/busybox:v1 'echo from-import'
	assert_eq "an imported image runs" from-import "$OUT"
	store=$(new_store)
	img "$store" import "$WORK/nothere"
	assert_one_line_error "import of a missing path" "nothere"
	mkdir -p "$WORK/notalayout"
	img "$store" import "$WORK/notalayout"
	assert_one_line_error "import of a dir that is no layout" "oci-layout|index.json|layout"
	assert_store_empty "failed imports write nothing" "$store"
}

t_import_tar() {
	local store
	store=$(new_store)
	tar -C "$IMAGES/busybox" -cf "$WORK/busybox.tar" oci-layout index.json blobs
	img "$store" import "$WORK/busybox.tar" tarred/busybox:v1
	assert_rc "import a tar of an OCI layout" 0 "$RC" || return 1
	assert_contains "tar import: the same image id" "$OUT" "$BUSYBOX_ID"
	img "$store" inspect tarred/busybox:v1
	assert_eq "tar import: inspect by the name" "$BUSYBOX_ID" "$(json_expr 'd["id"]' <<<"$OUT")"
	head -c 100000 "$WORK/busybox.tar" >"$WORK/truncated.tar"
	store=$(new_store)
	img "$store" import "$WORK/truncated.tar" trunc/busybox:v1
	assert_one_line_error "import of a truncated tar" "tar|truncat|missing|eof|blob"
	assert_store_empty "a failed tar import writes nothing" "$store"
}

t_export_round_trip() {
	local store store2 dir
	store=$(new_store)
	dir=$(new_tmpdir export)
	img "$store" pull "$REG/test/busybox:latest"
	[ "$RC" -eq 0 ] || {
		not_ok "pull busybox for export" "$ERR"
		return 1
	}
	img "$store" export "$REG/test/busybox:latest" "$dir/layout"
	assert_rc "export to a dir" 0 "$RC" || return 1
	assert_true "export: the dir has oci-layout and index.json" test -f "$dir/layout/oci-layout" -a -f "$dir/layout/index.json"
	capture "${SKOPEO[@]}" inspect --config "oci:$dir/layout"
	assert_contains "export: skopeo reads the exported layout" "$OUT" '"User": "tester"'
	store2=$(new_store)
	img "$store2" import "$dir/layout" roundtrip/busybox:again
	assert_rc "re-import the export under a new name" 0 "$RC"
	img "$store2" inspect roundtrip/busybox:again
	assert_eq "round trip: same image id" "$BUSYBOX_ID" "$(json_expr 'd["id"]' <<<"$OUT")"
	assert_eq "round trip: same manifest digest" "$BUSYBOX_MANIFEST" "$(json_expr 'd["manifestDigest"]' <<<"$OUT")"
	img "$store" export "$REG/test/busybox:latest" "$dir/busybox.tar"
	assert_rc "export to a tar" 0 "$RC"
	store2=$(new_store)
	img "$store2" import "$dir/busybox.tar" roundtrip/busybox:tar
	img "$store2" inspect roundtrip/busybox:tar
	assert_eq "tar round trip: same image id" "$BUSYBOX_ID" "$(json_expr 'd["id"]' <<<"$OUT")"
	mkdir -p "$dir/busy"
	echo keep >"$dir/busy/mine"
	img "$store" export "$REG/test/busybox:latest" "$dir/busy"
	assert_one_line_error "export into a non-empty dir" "busy|empty|exist"
	assert_eq "export refused: the dir is untouched" mine "$(ls -A "$dir/busy" | tr '\n' ' ' | sed 's/ $//')"
	img "$store" export "$REG/test/nothere:latest" "$dir/none"
	assert_one_line_error "export of a missing image" "not found"
	assert_true "export of a missing image writes no dir" test ! -e "$dir/none"
}

t_bad_refs() {
	local store ref
	for ref in Busybox a:b:c x@sha256:123 "" "busybox:" "@sha256:$(printf 'a%.0s' $(seq 64))"; do
		store=$(new_store)
		img "$store" pull "$ref"
		assert_one_line_error "bad reference \"$ref\"" "reference"
		assert_store_empty "bad reference \"$ref\": nothing written" "$store"
	done
}

t_unreachable() {
	local store start elapsed
	store=$(new_store)
	start=$(date +%s)
	img "$store" pull 127.0.0.1:1/test/busybox:latest
	elapsed=$(($(date +%s) - start))
	assert_one_line_error "unreachable registry" "127\.0\.0\.1:1.*(connect|refused|reach)"
	assert_true "unreachable registry: gives up within 30 s (${elapsed} s)" test "$elapsed" -lt 30
	assert_store_empty "unreachable registry: nothing written" "$store"
}

t_not_found() {
	local store
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:nosuchtag"
	assert_one_line_error "404 tag" "manifest unknown|not found"
	assert_contains "404 tag: the error names the reference" "$ERR" "busybox:nosuchtag"
	assert_store_empty "404 tag: nothing written" "$store"
	img "$store" pull "$REG/test/nosuchrepo:latest"
	assert_one_line_error "404 repository" "unknown|not found"
	assert_store_empty "404 repository: nothing written" "$store"
}

t_schema1() {
	local store
	store=$(new_store)
	img "$store" pull "$FAKE/schema1:latest"
	assert_one_line_error "schema1 manifest" "unsupported|not supported"
	assert_contains "schema1: the error names the media type" "$ERR" "manifest.v1+prettyjws"
	assert_store_empty "schema1: nothing written" "$store"
}

t_interrupted_fake() {
	local store
	store=$(new_store)
	img "$store" pull "$FAKE/partial:latest"
	assert_true "cut connection (fake): the rest was asked for with Range" \
		test "$(stats_of "$FAKE" "range /v2/partial/blobs/$FAKE_BLOB")" -ge 1
	assert_contains "cut connection (fake): the pull got as far as the (empty) diff_ids, so the resumed blob matched its digest" \
		"$ERR" "diff_ids"
	assert_store_empty "cut connection (fake): the failed pull's blob is collected, no ingest file left" "$store"
}

t_interrupted_proxy() {
	local store layer
	store=$(new_store)
	img "$store" pull "$PROXY/cut/test/big:latest"
	assert_pulled "cut connection (proxy): the pull of big succeeds" "$(layout_config_digest big)"
	layer=$(layout_blobs_of big | tail -n 1)
	assert_true "cut connection (proxy): the cut layer was fetched again (resumed or restarted)" \
		test "$(stats_of "$PROXY" "/v2/cut/test/big/blobs/$layer")" -ge 2
	assert_eq "cut connection (proxy): no ingest file left" "" "$(ingest_files "$store")"
	assert_blobs_verified "cut connection (proxy): every blob matches its digest" "$store"
}

# A pull killed in the middle (a crash) must not poison the next one, and
# what it left in ROOT/ingest must not stay forever.
t_killed_pull() {
	local store pid size=0
	store=$(new_store)
	"$HUSK" image --root "$store" pull "$PROXY/slow/test/big:latest" >/dev/null 2>&1 </dev/null &
	pid=$!
	for _ in $(seq 1 200); do
		size=$(du -sb "$store/ingest" 2>/dev/null | cut -f1)
		[ "${size:-0}" -gt 300000 ] && break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	assert_true "killed pull: it was killed mid-download (${size} bytes in ingest)" test "${size:-0}" -gt 300000
	img "$store" pull "$REG/test/big:latest"
	assert_pulled "killed pull: the next pull succeeds" "$(layout_config_digest big)"
	assert_blobs_verified "killed pull: every blob matches its digest" "$store"
	img "$store" rm "$REG/test/big:latest"
	assert_eq "killed pull: after rm and GC, ROOT/ingest is empty" "" "$(ingest_files "$store")"
	assert_eq "killed pull: after rm and GC, ROOT/blobs is empty" "" "$(blob_names "$store")"
}

# The blobs no image record names (manifest, config, layers, index).
unreferenced_blobs() { # STORE
	comm -23 <(blob_names "$1") <(
		[ -f "$1/images.json" ] && json_expr '"\n".join(sorted({x[7:] for i in d["images"] for x in
			[i["id"], i["manifest_digest"], i.get("index_digest") or "sha256:"] + [l["digest"] for l in i["layers"]] if x[7:]}))' \
			<"$1/images.json"
	)
}

# A pull that fails once it has written blobs (here: in the unpack) leaves
# no blob to no image, even while another pull holds the GC lock (its GC is
# then wanted, and run when that pull ends); an image pulled before keeps
# every blob.
t_failed_pull_gc() {
	local store holder bb_blobs
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	assert_pulled "failed pull GC: busybox pulled first" "$BUSYBOX_ID" || return 1
	bb_blobs=$(blob_names "$store")
	img "$store" pull "$REG/test/evil-traversal:latest"
	assert_fails "failed pull GC: the evil pull fails in the unpack" "$RC"
	assert_eq "failed pull GC: the blobs left are busybox's, all of them" "$bb_blobs" "$(blob_names "$store")"
	assert_eq "failed pull GC: no blob left that no image references" "" "$(unreferenced_blobs "$store")"
	assert_true "failed pull GC: no GC left wanted" test ! -e "$store/gc.wanted"

	# Another pull (played by flock and its sleep) holds the GC lock shared.
	flock -s "$store/gc.lock" sleep 60 &
	holder=$!
	defer "pkill -P $holder sleep"
	for _ in $(seq 100); do
		flock -n -x "$store/gc.lock" true || break
		sleep 0.05
	done
	img "$store" pull "$REG/test/evil-absolute:latest"
	assert_fails "failed pull GC, lock held: the evil pull fails" "$RC"
	assert_true "failed pull GC, lock held: the GC is deferred, and wanted" test -e "$store/gc.wanted"
	assert_true "failed pull GC, lock held: so its blobs are still there" test -n "$(unreferenced_blobs "$store")"
	pkill -P "$holder" sleep
	wait "$holder" 2>/dev/null
	img "$store" pull "$REG/test/multiarch:latest"
	assert_rc "failed pull GC: the next pull succeeds" 0 "$RC"
	assert_eq "failed pull GC: when it ends, the wanted GC has run: no blob is unreferenced" "" \
		"$(unreferenced_blobs "$store")"
	assert_true "failed pull GC: and none is wanted any more" test ! -e "$store/gc.wanted"
	assert_eq "failed pull GC: busybox's blobs are all still there" "" \
		"$(comm -23 <(echo "$bb_blobs") <(blob_names "$store"))"
	capture husk_cmd container --root "$store" run --rm --network none "$REG/test/busybox:latest" 'echo still-runs'
	assert_eq "failed pull GC: busybox still runs" still-runs "$OUT"
}

# On a full disk: a pull whose blobs fit but whose unpack does not gives
# the space back.  big is 32 MiB of incompressible layers: on a 48 MiB
# tmpfs the blobs fit, the unpack runs out.
t_full_disk_pull() {
	local dir store used
	dir=$(new_tmpdir fullstore)
	store=$dir/store
	mkdir "$store"
	if ! mount -t tmpfs -o size=48m husk-test-store "$store"; then
		not_ok "mount a 48 MiB tmpfs for the store"
		return
	fi
	defer "umount -l '$store'"
	img "$store" pull "$REG/test/big:latest"
	assert_one_line_error "full disk: the pull of big fails" "no space left on device"
	assert_store_empty "full disk: no blob, snapshot (not even tmp-), ingest file or record left" "$store"
	used=$(df -k --output=used "$store" | tail -n 1 | tr -d ' ')
	assert_true "full disk: the space is given back (${used} KiB used of 49152)" test "$used" -lt 1024
	img "$store" pull "$REG/test/busybox:latest"
	assert_pulled "full disk: a pull that fits works after" "$BUSYBOX_ID"
	assert_eq "full disk: its blobs stay" "" "$(unreferenced_blobs "$store")"
	assert_true "full disk: and it has them all" test "$(blob_names "$store" | wc -l)" -ge 3
}

# ---------------------------------------------------------------- main

setup_servers
for t in t_pull_by_tag t_pull_by_digest t_inspect_config t_multiarch t_basic_auth t_corrupt_blob \
	t_flaky_fake t_flaky_proxy t_parallel_pulls t_whiteouts t_evil_traversal t_evil_absolute \
	t_evil_symlink t_evil_hardlink t_rm_gc t_import_dir t_import_tar t_export_round_trip t_bad_refs \
	t_unreachable t_not_found t_schema1 t_interrupted_fake t_interrupted_proxy t_killed_pull t_failed_pull_gc \
	t_full_disk_pull; do
	run_test "$t"
done
finish
