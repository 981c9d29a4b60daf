#!/usr/bin/env bash
# Starts and stops a local test registry: Debian's docker-registry
# (distribution 2.x) on 127.0.0.1 with a free port, storage under DIR.
#
#   hack/registry.sh start DIR [--htpasswd USER:PASS]   prints 127.0.0.1:PORT
#   hack/registry.sh stop DIR
#
# DIR holds config.yml, data/, registry.log, registry.pid and addr.  With
# --htpasswd the registry wants Basic auth (bcrypt htpasswd, as distribution
# requires).
set -euo pipefail

registry_bin=${DOCKER_REGISTRY:-/usr/bin/docker-registry}

usage() {
	echo "usage: $0 start DIR [--htpasswd USER:PASS] | stop DIR" >&2
	exit 2
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_config() { # DIR PORT HTPASSWD_FILE
	cat >"$1/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $1/data
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$2
  secret: husk-test-registry
EOF
	if [ -n "$3" ]; then
		cat >>"$1/config.yml" <<EOF
auth:
  htpasswd:
    realm: husk-test
    path: $3
EOF
	fi
}

# Any HTTP answer from /v2/ (200, or 401 with auth) means it is serving.
wait_ready() { # ADDR PID
	local _i code
	for _i in $(seq 1 100); do
		if ! kill -0 "$2" 2>/dev/null; then
			return 1
		fi
		code=$(curl -s -o /dev/null -w '%{http_code}' "http://$1/v2/" 2>/dev/null || true)
		if [ "$code" = 200 ] || [ "$code" = 401 ]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

start() { # DIR [--htpasswd USER:PASS]
	local dir=$1 htpasswd_file="" port addr pid _attempt
	shift
	if [ $# -gt 0 ]; then
		if [ "$1" != --htpasswd ] || [ $# -ne 2 ]; then
			usage
		fi
		case $2 in *:*) ;; *) usage ;; esac
		htpasswd_file=$dir/htpasswd
	fi
	[ -x "$registry_bin" ] || {
		echo "$0: $registry_bin not found (install docker-registry)" >&2
		exit 1
	}
	mkdir -p "$dir/data"
	dir=$(cd "$dir" && pwd)
	[ -n "$htpasswd_file" ] && htpasswd_file=$dir/htpasswd
	stop "$dir"
	if [ -n "$htpasswd_file" ]; then
		htpasswd -Bbn "${2%%:*}" "${2#*:}" >"$htpasswd_file"
	fi
	# Another process may take the port between picking and binding: retry.
	for _attempt in 1 2 3 4 5; do
		port=$(free_port)
		addr=127.0.0.1:$port
		write_config "$dir" "$port" "$htpasswd_file"
		# docker-registry reads every REGISTRY_* variable as a config key
		# (REGISTRY_AUTH_FILE, podman's auth file, would break it).
		# shellcheck disable=SC2046 # one "-u NAME" pair per variable
		setsid env $(env | sed -n 's/^\(REGISTRY_[A-Za-z0-9_]*\)=.*/-u \1/p') \
			"$registry_bin" serve "$dir/config.yml" >"$dir/registry.log" 2>&1 </dev/null &
		pid=$!
		echo "$pid" >"$dir/registry.pid"
		if wait_ready "$addr" "$pid"; then
			echo "$addr" >"$dir/addr"
			echo "$addr"
			return 0
		fi
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		rm -f "$dir/registry.pid"
	done
	echo "$0: docker-registry did not start; last log:" >&2
	tail -n 5 "$dir/registry.log" >&2
	exit 1
}

stop() { # DIR
	local dir=$1 pid _i
	[ -f "$dir/registry.pid" ] || return 0
	pid=$(cat "$dir/registry.pid")
	if kill "$pid" 2>/dev/null; then
		for _i in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/registry.pid" "$dir/addr"
}

[ $# -ge 2 ] || usage
cmd=$1
shift
case $cmd in
start) start "$@" ;;
stop)
	[ $# -eq 1 ] || usage
	stop "$1"
	;;
*) usage ;;
esac
