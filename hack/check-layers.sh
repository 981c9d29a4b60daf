#!/usr/bin/env bash
# The layers of DESIGN.md, checked over the #include "..." lines of the tree:
# each folder below may include only headers under the prefixes listed for
# it.  Prints one line per include that breaks a rule and exits 1 when one
# does; `make test` runs it (make check-layers).
#
#   hack/check-layers.sh [ROOT]     # ROOT: the tree to check (default: this repo)
set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
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
)

rule_of() { # FILE -> the allowed prefixes of the most specific folder, or "*"
	local file=$1 best="" allowed="*" rule dir
	for rule in "${rules[@]}"; do
		dir=${rule%%:*}
		case $file in
		"$dir"/*)
			if [ ${#dir} -gt ${#best} ]; then
				best=$dir
				allowed=${rule#*:}
			fi
			;;
		esac
	done
	echo "$allowed"
}

bad=0
while IFS= read -r file; do
	allowed=$(rule_of "$file")
	[ "$allowed" = "*" ] && continue
	while IFS=: read -r line header; do
		ok=no
		case $header in husk/*) ok=yes ;; esac
		for prefix in $allowed; do
			case $header in "$prefix"*) ok=yes ;; esac
		done
		if [ $ok = no ]; then
			echo "check-layers: $file:$line includes \"$header\"; ${file%/*}/ may include only husk/ ${allowed:-}" >&2
			bad=1
		fi
	done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
		sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done < <(find common include runtime image cri -name '*.[ch]' 2>/dev/null | sort)
exit $bad
