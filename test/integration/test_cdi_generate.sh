#!/usr/bin/env bash
# `husk cdi generate nvidia` and `husk cdi list` on a fake driver root
# (hack/fake-nvidia.sh: 2 GPUs, 2 MIG devices on GPU 0): the spec's
# devices by index, UUID, MIG and `all`, its hooks, YAML and JSON; a
# container given GPU 0 or a MIG device through husk's own cdi_apply
# (cdi_apply.c, built here against the build's libraries) sees its nodes
# with the host's numbers, the driver libraries mounted read-only and the
# fake nvidia-smi; bad input fails with one line and writes nothing.  The
# fake tree builder itself: idempotent, refuses a foreign dir, removes all.
# The containers run under $RUNTIME (any OCI runtime); the cdi verbs are
# husk's own ($HUSK).
# Run alone: BUILD_DIR=build ./test/integration/test_cdi_generate.sh   (HUSK=... to override)
. "$(dirname "$0")/lib.sh"
require_runtime

HUSK=${HUSK:-$BUILD_DIR/husk}
FAKE_SH=$REPO_DIR/hack/fake-nvidia.sh
FAKE=$WORK/fake
APPLY=$WORK/cdi_apply
LIBDIR=/usr/lib/x86_64-linux-gnu
VERSION=550.54.14
UUID0=GPU-fa4e0000-1111-2222-3333-000000c0de00
UUID1=GPU-fa4e0001-1111-2222-3333-000000c0de01

setup() {
	if ! "$FAKE_SH" create "$FAKE" 2 >"$WORK/fake.log" 2>&1; then
		echo "not ok - hack/fake-nvidia.sh create"
		diag "$(cat "$WORK/fake.log")"
		exit 1
	fi
	# shellcheck disable=SC2046,SC2153 # pkg-config prints several words; LIB_DIR is lib.sh's
	if ! gcc -I"$REPO_DIR" -I"$REPO_DIR/include" $(pkg-config --cflags jansson) -o "$APPLY" "$LIB_DIR/cdi_apply.c" \
		"$BUILD_DIR/libhusk-cri.a" "$BUILD_DIR/libhusk-common.a" $(pkg-config --libs jansson yaml-0.1) \
		2>"$WORK/gcc.err"; then
		echo "not ok - build cdi_apply.c against $BUILD_DIR"
		diag "$(cat "$WORK/gcc.err")"
		exit 1
	fi
}

gen() { # ARGS...: generate nvidia for the fake tree; sets OUT, ERR, RC
	OUT=$("$HUSK" cdi generate nvidia --dev-root "$FAKE" --proc-root "$FAKE/proc" --sys-root "$FAKE/sys" \
		--driver-root "$FAKE/driver" "$@" 2>"$WORK/gen.err")
	RC=$?
	ERR=$(cat "$WORK/gen.err")
}

