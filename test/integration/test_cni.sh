#!/usr/bin/env bash
# husk's CNI client (cri/cni/) against Debian's real plugins in
# /usr/lib/cni: a conflist of bridge (host-local IPAM) + portmap + loopback
# on pod netns made with `ip netns add`.  ADD gives the pod an address on
# eth0 that the host reaches, a port mapping on 127.0.0.1 reaches a busybox
# httpd in the pod, and DEL (from a new process, with the config gone, as
# after a huskd restart) removes the veth, the IP lease and portmap's
# iptables rules; a second DEL succeeds.  A small C driver, built here
# against build/libhusk-cri.a, calls the library as huskd would.
#
# Traffic never leaves this machine: 127.0.0.1 and the test's own bridge
# subnets.  The cleanup removes the netns, bridge, iptables rules and
# chains, host-local state and ip_forward change, even on failure.
. "$(dirname "$0")/lib.sh"

CNI_BIN=/usr/lib/cni
NET=husk-cni-test-$$
CHK_NET=husk-cni-check-$$
BRIDGE=huskcni$(($$ % 100000))
SUBNET_PREFIX=
CHK_SUBNET_PREFIX=
IPAM_DIR=/var/lib/cni/networks
CONF_DIR=$WORK/net.d
CHK_CONF_DIR=$WORK/net-check.d
CACHE_DIR=$WORK/cni-cache
DRIVER=$WORK/cni-driver
SHARED_CHAINS='CNI-HOSTPORT-DNAT|CNI-HOSTPORT-MASQ|CNI-HOSTPORT-SETMARK'
FORWARD_BEFORE=$(cat /proc/sys/net/ipv4/ip_forward)
VAR_LIB_CNI_BEFORE=$([ -d /var/lib/cni ] && echo yes)

# ---------------------------------------------------------------- cleanup


# portmap's shared chains stay after DEL by design; they go here only if
# this test made them and nobody else has rules in them.
purge_shared_chains() {
	local rule chain
	grep -q CNI-HOSTPORT-DNAT "$WORK/nat-chains-before" 2>/dev/null && return 0
	iptables-save -t nat 2>/dev/null | grep -q '^-A CNI-HOSTPORT-DNAT ' && return 0
	iptables-save -t nat 2>/dev/null | grep -E "^-A (PREROUTING|OUTPUT|POSTROUTING) .*-j ($SHARED_CHAINS)( |$)" |
		while read -r rule; do
			eval "iptables -w -t nat -D ${rule#-A }" 2>/dev/null
		done
	for chain in CNI-HOSTPORT-DNAT CNI-HOSTPORT-MASQ CNI-HOSTPORT-SETMARK; do
		iptables -w -t nat -F "$chain" 2>/dev/null
		iptables -w -t nat -X "$chain" 2>/dev/null
	done
}

cni_cleanup() {
	local ns
	if [ -f "$WORK/netns" ]; then
		while read -r ns; do
			del_netns "$ns" 2>/dev/null
		done <"$WORK/netns"
	fi
	ip link del "$BRIDGE" 2>/dev/null
	cni_purge_rules "$NET" "$CHK_NET"
	purge_shared_chains
	rm -rf "${IPAM_DIR:?}/$NET" "${IPAM_DIR:?}/$CHK_NET"
	[ -z "$VAR_LIB_CNI_BEFORE" ] && rmdir "$IPAM_DIR" /var/lib/cni 2>/dev/null
	[ "$(cat /proc/sys/net/ipv4/ip_forward)" != "$FORWARD_BEFORE" ] &&
		echo "$FORWARD_BEFORE" >/proc/sys/net/ipv4/ip_forward
	release_subnets
}

# shellcheck source=hack/free-subnet.sh
. "$REPO_DIR/hack/free-subnet.sh"
trap 'cni_cleanup; cleanup_all' EXIT
if ! SUBNET_PREFIX=$(free_subnet) || ! CHK_SUBNET_PREFIX=$(free_subnet); then
	echo "not ok - two free 10.x.y.0/24 subnets for the test bridges (none found)"
	finish
fi

