#!/usr/bin/env bash
# `husk image` as a command line, against podman 4.3's conventions: every
# verb's --help, one-line errors for unknown options and missing values,
# login/logout with the containers-auth.json file (checked with podman
# itself) against a docker-registry that wants Basic auth, pulls and
# huskd's PullImage (through husk's crictl-like client, test/e2e/cri_cli.py)
# using that file, the pull progress
# on a terminal (through script(1)) and off one, `image ls` and its JSON,
# the bash completion and the man pages.  The registry, huskd and every
# temp dir are removed by the trap, even on failure.
. "$(dirname "$0")/lib.sh"

HUSK=${HUSK:-$BUILD_DIR/husk}
HUSKD=${HUSKD:-$BUILD_DIR/huskd}
IMAGES=${HUSK_TEST_IMAGES:-$CACHE_DIR/test-images}
USER_PASS=alice:s3cret
# No test may read or write the caller's credentials.
export REGISTRY_AUTH_FILE=$WORK/no-auth.json
unset XDG_RUNTIME_DIR

# ---------------------------------------------------------------- helpers

husk_cmd() { # ARGS...
	timeout -k 5 60 "$HUSK" --root "$ROOT" "$@"
}

capture() { # COMMAND...: sets OUT, RC, ERR
	OUT=$("$@" 2>"$WORK/err" </dev/null)
	RC=$?
	ERR=$(cat "$WORK/err")
}

img() { # STORE ARGS...
	local store=$1
	shift
	capture husk_cmd image --root "$store" "$@"
}

one_line_error() { # NAME NEEDLE-REGEX: RC non-zero, stderr one line matching
	assert_fails "$1: fails" "$RC"
	assert_eq "$1: one line on stderr" 1 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_match "$1: the line says what" "$ERR" "$2"
}

# Drops the progress lines a pull prints off a terminal.
without_progress() {
	grep -v -E '^([0-9a-f]{12}  (done|already exists)|unpacking [0-9]+ layers?$)' <<<"$1"
}

new_store() {
	new_tmpdir store
}

setup_registry() {
	local dir
	if ! "$REPO_DIR/hack/test-images.sh" "$IMAGES" >"$WORK/images.log" 2>&1; then
		echo "not ok - build the test images"
		exit 1
	fi
	dir=$(new_tmpdir authreg)
	# the per-test cleanup would stop it: stop it at the very end instead
	sed -i "\|$dir|d" "$WORK/bundles"
	# shellcheck disable=SC2064 # the dir is known now
	trap "'$REPO_DIR/hack/registry.sh' stop '$dir' >/dev/null 2>&1; rm -rf '$dir'; cleanup_all" EXIT
	# distribution reads REGISTRY_* variables as config keys (auth.file here)
	REG=$(env -u REGISTRY_AUTH_FILE "$REPO_DIR/hack/registry.sh" start "$dir" --htpasswd "$USER_PASS") || {
		echo "not ok - start docker-registry with --htpasswd"
		exit 1
	}
	if ! (
		OUTDIR=$IMAGES
		. "$REPO_DIR/hack/test-images.sh"
		push_test_images "$REG" --creds "$USER_PASS" busybox big
	) >"$WORK/push.log" 2>&1; then
		echo "not ok - push busybox and big to $REG"
		diag "$(tail -n 5 "$WORK/push.log")"
		exit 1
	fi
	echo "# $TEST_NAME: husk $HUSK, registry $REG (Basic auth)"
}

# ---------------------------------------------------------------- help and errors

IMAGE_VERBS="pull ls inspect rm import export login logout"
declare -A VERB_OPTIONS=(
	[pull]="--platform --creds --authfile --quiet -q --max-size --help"
	[ls]="--quiet -q --format --no-trunc --noheading -n --help"
	[inspect]="--help" [rm]="--help" [import]="--help" [export]="--help"
	[login]="--username -u --password -p --password-stdin --authfile --get-login --help"
	[logout]="--all -a --authfile --help"
)

