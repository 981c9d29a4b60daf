#!/usr/bin/env bash
# husk as containerd's runtime: Debian's containerd 1.6 with its runc shim
# (io.containerd.runc.v2) calling husk through `ctr run --runc-binary`.  This
# exercises the command line exactly as containerd speaks it: --root, --log
# with --log-format json, create --bundle --pid-file, start, state, kill,
# delete, exec --process --detach, and the console socket for -t.
. "$(dirname "$0")/lib.sh"
require_runtime
ensure_rootfs

if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
	echo "not ok - containerd and ctr are installed (hack/deps.sh installs them)"
	finish
fi

# Not new_tmpdir: that is emptied after every test, and containerd lives
# through all of them.
CTD=$(mktemp -d /tmp/husk-it-containerd.XXXXXX)
CTD_STATE=/run/husk-it-ctd.$$
SOCK=$CTD_STATE/ctd.sock
IMAGE=husk-test/busybox:latest
cat >"$CTD/config.toml" <<EOC
version = 2
root = "$CTD/root"
state = "$CTD_STATE/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
EOC

stop_containerd() {
	[ -n "${CTD_PID:-}" ] && kill "$CTD_PID" 2>/dev/null && wait "$CTD_PID" 2>/dev/null
	pkill -f "containerd-shim-runc-v2 -namespace husk-it .*-address $SOCK" 2>/dev/null
	umount_under "$CTD" "$CTD_STATE"
	rm -rf --one-file-system "$CTD_STATE" "$CTD"
}

containerd --config "$CTD/config.toml" >"$CTD/containerd.log" 2>&1 &
CTD_PID=$!
trap 'stop_containerd; cleanup_all' EXIT
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done

ctr_() { timeout 60 ctr -a "$SOCK" -n husk-it "$@"; }
# --cpu-shares 0: ctr asks for cpu.shares 1024 by default, and this host
# has no cpu controller on its cgroup v2 hierarchy, which husk refuses.
ctr_run() { ctr_ run --cpu-shares 0 --runc-binary "$RUNTIME" "$@"; }

# An image of the busybox rootfs as an OCI archive, imported into containerd.
import_image() {
	local layout=$CTD/layout
	"$PY" - "$ROOTFS_CACHE" "$layout" <<'EOP'
import gzip, hashlib, io, json, os, sys, tarfile
rootfs, out = sys.argv[1], sys.argv[2]
os.makedirs(out + "/blobs/sha256", exist_ok=True)
def put(data):
    d = hashlib.sha256(data).hexdigest()
    open(f"{out}/blobs/sha256/{d}", "wb").write(data)
    return "sha256:" + d, len(data)
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w") as t:
    for name in sorted(os.listdir(rootfs)):
        if not name.startswith(".husk"):
            t.add(os.path.join(rootfs, name), arcname=name)
diff_id = "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()
layer, layer_size = put(gzip.compress(raw.getvalue(), mtime=0))
config, config_size = put(json.dumps({"architecture": "amd64", "os": "linux",
    "config": {"Cmd": ["sh"]}, "rootfs": {"type": "layers", "diff_ids": [diff_id]}}).encode())
manifest, manifest_size = put(json.dumps({"schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer, "size": layer_size}]}).encode())
json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
    "digest": manifest, "size": manifest_size,
    "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}, open(out + "/index.json", "w"))
json.dump({"imageLayoutVersion": "1.0.0"}, open(out + "/oci-layout", "w"))
EOP
	tar -C "$layout" -cf "$CTD/image.tar" . && ctr_ image import --base-name husk-test/busybox "$CTD/image.tar"
}

t_import() {
	local out
	out=$(import_image 2>&1)
	assert_rc "containerd imports the test image" 0 $?
	[ $? -eq 0 ] || diag "$out"
}

t_run_foreground() {
	local out rc
	out=$(ctr_run --rm "$IMAGE" husk-it-fg sh -c 'echo hello from husk; id -u; exit 7' 2>&1)
	rc=$?
	assert_contains "ctr run: output comes through the shim" "$out" "hello from husk"
	assert_rc "ctr run: the container's exit code" 7 "$rc"
}

t_run_tty() {
	local out
	out=$(timeout 60 script -qec "ctr -a $SOCK -n husk-it run --rm -t --cpu-shares 0 --runc-binary $RUNTIME $IMAGE husk-it-tty sh -c 'tty'" /dev/null </dev/null 2>&1)
	assert_contains "ctr run -t: the process has a pty from the console socket" "$out" "/dev/pts/"
}

t_detached_exec_kill() {
	local out
	ctr_run -d "$IMAGE" husk-it-bg sleep 300 >/dev/null 2>&1
	assert_contains "ctr run -d: the task runs" "$(ctr_ task ls 2>&1)" "RUNNING"
	out=$(ctr_ task exec --exec-id e1 husk-it-bg sh -c 'echo exec says hi; cat /proc/1/cmdline | tr "\0" " "' 2>&1)
	assert_contains "ctr task exec: runs in the container" "$out" "exec says hi"
	assert_contains "ctr task exec: sees the container's pid 1" "$out" "sleep 300"
	ctr_ task kill -s KILL husk-it-bg >/dev/null 2>&1
	for _ in $(seq 50); do ctr_ task ls 2>/dev/null | grep -q STOPPED && break; sleep 0.1; done
	assert_contains "ctr task kill: the task stops" "$(ctr_ task ls 2>&1)" "STOPPED"
	ctr_ task delete husk-it-bg >/dev/null 2>&1
	ctr_ container delete husk-it-bg >/dev/null 2>&1
	assert_eq "ctr task delete: no husk state is left" "" "$(ls "$CTD_STATE/state/io.containerd.runtime.v2.task/husk-it" 2>/dev/null)"
	assert_eq "ctr container delete: containerd forgets it" "" "$(ctr_ container ls -q 2>/dev/null)"
}

t_refusal_reaches_containerd() {
	local out
	# A CFS quota below 1 ms: refused before anything is made.
	out=$(ctr_ run --rm --runc-binary "$RUNTIME" --cpu-quota 500 --cpu-period 100000 "$IMAGE" husk-it-mem true 2>&1)
	assert_fails "a limit husk cannot apply fails the task" $?
	assert_contains "containerd shows husk's one-line error" "$out" "cpu.quota"
	ctr_ container delete husk-it-mem >/dev/null 2>&1 || true
}

t_run_defaults_and_oom() {
	local out
	# ctr's defaults (cpu.shares 1024) and a memory limit: applied on v2 or v1.
	out=$(ctr_ run --rm --runc-binary "$RUNTIME" "$IMAGE" husk-it-defaults echo defaults-ok 2>&1)
	assert_contains "ctr run with default options (cpu.shares 1024)" "$out" defaults-ok
	ctr_ run --rm --runc-binary "$RUNTIME" --memory-limit 33554432 "$IMAGE" husk-it-oom \
		dd if=/dev/zero of=/dev/null bs=96M count=1 >/dev/null 2>&1
	assert_eq "ctr run --memory-limit: OOM-killed, exit 137" 137 "$?"
	ctr_ container delete husk-it-defaults husk-it-oom >/dev/null 2>&1 || true
}

for t in t_import t_run_foreground t_run_tty t_detached_exec_kill t_refusal_reaches_containerd t_run_defaults_and_oom; do
	run_test "$t"
done
finish
