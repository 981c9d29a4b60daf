#!/usr/bin/env bash
# `make run` until huskd exists: builds the busybox rootfs, makes a bundle
# under /tmp, and `husk run`s a container that greets, prints its hostname
# and `id`, and exits.  Cleans up after itself.
#
#   ./hack/demo.sh BUILD
set -u

if [ $# -ne 1 ]; then
	echo "usage: $0 BUILD" >&2
	exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
husk=$(cd "$1" 2>/dev/null && pwd)/husk
if [ ! -x "$husk" ]; then
	echo "$0: $1/husk is missing; run make build" >&2
	exit 1
fi

rootfs_cache=${HUSK_TEST_CACHE:-/tmp/husk-test-cache}/rootfs-busybox
"$repo/hack/busybox-rootfs.sh" "$rootfs_cache" || exit 1

bundle=$(mktemp -d /tmp/husk-demo.XXXXXX)
state=$(mktemp -d /tmp/husk-demo-state.XXXXXX)
id=husk-demo-$$
cleanup() {
	"$husk" --root "$state" delete --force "$id" >/dev/null 2>&1
	rm -rf --one-file-system "$bundle" "$state"
}
trap cleanup EXIT

cp -a "$rootfs_cache" "$bundle/rootfs"
rm -f "$bundle/rootfs/.husk-rootfs-ok" "$bundle/rootfs/.husk-rootfs-lock"
(cd "$bundle" && "$husk" spec) || exit 1
/usr/bin/python3 - "$bundle/config.json" <<'EOF'
import json, sys
path = sys.argv[1]
c = json.load(open(path))
c["process"]["args"] = ["sh", "-c", "echo hello from husk; echo \"hostname: $(hostname)\"; id"]
c["process"]["terminal"] = False
c["hostname"] = "husk-demo"
json.dump(c, open(path, "w"), indent=2)
EOF

echo "+ husk --root $state run --bundle $bundle $id"
"$husk" --root "$state" run --bundle "$bundle" "$id" </dev/null
rc=$?
echo "container exited with status $rc"
exit "$rc"