t_help_image_verbs() {
	local v o group
	capture husk_cmd image --help
	assert_rc "image --help exits 0" 0 "$RC"
	group=$OUT
	for v in $IMAGE_VERBS; do
		assert_match "image --help lists $v" "$group" "^  $v +[a-z]"
		capture husk_cmd image "$v" --help
		assert_rc "image $v --help exits 0" 0 "$RC"
		assert_eq "image $v --help: nothing on stderr" "" "$ERR"
		assert_match "image $v --help: usage line" "$OUT" "^Usage: husk image $v( |$)"
		for o in ${VERB_OPTIONS[$v]}; do
			assert_match "image $v --help lists $o" "$OUT" "(^|[ ,])$o( |,|$)"
		done
		capture husk_cmd image "$v" -h
		assert_rc "image $v -h exits 0" 0 "$RC"
	done
}

# The runtime's commands (husk --help's list) answer --help with a usage
# that names their options.
t_help_runtime_verbs() {
	local v
	capture husk_cmd --help
	for v in $(awk '/^Commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }' <<<"$OUT"); do
		capture husk_cmd "$v" --help
		assert_rc "husk $v --help exits 0" 0 "$RC"
		assert_match "husk $v --help: a usage line" "$OUT" "^[Uu]sage: husk $v"
	done
	capture husk_cmd create --help
	assert_contains "create --help lists --bundle" "$OUT" "-b, --bundle DIR"
	assert_contains "list --help lists --format" "$(husk_cmd list --help)" "--format table|json"
	assert_contains "exec --help lists --env" "$(husk_cmd exec --help)" "-e, --env KEY=VALUE"
}

# Every option a runtime verb's --help lists (main.c's tables) is one its
# parser takes: with an unknown option after it, the error names that one.
t_runtime_tables_match_parsers() {
	local v help line opt value checked=0 bad=""
	for v in create run start state kill delete list exec ps spec update pause resume events features checkpoint restore; do
		help=$(husk_cmd "$v" --help)
		while read -r line; do
			# a value its parser accepts, by the name the table gives it
			value=()
			case $(grep -oE -- '--[a-z0-9-]+ [A-Za-z][^ ]*' <<<"$line" | awk '{ print $2 }') in
			"") ;;
			N) value=(1) ;;
			KEY=VALUE) value=(A=b) ;;
			table\|json) value=(json) ;;
			DURATION) value=(1s) ;;
			ROWSxCOLS) value=(24x80) ;;
			soft\|full\|strict\|ignore) value=(soft) ;;
			*) value=(x) ;;
			esac
			for opt in $(grep -oE -- '(^|, )--?[a-z][a-z0-9-]*' <<<"$line" | sed 's/^, //'); do
				[ "$opt" = --help ] || [ "$opt" = -h ] && continue
				capture husk_cmd "$v" "$opt" "${value[@]}" --zz-bogus
				checked=$((checked + 1))
				[[ $ERR == *"unknown option \`--zz-bogus\`"* ]] || bad+="husk $v $opt: $ERR"$'\n'
			done
		done < <(grep -E '^  +-' <<<"$help")
	done
	echo "# checked $checked runtime options"
	assert_eq "every runtime option in --help is one the parser takes" "" "$bad"
	assert_true "and there are some (>= 40)" test "$checked" -ge 40
}

