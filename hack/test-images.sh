#!/usr/bin/env bash
# Builds husk's test images offline, from Debian's busybox-static, as OCI
# image layouts (OUTDIR/<name>/{oci-layout,index.json,blobs/sha256/...}),
# and pushes them to a registry:
#
#   hack/test-images.sh OUTDIR                          build (cached)
#   hack/test-images.sh OUTDIR --push ADDR [--creds U:P] [NAME...]
#                                     build, then push (all, or the NAMEs) to
#                                     ADDR as test/NAME:latest
#   . hack/test-images.sh; OUTDIR=...; push_test_images ADDR [--creds U:P] [NAME...]
#
# Images (all tagged "latest"):
#   busybox    3 layers: busybox + applets + passwd/group (user tester 1000:1000);
#              files, a file to white out, a dir to make opaque; whiteout,
#              opaque dir, symlinks, hardlink, long name (zstd).  Config with
#              Env, Entrypoint, Cmd, WorkingDir, User, ExposedPorts, Volumes,
#              Labels, StopSignal.
#   multiarch  an index: linux/amd64 (busybox base) and linux/arm64/v8.
#   big        busybox base + 4 incompressible 8 MiB layers (pull benchmark).
#   evil/{traversal,absolute,symlink-escape,hardlink-escape}: one hostile layer each.
# Output is deterministic (fixed mtimes and owners, sorted entries), so the
# digests only change when this script or busybox does; OUTDIR/.done holds
# the hash of both and a match means "already built".
set -euo pipefail

busybox=${BUSYBOX:-/bin/busybox}

# The exact push commands.  skopeo keeps the manifests byte for byte, so the
# registry serves the digests written in the layouts.
push_test_images() { # ADDR [--creds USER:PASS] [NAME...]   (uses $OUTDIR)
	local dest=$1 name
	local skopeo=(skopeo --insecure-policy copy --quiet --dest-tls-verify=false)
	shift
	if [ "${1:-}" = --creds ]; then
		skopeo+=(--dest-creds "$2")
		shift 2
	fi
	local names=("$@")
	if [ ${#names[@]} -eq 0 ]; then
		names=(busybox multiarch big evil-traversal evil-absolute evil-symlink-escape evil-hardlink-escape)
	fi
	for name in "${names[@]}"; do
		case $name in
		multiarch) "${skopeo[@]}" --all "oci:$OUTDIR/$name:latest" "docker://$dest/test/$name:latest" ;;
		evil-*) "${skopeo[@]}" "oci:$OUTDIR/evil/${name#evil-}:latest" "docker://$dest/test/$name:latest" ;;
		*) "${skopeo[@]}" "oci:$OUTDIR/$name:latest" "docker://$dest/test/$name:latest" ;;
		esac
	done
}