py_json() { # FILE EXPR: prints EXPR over the JSON document `d` in FILE
	"$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

t_fake_tree() {
	assert_eq "fake tree: /dev/nvidia0 is char 195:0 (c3:0)" "character special file c3:0" \
		"$(stat -c '%F %t:%T' "$FAKE/dev/nvidia0")"
	assert_eq "fake tree: nvidia-cap21 is char 508:21" "508:21" \
		"$(printf '%d:%d' "0x$(stat -c %t "$FAKE/dev/nvidia-caps/nvidia-cap21")" "0x$(stat -c %T "$FAKE/dev/nvidia-caps/nvidia-cap21")")"
	assert_eq "fake tree: mig-minors has gpu0/gi2/ci0 at 22" "gpu0/gi2/ci0/access 22" \
		"$(grep '^gpu0/gi2/ci0/access ' "$FAKE/proc/driver/nvidia-caps/mig-minors")"
	assert_contains "fake tree: ldconfig -r's cache names libcuda.so.1" \
		"$(ldconfig -r "$FAKE/driver" -p)" "libcuda.so.1 (libc6,x86-64) => $LIBDIR/libcuda.so.1"
	assert_contains "fake tree: libcuda is an ELF shared object with soname libcuda.so.1" \
		"$(readelf -d "$FAKE/driver$LIBDIR/libcuda.so.$VERSION")" "Library soname: [libcuda.so.1]"

	local d foreign
	d=$(new_tmpdir fakenv)
	"$FAKE_SH" create "$d/t" 1 >/dev/null 2>&1
	"$FAKE_SH" create "$d/t" 3 >/dev/null 2>&1
	assert_rc "fake tree: a second create over its own tree works" 0 $?
	assert_eq "fake tree: the second create starts over (3 GPUs, no leftover of the first)" \
		"nvidia0 nvidia1 nvidia2" "$(cd "$d/t/dev" && echo nvidia[0-9]*)"
	"$FAKE_SH" remove "$d/t"
	assert_eq "fake tree: remove leaves nothing" "" "$(ls -A "$d")"
	"$FAKE_SH" remove "$d/t"
	assert_rc "fake tree: remove of a removed tree is fine" 0 $?
	foreign=$d/foreign
	mkdir -p "$foreign" && echo keep >"$foreign/file"
	"$FAKE_SH" create "$foreign" 2>"$WORK/fake.err"
	assert_fails "fake tree: create refuses a dir it did not make" $?
	"$FAKE_SH" remove "$foreign" 2>>"$WORK/fake.err"
	assert_fails "fake tree: remove refuses a dir it did not make" $?
	assert_eq "fake tree: the foreign dir is untouched" "keep" "$(cat "$foreign/file")"
}

t_generate_and_list() {
	local dir=$WORK/cdi-list
	mkdir -p "$dir"
	gen --output "$dir/nvidia.yaml"
	assert_rc "generate: exit 0" 0 "$RC" || {
		diag "$ERR"
		return 1
	}
	assert_eq "generate: --output writes nothing to stdout or stderr" "" "$OUT$ERR"
	assert_match "generate: a .yaml output is YAML" "$(head -n 2 "$dir/nvidia.yaml")" '^cdiVersion: "0\.6\.0"'
	local list rc
	list=$("$HUSK" cdi list --spec-dir "$dir" 2>"$WORK/list.err")
	rc=$?
	assert_rc "list: exit 0" 0 "$rc"
	assert_eq "list: no spec errors" "" "$(cat "$WORK/list.err")"
	local name
	for name in 0 1 all "$UUID0" "$UUID1" 0:0 0:1; do
		assert_match "list: nvidia.com/gpu=$name from nvidia.yaml" "$list" \
			"(^|$(printf '\n'))nvidia.com/gpu=$name +$dir/nvidia.yaml"
	done
	assert_eq "list: 7 devices and a header" 8 "$(printf '%s\n' "$list" | wc -l)"

	"$HUSK" cdi list --spec-dir "$dir" --format json >"$WORK/list.json"
	assert_eq "list --format json: the 7 devices, no errors" "7 0" \
		"$(py_json "$WORK/list.json" 'str(len(d["devices"])) + " " + str(len(d["errors"]))')"

	# A bad file and a duplicate: listed on stderr and in the JSON, exit 1.
	echo '{"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [], "bogus": 1}' >"$dir/bad.json"
	list=$("$HUSK" cdi list --spec-dir "$dir" 2>"$WORK/list.err")
	rc=$?
	assert_rc "list with a bad spec: exit 1" 1 "$rc"
	assert_contains "list with a bad spec: the error names the file and field" "$(cat "$WORK/list.err")" \
		"$dir/bad.json"
	assert_contains "list with a bad spec: the good devices are still listed" "$list" "nvidia.com/gpu=all"
	"$HUSK" cdi list --spec-dir "$dir" --format json >"$WORK/list.json"
	assert_eq "list --format json with a bad spec: the error is in the JSON" "$dir/bad.json" \
		"$(py_json "$WORK/list.json" 'd["errors"][0]["file"]')"
}

t_generate_formats_and_hooks() {
	gen --format json
	assert_rc "generate --format json to stdout: exit 0" 0 "$RC"
	printf '%s\n' "$OUT" >"$WORK/spec.json"
	assert_eq "generate json: kind and version" "nvidia.com/gpu 0.6.0" \
		"$(py_json "$WORK/spec.json" 'd["kind"] + " " + d["cdiVersion"]')"
	assert_eq "generate json: GPU 0 and its UUID device carry NUMA node 0, GPU 1 node 1" "0 0 1" \
		"$(py_json "$WORK/spec.json" '" ".join(x["annotations"]["husk/numa-node"] for x in d["devices"] if x["name"] in ("0", "'"$UUID0"'", "1"))')"
	# Both GPUs on node 0: nothing for cdi_numa_align to choose, so no
	# annotations, and the spec stays 0.5.0 for older CDI libraries.
	cp -a "$FAKE/sys" "$WORK/sys-one-node"
	for f in "$WORK"/sys-one-node/bus/pci/devices/*/numa_node; do echo 0 >"$f"; done
	gen --format json --sys-root "$WORK/sys-one-node"
	printf '%s\n' "$OUT" >"$WORK/spec-one-node.json"
	assert_eq "generate, GPUs on one NUMA node: cdiVersion 0.5.0 (podman 4.3 and containerd 1.7 read it), no annotations" \
		"0.5.0 0" "$(py_json "$WORK/spec-one-node.json" 'd["cdiVersion"] + " " + str(sum("annotations" in x for x in d["devices"]))')"
	rm -rf "$WORK/sys-one-node"
	# GPU 0's node missing (nvidia-modprobe not run yet): GPU 1 keeps its
	# index, as nvidia-smi and NVIDIA_VISIBLE_DEVICES number it.
	mkdir -p "$WORK/devroot-no0"
	cp -a "$FAKE/dev" "$WORK/devroot-no0/dev"
	rm -f "$WORK/devroot-no0/dev/nvidia0"
	gen --format json --dev-root "$WORK/devroot-no0"
	printf '%s\n' "$OUT" >"$WORK/spec-no0.json"
	assert_eq "generate, GPU 0's node missing: GPU 1 is still nvidia.com/gpu=1 (and its UUID), no gpu=0" \
		"1 $UUID1" "$(py_json "$WORK/spec-no0.json" '" ".join(x["name"] for x in d["devices"] if x["name"] in ("0", "1", "'"$UUID0"'", "'"$UUID1"'"))')"
	assert_contains "generate, GPU 0's node missing: a warning names it" "$ERR" "nvidia0"
	rm -rf "$WORK/devroot-no0"
	assert_eq "generate json: the MIG device 0:1 is GPU 0 and caps 21, 22" \
		"/dev/nvidia0 /dev/nvidia-caps/nvidia-cap21 /dev/nvidia-caps/nvidia-cap22" \
		"$(py_json "$WORK/spec.json" '" ".join(n["path"] for x in d["devices"] if x["name"] == "0:1" for n in x["containerEdits"]["deviceNodes"])')"
	assert_eq "generate json: control nodes at spec level" \
		"/dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools /dev/nvidia-modeset" \
		"$(py_json "$WORK/spec.json" '" ".join(n["path"] for n in d["containerEdits"]["deviceNodes"])')"
	assert_eq "generate json: the hooks run this husk binary" "$(realpath "$HUSK") $(realpath "$HUSK")" \
		"$(py_json "$WORK/spec.json" '" ".join(h["path"] for h in d["containerEdits"]["hooks"])')"
	assert_eq "generate json: create-symlinks makes the soname and libcuda.so links" \
		"libcuda.so.$VERSION::$LIBDIR/libcuda.so.1 libcuda.so.1::$LIBDIR/libcuda.so" \
		"$(py_json "$WORK/spec.json" '" ".join(d["containerEdits"]["hooks"][0]["args"][4:8:2])')"
	assert_eq "generate json: update-ldcache gets the library folder" \
		"husk cdi-hook update-ldcache --folder $LIBDIR" \
		"$(py_json "$WORK/spec.json" '" ".join(d["containerEdits"]["hooks"][1]["args"])')"
	assert_eq "generate json: 9 libraries, 5 binaries, the firmware mounted ro,nosuid,nodev,bind" "15 15" \
		"$(py_json "$WORK/spec.json" 'str(len(d["containerEdits"]["mounts"])) + " " + str(sum(m["options"] == ["ro", "nosuid", "nodev", "bind"] for m in d["containerEdits"]["mounts"]))')"
	gen --hook-path /opt/husk/bin/husk --output "$WORK/x.json"
	assert_eq "generate: --hook-path names the hooks' binary; a .json output is JSON" "/opt/husk/bin/husk" \
		"$(py_json "$WORK/x.json" 'd["containerEdits"]["hooks"][0]["path"]')"
	# The daemons' sockets, where they run: mounted as nvidia-ctk does.
	mkdir -p "$FAKE/driver/run/nvidia-persistenced" "$FAKE/driver/tmp/nvidia-mps"
	"$PY" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
		"$FAKE/driver/run/nvidia-persistenced/socket"
	gen --format json
	printf '%s\n' "$OUT" >"$WORK/spec-ipc.json"
	assert_eq "generate: the persistenced socket and the MPS dir are mounted (read-only binds)" \
		"/run/nvidia-persistenced/socket /tmp/nvidia-mps" \
		"$(py_json "$WORK/spec-ipc.json" '" ".join(m["containerPath"] for m in d["containerEdits"]["mounts"] if m["containerPath"] in ("/run/nvidia-persistenced/socket", "/tmp/nvidia-mps"))')"
	rm -rf "$FAKE/driver/run/nvidia-persistenced" "$FAKE/driver/tmp/nvidia-mps"
}

# The spec the containers use, with its real hooks (this build's husk).
container_spec() { # DIR
	gen --output "$1/nvidia.yaml"
}

t_container_gpu0() {
	local dir=$WORK/cdi-run
	mkdir -p "$dir"
	container_spec "$dir"
	BUNDLE=$(new_bundle)
	spec_args sh -c "stat -c '%F %t:%T' /dev/nvidia0 /dev/nvidiactl
ls /dev/nvidia1 2>&1
grep -c . $LIBDIR/libcuda.so.$VERSION >/dev/null && echo libcuda readable
awk '\$5 == \"$LIBDIR/libcuda.so.$VERSION\" {print \$6}' /proc/self/mountinfo
nvidia-smi -L
ls -l $LIBDIR/libcuda.so.1 2>&1
exit 0"
	"$APPLY" "$dir" "$BUNDLE/config.json" nvidia.com/gpu=0 2>"$WORK/apply.err"
	assert_rc "container gpu=0: cdi_apply takes the generated spec" 0 $? || {
		diag "$(cat "$WORK/apply.err")"
		return 1
	}
	run_ctr
	assert_rc "container gpu=0: runs" 0 "$RC" || {
		diag "$ERR"
		return 1
	}
	assert_contains "container gpu=0: /dev/nvidia0 is char 195:0 (c3:0)" "$OUT" "character special file c3:0"
	assert_contains "container gpu=0: /dev/nvidiactl is char 195:255 (c3:ff)" "$OUT" "character special file c3:ff"
	assert_contains "container gpu=0: /dev/nvidia1 was not injected" "$OUT" "/dev/nvidia1: No such file or directory"
	assert_contains "container gpu=0: libcuda is readable" "$OUT" "libcuda readable"
	assert_match "container gpu=0: libcuda is a read-only mount" "$OUT" "(^|$(printf '\n'))ro,"
	assert_contains "container gpu=0: the fake nvidia-smi runs from the driver root" "$OUT" \
		"GPU 0: Fake H100 80GB HBM3 (UUID: $UUID0)"
	assert_contains "container gpu=0: the create-symlinks hook made libcuda.so.1" "$OUT" \
		"libcuda.so.1 -> libcuda.so.$VERSION"
}

t_container_mig() {
	local dir=$WORK/cdi-mig
	mkdir -p "$dir"
	container_spec "$dir"
	BUNDLE=$(new_bundle)
	spec_args sh -c "stat -c '%n %t:%T' /dev/nvidia0 /dev/nvidia-caps/*; ls /dev/nvidia1 2>&1; exit 0"
	"$APPLY" "$dir" "$BUNDLE/config.json" nvidia.com/gpu=0:1 2>"$WORK/apply.err"
	assert_rc "container MIG 0:1: cdi_apply takes it" 0 $? || {
		diag "$(cat "$WORK/apply.err")"
		return 1
	}
	run_ctr
	assert_rc "container MIG 0:1: runs" 0 "$RC" || {
		diag "$ERR"
		return 1
	}
	assert_eq "container MIG 0:1: GPU 0 and caps 508:21, 508:22 only" \
		"/dev/nvidia0 c3:0 /dev/nvidia-caps/nvidia-cap21 1fc:15 /dev/nvidia-caps/nvidia-cap22 1fc:16" \
		"$(printf '%s\n' "$OUT" | grep '^/dev/nvidia' | tr '\n' ' ' | sed 's/ $//')"
	assert_contains "container MIG 0:1: no other GPU" "$OUT" "/dev/nvidia1: No such file or directory"
}

t_errors() {
	local v out empty
	for v in "generate" "generate nvidia" "list"; do
		# shellcheck disable=SC2086 # two words for generate nvidia
		"$HUSK" cdi $v --help >"$WORK/help.out" 2>&1
		assert_rc "husk cdi $v --help: exit 0" 0 $?
		assert_contains "husk cdi $v --help: its own usage" "$(head -n 1 "$WORK/help.out")" "usage: husk cdi ${v% nvidia}"
	done
	assert_contains "husk cdi generate --help: its options" "$("$HUSK" cdi generate --help)" "--driver-root DIR"
	assert_not_contains "husk cdi list --help: not generate's" "$("$HUSK" cdi list --help)" generate
	assert_contains "husk cdi --help: both verbs" "$("$HUSK" cdi --help)" "generate nvidia [--driver-root DIR]"
	out=$(new_tmpdir cdigen-out)
	empty=$(new_tmpdir cdigen-empty)
	"$HUSK" cdi generate nvidia --dev-root "$empty" --proc-root "$empty" --driver-root "$FAKE/driver" \
		--output "$out/nvidia.yaml" 2>"$WORK/err1"
	assert_rc "no GPU: exit 1" 1 $?
	assert_eq "no GPU: one line naming the dev dir" \
		"husk: cdi generate nvidia: no NVIDIA GPU found under $empty/dev (no nvidia[0-9]* character device; $empty/driver/nvidia/gpus lists none)" \
		"$(cat "$WORK/err1")"
	assert_eq "no GPU: nothing written" "" "$(ls -A "$out")"

	gen --driver-root "$empty/none" --output "$out/nvidia.yaml"
	assert_rc "bad --driver-root: exit 1" 1 "$RC"
	assert_eq "bad --driver-root: one line naming it" \
		"husk: cdi generate nvidia: driver root \`$empty/none\`: No such file or directory" "$ERR"
	gen --driver-root "$empty" --output "$out/nvidia.yaml"
	assert_contains "driver root without an ld.so.cache: named" "$ERR" "$empty/etc/ld.so.cache"
	assert_eq "bad driver roots: nothing written" "" "$(ls -A "$out")"

	echo old >"$out/keep.yaml"
	gen --output "$out/keep.yaml/nvidia.yaml"
	assert_rc "unwritable --output (under a file): exit 1" 1 "$RC"
	assert_match "unwritable --output: one line naming it" "$ERR" \
		"^husk: cdi generate nvidia: --output $out/keep.yaml/nvidia.yaml: .*Not a directory$"
	gen --output "$out/keep.yaml" --driver-root "$empty/none"
	assert_eq "a failed generate leaves an existing --output as it was" "old" "$(cat "$out/keep.yaml")"
	assert_eq "failed generates leave no temp file" "keep.yaml" "$(ls -A "$out")"
	gen --output "$out/new/cdi/nvidia.yaml"
	assert_rc "--output in a dir not there yet (a fresh node's /etc/cdi): made, exit 0" 0 "$RC"
	assert_true "... the spec is written" test -s "$out/new/cdi/nvidia.yaml"
	rm -rf "$out/new"

	gen --format xml
	assert_eq "bad --format: one line" "husk: cdi generate: --format \`xml\`: not json or yaml" "$ERR"
	"$HUSK" cdi generate amd 2>"$WORK/err2"
	assert_rc "unknown vendor: exit 1" 1 $?
	assert_contains "unknown vendor: named" "$(cat "$WORK/err2")" "unknown vendor (only \`nvidia\` is known"
	"$HUSK" cdi list --spec-dir 2>"$WORK/err3"
	assert_eq "list --spec-dir without a value: one line" \
		"husk: cdi list: unknown option or missing value \`--spec-dir\` (see husk cdi --help)" "$(cat "$WORK/err3")"
}

setup
for t in t_fake_tree t_generate_and_list t_generate_formats_and_hooks t_container_gpu0 t_container_mig t_errors; do
	run_test "$t"
done
finish
