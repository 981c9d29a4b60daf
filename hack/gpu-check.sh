#!/usr/bin/env bash
# On a machine with a real NVIDIA GPU and its driver: generates a CDI spec
# with `husk cdi generate nvidia`, then runs `nvidia-smi -L` in a container
# three ways and checks that it lists the host's GPUs:
#   1. husk container run --gpus all           (the debug CLI, no daemon)
#   2. huskd, the CDI name in a cdi.k8s.io/ annotation
#   3. huskd, NVIDIA_VISIBLE_DEVICES=0 in the container's env
# (huskd driven by husk's own crictl-like client, test/e2e/cri_cli.py)
#
#   hack/gpu-check.sh [BUILD_DIR]        (as root; BUILD_DIR default ./build)
#   FAKE_NVIDIA=1 hack/gpu-check.sh [BUILD_DIR]
#                   the same against hack/fake-nvidia.sh's fake driver tree
#                   (a dry run of this script on a machine without a GPU:
#                   the fake nvidia-smi answers -L; nodes open with ENXIO)
#
# Needs: husk, huskd, husk-monitor, husk-pause and husk-image in
# BUILD_DIR (make build), busybox (busybox-static, or $BUSYBOX), python3,
# and for steps 2 and 3 Debian's python3-grpcio, python3-protobuf and
# protobuf-compiler (hack/deps.sh test installs them).  The image is made here, offline:
# busybox plus the host's C library files nvidia-smi links against (the
# driver's own files come from the CDI spec's mounts).  Everything lives in
# one temp dir, removed at the end; huskd listens on a socket in it and
# uses the host network (no CNI needed).  Prints TAP and a summary line.
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$(cd "${1:-$REPO/build}" && pwd) || exit 1
HUSK=$BUILD/husk
HUSKD=$BUILD/huskd
BUSYBOX=${BUSYBOX:-/bin/busybox}

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok - $1"; }
not_ok() {
	failed=$((failed + 1))
	echo "not ok - $1"
	shift
	[ $# -gt 0 ] && printf '%s\n' "$@" | tail -n 20 | sed 's/^/#   /'
}
finish() {
	echo "# gpu-check: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

[ "$(id -u)" -eq 0 ] || { echo "gpu-check: run as root" >&2; exit 2; }
for f in "$HUSK" "$HUSKD" "$BUILD/husk-image" "$BUSYBOX"; do
	[ -x "$f" ] || [ -f "$f" ] || { echo "gpu-check: $f is missing (make build; busybox-static)" >&2; exit 2; }
done
T=$(mktemp -d /tmp/husk-gpu.XXXXXX)
GENERATE=()
if [ "${FAKE_NVIDIA:-}" = 1 ]; then
	"$REPO/hack/fake-nvidia.sh" create "$T/nv" 2 >/dev/null || { rm -rf "$T"; exit 2; }
	GENERATE=(--driver-root "$T/nv/driver" --dev-root "$T/nv" --proc-root "$T/nv/proc" --sys-root "$T/nv/sys")
	SMI=$T/nv/driver/usr/bin/nvidia-smi
else
	if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
		echo "gpu-check: no /dev/nvidia[0-9]* here: this check needs an NVIDIA GPU and its driver" >&2
		rm -rf "$T"
		exit 2
	fi
	SMI=$(command -v nvidia-smi || true)
	[ -n "$SMI" ] || { echo "gpu-check: nvidia-smi is not on the host's PATH" >&2; rm -rf "$T"; exit 2; }
fi
HUSKD_PID=
cleanup() {
	if [ -n "$HUSKD_PID" ]; then
		[ -d "$T/gen" ] && "${C[@]}" rmp -fa >/dev/null 2>&1
		kill "$HUSKD_PID" 2>/dev/null
		wait "$HUSKD_PID" 2>/dev/null
	fi
	"$HUSK" container --root "$T/root" rm -f gpu-cli >/dev/null 2>&1
	umount -R "$T/root" 2>/dev/null
	[ -d "$T/nv" ] && "$REPO/hack/fake-nvidia.sh" remove "$T/nv" >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
host_list=$("$SMI" -L 2>&1)
echo "# host: $(echo "$host_list" | head -n 1) ($(echo "$host_list" | grep -c '^GPU') GPU(s))"

# ---------------------------------------------------------------- the spec
mkdir -p "$T/cdi"
if out=$("$HUSK" cdi generate nvidia "${GENERATE[@]}" --output "$T/cdi/nvidia.yaml" 2>&1); then
	ok "husk cdi generate nvidia wrote a spec"
else
	not_ok "husk cdi generate nvidia" "$out"
	finish
fi
list=$("$HUSK" cdi list --spec-dir "$T/cdi" 2>&1)
if echo "$list" | grep -q 'nvidia.com/gpu=all' && echo "$list" | grep -q 'nvidia.com/gpu=0'; then
	ok "husk cdi list shows nvidia.com/gpu=0 and =all"
else
	not_ok "husk cdi list shows nvidia.com/gpu=0 and =all" "$list"
fi
echo "$list" | sed 's/^/# /'

# ---------------------------------------------------------------- the image
# busybox + the C library files nvidia-smi needs, as an OCI layout.
R=$T/rootfs
mkdir -p "$R/bin" "$R/tmp" "$R/etc" "$R/proc" "$R/sys" "$R/dev"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh ls cat; do ln -s busybox "$R/bin/$a"; done
ldd "$SMI" 2>/dev/null | awk '/=> \// { print $3 } /^\s*\/.*ld-linux/ { print $1 }' | while read -r lib; do
	case "$(basename "$lib")" in libnvidia* | libcuda*) continue ;; esac
	mkdir -p "$R$(dirname "$lib")"
	cp -L "$lib" "$R$lib"
done
# The loader's own path, as the binary names it.
interp=$(readelf -l "$SMI" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
if [ -n "$interp" ] && [ ! -e "$R$interp" ]; then
	mkdir -p "$R$(dirname "$interp")"
	cp -L "$interp" "$R$interp"
fi
echo "/usr/lib/x86_64-linux-gnu" >"$R/etc/ld.so.conf"
python3 - "$R" "$T/layout" <<'EOF' || { not_ok "build the test image"; finish; }
import hashlib, io, json, os, sys, tarfile
root, out = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(out, "blobs", "sha256"))
def blob(data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out, "blobs", "sha256", d), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + d, "size": len(data)}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tar:
    tar.add(root, arcname=".")
layer = blob(buf.getvalue())
diff = layer["digest"]
config = blob(json.dumps({"architecture": "amd64", "os": "linux",
                          "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/bin/sh"]},
                          "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode())
manifest = blob(json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "config": dict(config, mediaType="application/vnd.oci.image.config.v1+json"),
                            "layers": [dict(layer, mediaType="application/vnd.oci.image.layer.v1.tar")]}).encode())
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [dict(manifest,
              mediaType="application/vnd.oci.image.manifest.v1+json",
              annotations={"org.opencontainers.image.ref.name": "latest"})]}, f)
