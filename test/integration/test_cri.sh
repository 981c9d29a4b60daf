#!/usr/bin/env bash
# huskd end to end over gRPC: the runtime-info RPCs and the ImageService,
# driven by test/e2e/cri_images.py against a local docker-registry.
. "$(dirname "$0")/lib.sh"

HUSKD=${HUSKD:-$BUILD_DIR/huskd}
if [ ! -x "$HUSKD" ]; then
	echo "not ok - huskd is built ($HUSKD)"
	finish
fi

E2E=$(mktemp -d /tmp/husk-it-cri.XXXXXX)
stop_all() {
	"$REPO_DIR/hack/registry.sh" stop "$E2E/registry" >/dev/null 2>&1
	umount_under "$E2E"
	rm -rf --one-file-system "$E2E"
}
trap 'stop_all; cleanup_all' EXIT

mkdir -p "$E2E/gen"
if ! protoc --python_out="$E2E/gen" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" 2>"$E2E/protoc.err"; then
	not_ok "generate the Python CRI messages" "$(cat "$E2E/protoc.err")"
	finish
fi
if ! ADDR=$("$REPO_DIR/hack/registry.sh" start "$E2E/registry" 2>"$E2E/registry.err"); then
	not_ok "start the test registry" "$(cat "$E2E/registry.err")"
	finish
fi
if ! "$REPO_DIR/hack/test-images.sh" "$CACHE_DIR/test-images" --push "$ADDR" busybox >"$E2E/images.log" 2>&1; then
	not_ok "build and push the test images" "$(tail -5 "$E2E/images.log")"
	finish
fi

"$PY" "$REPO_DIR/test/e2e/cri_images.py" "$HUSKD" "$ADDR" "$E2E" | tee "$E2E/tap"
# The Python side prints the TAP lines; count them as lib.sh's ok/not_ok do.
while read -r line; do
	case $line in
	"ok "*) echo ok >>"$WORK/results" ;;
	"not ok"*) echo "not ok" >>"$WORK/results" ;;
	esac
done <"$E2E/tap"
[ -s "$E2E/tap" ] || not_ok "cri_images.py printed results" "$(tail -5 "$E2E/huskd.log" 2>/dev/null)"
if grep -q '^not ok' "$E2E/tap"; then diag "huskd log: $(tail -5 "$E2E/huskd.log")"; fi
finish
