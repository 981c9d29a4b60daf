#!/usr/bin/env bash
# hack/check-layers.sh, the include rules of DESIGN.md: the tree as it is
# passes, and a copy of it with one forbidden include per rule fails naming
# the file, the line and the header.
. "$(dirname "$0")/lib.sh"

CHECK=$REPO_DIR/hack/check-layers.sh

copy_tree() { # -> a fresh copy of the source folders under $WORK
	local dir
	dir=$(mktemp -d "$WORK/tree.XXXXXX")
	cp -r "$REPO_DIR"/common "$REPO_DIR"/include "$REPO_DIR"/runtime "$REPO_DIR"/image "$REPO_DIR"/cri "$dir"/
	echo "$dir"
}

test_tree_is_clean() {
	local out rc=0
	out=$("$CHECK" "$REPO_DIR" 2>&1) || rc=$?
	assert_rc "the tree keeps its layers" 0 "$rc" && assert_eq "nothing printed" "" "$out"
}

forbidden() { # NAME FILE HEADER: appending the include to FILE must fail
	local name=$1 file=$2 header=$3 dir out rc=0
	dir=$(copy_tree)
	printf '#include "%s"\n' "$header" >>"$dir/$file"
	out=$("$CHECK" "$dir" 2>&1) || rc=$?
	assert_rc "$name: refused" 1 "$rc" &&
		assert_match "$name: names file, line and header" "$out" "^check-layers: $file:[0-9]+ includes \"$header\""
}

test_rpc_includes_cri() { forbidden "cri/rpc -> cri" cri/rpc/pool.c cri/service.h; }
test_cni_includes_cri() { forbidden "cri/cni -> cri" cri/cni/cni.h cri/sandbox.h; }
test_cni_includes_rpc() { forbidden "cri/cni -> cri/rpc" cri/cni/exec.c cri/rpc/server.h; }
test_runtime_includes_image() { forbidden "runtime -> image" runtime/init.c image/store.h; }
test_image_includes_runtime() { forbidden "image -> runtime" image/pull.c runtime/spec/spec.h; }
test_common_includes_cri() { forbidden "common -> cri" common/util.c cri/config.h; }

test_programs_may_reach_all() {
	local dir out rc=0
	dir=$(copy_tree)
	printf '#include "cri/rpc/server.h"\n#include "image/store.h"\n' >>"$dir/cri/huskd/main.c"
	out=$("$CHECK" "$dir" 2>&1) || rc=$?
	assert_rc "a program's main may include any layer" 0 "$rc"
}

run_test test_tree_is_clean
run_test test_rpc_includes_cri
run_test test_cni_includes_cri
run_test test_cni_includes_rpc
run_test test_runtime_includes_image
run_test test_image_includes_runtime
run_test test_common_includes_cri
run_test test_programs_may_reach_all
finish