t_bad_options() {
	local v
	for v in $IMAGE_VERBS; do
		capture husk_cmd image "$v" --bogus-opt x
		one_line_error "image $v --bogus-opt" "unknown option \`--bogus-opt\`.*husk image $v --help"
		capture husk_cmd image "$v" -Z
		one_line_error "image $v -Z" "unknown option \`-Z\`"
	done
	capture husk_cmd image --bogus-opt ls
	one_line_error "image --bogus-opt" "unknown option \`--bogus-opt\`"
	capture husk_cmd image nosuchverb
	one_line_error "image nosuchverb" "unknown command \`nosuchverb\`"
	capture husk_cmd image pull --platform
	one_line_error "image pull --platform (no value)" "option \`--platform\` needs a value"
	capture husk_cmd image --root
	one_line_error "image --root (no value)" "option \`--root\` needs a value"
	capture husk_cmd image login -u
	one_line_error "image login -u (no value)" "option \`-u\` needs a value"
	capture husk_cmd image ls --format yaml
	one_line_error "image ls --format yaml" "--format \`yaml\`: expected table or json"
	capture husk_cmd image pull --plat=linux/amd64 x
	one_line_error "image pull --plat (an abbreviation)" "unknown option \`--plat\`"
	capture husk_cmd image ls --quiet=1
	one_line_error "image ls --quiet=1" "option \`--quiet\` takes no value"
	capture husk_cmd image pull
	one_line_error "image pull without REF" "missing REF"
	capture husk_cmd image inspect a b
	one_line_error "image inspect a b" "unexpected argument \`b\`"
	for v in create run start state kill delete list exec ps spec update pause resume events; do
		capture husk_cmd "$v" --bogus-opt
		one_line_error "husk $v --bogus-opt" "$v: unknown option \`--bogus-opt\`"
	done
	capture husk_cmd create --bundle
	one_line_error "husk create --bundle (no value)" "create: option \`--bundle\` needs a value"
	capture husk_cmd --log-format
	one_line_error "husk --log-format (no value)" "global option \`--log-format\` needs a value"
}

# ---------------------------------------------------------------- credentials

t_login_pull_logout() {
	local store auth=$WORK/login/containers/auth.json b64
	export REGISTRY_AUTH_FILE=$auth
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	ERR=$(without_progress "$ERR")
	one_line_error "pull before login" "unauthorized.*husk image login $REG"
	capture husk_cmd image login -u alice -p wrong "$REG"
	one_line_error "login with a wrong password" "log in to $REG: unauthorized"
	assert_true "a refused login writes no file" test ! -e "$auth"
	capture husk_cmd image login -u alice --password-stdin "$REG"
	one_line_error "login --password-stdin with nothing on stdin" "no password on standard input"
	OUT=$(husk_cmd image login -u alice --password-stdin "$REG" <<<"s3cret" 2>"$WORK/err")
	RC=$?
	assert_rc "login --password-stdin" 0 "$RC"
	assert_eq "login says so" "Login Succeeded!" "$OUT"
	assert_eq "auth.json is mode 0600" 600 "$(stat -c %a "$auth")"
	assert_eq "its directory is mode 0700" 700 "$(stat -c %a "$(dirname "$auth")")"
	b64=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["auths"][sys.argv[2]]["auth"])' "$auth" "$REG")
	assert_eq "auths[REG].auth is base64 of user:password" "$(printf %s "$USER_PASS" | base64)" "$b64"
	assert_eq "no temp file left next to it" "auth.json" "$(ls -A "$(dirname "$auth")")"
	capture timeout 30 podman login --get-login --authfile "$auth" "$REG"
	assert_eq "podman reads husk's auth.json (podman login --get-login)" alice "$OUT"
	capture husk_cmd image login --get-login "$REG"
	assert_eq "husk image login --get-login" alice "$OUT"
	img "$store" pull "$REG/test/busybox:latest"
	assert_rc "pull after login" 0 "$RC"
	assert_match "pull after login prints the id" "$OUT" "^sha256:[0-9a-f]{64}$"
	capture husk_cmd image logout "$REG"
	assert_eq "logout says so" "Removed login credentials for $REG" "$OUT"
	store=$(new_store)
	img "$store" pull "$REG/test/busybox:latest"
	ERR=$(without_progress "$ERR")
	one_line_error "pull after logout" "$REG/test/busybox:latest: unauthorized: authentication required"
	assert_eq "a refused pull leaves an empty store" "" "$(husk_cmd image --root "$store" ls -q)"
	capture husk_cmd image logout "$REG"
	one_line_error "logout twice" "not logged in to $REG"
	capture husk_cmd image logout
	one_line_error "logout without REGISTRY or --all" "REGISTRY or --all"
}

