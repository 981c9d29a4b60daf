#!/usr/bin/env bash
# The layers of DESIGN.md, checked over the #include "..." lines of the tree:
# each folder below may include only headers under the prefixes listed for
# it.  Then the file graph (hack/file-graph.py, includes and calls read from
# the sources, about a second): no circle of files that call each other, and
# cri/server/'s handlers call neither the method table nor each other.
# Prints one line per break and exits 1 when there is one; `make test` runs
# it (make check-layers).
#
#   hack/check-layers.sh [ROOT]     # ROOT: the tree to check (default: this repo)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=${1:-$here/..}
cd "$root" || {
	echo "check-layers: no such tree: $root" >&2
	exit 2
}

# folder : the prefixes its files may include (after "husk/", always allowed).
# The most specific folder a file lives in decides.
rules=(
	"common:"
	"include:"
	"runtime:runtime/"
	"image:image/"
	"cri/rpc:cri/rpc/"
	"cri/cni:cri/cni/"
	"cri/cdi:cri/cdi/ runtime/spec/spec.h"
	"cri/streaming:cri/streaming/"
	# cri/'s own rooms, bottom to top: spec < config < pod < container,
	# stats beside them, server (method table, handlers, reply) on top; the
	# debug CLI stands on container, pod and spec, never on the handlers.
	"cri/spec:cri/spec/ cri/proto/ runtime/spec/ runtime/cgroup/ runtime/lsm/ image/"
	"cri/config:cri/config/ cri/spec/ cri/cdi/ runtime/spec/"
	"cri/pod:cri/pod/ cri/config/ cri/spec/ cri/cni/ cri/proto/ runtime/cgroup/ runtime/lsm/"
	"cri/container:cri/container/ cri/pod/ cri/config/ cri/spec/ cri/cdi/ cri/cni/ cri/rpc/ cri/proto/ runtime/ image/"
	"cri/stats:cri/stats/ cri/streaming/ cri/proto/ runtime/cgroup/"
	"cri/server:cri/server/ cri/container/ cri/pod/ cri/config/ cri/spec/ cri/stats/ cri/cdi/ cri/cni/ cri/rpc/ cri/streaming/ cri/proto/ runtime/ image/"
	"cri/cli:cri/cli/ cri/container/ cri/pod/ cri/spec/ cri/config/ cri/cdi/ image/ runtime/"
	# runtime/: the Linux security modules' switches (AppArmor) and the spec
	# readers at the bottom, cgroup above them (no container state: that is
	# runtime/container_cgroup.c), the rest on top.
	"runtime/lsm:runtime/lsm/"
	"runtime/spec:runtime/spec/ runtime/lsm/"
	"runtime/cgroup:runtime/cgroup/ runtime/spec/"
	"image/registry:image/registry/ image/digest.h image/hosts.h image/reference.h"
)

# Circles of files allowed to stay for now, each as its member list (a
# pair "A B" under cri/server/ lets handler A still call handler B); the
# check fails when one grows or shrinks.  None is left: keep it so.
known=()

args=()
for rule in "${rules[@]}"; do
	args+=(--rule "$rule")
done
for circle in ${known[@]+"${known[@]}"}; do
	args+=(--known "$circle")
done
exec python3 "$here/file-graph.py" --root . check "${args[@]}"