del_netns() { # NAME: kills what runs in it (httpd), then removes it
	local pid
	for pid in $(ip netns pids "$1" 2>/dev/null); do
		kill -KILL "$pid" 2>/dev/null
	done
	ip netns del "$1"
}

new_netns() { # -> prints the name of a fresh netns, registered for cleanup
	local ns=husk-cni-test-$$-$1
	echo "$ns" >>"$WORK/netns"
	ip netns add "$ns" || return 1
	ip -n "$ns" link set lo up
	echo "$ns"
}

# iptables state without counters and comments, for before/after diffs.
iptables_snapshot() {
	local table
	for table in nat filter; do
		iptables-save -t "$table" 2>/dev/null | grep -v '^#' | sed "s/^\(:[^ ]* [^ ]*\) \[[0-9]*:[0-9]*\]/\1/;s/^/$table /"
	done
}

# The snapshot's lines that belong to NETWORK's attachment of CID: rules
# whose comment names either, and the chains the plugins name after them
# ("CNI-" or "CNI-DN-" and the start of sha512(NETWORK CID), as libcni's
# FormatChainName does).  Other pods' rules (a benchmark or another test
# on this shared machine) come and go meanwhile and must not count.
own_iptables() { # NETWORK CID
	local hash
	hash=$(printf '%s%s' "$1" "$2" | sha512sum | cut -c1-16)
	iptables_snapshot | grep -E "name: \\\\\"$1\\\\\"|$2|CNI-(DN-)?$hash"
}

leases() { # NETWORK -> the addresses host-local holds for it
	find "$IPAM_DIR/$1" -maxdepth 1 -name '[0-9]*' -printf '%f\n' 2>/dev/null
}

pings() { # [ip netns exec NS] ADDRESS: one ping, quietly
	"${@:1:$#-1}" busybox ping -c 1 -W 2 "${!#}" >/dev/null 2>&1
}

free_port() {
	local port
	for port in $(shuf -i 20000-40000 -n 50); do
		if ! ss -Htln "sport = :$port" | grep -q .; then
			echo "$port"
			return 0
		fi
	done
	return 1
}

# ---------------------------------------------------------------- the driver