build_images() { # OUTDIR
	python3 - "$1" "$busybox" <<'PY'
import gzip, hashlib, io, json, os, shutil, subprocess, sys, tarfile

out, busybox = sys.argv[1], sys.argv[2]
MTIME = 1704067200  # 2024-01-01T00:00:00Z
CREATED = "2024-01-01T00:00:00Z"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"


def entry(name, kind=tarfile.REGTYPE, data=b"", mode=None, uid=0, gid=0, link=""):
    return dict(name=name, kind=kind, data=data, mode=mode, uid=uid, gid=gid, link=link)


def d(name, mode=0o755, uid=0, gid=0):
    return entry(name, tarfile.DIRTYPE, mode=mode, uid=uid, gid=gid)


def f(name, data, mode=0o644, uid=0, gid=0):
    return entry(name, data=data if isinstance(data, bytes) else data.encode(), mode=mode, uid=uid, gid=gid)


def sym(name, target):
    return entry(name, tarfile.SYMTYPE, mode=0o777, link=target)


def hard(name, target):
    return entry(name, tarfile.LNKTYPE, mode=0o644, link=target)


def tar_bytes(entries, keep_order=False):
    """A tar stream; entries sorted by name unless the order is the point."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries if keep_order else sorted(entries, key=lambda e: e["name"]):
            info = tarfile.TarInfo(e["name"])
            info.type = e["kind"]
            info.mtime = MTIME
            info.uid, info.gid = e["uid"], e["gid"]
            info.uname = info.gname = ""
            info.mode = e["mode"] if e["mode"] is not None else 0o644
            info.linkname = e["link"]
            info.size = len(e["data"]) if e["kind"] == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(e["data"]) if info.size else None)
    return buf.getvalue()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Layout:
    def __init__(self, path):
        self.path = path
        os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)
        with open(os.path.join(path, "oci-layout"), "w") as fh:
            json.dump({"imageLayoutVersion": "1.0.0"}, fh)

    def blob(self, data, media_type):
        digest = sha(data)
        p = os.path.join(self.path, "blobs", "sha256", digest[7:])
        if not os.path.exists(p):
            with open(p + ".tmp", "wb") as fh:
                fh.write(data)
            os.rename(p + ".tmp", p)
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    def json_blob(self, doc, media_type):
        return self.blob(json.dumps(doc, indent=2, sort_keys=True).encode(), media_type)

    def tag(self, descriptor, tag="latest"):
        desc = dict(descriptor)
        desc["annotations"] = {"org.opencontainers.image.ref.name": tag}
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [desc]}
        with open(os.path.join(self.path, "index.json"), "w") as fh:
            json.dump(index, fh, indent=2, sort_keys=True)


def compress(raw, how):
    if how == "gzip":
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="", compresslevel=6) as gz:
            gz.write(raw)
        return buf.getvalue(), LAYER_GZIP
    if how == "gzip-fast":
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="", compresslevel=1) as gz:
            gz.write(raw)
        return buf.getvalue(), LAYER_GZIP
    zst = subprocess.run(["zstd", "-q", "-c", "-3", "--no-progress"], input=raw, stdout=subprocess.PIPE, check=True)
    return zst.stdout, LAYER_ZSTD


def image(layout, layers, config, arch="amd64", variant=None):
    """Writes layer blobs, config and manifest; returns the manifest descriptor."""
    descs, diff_ids, history = [], [], []
    for i, (entries, how, keep_order) in enumerate(layers):
        raw = tar_bytes(entries, keep_order)
        blob, media_type = compress(raw, how)
        descs.append(layout.blob(blob, media_type))
        diff_ids.append(sha(raw))
        history.append({"created": CREATED, "created_by": "hack/test-images.sh layer %d" % (i + 1)})
    cfg = {"architecture": arch, "os": "linux", "created": CREATED, "config": config,
           "rootfs": {"type": "layers", "diff_ids": diff_ids}, "history": history}
    if variant:
        cfg["variant"] = variant
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": layout.json_blob(cfg, OCI_CONFIG), "layers": descs}
    desc = layout.json_blob(manifest, OCI_MANIFEST)
    desc["platform"] = {"architecture": arch, "os": "linux"}
    if variant:
        desc["platform"]["variant"] = variant
    return desc


def busybox_base():
    with open(busybox, "rb") as fh:
        binary = fh.read()
    applets = subprocess.run([busybox, "--list"], stdout=subprocess.PIPE, check=True, text=True).stdout.split()
    entries = [d("bin"), d("etc"), d("home"), d("home/tester", uid=1000, gid=1000), d("proc"), d("sys"),
               d("dev"), d("root", 0o700), d("tmp", 0o1777), d("usr"), d("var"), d("var/tmp", 0o1777),
               f("bin/busybox", binary, 0o755),
               sym("sbin", "bin"), sym("usr/bin", "../bin"), sym("usr/sbin", "../bin"),
               f("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
                               "tester:x:1000:1000:tester:/home/tester:/bin/sh\n"
                               "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"),
               f("etc/group", "root:x:0:\ntester:x:1000:\nextra:x:1001:tester\nnogroup:x:65534:\n"),
               f("etc/hostname", "husk-busybox\n")]
    entries += [sym("bin/" + a, "busybox") for a in applets if a != "busybox"]
    return entries


PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build_busybox(base):
    layout = Layout(os.path.join(out, "busybox"))
    layer2 = [d("data"), f("data/keep.txt", "kept\n"), f("data/remove-me.txt", "whited out in layer 3\n"),
              f("data/hello.sh", "#!/bin/sh\necho hello from husk\n", 0o755),
              f("data/tester-only", "secret\n", 0o600, 1000, 1000),
              d("opaque"), f("opaque/old1.txt", "hidden by opaque\n"), d("opaque/sub"),
              f("opaque/sub/old2.txt", "hidden by opaque\n"), f("etc/motd", "welcome to husk\n")]
    # Order matters in an OCI layer: the opaque marker comes first in its dir.
    layer3 = [d("data"), f("data/.wh.remove-me.txt", ""), f("data/new.txt", "new in layer 3\n"),
              hard("data/new-hardlink.txt", "data/new.txt"), sym("data/link-to-keep", "keep.txt"),
              sym("data/abs-link", "/etc/motd"), d("opaque"), f("opaque/.wh..wh..opq", ""),
              f("opaque/new.txt", "only file left in opaque\n"), d("data/vol")]
    long_dir = "data"
    for _ in range(3):  # a path past tar's 100-character name field
        long_dir += "/a-rather-long-directory-name-for-pax"
        layer3.append(d(long_dir))
    layer3.append(f(long_dir + "/file-with-a-long-name.txt", "long name\n"))
    config = {"User": "tester", "Env": [PATH_ENV, "HUSK_TEST=busybox", "GREETING=hello world"],
              "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo hello from husk"], "WorkingDir": "/home/tester",
              "ExposedPorts": {"8080/tcp": {}, "53/udp": {}}, "Volumes": {"/data/vol": {}},
              "Labels": {"org.husk.test": "busybox", "org.opencontainers.image.title": "husk test busybox"},
              "StopSignal": "SIGTERM"}
    desc = image(layout, [(base, "gzip", False), (layer2, "gzip", False), (layer3, "zstd", True)], config)
    layout.tag(desc)


def build_multiarch(base):
    layout = Layout(os.path.join(out, "multiarch"))
    config = {"Env": [PATH_ENV], "Cmd": ["/bin/sh"]}
    amd64 = image(layout, [(base, "gzip", False)], dict(config, Labels={"arch": "amd64"}))
    arm64_layer = [d("etc"), f("etc/arch", "arm64\n")]
    arm64 = image(layout, [(arm64_layer, "gzip", False)], dict(config, Labels={"arch": "arm64"}), "arm64", "v8")
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [amd64, arm64]}
    layout.tag(layout.json_blob(index, OCI_INDEX))


def build_big(base):
    layout = Layout(os.path.join(out, "big"))
    layers = [(base, "gzip", False)]
    for i in range(4):
        data = hashlib.shake_256(b"husk-big-layer-%d" % i).digest(8 << 20)
        layers.append(([d("big"), f("big/blob-%d.bin" % i, data)], "gzip-fast", False))
    config = {"Env": [PATH_ENV], "Cmd": ["/bin/sh", "-c", "ls -l /big"]}
    layout.tag(image(layout, layers, config))


def build_evil():
    hostile = {
        "traversal": [f("../../escape", "escaped via ..\n")],
        "absolute": [f("/etc/evil", "written through an absolute path\n")],
        "symlink-escape": [sym("link", "/tmp"), f("link/pwned", "written through a symlink\n")],
        "hardlink-escape": [hard("passwd-link", "../../etc/passwd")],
    }
    for name, entries in hostile.items():
        layout = Layout(os.path.join(out, "evil", name))
        layout.tag(image(layout, [(entries, "gzip", True)], {"Cmd": ["/bin/sh"]}))


base = busybox_base()
build_busybox(base)
build_multiarch(base)
build_big(base)
build_evil()
PY
}

main() {
	local outdir=$1 stamp
	shift
	[ -x "$busybox" ] || {
		echo "$0: $busybox not found (install busybox-static)" >&2
		exit 1
	}
	command -v zstd >/dev/null || {
		echo "$0: zstd not found (install zstd)" >&2
		exit 1
	}
	stamp=$(cat "${BASH_SOURCE[0]}" "$busybox" | sha256sum | cut -d' ' -f1)
	mkdir -p "$outdir"
	OUTDIR=$(cd "$outdir" && pwd)
	# Tests starting at once must not build the same directory together.
	exec 9>"$OUTDIR/.lock"
	flock 9
	if [ "$(cat "$OUTDIR/.done" 2>/dev/null)" != "$stamp" ]; then
		rm -rf "$OUTDIR/busybox" "$OUTDIR/multiarch" "$OUTDIR/big" "$OUTDIR/evil" "$OUTDIR/.done"
		build_images "$OUTDIR"
		echo "$stamp" >"$OUTDIR/.done"
	fi
	exec 9>&-
	if [ $# -gt 0 ]; then
		if [ "$1" != --push ] || [ $# -lt 2 ]; then
			usage
		fi
		shift
		push_test_images "$@"
	fi
}

usage() {
	echo "usage: $0 OUTDIR [--push ADDR [--creds USER:PASS] [NAME...]]" >&2
	exit 2
}

# Sourced: only define push_test_images.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	[ $# -ge 1 ] || usage
	main "$@"
fi
