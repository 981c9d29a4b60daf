#!/usr/bin/env bash
# husk's own CDI hooks (`husk cdi-hook update-ldcache | create-symlinks |
# chmod`) as createContainer hooks of a real container: they see the bind
# mounts of "driver" libraries, write the rootfs before pivot_root, and a
# dynamically linked program in the container then dlopen()s the mounted
# library by its soname through the ld.so.cache they rebuilt.  A bad hook
# fails create with an error naming the hook and the cause, leaving
# nothing behind; a rootfs whose /etc points at a host dir is written
# inside the rootfs only.
# Run alone: BUILD_DIR=build RUNTIME=build/husk ./test/integration/test_cdi_hook.sh
. "$(dirname "$0")/lib.sh"
require_runtime

# ---------------------------------------------------------------- fixtures

# A tiny shared library with a soname, and a program that dlopen()s it by
# that soname: built once per run into $WORK/fake.
build_fake_driver() {
	local dir=$WORK/fake
	[ -f "$dir/dlprobe" ] && return 0
	mkdir -p "$dir/lib"
	cat >"$dir/fake.c" <<'EOF'
const char *fake_hello (void) { return "fake-driver-ok"; }
EOF
	cat >"$dir/dlprobe.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main (void)
{
  void *h = dlopen ("libfake.so.1", RTLD_NOW);
  const char *(*hello) (void);
  if (h == NULL) { printf ("dlopen: %s\n", dlerror ()); return 1; }
  hello = (const char *(*) (void)) dlsym (h, "fake_hello");
  printf ("dlopen: %s\n", hello ? hello () : "no symbol");
  return hello ? 0 : 1;
}
EOF
	gcc -shared -fPIC -Wl,-soname,libfake.so.1 -o "$dir/lib/libfake.so.1.2.3" "$dir/fake.c" &&
		gcc -o "$dir/dlprobe" "$dir/dlprobe.c" -ldl
}

# Copies the program and what the dynamic loader needs (the loader, libc)
# into ROOTFS at the same paths as on the host.
install_dlprobe() { # ROOTFS
	local rootfs=$1 lib
	cp "$WORK/fake/dlprobe" "$rootfs/dlprobe"
	for lib in $(ldd "$WORK/fake/dlprobe" | grep -o '/[^ ]*'); do
		mkdir -p "$rootfs$(dirname "$lib")"
		cp -L "$lib" "$rootfs$lib"
	done
}

# The hook entries: hook VERB ARGS... -> one createContainer hook of husk.
hooks_set() { # PYTHON-LIST-OF-ARG-LISTS
	spec_set '
rt = A[0]
c["hooks"] = {"createContainer": [{"path": rt, "args": ["husk", "cdi-hook"] + a} for a in eval(A[1])]}' \
		"$RUNTIME" "$1"
}

# The fake driver's file mounted as a CDI spec from nvidia-ctk would: the
# library file alone, read-only, into a dir of the rootfs.
mount_fake_library() {
	spec_mount /usr/lib/fake/libfake.so.1.2.3 bind "$WORK/fake/lib/libfake.so.1.2.3" bind ro
}

# A device node under /dev/dri (the host's /dev/null, 1:3), so that the
# runtime makes /dev/dri for chmod to find.
add_dri_node() {
	spec_set 'c["linux"].setdefault("devices", []).append({"path": "/dev/dri/card9", "type": "c", "major": 1, "minor": 3, "fileMode": 438})'
}

# Nothing of a failed create may remain: no state, no container in list.
assert_nothing_left() { # NAME
	assert_eq "$1: no state under --root" "" "$(ls -A "$ROOT")"
	assert_eq "$1: list is empty" "" "$(rt list --quiet 2>&1)"
}

# ---------------------------------------------------------------- tests

t_hooks_fix_the_rootfs() {
	local b
	build_fake_driver || {
		not_ok "build the fake driver library and dlprobe with gcc"
		return
	}
	b=$(new_bundle)
	BUNDLE=$b
	install_dlprobe "$b/rootfs"
	mount_fake_library
	add_dri_node
	mkdir -p "$b/rootfs/srv/data"
	chmod 0755 "$b/rootfs/srv/data"
	hooks_set '[["update-ldcache", "--folder", "/usr/lib/fake", "--folder", "/no/such/dir"],
		["create-symlinks", "--link", "libfake.so.1::/usr/lib/fake-links/libfake.so",
		 "--link", "/usr/lib/fake/libfake.so.1.2.3::/opt/abs/libfake.so"],
		["chmod", "--mode", "710", "--path", "/dev/dri", "--path", "/srv/data", "--path", "/no/such/path"]]'
	spec_set 'c["root"]["readonly"] = True'
	spec_args sh -c '/dlprobe
