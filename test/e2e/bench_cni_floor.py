#!/usr/bin/python3
"""The CNI floor of the density storms (hack/bench-cri.sh --density): the
chain of CONFLIST (the one both runtimes were given) run by this driver
alone, no runtime, as a storm of 20 workers does it: N network namespaces
(bind-mounted under NETNS_DIR, so the caller's unmount removes them), each
plugin's ADD in order with the previous result, then each one's DEL in
reverse.  No runtime can start or stop N pods faster than their networks,
so FLOOR / containerd's storm is the lowest ratio of the storm goals.

  bench_cni_floor.py CONFLIST NETNS_DIR N CNI_BIN_DIR

Prints one JSON line: wall seconds and the plugins' CPU (RUSAGE_CHILDREN)
of each storm, the host's 1-minute load after each.
"""
import concurrent.futures
import json
import os
import resource
import subprocess
import sys
import time

WORKERS = 20


def plugin(conf, cmd, spec, cid, netns, bin_dir, prev):
    """One plugin's CMD: its result (ADD), else PREV."""
    cfg = dict(spec, cniVersion=conf["cniVersion"], name=conf["name"])
    if prev is not None:
        cfg["prevResult"] = prev
    env = dict(os.environ, CNI_COMMAND=cmd, CNI_CONTAINERID=cid, CNI_NETNS=netns, CNI_IFNAME="eth0",
               CNI_PATH=bin_dir)
    p = subprocess.run([os.path.join(bin_dir, spec["type"])], input=json.dumps(cfg).encode(), env=env,
                       capture_output=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"{spec['type']} {cmd} for {cid}: {p.stdout[:300]!r} {p.stderr[:300]!r}")
    return json.loads(p.stdout) if cmd == "ADD" and p.stdout.strip() else prev


def storm(fn, n):
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(fn, range(n)))
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.monotonic() - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, os.getloadavg()[0]


def main():
    conflist, ns_dir, n, bin_dir = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    conf = json.load(open(conflist))
    tag = f"husk-cni-floor-{os.getpid()}"
    results = {}
    os.makedirs(ns_dir, exist_ok=True)

    def netns(i):
        return os.path.join(ns_dir, f"ns{i}")

    def add(i):
        open(netns(i), "w").close()
        subprocess.run(["unshare", f"--net={netns(i)}", "true"], check=True)
        prev = None
        for spec in conf["plugins"]:
            prev = plugin(conf, "ADD", spec, f"{tag}-{i}", netns(i), bin_dir, prev)
        results[i] = prev

    def delete(i):
        for spec in reversed(conf["plugins"]):
            plugin(conf, "DEL", spec, f"{tag}-{i}", netns(i), bin_dir, results.get(i))
        subprocess.run(["umount", netns(i)], check=True)
        os.unlink(netns(i))

    out = {"pods": n}
    out["add_s"], out["add_cpu_s"], out["add_load"] = storm(add, n)
    out["del_s"], out["del_cpu_s"], out["del_load"] = storm(delete, n)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
