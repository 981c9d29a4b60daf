#!/usr/bin/env bash
# The registry test kit, end to end against the peer tools: the images of
# hack/test-images.sh are valid OCI layouts (skopeo reads them), survive a
# push to hack/registry.sh's docker-registry byte for byte (same manifest
# digests, blobs verified by skopeo on the way back), the htpasswd registry
# refuses anonymous access, and stop really stops.  Needs no runtime.
. "$(dirname "$0")/lib.sh"

IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
SKOPEO=(skopeo --insecure-policy)

layout_digest() { # NAME -> the digest index.json tags latest
	$PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$IMAGES/$1/index.json"
}

start_registry() { # DIR [--htpasswd U:P] -> prints ADDR, registers the stop
	defer "'$REPO_DIR/hack/registry.sh' stop '$1'"
	"$REPO_DIR/hack/registry.sh" start "$@"
}

t_build_cached() {
	local before start elapsed
	"$REPO_DIR/hack/test-images.sh" "$IMAGES" || return 1
	before=$(cat "$IMAGES/.done")
	start=$(date +%s%N)
	"$REPO_DIR/hack/test-images.sh" "$IMAGES" || return 1
	elapsed=$((($(date +%s%N) - start) / 1000000))
	assert_eq "second build is a cache hit" "$before" "$(cat "$IMAGES/.done")"
	assert_true "cache hit takes under a second (${elapsed} ms)" test "$elapsed" -lt 1000
}

t_layouts_readable() {
	local name out
	for name in busybox big evil/traversal evil/absolute evil/symlink-escape evil/hardlink-escape; do
		out=$("${SKOPEO[@]}" inspect --config "oci:$IMAGES/$name:latest" 2>&1)
		assert_contains "skopeo reads $name" "$out" '"rootfs"'
	done
	out=$("${SKOPEO[@]}" inspect --config "oci:$IMAGES/busybox:latest")
	assert_contains "busybox config: user tester" "$out" '"User": "tester"'
	assert_contains "busybox config: stop signal" "$out" '"StopSignal": "SIGTERM"'
	out=$("${SKOPEO[@]}" inspect --raw "oci:$IMAGES/busybox:latest")
	assert_contains "busybox has a zstd layer" "$out" 'tar+zstd'
	out=$("${SKOPEO[@]}" inspect --raw "oci:$IMAGES/multiarch:latest")
	assert_contains "multiarch is an index with arm64" "$out" '"architecture": "arm64"'
}

t_push_round_trip() {
	local dir addr name raw got
	dir=$(new_tmpdir registry)
	addr=$(start_registry "$dir") || return 1
	# The documented way: source the script and call push_test_images.
	(
		OUTDIR=$IMAGES
		. "$REPO_DIR/hack/test-images.sh"
		push_test_images "$addr"
	) || return 1
	got=$(curl -s "http://$addr/v2/_catalog")
	for name in busybox multiarch big evil-traversal evil-absolute evil-symlink-escape evil-hardlink-escape; do
		assert_contains "catalog lists test/$name" "$got" "\"test/$name\""
	done
	for name in busybox multiarch big; do
		raw=$(curl -s -H 'Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json' \
			"http://$addr/v2/test/$name/manifests/latest" | sha256sum | cut -d' ' -f1)
		assert_eq "test/$name keeps its manifest digest" "$(layout_digest "$name")" "sha256:$raw"
	done
	# skopeo checks every blob digest on the way back.
	"${SKOPEO[@]}" copy --quiet --src-tls-verify=false "docker://$addr/test/busybox:latest" "oci:$dir/back:latest"
	assert_rc "pull busybox back with digests verified" 0 $?
}

t_auth_registry() {
	local dir addr code
	dir=$(new_tmpdir authreg)
	addr=$(start_registry "$dir" --htpasswd husk:s3cret) || return 1
	code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v2/")
	assert_eq "anonymous /v2/ is 401" 401 "$code"
	code=$(curl -s -o /dev/null -w '%{http_code}' -u husk:wrong "http://$addr/v2/")
	assert_eq "wrong password is 401" 401 "$code"
	code=$(curl -s -o /dev/null -w '%{http_code}' -u husk:s3cret "http://$addr/v2/")
	assert_eq "right password is 200" 200 "$code"
	"$REPO_DIR/hack/test-images.sh" "$IMAGES" --push "$addr" busybox >/dev/null 2>&1
	assert_fails "push without credentials fails" $?
	"$REPO_DIR/hack/test-images.sh" "$IMAGES" --push "$addr" --creds husk:s3cret busybox
	assert_rc "push with credentials" 0 $?
}

t_stop() {
	local dir addr pid
	dir=$(new_tmpdir stopreg)
	addr=$("$REPO_DIR/hack/registry.sh" start "$dir") || return 1
	pid=$(cat "$dir/registry.pid")
	"$REPO_DIR/hack/registry.sh" stop "$dir"
	assert_true "registry process is gone" test ! -d "/proc/$pid"
	curl -s -o /dev/null "http://$addr/v2/"
	assert_fails "its port no longer answers" $?
	"$REPO_DIR/hack/registry.sh" stop "$dir"
	assert_rc "stop twice is fine" 0 $?
}

echo "# $TEST_NAME: images in $IMAGES"
for t in t_build_cached t_layouts_readable t_push_round_trip t_auth_registry t_stop; do
	run_test "$t"
done
finish