echo "link: $(readlink /usr/lib/fake-links/libfake.so)"
echo "abs: $(readlink /opt/abs/libfake.so)"
echo "soname: $(readlink /usr/lib/fake/libfake.so.1)"
echo "dri: $(stat -c %a /dev/dri)"
echo "data: $(stat -c %a /srv/data)"
echo "conf: $(cat /etc/ld.so.conf.d/00-husk-cdi.conf | tr "\n" " ")"
touch /etc/x 2>/dev/null && echo "root: rw" || echo "root: ro"'
	run_ctr
	assert_rc "cdi hooks: the container runs" 0 "$RC" || return
	assert_contains "dlopen(\"libfake.so.1\") in the container finds the mounted library through the new ld.so.cache" \
		"$OUT" "dlopen: fake-driver-ok"
	assert_contains "ldconfig made the soname link in the rootfs next to the mounted file" "$OUT" "soname: libfake.so.1.2.3"
	assert_contains "create-symlinks: a relative link, parents created" "$OUT" "link: libfake.so.1"
	assert_contains "create-symlinks: an absolute target, as given" "$OUT" "abs: /usr/lib/fake/libfake.so.1.2.3"
	assert_contains "chmod: /dev/dri the runtime made is 710" "$OUT" "dri: 710"
	assert_contains "chmod: a rootfs dir is 710" "$OUT" "data: 710"
	assert_contains "update-ldcache: the conf names the folder that exists, not the missing one" "$OUT" \
		"conf: /usr/lib/fake "
	assert_contains "the hooks wrote a rootfs that is read-only once the container runs" "$OUT" "root: ro"
	assert_true "the rootfs's ld.so.cache names the library" grep -qaF /usr/lib/fake/libfake.so.1 "$b/rootfs/etc/ld.so.cache"
	assert_eq "the host's library dir is untouched" "libfake.so.1.2.3" "$(ls "$WORK/fake/lib")"
}

# In a user namespace the hooks run as its root (host uid 100000): they
# write the rootfs an image unpacked for that mapping owns.
t_user_namespace() {
	local b
	build_fake_driver || return
	b=$(new_bundle)
	BUNDLE=$b
	install_dlprobe "$b/rootfs"
	chown -R -h 100000:100000 "$b/rootfs"
	mount_fake_library
	spec_ns user
	spec_set '
c["linux"]["uidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["linux"]["gidMappings"] = [{"containerID": 0, "hostID": 100000, "size": 65536}]
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/sys/fs/cgroup"]'
	hooks_set '[["update-ldcache", "--folder", "/usr/lib/fake"], ["create-symlinks", "--link", "libfake.so.1::/opt/l"]]'
	spec_args sh -c '/dlprobe; echo "link: $(readlink /opt/l)"'
	run_ctr
	assert_rc "user ns: the container with the hooks runs" 0 "$RC" || return
	assert_contains "user ns: the library loads" "$OUT" "dlopen: fake-driver-ok"
	assert_contains "user ns: the link is there" "$OUT" "link: libfake.so.1"
	assert_eq "user ns: the new ld.so.cache belongs to the mapped root" 100000 "$(stat -c %u "$b/rootfs/etc/ld.so.cache")"
}

# The control: the same container without the hooks cannot load the library.
t_without_hooks_no_library() {
	local b
	build_fake_driver || return
	b=$(new_bundle)
	BUNDLE=$b
	install_dlprobe "$b/rootfs"
	mount_fake_library
	spec_args /dlprobe
	run_ctr
	assert_fails "without update-ldcache the library is not found" "$RC"
	assert_contains "without update-ldcache: dlopen says why" "$OUT" "libfake.so.1: cannot open shared object file"
}

# A rootfs whose /etc is a symlink to a host dir: update-ldcache writes into
# <rootfs>/<that dir>, never into the host's.
t_etc_symlink_attack() {
	local b host
	build_fake_driver || return
	host=$(new_tmpdir host-etc)
	b=$(new_bundle)
	BUNDLE=$b
	install_dlprobe "$b/rootfs"
	mount_fake_library
	rm -rf "$b/rootfs/etc"
	ln -s "$host" "$b/rootfs/etc"
	hooks_set '[["update-ldcache", "--folder", "/usr/lib/fake"],
		["create-symlinks", "--link", "x::/etc/sub/link"], ["chmod", "--mode", "777", "--path", "/etc/ld.so.conf.d"]]'
	spec_args /dlprobe
	run_ctr
	assert_rc "etc -> host dir: the container runs" 0 "$RC"
	assert_contains "etc -> host dir: the library loads through the cache written inside" "$OUT" "dlopen: fake-driver-ok"
	assert_eq "etc -> host dir: the host dir stays empty" "" "$(ls -A "$host")"
	assert_eq "etc -> host dir: its mode is unchanged" 700 "$(stat -c %a "$host")"
	assert_true "etc -> host dir: the conf went to <rootfs>$host" test -f "$b/rootfs$host/ld.so.conf.d/00-husk-cdi.conf"
	assert_true "etc -> host dir: so did the link" test -L "$b/rootfs$host/sub/link"
	assert_eq "etc -> host dir: chmod went inside too" 777 "$(stat -c %a "$b/rootfs$host/ld.so.conf.d")"
}

