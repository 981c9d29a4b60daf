#!/usr/bin/env bash
# Writes a man page (section 1) for husk and for each of its commands, from
# what `husk [COMMAND...] --help` prints: the verbs' option tables (husk/
# cli_opts.h) and the runtime's command table, the same text the bash
# completion (`husk completion bash`) reads, so the three cannot disagree.
#
#   hack/gen-man.sh HUSK OUTDIR     e.g. hack/gen-man.sh build/husk build/man
#
# Pages: husk.1, husk-image.1, husk-image-pull.1, ...; a command whose
# --help fails or prints no usage gets no page (its group's page lists it).
set -euo pipefail

[ $# -eq 2 ] || {
	echo "usage: $0 HUSK OUTDIR" >&2
	exit 2
}
husk=$1
out=$2
version=$("$husk" --version | awk 'NR == 1 { print $3 }')
mkdir -p "$out"
rm -f "$out"/husk*.1 # a verb that went takes its page along

# The commands a help text lists (as the completion reads them); of
# "  ls, ps  ..." the first name only: aliases get no page of their own.
commands_of() { # HELP-TEXT
	awk '/^Commands:/ { section = 1; next }
		section && /^$/ { exit }
		/^  [a-z][a-z0-9-]*(, [a-z][a-z0-9-]*)*( |$)/ && (section || !seen_heading) { sub(/,$/, "", $1); print $1 }
		/^[A-Z][a-z]*:$/ { seen_heading = 1 }' <<<"$1" | sort -u
}

# HELP-TEXT on stdin -> roff.  PATH: "image pull"; SUMMARY: the parent's
# line for it, used when the help has no summary of its own.
to_roff() { # PATH SUMMARY VERSION
	awk -v path="$1" -v parent_summary="$2" -v version="$3" '
	function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); if (s ~ /^[.\x27]/) s = "\\&" s; return s }
	function split_entry(line,    m) {
		sub(/^ +/, "", line)
		if (match(line, /  +/)) { term = substr(line, 1, RSTART - 1); desc = substr(line, RSTART + RLENGTH) }
		else { term = line; desc = "" }
	}
	NR == 1 && tolower($1) == "usage:" { synopsis = $0; sub(/^[Uu]sage: */, "", synopsis); next }
	/^$/ { if (in_list) { in_list = 0 }; blank = 1; next }
	/^[A-Z][A-Za-z ]*:$/ { section = toupper(substr($0, 1, length($0) - 1)); body[++n] = ".SH " section; in_list = 0; next }
	/^ +-/ || (section != "" && /^  [a-z]/) {
		split_entry($0)
		body[++n] = ".TP\n.B " esc(term) (desc != "" ? "\n" esc(desc) : "")
		next
	}
	/^  / {
		if (!in_list) { body[++n] = (section == "" ? ".SH COMMANDS\n" : "") ".nf"; in_list = 1; closes[n] = 1 }
		line = $0; sub(/^  /, "", line); body[++n] = esc(line); last_list = n
		next
	}
	{
		if (summary == "" && section == "") { summary = $0; next }
		body[++n] = (blank ? ".PP\n" : "") esc($0); blank = 0
	}
	END {
		name = "husk" (path == "" ? "" : "-" path); gsub(/ /, "-", name)
		if (summary == "") summary = parent_summary != "" ? parent_summary : "husk " path
		sub(/\.$/, "", summary)
		printf ".TH %s 1 \"\" \"husk %s\" \"husk manual\"\n", toupper(name), version
		printf ".SH NAME\n%s \\- %s\n", esc(name), esc(summary)
		printf ".SH SYNOPSIS\n%s\n", esc(synopsis)
		printf ".SH DESCRIPTION\n%s.\n", esc(summary)
		for (i = 1; i <= n; i++) {
			print body[i]
			# close a preformatted block before the next non-list line
			if (body[i] ~ /\.nf$/) open = 1
			if (open && (i == n || body[i + 1] ~ /^\.(SH|TP|PP)/)) { print ".fi"; open = 0 }
		}
		printf ".SH SEE ALSO\n"
		if (path == "") print "runc(8), podman(1), crictl(1)"
		else { parent = path; sub(/ ?[^ ]+$/, "", parent); p = "husk" (parent == "" ? "" : "-" parent); gsub(/ /, "-", p); print esc(p) "(1)" }
	}'
}

pages=0
page() { # SUMMARY PARENT-HELP COMMAND...
	local summary=$1 parent_help=$2 help name cmd line
	shift 2
	help=$("$husk" "$@" --help 2>/dev/null) || return 0
	# a verb that ignores --help (prints something else) gets no page
	[[ $help =~ ^[Uu]sage: ]] || return 0
	# nor one whose --help prints its group's: that page would be a copy,
	# and its list would name the group's verbs as its own
	[[ -n $parent_help && $help == "$parent_help" ]] && return 0
	name=husk${*:+-$*}
	name=${name// /-}
	to_roff "$*" "$summary" "$version" <<<"$help" >"$out/$name.1"
	pages=$((pages + 1))
	for cmd in $(commands_of "$help"); do
		# a verb whose --help repeats its group's list must not recurse
		[[ " $* " == *" $cmd "* ]] && continue
		line=$(grep -m1 -E "^  $cmd(,| |$)" <<<"$help" | sed -E "s/^  $cmd(, [a-z][a-z0-9-]*)* +//")
		page "$line" "$help" "$@" "$cmd"
	done
}
page "" ""
echo "$pages man pages in $out"
