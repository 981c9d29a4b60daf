# shellcheck shell=bash
# Sourced by hack/bench-cri.sh and test/integration/test_containerd_cri.sh:
# Debian's containerd 1.6 with its CRI plugin, on a work dir of its own.
#
#   ctrd_pause_image OUTDIR        an OCI layout of the sandbox image: busybox
#                                  as /bin/sleep, sleeping as the pod's pid 1
#   ctrd_write_config FILE DIR REGISTRY CNI_CONF_DIR [RUNC_BINARY]
#                                  config.toml: root, state and sockets under
#                                  DIR (DIR/ctrd.sock), REGISTRY (host:port)
#                                  as a plain-http mirror with the pause image
#                                  pushed as REGISTRY/test/pause:latest, CNI
#                                  from CNI_CONF_DIR and /usr/lib/cni, and the
#                                  runc shim (io.containerd.runc.v2) calling
#                                  RUNC_BINARY (default: runc from PATH) with
#                                  its --root under DIR/runc-root, cgroupfs.
#
# Needs PY (a python3).  Nothing here lowers oom_score_adj: the CRI plugin's
# restrict_oom_score_adj keeps it at or above containerd's own, since these
# machines lack CAP_SYS_RESOURCE.

ctrd_pause_image() { # OUTDIR
	"$PY" - "$1" /bin/busybox <<'EOP'
import hashlib, io, json, os, sys, tarfile
out, busybox = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(out, "blobs", "sha256"), exist_ok=True)
def blob(data, media):
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(out, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return {"mediaType": media, "digest": "sha256:" + digest, "size": len(data)}
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
    d = tarfile.TarInfo("bin"); d.type = tarfile.DIRTYPE; d.mode = 0o755; tar.addfile(d)
    with open(busybox, "rb") as f:
        data = f.read()
    t = tarfile.TarInfo("bin/sleep"); t.mode = 0o755; t.size = len(data)
    tar.addfile(t, io.BytesIO(data))
layer = buf.getvalue()
diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
config = {"architecture": "amd64", "os": "linux",
          "config": {"Entrypoint": ["/bin/sleep"], "Cmd": ["2147483647"], "StopSignal": "SIGKILL"},
          "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": blob(json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json"),
            "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar")]}
m = blob(json.dumps(manifest).encode(), manifest["mediaType"])
m["annotations"] = {"org.opencontainers.image.ref.name": "latest"}
with open(os.path.join(out, "index.json"), "w") as f:
    json.dump({"schemaVersion": 2, "manifests": [m]}, f)
with open(os.path.join(out, "oci-layout"), "w") as f:
    json.dump({"imageLayoutVersion": "1.0.0"}, f)
EOP
}

ctrd_write_config() { # FILE DIR REGISTRY CNI_CONF_DIR [RUNC_BINARY]
	local binary=${5:-runc}
	cat >"$1" <<EOT
version = 2
root = "$2/ctrd/root"
state = "$2/ctrd/state"

[grpc]
  address = "$2/ctrd.sock"

[ttrpc]
  address = "$2/ctrd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  # pod netns under DIR, not /run/netns: the trap's umount finds them
  netns_mounts_under_state_dir = true
  sandbox_image = "$3/test/pause:latest"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "$binary"
  Root = "$2/runc-root"
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "$4"
  max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri".registry.mirrors."$3"]
  endpoint = ["http://$3"]
EOT
}