# A file podman login wrote, and --authfile over REGISTRY_AUTH_FILE.
t_podman_authfile() {
	local store podfile=$WORK/podman-auth.json
	export REGISTRY_AUTH_FILE=$WORK/elsewhere.json
	capture timeout 60 podman login --tls-verify=false -u alice -p s3cret --authfile "$podfile" "$REG"
	assert_rc "podman login --authfile" 0 "$RC" || return 1
	store=$(new_store)
	img "$store" pull --authfile "$podfile" "$REG/test/busybox:latest"
	assert_rc "husk image pull --authfile FILE-podman-wrote" 0 "$RC"
	img "$store" pull "$REG/test/busybox:latest"
	assert_fails "without --authfile, REGISTRY_AUTH_FILE (empty) is read" "$RC"
	capture husk_cmd image logout --all --authfile "$podfile"
	assert_eq "logout --all" "Removed login credentials for all registries" "$OUT"
	assert_eq "logout --all leaves auths empty" "{}" \
		"$("$PY" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["auths"]))' "$podfile")"
}

# Without REGISTRY_AUTH_FILE: $XDG_RUNTIME_DIR/containers/auth.json.
t_default_path() {
	local xdg
	xdg=$(new_tmpdir xdg)
	capture env -u REGISTRY_AUTH_FILE XDG_RUNTIME_DIR="$xdg" "$HUSK" image login -u alice -p s3cret "$REG"
	assert_rc "login with XDG_RUNTIME_DIR" 0 "$RC"
	assert_true "it wrote \$XDG_RUNTIME_DIR/containers/auth.json" test -s "$xdg/containers/auth.json"
}

# On a terminal login asks for the user and, without echo, the password.
t_login_tty() {
	local auth=$WORK/tty-auth.json out
	out=$( (
		sleep 0.5
		printf 'alice\n'
		sleep 0.5
		printf 's3cret\n'
		sleep 1
	) | script -qfec "'$HUSK' image login --authfile '$auth' '$REG'" /dev/null | tr -d '\r')
	assert_contains "login on a terminal asks for the user name" "$out" "Username: alice"
	assert_match "and for the password, not echoed" "$out" "^Password: $"
	assert_contains "and logs in" "$out" "Login Succeeded!"
	assert_eq "the file holds the typed credentials" alice "$(husk_cmd image login --authfile "$auth" --get-login "$REG")"
}

# huskd's PullImage with no auth from kubelet reads the same file; auth
# from kubelet wins over it.
t_huskd_uses_auth_file() {
	local dir sock pid auth
	if [ ! -x "$HUSKD" ]; then
		not_ok "huskd is built" "$HUSKD"
		return 1
	fi
	dir=$(new_tmpdir huskd)
	if ! protoc --python_out="$dir" -I "$REPO_DIR/cri/proto" "$REPO_DIR/cri/proto/api.proto" 2>"$dir/protoc.err"; then
		not_ok "generate the Python CRI messages" "$(cat "$dir/protoc.err")"
		return 1
	fi
	sock=$dir/husk.sock
	auth=$dir/auth.json
	REGISTRY_AUTH_FILE=$auth "$HUSKD" --listen "unix://$sock" --root "$dir/root" --state "$dir/state" \
		>"$dir/huskd.log" 2>&1 &
	pid=$!
	defer "kill $pid; wait $pid"
	wait_file "$sock" 10 || {
		not_ok "huskd starts" "$(tail -5 "$dir/huskd.log")"
		return 1
	}
	cri() {
		HUSK_CRI_GEN=$dir timeout 60 "$PY" "$REPO_DIR/test/e2e/cri_cli.py" --runtime-endpoint "unix://$sock" \
			--image-endpoint "unix://$sock" "$@"
	}
	capture cri pull "$REG/test/busybox:latest"
	assert_fails "PullImage without credentials fails" "$RC"
	assert_contains "it says unauthorized" "$ERR" "unauthorized"
	capture husk_cmd image login --authfile "$auth" -u alice -p s3cret "$REG"
	assert_rc "husk image login into huskd's file" 0 "$RC"
	capture cri pull "$REG/test/busybox:latest"
	assert_rc "PullImage (no auth) after login: huskd read the file" 0 "$RC"
	assert_contains "the reply holds the image id" "$OUT" "sha256:"
	capture cri pull --creds alice:wrong "$REG/test/busybox:latest"
	assert_fails "kubelet's own (wrong) credentials win over the file" "$RC"
	capture husk_cmd image logout --authfile "$auth" "$REG"
	capture cri pull "$REG/test/busybox:latest"
	assert_fails "PullImage after logout fails again" "$RC"
}

