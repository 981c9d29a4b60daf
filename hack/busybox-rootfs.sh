#!/usr/bin/env bash
# Builds a minimal busybox root filesystem in DIR, offline, from Debian's
# busybox-static (/bin/busybox).  Used by the integration tests, the demo and
# the benchmark.  Idempotent and cached: DIR/.husk-rootfs-ok records the
# busybox version it was built from, and a matching marker means "done".
set -u

usage() {
	echo "usage: $0 DIR" >&2
	exit 2
}

[ $# -eq 1 ] || usage
dir=$1
busybox=${BUSYBOX:-/bin/busybox}

if [ ! -x "$busybox" ]; then
	echo "$0: $busybox not found (install busybox-static)" >&2
	exit 1
fi
version=$("$busybox" 2>&1 | head -n 1)
if [ -z "$version" ]; then
	echo "$0: $busybox does not run" >&2
	exit 1
fi
marker=$dir/.husk-rootfs-ok

if [ -f "$marker" ] && [ "$(cat "$marker")" = "$version" ]; then
	exit 0
fi

mkdir -p "$dir" || exit 1

# Two tests starting at once must not build the same directory together.
exec 9>"$dir/.husk-rootfs-lock" || exit 1
flock 9
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$version" ]; then
	exit 0
fi
rm -f "$marker"

set -e
for d in bin etc proc sys dev root home/tester tmp var/tmp run usr; do
	mkdir -p "$dir/$d"
done
chmod 1777 "$dir/tmp" "$dir/var/tmp"
chmod 0700 "$dir/root"

# A fresh copy rather than a hardlink: tests may write to their rootfs.
cp -f "$busybox" "$dir/bin/busybox.new"
chmod 0755 "$dir/bin/busybox.new"
mv -f "$dir/bin/busybox.new" "$dir/bin/busybox"

# Every applet in /bin; /usr/bin, /sbin and /usr/sbin point there so the
# default PATH and absolute paths like /usr/bin/env both work.
for applet in $("$dir/bin/busybox" --list); do
	[ "$applet" = busybox ] && continue
	ln -sfn busybox "$dir/bin/$applet"
done
link_dir() { # TARGET LINK: replaces LINK only if it is absent or a symlink
	if [ -L "$2" ] || [ ! -e "$2" ]; then
		ln -sfn "$1" "$2"
	fi
}
link_dir bin "$dir/sbin"
link_dir ../bin "$dir/usr/bin"
link_dir ../bin "$dir/usr/sbin"

cat >"$dir/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
tester:x:1000:1000:tester:/home/tester:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$dir/etc/group" <<'EOF'
root:x:0:
tester:x:1000:
extra:x:1001:tester
nogroup:x:65534:
EOF
echo husk-busybox >"$dir/etc/hostname"
: >"$dir/etc/resolv.conf"
chown 1000:1000 "$dir/home/tester"

"$dir/bin/busybox" true
echo "$version" >"$marker"