with open(os.path.join(out, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
EOF
IMAGE=localhost/husk-gpu-check:latest
if out=$("$HUSK" image --root "$T/root" import "$T/layout" "$IMAGE" 2>&1); then
	ok "the test image is imported ($IMAGE)"
else
	not_ok "husk image import" "$out"
	finish
fi

# Each GPU line nvidia-smi -L prints on the host must appear in OUTPUT.
same_gpus() { # WHAT OUTPUT
	local line missing=""
	while read -r line; do
		case "$line" in GPU*) echo "$2" | grep -qF "$line" || missing="$missing$line; " ;; esac
	done <<<"$host_list"
	if [ -z "$missing" ] && echo "$2" | grep -q '^GPU'; then
		ok "$1: nvidia-smi -L lists the host's GPUs"
	else
		not_ok "$1: nvidia-smi -L lists the host's GPUs" "missing: $missing" "$2"
	fi
}

# ------------------------------------------------- 1. husk container run
out=$("$HUSK" container --root "$T/root" run --rm --network none --name gpu-cli --cdi-spec-dir "$T/cdi" --gpus all \
	"$IMAGE" nvidia-smi -L 2>&1)
same_gpus "husk container run --gpus all" "$out"

# ------------------------------------------------- 2, 3. huskd
C=(env HUSK_CRI_GEN="$T/gen" /usr/bin/python3 "$REPO/test/e2e/cri_cli.py" -r "unix://$T/huskd.sock"
	-i "unix://$T/huskd.sock" --timeout 60s)
if ! /usr/bin/python3 -c 'import grpc' 2>/dev/null || ! mkdir -p "$T/gen" ||
	! protoc --python_out="$T/gen" -I "$REPO/cri/proto" "$REPO/cri/proto/api.proto" 2>"$T/protoc.err"; then
	rmdir "$T/gen" 2>/dev/null
	not_ok "the CRI client (python3-grpcio, protoc) for the huskd checks" "$(cat "$T/protoc.err" 2>/dev/null)"
	finish
fi
cat >"$T/huskd.json" <<EOF
{"cdi_spec_dirs": ["$T/cdi"]}
EOF
"$HUSKD" --listen "unix://$T/huskd.sock" --root "$T/root" --state "$T/state" --config "$T/huskd.json" \
	>"$T/huskd.log" 2>&1 &
HUSKD_PID=$!
for _ in $(seq 100); do [ -S "$T/huskd.sock" ] && break; sleep 0.1; done
cat >"$T/pod.json" <<EOF
{"metadata": {"name": "gpu-check", "namespace": "husk", "uid": "gpu-check-$$"},
 "log_directory": "$T/logs",
 "linux": {"security_context": {"namespace_options": {"network": 2}}}}
EOF
pod=$("${C[@]}" runp "$T/pod.json" 2>&1) || { not_ok "RunPodSandbox (host network)" "$pod" "$(tail -n 5 "$T/huskd.log")"; finish; }

run_ctr() { # NAME JSON-FRAGMENT: prints the log of `nvidia-smi -L; ls /dev`
	local cfg=$T/$1.json id
	cat >"$cfg" <<EOF
{"metadata": {"name": "$1"}, "image": {"image": "$IMAGE"}, "command": ["sh", "-c", "nvidia-smi -L; ls /dev"],
 "log_path": "$1.log", $2}
EOF
	id=$("${C[@]}" create "$pod" "$cfg" "$T/pod.json" 2>&1) || { echo "create: $id"; return; }
	"${C[@]}" start "$id" >/dev/null 2>&1 || { echo "start failed"; return; }
	for _ in $(seq 100); do
		"${C[@]}" inspect -o go-template --template '{{.status.state}}' "$id" 2>/dev/null | grep -q EXITED && break
		sleep 0.1
	done
	"${C[@]}" logs "$id" 2>&1
}
same_gpus "huskd, annotation cdi.k8s.io/gpu: nvidia.com/gpu=all" \
	"$(run_ctr by-annotation '"annotations": {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}')"
out=$(run_ctr by-env '"envs": [{"key": "NVIDIA_VISIBLE_DEVICES", "value": "0"}]')
first=$(echo "$host_list" | grep '^GPU 0:' | sed 's/ (UUID.*//')
if echo "$out" | grep -qx nvidia0 && ! echo "$out" | grep -qx 'nvidia[1-9][0-9]*'; then
	ok "huskd, NVIDIA_VISIBLE_DEVICES=0: the container has /dev/nvidia0 and no other GPU node"
else
	not_ok "huskd, NVIDIA_VISIBLE_DEVICES=0: the container has /dev/nvidia0 and no other GPU node" "$out"
fi
# The real nvidia-smi lists the GPUs it can open; the fake one prints all.
if [ "${FAKE_NVIDIA:-}" != 1 ]; then
	if echo "$out" | grep -qF "$first" && [ "$(echo "$out" | grep -c '^GPU')" -eq 1 ]; then
		ok "huskd, NVIDIA_VISIBLE_DEVICES=0: nvidia-smi -L lists GPU 0 only"
	else
		not_ok "huskd, NVIDIA_VISIBLE_DEVICES=0: nvidia-smi -L lists GPU 0 only" "$out"
	fi
fi
finish
