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

test_rpc_includes_cri() { forbidden "cri/rpc -> cri" cri/rpc/pool.c cri/server/service.h; }
test_cni_includes_cri() { forbidden "cri/cni -> cri" cri/cni/cni.h cri/pod/sandbox.h; }
test_cni_includes_rpc() { forbidden "cri/cni -> cri/rpc" cri/cni/exec.c cri/rpc/server.h; }
test_runtime_includes_image() { forbidden "runtime -> image" runtime/init.c image/store.h; }
test_image_includes_runtime() { forbidden "image -> runtime" image/pull.c runtime/spec/spec.h; }
test_common_includes_cri() { forbidden "common -> cri" common/util.c cri/config/config.h; }

# cri/'s rooms (issue 27): a lower room never includes a higher one.
test_pod_includes_server() { forbidden "cri/pod -> cri/server" cri/pod/sandbox.c cri/server/service.h; }
test_spec_includes_pod() { forbidden "cri/spec -> cri/pod" cri/spec/cri_spec.c cri/pod/sandbox.h; }
test_config_includes_container() { forbidden "cri/config -> cri/container" cri/config/runtime_exec.c cri/container/containers.h; }
test_container_includes_server() { forbidden "cri/container -> cri/server" cri/container/containers.c cri/server/service.h; }
test_stats_includes_container() { forbidden "cri/stats -> cri/container" cri/stats/cri_stats.c cri/container/container_store.h; }
test_cli_includes_server() { forbidden "cri/cli -> cri/server" cri/cli/exec.c cri/server/service.h; }
test_cgroup_includes_runtime() { forbidden "runtime/cgroup -> runtime" runtime/cgroup/cgroup_v1.c runtime/init.h; }
test_spec_reader_includes_cgroup() { forbidden "runtime/spec -> runtime/cgroup" runtime/spec/spec.c runtime/cgroup/cgroup.h; }
test_registry_includes_image() { forbidden "image/registry -> image" image/registry/registry.c image/store.h; }

refused_graph() { # NAME PATTERN FILE CODE...: appending CODE to FILE must fail with PATTERN
	local name=$1 pattern=$2 dir out rc=0
	shift 2
	dir=$(copy_tree)
	while [ $# -ge 2 ]; do
		printf '\n%s\n' "$2" >>"$dir/$1"
		shift 2
	done
	out=$("$CHECK" "$dir" 2>&1) || rc=$?
	assert_rc "$name: refused" 1 "$rc" && assert_match "$name: says why" "$out" "$pattern"
}

# Two files that call each other: a circle, found from calls alone (no include added).
test_call_circle() {
	refused_graph "metrics <-> metrics_http" \
		"^check-layers: a circle of files: cri/stats/metrics cri/stats/metrics_http: " \
		cri/stats/metrics.c "void layers_back_edge (void) { metrics_http_address (NULL); }"
}

# The gRPC layer's old circle stays broken: the log line gets the method
# from the call, it does not call back into call.c.
test_rpc_log_calls_call() {
	refused_graph "cri/rpc/log -> cri/rpc/call" \
		"^check-layers: a circle of files: cri/rpc/call cri/rpc/log: " \
		cri/rpc/log.c "void layers_back_edge (void) { rpc_call_method (NULL); }"
}

test_handler_calls_handler() {
	refused_graph "service_update -> service_image" \
		"^check-layers: handler cri/server/service_update.c calls cri_image_fs_info\(\) of handler cri/server/service_image.c" \
		cri/server/service_update.c "void layers_sibling (void) { cri_image_fs_info (NULL, NULL, 0, NULL); }"
}

# The pod handlers announce the pod's events through container_events.c,
# below the handlers: a call into the container handlers is refused.
test_pod_handler_calls_container_handler() {
	refused_graph "service_sandbox -> service_container" \
		"^check-layers: handler cri/server/service_sandbox.c calls cri_create_container\(\) of handler cri/server/service_container.c" \
		cri/server/service_sandbox.c "void layers_sibling (void) { cri_create_container (NULL, NULL, 0, NULL); }"
}

test_handler_calls_table() {
	refused_graph "service_runtime -> service" \
		"^check-layers: cri/server/service_runtime.c calls cri_service_methods\(\) of the method table" \
		cri/server/service_runtime.c "void layers_up (void) { cri_service_methods (NULL, NULL); }"
}

test_reply_calls_handler() {
	refused_graph "reply -> service_image" \
		"^check-layers: cri/server/reply.c, below the handlers, calls cri_image_fs_info\(\) of cri/server/service_image.c" \
		cri/server/reply.c "void layers_up (void) { cri_image_fs_info (NULL, NULL, 0, NULL); }"
}

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
run_test test_pod_includes_server
run_test test_spec_includes_pod
run_test test_config_includes_container
run_test test_container_includes_server
run_test test_stats_includes_container
run_test test_cli_includes_server
run_test test_cgroup_includes_runtime
run_test test_spec_reader_includes_cgroup
run_test test_registry_includes_image
run_test test_call_circle
run_test test_rpc_log_calls_call
run_test test_handler_calls_handler
run_test test_pod_handler_calls_container_handler
run_test test_handler_calls_table
run_test test_reply_calls_handler
run_test test_programs_may_reach_all
finish
