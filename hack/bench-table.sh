#!/usr/bin/env bash
# One markdown table of every benchmark `make bench` ran: the
# "BENCH|name|husk|peer|ratio|goal" lines the benchmark scripts print
# (the VM's come as "# BENCH|..."), then "N benchmarks, M goals met, K missed".
# A goal that names no verdict ("met"/"missed") is judged here when it reads
# "<= X" or ">= X" against the ratio.
#
#   hack/bench-table.sh [LOG...]      (default: build/bench.log; - for stdin)
set -uo pipefail

REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || set -- "$REPO_DIR/build/bench.log"
for log in "$@"; do
	[ "$log" = - ] || [ -r "$log" ] || {
		echo "bench-table: cannot read $log" >&2
		exit 1
	}
done

cat "$@" | sed -n 's/^\(# \)\{0,1\}\(BENCH|.*\)$/\2/p' | awk -F'|' '
function trim(s) { gsub(/^ +| +$/, "", s); return s }
function verdict(goal, ratio,   op, x) {
	if (goal == "" || goal == "-") return ""
	if (goal ~ /(^| )missed$/) return "missed"
	if (goal ~ /(^| )met$/) return "met"
	if (match(goal, /(<=|>=) *[0-9.]+/)) {
		op = substr(goal, RSTART, 2)
		x = substr(goal, RSTART + 2, RLENGTH - 2) + 0
		if (ratio !~ /^[0-9.]+$/) return "missed"
		return ((op == "<=" && ratio + 0 <= x) || (op == ">=" && ratio + 0 >= x)) ? "met" : "missed"
	}
	return ""
}
BEGIN {
	print "| benchmark | husk | peer | husk / peer | goal | |"
	print "|---|---:|---:|---:|---|:---:|"
}
NF >= 6 {
	name = trim($2); husk = trim($3); peer = trim($4); ratio = trim($5); goal = trim($6)
	v = verdict(goal, ratio)
	shown = goal; sub(/ *(met|missed)$/, "", shown)
	if (shown == "-") shown = ""
	print "| " name " | " husk " | " peer " | " ratio " | " shown " | " v " |"
	n++
	if (v == "met") met++
	if (v == "missed") missed++
}
NF > 0 && NF < 6 { bad++ }
END {
	printf "\n%d benchmarks, %d goals met, %d missed", n, met, missed
	if (bad) printf " (%d malformed BENCH lines skipped)", bad
	printf "\n"
}'