# ---------------------------------------------------------------- progress

# test/big (5 layers, 35 MB) on a terminal: in-place redraws, at most
# ~10 a second; each layer's own rate; "already exists" for the layer
# busybox shares with it.
t_progress_tty() {
	local store ts start end draws elapsed_ms
	export REGISTRY_AUTH_FILE=$WORK/progress-auth.json
	husk_cmd image login -u alice -p s3cret "$REG" >/dev/null 2>&1
	store=$(new_store)
	husk_cmd image --root "$store" pull -q "$REG/test/busybox:latest" >/dev/null 2>&1
	ts=$WORK/typescript
	start=$(date +%s%N)
	script -qfec "'$HUSK' image --root '$store' pull '$REG/test/big:latest'" "$ts" >/dev/null 2>&1
	RC=$?
	end=$(date +%s%N)
	assert_rc "pull on a terminal" 0 "$RC" || return 1
	elapsed_ms=$(((end - start) / 1000000))
	draws=$(($(grep -o $'\033\\[5A' "$ts" | wc -l) + 1))
	echo "# pull of test/big on a tty: $draws draws in $elapsed_ms ms"
	assert_true "at most 10 draws a second (+2 for the first and last)" \
		test "$draws" -le $((elapsed_ms / 100 + 2))
	assert_match "the shared layer: already exists" "$(tr -d '\r' <"$ts")" "^(.\\[K)?[0-9a-f]{12}  already exists$"
	assert_eq "every fetched layer ends with its own rate" 4 \
		"$(tr '\r' '\n' <"$ts" | grep -cE '^(.\[K)?[0-9a-f]{12}  done  [0-9.]+ [kM]?B in [0-9.]+ s \([0-9.]+ [kMG]?B/s\)$' | awk '{ print ($1 >= 4) ? 4 : $1 }')"
	assert_not_contains "no rate for the present layer" "$(grep 'already exists' "$ts")" "B/s"
}