# A failing hook: create fails naming the hook and the cause; nothing left.
expect_hook_failure() { # NAME HOOK-ARGS-LIST EXPECTED-TEXT...
	local name=$1 args=$2 text
	shift 2
	BUNDLE=$(new_bundle)
	hooks_set "$args"
	create_ctr
	assert_fails "$name: create fails" "$RC"
	diag "create said: $ERR"
	assert_contains "$name: the error names the createContainer hook" "$ERR" "createContainer hook"
	for text in "$@"; do
		assert_contains "$name: the error says: $text" "$ERR" "$text"
	done
	assert_nothing_left "$name"
}

t_bad_link() {
	expect_hook_failure "bad --link" '[["create-symlinks", "--link", "libcuda.so.1"]]' \
		"cdi-hook create-symlinks: --link \`libcuda.so.1\`: not TARGET::LINK"
}

t_path_escaping_root() {
	expect_hook_failure "path escaping the root" '[["chmod", "--mode", "777", "--path", "/../../../tmp"]]' \
		"cdi-hook chmod: --path \`/../../../tmp\`: \`..\` would leave the container's root"
}

t_unknown_verb() {
	expect_hook_failure "unknown verb" '[["frobnicate"]]' "cdi-hook: unknown verb \`frobnicate\`"
}

t_link_over_file() {
	expect_hook_failure "link over a file" '[["create-symlinks", "--link", "passwd.new::/etc/passwd"]]' \
		"cdi-hook create-symlinks: rootfs" "\`/etc/passwd\` exists and is a regular file, not a link to \`passwd.new\`"
}

# A rootfs on a read-only mount: nvidia-ctk fails there too; so do we,
# saying which file could not be written.
t_readonly_rootfs_mount() {
	local b
	BUNDLE=$(new_bundle)
	b=$BUNDLE
	if ! mount --bind "$b/rootfs" "$b/rootfs"; then
		not_ok "read-only rootfs: bind the rootfs onto itself"
		return
	fi
	defer "umount -l '$b/rootfs'"
	if ! mount -o remount,bind,ro "$b/rootfs"; then
		not_ok "read-only rootfs: make it read-only"
		return
	fi
	hooks_set '[["update-ldcache", "--folder", "/bin"]]'
	create_ctr
	assert_fails "read-only rootfs: create fails" "$RC"
	assert_contains "read-only rootfs: the error names the hook" "$ERR" "cdi-hook update-ldcache: rootfs"
	assert_contains "read-only rootfs: and the cause" "$ERR" "Read-only file system"
	assert_nothing_left "read-only rootfs"
}

for t in t_hooks_fix_the_rootfs t_without_hooks_no_library t_user_namespace t_etc_symlink_attack t_bad_link \
	t_path_escaping_root t_unknown_verb t_link_over_file t_readonly_rootfs_mount; do
	run_test "$t"
done
finish