write_driver() {
	cat >"$DRIVER.c" <<'EOF'
/* Calls cri/cni/ as huskd would:
 *   cni-driver ready CONF_DIR
 *   cni-driver add|check|del CONF_DIR CACHE_DIR ID NETNS [HOSTIP:HOSTPORT:PORT/PROTO...]
 *   cni-driver padd|pdel CONF_DIR CACHE_DIR ID=NETNS...   (one thread each)
 * Prints "ip ADDRESS" lines after ADD, then "ms N" and "fds N" (fds opened
 * and not closed by the call); errors as "error MSG" on stderr.  A DEL
 * whose CONF_DIR holds no config runs on the cache alone. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cri/cni/cni.h"
#include "husk/util.h"

struct job
{
  const char *op, *conf_dir, *id, *netns;
  struct cni_ctx ctx;
  struct cni_port_mapping ports[4];
  size_t n_ports;
  char out[1024];
  int rc;
};

static double
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
count_fds (void)
{
  DIR *dir = opendir ("/proc/self/fd");
  int n = 0;
  while (dir && readdir (dir))
    n++;
  if (dir)
    closedir (dir);
  return n;
}

static void
append (struct job *job, const char *fmt, const char *text, double number)
{
  size_t used = strlen (job->out);
  if (text)
    snprintf (job->out + used, sizeof job->out - used, fmt, text);
  else
    snprintf (job->out + used, sizeof job->out - used, fmt, number);
}

static int
run_op (struct job *job, struct husk_error **err)
{
  struct cni_network *net = NULL;
  struct cni_pod pod = { .container_id = job->id, .netns = job->netns, .pod_namespace = "husk-test",
                         .pod_name = "cni-pod", .pod_uid = "8d4c1a0e-husk-test",
                         .port_mappings = job->ports, .n_port_mappings = job->n_ports };
  struct cni_result *result = NULL;
  int ret;

  if (strcmp (job->op, "ready") == 0)
    return cni_network_ready (job->conf_dir, job->ctx.bin_dirs, err);
  if (cni_config_load_dir (job->conf_dir, &net, err) < 0)
    {
      if (strcmp (job->op, "del") != 0)
        return -1;
      husk_error_free (err);
    }
  if (strcmp (job->op, "add") == 0)
    ret = cni_add (&job->ctx, net, &pod, &result, err);
  else if (strcmp (job->op, "check") == 0)
    ret = cni_check (&job->ctx, net, &pod, err);
  else
    ret = cni_del (&job->ctx, net, &pod, err);
  if (result)
    {
      char **ips = cni_result_pod_ips (result, NULL);
      for (size_t i = 0; ips[i]; i++)
        {
          append (job, "ip %s\n", ips[i], 0);
          free (ips[i]);
        }
      free (ips);
      cni_result_free (result);
    }
  cni_network_free (net);
  return ret;
}

static void *
run_job (void *arg)
{
  struct job *job = arg;
  struct husk_error *err = NULL;
  int fds_before = count_fds ();
  double start = now_ms ();

  job->rc = run_op (job, &err) < 0 ? 1 : 0;
  if (err)
    append (job, "error %s\n", err->msg, 0);
  append (job, "ms %.0f\n", NULL, now_ms () - start);
  append (job, "fds %.0f\n", NULL, count_fds () - fds_before);
  husk_error_free (&err);
  return NULL;
}

static void
parse_port (char *spec, struct cni_port_mapping *mapping)
{
  char *proto = strchr (spec, '/'), *host_port = strchr (spec, ':'), *port;
  *proto++ = '\0';
  *host_port++ = '\0';
  port = strchr (host_port, ':');
  *port++ = '\0';
  *mapping = (struct cni_port_mapping){ .host_ip = spec, .host_port = atoi (host_port),
                                        .container_port = atoi (port), .protocol = proto };
}

static int
run_parallel (struct job *base, int n, char **pairs)
{
  struct job *jobs = calloc ((size_t) n, sizeof *jobs);
  pthread_t *threads = calloc ((size_t) n, sizeof *threads);
  int rc = 0;

  for (int i = 0; i < n; i++)
    {
      char *eq = strchr (pairs[i], '=');
      *eq = '\0';
      jobs[i] = *base;
      jobs[i].op = base->op + 1;
      jobs[i].id = pairs[i];
      jobs[i].netns = eq + 1;
      pthread_create (&threads[i], NULL, run_job, &jobs[i]);
    }
  for (int i = 0; i < n; i++)
    {
      pthread_join (threads[i], NULL);
      printf ("== %s\n%s", jobs[i].id, jobs[i].out);
      rc |= jobs[i].rc;
    }
  return rc;
}

int
main (int argc, char **argv)
{
  struct job job = { 0 };

  if (argc < 3)
    return 2;
  job.op = argv[1];
  job.conf_dir = argv[2];
  job.ctx.bin_dirs = getenv ("CNI_BIN_DIRS");
  job.ctx.cache_dir = argc > 3 ? argv[3] : NULL;
  job.ctx.timeout_s = 60;
  if (job.op[0] == 'p')
    return run_parallel (&job, argc - 4, argv + 4);
  job.id = argc > 4 ? argv[4] : "";
  job.netns = argc > 5 ? argv[5] : NULL;
  for (int i = 6; i < argc && job.n_ports < 4; i++)
    parse_port (argv[i], &job.ports[job.n_ports++]);
  run_job (&job);
  fputs (job.out, job.rc ? stderr : stdout);
  return job.rc;
}
EOF
	local jansson_cflags jansson_libs
	read -ra jansson_cflags <<<"$(pkg-config --cflags jansson)"
	# libcrypto: the CNI client hashes chain names (cri/cni/rules.c).
	read -ra jansson_libs <<<"$(pkg-config --libs jansson libcrypto)"
	gcc -std=gnu11 -O1 -Wall -Werror -D_GNU_SOURCE -I"$REPO_DIR/include" -I"$REPO_DIR" \
		"${jansson_cflags[@]}" -o "$DRIVER" "$DRIVER.c" \
		"$BUILD_DIR/libhusk-cri.a" "$BUILD_DIR/libhusk-common.a" "${jansson_libs[@]}" -lpthread
}

drive() { # ARGS...: runs the driver; sets OUT, ERR, RC
	OUT=$(CNI_BIN_DIRS="$CNI_BIN:/opt/cni/bin" timeout -k 5 120 "$DRIVER" "$@" 2>"$WORK/driver.err")
	RC=$?
	ERR=$(cat "$WORK/driver.err")
}

field() { # NAME TEXT -> the value of the first "NAME value" line
	printf '%s\n' "$2" | awk -v k="$1" '$1 == k { print $2; exit }'
}

write_conflists() {
	mkdir -p "$CONF_DIR" "$CHK_CONF_DIR"
	cat >"$CONF_DIR/10-husk-test.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$SUBNET_PREFIX.0/24" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } },
    { "type": "loopback" }
  ]
}
EOF
	# portmap 1.1.1's CHECK fails for IPv4-only pods whenever ip6tables
	# works (it checks an IPv6 chain it never made); CHECK is tested on a
	# list without it.
	cat >"$CHK_CONF_DIR/10-husk-check.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CHK_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$CHK_SUBNET_PREFIX.0/24" }]] }
    },
    { "type": "loopback" }
  ]
}
EOF
}

# ---------------------------------------------------------------- tests

test_setup() {
	local tool missing=
	for tool in "$CNI_BIN/bridge" "$CNI_BIN/host-local" "$CNI_BIN/portmap" "$CNI_BIN/loopback"; do
		[ -x "$tool" ] || missing="$missing $tool"
	done
	for tool in ip iptables iptables-save busybox curl gcc ss; do
		command -v "$tool" >/dev/null || missing="$missing $tool"
	done
	if [ -n "$missing" ]; then
		not_ok "tools present (run hack/deps.sh)" "missing:$missing"
		return 1
	fi
	ok "CNI plugins and tools present"
	if ! write_driver >"$WORK/driver-build.log" 2>&1; then
		not_ok "build the CNI driver against $BUILD_DIR/libhusk-cri.a" "$(cat "$WORK/driver-build.log")"
		return 1
	fi
	ok "build the CNI driver against libhusk-cri.a"
	write_conflists
}

test_network_ready() {
	local empty=$WORK/empty.d no_plugin=$WORK/no-plugin.d
	drive ready "$CONF_DIR"
	assert_rc "NetworkReady with the conflist and /usr/lib/cni" 0 "$RC"

	mkdir -p "$empty" "$no_plugin"
	drive ready "$empty"
	assert_fails "not ready without a config" "$RC"
	assert_contains "... says there is none" "$ERR" "no CNI network config in $empty"

	sed 's/"portmap"/"husk-no-such-plugin"/' "$CONF_DIR/10-husk-test.conflist" >"$no_plugin/10-x.conflist"
	drive ready "$no_plugin"
	assert_fails "not ready when a plugin binary is missing" "$RC"
	# shellcheck disable=SC2016 # the backquotes are literal
	assert_contains "... names the plugin" "$ERR" 'CNI plugin `husk-no-such-plugin` not found'
}

# ADD, traffic, DEL after a "restart", second DEL.
test_add_traffic_del() {
	local ns cid=husk$$a port ip www before after added left cache_file
	ns=$(new_netns pod1) || return 1
	port=$(free_port)
	iptables-save -t nat | grep '^:' >"$WORK/nat-chains-before"
	before=$(own_iptables "$NET" "$cid")

	drive add "$CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns" "127.0.0.1:$port:80/TCP"
	assert_rc "ADD through bridge, portmap, loopback" 0 "$RC" || return 1
	diag "ADD took $(field ms "$OUT") ms"
	assert_eq "ADD leaves no fd open in the caller" 0 "$(field fds "$OUT")"
	ip=$(field ip "$OUT")
	assert_match "ADD gives a pod IP in $SUBNET_PREFIX.0/24" "$ip" "^${SUBNET_PREFIX//./\\.}\.[0-9]+$"
	assert_contains "the IP is on eth0 in the pod netns" "$(ip -n "$ns" -4 addr show dev eth0 2>&1)" "inet $ip/24"
	assert_contains "host-local holds the lease" "$(cat "$IPAM_DIR/$NET/$ip" 2>&1)" "$cid"
	cache_file=$CACHE_DIR/$NET-$cid.json
	assert_contains "the result is cached" "$(cat "$cache_file" 2>&1)" "\"address\":\"$ip/24\""
	assert_contains "... with the port mappings" "$(cat "$cache_file" 2>&1)" "\"hostPort\":$port"

	assert_true "the host pings the pod" pings "$ip"
	www=$(new_tmpdir www)
	echo "hello from $cid" >"$www/index.html"
	ip netns exec "$ns" busybox httpd -p 80 -h "$www"
	sleep 0.2
	assert_eq "the host reaches httpd in the pod" "hello from $cid" "$(curl -s -m 5 "http://$ip/")"
	assert_eq "127.0.0.1:$port reaches the pod through portmap" "hello from $cid" \
		"$(curl -s -m 5 "http://127.0.0.1:$port/")"
	assert_contains "portmap made its DNAT rule" "$(iptables-save -t nat)" "id: \\\"$cid\\\""
	assert_contains "... and the check below sees the pod's own chains" "$(own_iptables "$NET" "$cid")" ":CNI-DN-"

	# A new process, and the config gone: all it knows is in the cache.
	mv "$CONF_DIR/10-husk-test.conflist" "$WORK/held-back.conflist"
	drive del "$CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	mv "$WORK/held-back.conflist" "$CONF_DIR/10-husk-test.conflist"
	assert_rc "DEL from the cache, with no config left" 0 "$RC" || return 1
	diag "DEL took $(field ms "$OUT") ms"
	assert_eq "DEL leaves no fd open in the caller" 0 "$(field fds "$OUT")"
	assert_eq "DEL removes eth0 from the pod" "" "$(ip -n "$ns" -o link show dev eth0 2>/dev/null)"
	assert_eq "DEL removes the host veth" "" "$(ip -o link show master "$BRIDGE" 2>/dev/null)"
	assert_true "DEL frees the host-local lease" test ! -e "$IPAM_DIR/$NET/$ip"
	assert_true "DEL removes the cache entry" test ! -e "$cache_file"
	assert_eq "curl to the old mapping fails" "" "$(curl -s -m 2 "http://127.0.0.1:$port/")"

	after=$(own_iptables "$NET" "$cid")
	added=$(comm -13 <(printf '%s\n' "$before" | sort) <(printf '%s\n' "$after" | sort))
	left=$(printf '%s\n' "$added" | grep -vE "$SHARED_CHAINS" | grep .)
	assert_eq "no iptables rule or chain left but portmap's shared ones" "" "$left"
	assert_not_contains "no CNI-DN chain left" "$added" "CNI-DN-"
	assert_not_contains "no rule names the pod" "$(iptables-save)" "$cid"

	drive del "$CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	assert_rc "a second DEL succeeds" 0 "$RC"
	del_netns "$ns"
	drive del "$CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	assert_rc "DEL after the netns is gone succeeds" 0 "$RC"
	drive del "$CONF_DIR" "$CACHE_DIR" "husk$$never" "/run/netns/husk-cni-never"
	assert_rc "DEL of a pod never added succeeds" 0 "$RC"
}

# Three pods at once from three threads of one process; they reach each
# other over the bridge.
test_parallel_pods() {
	local i ns pairs='' ips ip1 ip2 ip3 count
	for i in 1 2 3; do
		ns=$(new_netns par$i) || return 1
		pairs="$pairs husk$$p$i=/run/netns/$ns"
	done
	# shellcheck disable=SC2086
	drive padd "$CONF_DIR" "$CACHE_DIR" $pairs
	assert_rc "three ADDs in parallel threads" 0 "$RC" || {
		diag "$OUT"
		return 1
	}
	diag "parallel ADD times (ms): $(printf '%s\n' "$OUT" | awk '$1 == "ms" { printf "%s ", $2 }')"
	ips=$(printf '%s\n' "$OUT" | awk '$1 == "ip" { print $2 }')
	count=$(printf '%s\n' "$ips" | sort -u | grep -c .)
	assert_eq "each pod got its own IP" 3 "$count"
	ip1=$(printf '%s\n' "$ips" | sed -n 1p)
	ip2=$(printf '%s\n' "$ips" | sed -n 2p)
	ip3=$(printf '%s\n' "$ips" | sed -n 3p)
	assert_true "pod 1 pings pod 2" pings ip netns exec "husk-cni-test-$$-par1" "$ip2"
	assert_true "pod 3 pings pod 1" pings ip netns exec "husk-cni-test-$$-par3" "$ip1"
	assert_true "the host pings pod 3" pings "$ip3"

	# shellcheck disable=SC2086
	drive pdel "$CONF_DIR" "$CACHE_DIR" $pairs
	assert_rc "three DELs in parallel threads" 0 "$RC"
	assert_eq "no lease left" "" "$(leases "$NET")"
	assert_eq "no veth left on the bridge" "" "$(ip -o link show master "$BRIDGE" 2>/dev/null)"
	assert_eq "no cache entry left" "" "$(ls "$CACHE_DIR" 2>/dev/null)"
}

test_check() {
	local ns cid=husk$$c
	ns=$(new_netns chk) || return 1
	drive add "$CHK_CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	assert_rc "ADD on the bridge-only list" 0 "$RC" || return 1
	drive check "$CHK_CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	assert_rc "CHECK passes on a healthy pod" 0 "$RC"
	ip -n "$ns" addr flush dev eth0
	drive check "$CHK_CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	assert_fails "CHECK fails once the pod lost its address" "$RC"
	assert_contains "... with the plugin's message on one line" "$ERR" "error cni plugin bridge CHECK: "
	drive del "$CHK_CONF_DIR" "$CACHE_DIR" "$cid" "/run/netns/$ns"
	assert_rc "DEL after a failed CHECK" 0 "$RC"
}

# tuning fails on a sysctl that does not exist, after bridge and portmap
# did their part: the DEL that undoes the ADD must leave no trace.
test_add_failure_leaves_nothing() {
	local ns cid=husk$$f bad=$WORK/bad.d port before after
	ns=$(new_netns fail) || return 1
	port=$(free_port)
	mkdir -p "$bad"
	sed 's|{ "type": "loopback" }|{ "type": "tuning", "sysctl": { "net.ipv4.conf.eth0.husk_no_such_sysctl": "1" } }|' \
		"$CONF_DIR/10-husk-test.conflist" >"$bad/10-bad.conflist"
	before=$(own_iptables "$NET" "$cid" | grep -vE "$SHARED_CHAINS")
	drive add "$bad" "$CACHE_DIR" "$cid" "/run/netns/$ns" "127.0.0.1:$port:80/tcp"
	assert_fails "ADD fails in its third plugin" "$RC"
	assert_match "... with one line naming the plugin" "$ERR" \
		"^error cni plugin tuning ADD: open /proc/sys/net/ipv4/conf/eth0/husk_no_such_sysctl: no such file"
	assert_eq "... and no cache entry" "" "$(ls "$CACHE_DIR" 2>/dev/null)"
	assert_eq "... and no lease" "" "$(leases "$NET")"
	assert_eq "... and no eth0 in the pod" "" "$(ip -n "$ns" -o link show dev eth0 2>/dev/null)"
	assert_eq "... and no veth on the bridge" "" "$(ip -o link show master "$BRIDGE" 2>/dev/null)"
	after=$(own_iptables "$NET" "$cid" | grep -vE "$SHARED_CHAINS")
	assert_eq "... and no iptables rule from portmap or ipMasq" "$before" "$after"
}

echo "# $TEST_NAME: network $NET, bridge $BRIDGE, netns husk-cni-test-$$-*"
run_test test_setup
if grep -q '^not ok' "$WORK/results"; then
	finish
fi
run_test test_network_ready
run_test test_add_traffic_del
run_test test_parallel_pods
run_test test_check
run_test test_add_failure_leaves_nothing
finish