# A proxy in front of the registry that sends bodies at RATE bytes/s per
# connection, so that a pull lasts seconds and the redraw limit shows.
start_slow_proxy() { # RATE -> prints 127.0.0.1:PORT
	local portfile=$WORK/slow.port
	rm -f "$portfile"
	"$PY" - "$REG" "$1" "$portfile" >"$WORK/slow.log" 2>&1 <<'PYEOF' &
import http.client, http.server, os, socketserver, sys, time
upstream, rate, portfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        conn = http.client.HTTPConnection(upstream)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
        conn.request("GET", self.path, headers=headers)
        resp = conn.getresponse()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding"):
                self.send_header(k, v)
        self.end_headers()
        while True:
            chunk = resp.read(rate // 20)
            if not chunk:
                break
            self.wfile.write(chunk)
            time.sleep(0.05)
        conn.close()
    do_HEAD = do_GET
    def log_message(self, *a):
        pass
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
server = Server(("127.0.0.1", 0), Proxy)
with open(portfile + ".tmp", "w") as fh:
    fh.write("%d\n" % server.server_address[1])
os.rename(portfile + ".tmp", portfile)
server.serve_forever()
PYEOF
	defer "kill $!"
	wait_file "$portfile" 10 || return 1
	echo "127.0.0.1:$(cat "$portfile")"
}

# test/big at 2 MB/s a layer (4 at once): a pull of seconds, redrawn at
# most 10 times a second but steadily.
t_progress_rate_limit() {
	local store proxy ts start end draws elapsed_ms
	export REGISTRY_AUTH_FILE=$WORK/slow-auth.json
	proxy=$(start_slow_proxy 2000000) || {
		not_ok "start the slow proxy" "$(cat "$WORK/slow.log")"
		return 1
	}
	capture husk_cmd image login -u alice -p s3cret "$proxy"
	assert_rc "login through the slow proxy" 0 "$RC"
	store=$(new_store)
	ts=$WORK/slow-typescript
	start=$(date +%s%N)
	script -qfec "'$HUSK' image --root '$store' pull '$proxy/test/big:latest'" "$ts" >/dev/null 2>&1
	RC=$?
	end=$(date +%s%N)
	assert_rc "slow pull on a terminal" 0 "$RC" || return 1
	elapsed_ms=$(((end - start) / 1000000))
	draws=$(($(grep -o $'\033\\[5A' "$ts" | wc -l) + 1))
	echo "# slow pull of test/big (35 MB) on a tty: $draws draws in $elapsed_ms ms"
	assert_true "it took seconds (> 2 s)" test "$elapsed_ms" -gt 2000
	assert_true "at most 10 draws a second" test "$draws" -le $((elapsed_ms / 100 + 2))
	assert_true "and at least 4 a second while it fetches" test "$draws" -ge $((elapsed_ms / 250))
	assert_eq "every layer ends done" 5 \
		"$(tr '\r' '\n' <"$ts" | grep -aE '[0-9a-f]{12}  ' | tail -n 5 | grep -c '  done  ')"
}

t_progress_plain() {
	local store
	export REGISTRY_AUTH_FILE=$WORK/progress-auth.json
	husk_cmd image login -u alice -p s3cret "$REG" >/dev/null 2>&1
	store=$(new_store)
	husk_cmd image --root "$store" pull -q "$REG/test/busybox:latest" >/dev/null 2>&1
	img "$store" pull "$REG/test/big:latest"
	assert_rc "pull off a terminal" 0 "$RC"
	assert_eq "one line per layer and one for the unpack" 6 "$(printf '%s\n' "$ERR" | grep -c .)"
	assert_eq "one layer already exists" 1 "$(grep -c '^[0-9a-f]\{12\}  already exists$' <<<"$ERR")"
	assert_eq "four done, each with its rate" 4 "$(grep -cE '^[0-9a-f]{12}  done  .* \([0-9.]+ [kMG]?B/s\)$' <<<"$ERR")"
	assert_not_contains "no escape sequences off a terminal" "$ERR" $'\033'
	img "$store" pull -q "$REG/test/big:latest"
	assert_eq "pull -q: no progress" "" "$ERR"
}

# ---------------------------------------------------------------- ls

t_ls() {
	local store podman_header
	export REGISTRY_AUTH_FILE=$WORK/ls-auth.json
	husk_cmd image login -u alice -p s3cret "$REG" >/dev/null 2>&1
	store=$(new_store)
	img "$store" pull -q "$REG/test/busybox:latest"
	img "$store" ls
	podman_header=$(podman images 2>/dev/null | head -n 1 | tr -s ' ')
	assert_eq "ls header: podman's columns" "REPOSITORY TAG IMAGE ID CREATED SIZE" "$(head -n 1 <<<"$OUT" | tr -s ' ')"
	assert_eq "podman's header (for comparison)" "REPOSITORY TAG IMAGE ID CREATED SIZE" "$podman_header"
	assert_match "ls row: repository, tag, short id, age, size" "$(sed -n 2p <<<"$OUT")" \
		"^$REG/test/busybox +latest +[0-9a-f]{12} +([0-9]+ [a-z]+s? ago|About an? [a-z]+ ago) +[0-9.]+ [kMG]?B$"
	img "$store" ls --noheading
	assert_eq "ls -n: no header" 1 "$(grep -c . <<<"$OUT")"
	img "$store" ls --format json
	assert_rc "ls --format json" 0 "$RC"
	assert_eq "ls json: podman's keys and types" "ok" "$("$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
i = d[0]
assert len(d) == 1
assert len(i["Id"]) == 64 and isinstance(i["Size"], int) and isinstance(i["Created"], int)
assert i["RepoTags"] == [sys.argv[1] + "/test/busybox:latest"] and i["Names"] == i["RepoTags"]
assert i["Digest"].startswith("sha256:") and i["RepoDigests"][0].endswith(i["Digest"])
assert i["CreatedAt"].endswith("Z") and isinstance(i["Labels"], dict)
print("ok")' "$REG" <<<"$OUT" 2>&1)"
	img "$store" ls -q
	assert_match "ls -q: the short id" "$OUT" "^[0-9a-f]{12}$"
	img "$(new_store)" ls --format json
	assert_eq "ls --format json of an empty store" "[]" "$OUT"
}

# ---------------------------------------------------------------- completion and man

complete_words() { # WORDS... (the last is the one being completed)
	bash -c '
		source <("$1" completion bash) || exit 1
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_husk
		echo "${COMPREPLY[*]}"' _ "$HUSK" "$HUSK" "$@"
}

t_completion() {
	capture "$HUSK" completion bash
	assert_rc "husk completion bash" 0 "$RC"
	assert_true "the script loads in bash" bash -c 'source <("$1" completion bash) && complete -p husk' _ "$HUSK"
	assert_match "completes husk's commands" "$(complete_words "")" "(^| )create .*image .*list "
	assert_eq "completes husk cr" "create" "$(complete_words cr)"
	assert_eq "completes husk image VERB" "export import inspect login logout ls pull rm" "$(complete_words image "")"
	assert_eq "completes husk image pu" "pull" "$(complete_words image pu)"
	assert_eq "completes husk image pull --pl" "--platform" "$(complete_words image pull --pl)"
	assert_eq "completes after a group option's value" "--format --help --no-trunc --noheading --quiet -h -n -q" \
		"$(complete_words image --root /tmp ls -)"
	assert_eq "completes --format's values" "table json" "$(complete_words image ls --format "")"
	assert_contains "completes a runtime verb's options" "$(complete_words create --)" "--bundle"
	assert_match "completes husk container's verbs" "$(complete_words container "")" "(^| )ls( .*)? run( |$)"
	capture "$HUSK" completion zsh
	one_line_error "completion zsh" "only bash"
}

t_man_pages() {
	local dir o
	dir=$(new_tmpdir man)
	capture "$REPO_DIR/hack/gen-man.sh" "$HUSK" "$dir"
	assert_rc "hack/gen-man.sh" 0 "$RC"
	for o in husk husk-image husk-image-pull husk-image-login husk-image-ls husk-create husk-list; do
		assert_true "man page $o.1" test -s "$dir/$o.1"
	done
	assert_contains "husk-exec(1) describes --env" "$(MANWIDTH=200 man -l "$dir/husk-exec.1" 2>&1)" \
		"set an environment variable"
	assert_eq "groff finds nothing wrong" "" "$(for f in "$dir"/*.1; do groff -man -ww -z "$f" 2>&1; done)"
	OUT=$(MANWIDTH=200 man -l "$dir/husk-image-pull.1" 2>&1)
	for o in ${VERB_OPTIONS[pull]}; do
		assert_contains "husk-image-pull(1) has $o" "$OUT" "$o"
	done
	assert_contains "husk-image-pull(1) NAME line" "$OUT" "husk-image-pull - pull an image"
}

# ---------------------------------------------------------------- main

setup_registry
for t in t_help_image_verbs t_help_runtime_verbs t_runtime_tables_match_parsers t_bad_options t_login_pull_logout t_podman_authfile \
	t_default_path t_login_tty t_huskd_uses_auth_file t_progress_tty t_progress_rate_limit t_progress_plain t_ls t_completion t_man_pages; do
	run_test "$t"
done
finish
