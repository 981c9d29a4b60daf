#!/usr/bin/python3
"""The table of hack/bench-cri.sh --density: bench_density.py's JSON for
husk and for containerd side by side, with the goals of issue 30, then one
BENCH| line per figure for hack/bench-table.sh (the host's 1-minute load
average during each runtime's phase beside each).

  bench_density_table.py HUSK_JSON CONTAINERD_JSON SECONDS CGROUP_ROOT [CNI_JSON]

CONTAINERD_JSON `-` (PEERS=husk): husk's figures alone, no ratios.
CNI_JSON (bench_cni_floor.py's, `-` or absent: none): the CNI chain's own
storms, the floor of the storm figures, printed after the table.
"""
import json
import sys

h, c = json.loads(sys.argv[1]), None if sys.argv[2] == "-" else json.loads(sys.argv[2])
SECONDS, CG_ROOT = float(sys.argv[3]), sys.argv[4]
cni = json.loads(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
N = h["pods"]


def call(r, method, key):
    m = r["calls"].get(method)
    return None if m is None else m[key]


# name, value of a run, unit, load key, goal: ("ratio", x) or ("abs", x ms) or None
ROWS = [
    ("start storm, 20 workers, until all run", lambda r: r["start_s"], "s", "start_load", ("ratio", 0.2)),
    ("start storm CPU, the runtime's whole cgroup tree", lambda r: r.get("start_cpu_s"), "s", "start_load", None),
    ("steady CPU, the runtime's whole cgroup tree", lambda r: r["cpu_s_per_min"], "s/min", "steady_load",
     ("ratio", 0.1)),
    ("steady CPU, daemon + monitors/shims cgroup only", lambda r: r["daemon_cpu_s_per_min"], "s/min",
     "steady_load", None),
    ("memory PSS, daemon + helpers", lambda r: r["pss_kib"] / 1024, "MiB", "steady_load", None),
    ("ExecSync `true` p50", lambda r: call(r, "ExecSync", "p50_ms"), "ms", "steady_load", ("abs", 10)),
    ("ExecSync `true` p99", lambda r: call(r, "ExecSync", "p99_ms"), "ms", "steady_load", ("abs", 20)),
    ("ContainerStatus p50", lambda r: call(r, "ContainerStatus", "p50_ms"), "ms", "steady_load", None),
    ("ContainerStatus p99", lambda r: call(r, "ContainerStatus", "p99_ms"), "ms", "steady_load", None),
    ("ListContainerStats p50", lambda r: call(r, "ListContainerStats", "p50_ms"), "ms", "steady_load", None),
    ("ListContainerStats p99", lambda r: call(r, "ListContainerStats", "p99_ms"), "ms", "steady_load", ("abs", 10)),
    ("ListPodSandboxStats p50", lambda r: call(r, "ListPodSandboxStats", "p50_ms"), "ms", "steady_load", None),
    ("ListPodSandboxStats p99", lambda r: call(r, "ListPodSandboxStats", "p99_ms"), "ms", "steady_load",
     ("abs", 10)),
    ("ListPodSandbox p50", lambda r: call(r, "ListPodSandbox", "p50_ms"), "ms", "steady_load", None),
    ("ListPodSandbox p99", lambda r: call(r, "ListPodSandbox", "p99_ms"), "ms", "steady_load", ("ratio", 1.0)),
    ("ListContainers p50", lambda r: call(r, "ListContainers", "p50_ms"), "ms", "steady_load", None),
    ("ListContainers p99", lambda r: call(r, "ListContainers", "p99_ms"), "ms", "steady_load", ("ratio", 1.0)),
    ("teardown storm, 20 workers", lambda r: r["teardown_s"], "s", "teardown_load", ("ratio", 0.2)),
    ("teardown storm CPU, the runtime's whole cgroup tree", lambda r: r.get("teardown_cpu_s"), "s", "teardown_load",
     None),
]


def cni_floor(c):
    """The CNI chain's own storms against husk's (and containerd's): text
    for after the table and BENCH lines."""
    if cni is None:
        return "", []
    text, bench = [], []
    for storm, key, run_key in (("start", "add", "start_s"), ("teardown", "del", "teardown_s")):
        floor, load = cni[f"{key}_s"], cni[f"{key}_load"]
        of_husk = floor / h[run_key]
        of_peer = floor / c[run_key] if c else None
        own_cpu = h.get(run_key.replace("_s", "_cpu_s"))
        text.append(f"{key.upper()} {show(floor)} s ({show(cni[key + '_cpu_s'])} s CPU, load {load:.2f}), "
                    f"{of_husk:.2f} of husk's {storm} storm"
                    + (f" (whose cgroup tree used {show(own_cpu)} s CPU: "
                       f"{show(abs(own_cpu - cni[key + '_cpu_s']))} s "
                       f"{'more' if own_cpu >= cni[key + '_cpu_s'] else 'less'} than the chain's)" if own_cpu else "")
                    + (f", {of_peer:.2f}x containerd's" if c else ""))
        bench.append(f"BENCH|density {N} pods: the CNI chain alone, {key.upper()} storm, 20 workers (load {load:.2f})|"
                     f"{show(floor)} s|" + (f"containerd {storm} storm {show(c[run_key])} s|{show(of_peer)}|"
                                            "the floor of the 0.2x goal" if c else "-|-|-"))
    return ("The CNI chain alone (the same conflist run by bench_cni_floor.py, no runtime, "
            f"{N} network namespaces, 20 workers): " + "; ".join(text) + "."), bench


def show(v):
    return "-" if v is None else (f"{v:.2f}" if v < 10 else f"{v:.1f}")


def verdict(goal, hv, ratio):
    if goal is None or hv is None:
        return "", ""
    kind, x = goal
    if kind == "ratio":
        return f"<= {x}x", ("met" if ratio is not None and ratio <= x else "missed")
    return f"<= {x} ms", ("met" if hv <= x else "missed")


if c is None:
    print(f"{N} pods of one `sleep` container each, huskd alone (PEERS=husk); steady phase {SECONDS:.0f} s of "
          "kubelet's load (relist 1 s, stats 10 s, ContainerStatus + ExecSync `true` per pod every 10 s); CPU from "
          f"cpuacct of its cgroup tree under {CG_ROOT}; 1-minute load average of the host in each phase\n")
    print("| measure | husk | goal (issue 30) | load |")
    print("|---|---:|---|---:|")
    bench = []
    for name, get, unit, load_key, goal in ROWS:
        hv = get(h)
        goal_text, met = verdict(goal, hv, None) if goal and goal[0] == "abs" else ("", "")
        print(f"| {name} ({unit}) | {show(hv)} | {goal_text} {met} | {h[load_key]:.2f} |")
        bench.append(f"BENCH|density {N} pods, husk alone: {name} (load {h[load_key]:.2f})|{show(hv)} {unit}|-|-|"
                     + (f"{goal_text} {met}" if goal_text else "-"))
    calls = ", ".join(f"{m} {v['n']}" for m, v in sorted(h["calls"].items()))
    procs = ", ".join(f"{k} x{v['procs']} {v['pss_kib'] / 1024:.1f} MiB" for k, v in sorted(h["pss_by_comm"].items()))
    print(f"\nhusk: calls timed: {calls}; errors: {h['errors'] or 'none'}; probe ticks dropped: {h['probes_late']}; "
          f"steady phase {h['seconds']:.0f} s; PSS by process: {procs}; the driver's own CPU: {h['driver_cpu_s']:.1f} s")
    floor_text, floor_bench = cni_floor(None)
    print(f"\n{floor_text}" if floor_text else "")
    print("\n".join(bench + floor_bench))
    sys.exit(0)

print(f"{N} pods of one `sleep` container each, huskd then containerd 1.6 (runc shims), same CNI and image; "
      f"steady phase {SECONDS:.0f} s of kubelet's load (relist 1 s, stats 10 s, ContainerStatus + ExecSync "
      f"`true` per pod every 10 s); CPU from cpuacct of each runtime's cgroup tree under {CG_ROOT}; "
      "1-minute load average of the host in each phase\n")
print("| measure | husk | containerd 1.6 | husk / containerd | goal (issue 30) | load husk / containerd |")
print("|---|---:|---:|---:|---|---:|")
bench = []
for name, get, unit, load_key, goal in ROWS:
    hv, cv = get(h), get(c)
    ratio = hv / cv if hv is not None and cv else None
    goal_text, met = verdict(goal, hv, ratio)
    load = f"{h[load_key]:.2f} / {c[load_key]:.2f}"
    peer = "unimplemented" if cv is None else show(cv)
    print(f"| {name} ({unit}) | {show(hv)} | {peer} | {show(ratio)} | {goal_text} {met} | {load} |")
    bench.append(f"BENCH|density {N} pods: {name} (load {load})|{show(hv)} {unit}|"
                 f"containerd {peer}{'' if cv is None else ' ' + unit}|{show(ratio)}|"
                 + (f"{goal_text} {met}" if goal_text else "-"))
for label, r in (("husk", h), ("containerd", c)):
    calls = ", ".join(f"{m} {v['n']}" for m, v in sorted(r["calls"].items()))
    procs = ", ".join(f"{k} x{v['procs']} {v['pss_kib'] / 1024:.1f} MiB" for k, v in sorted(r["pss_by_comm"].items()))
    print(f"\n{label}: calls timed: {calls}; errors: {r['errors'] or 'none'}; probe ticks dropped "
          f"(the pod's previous probe still running): {r['probes_late']}; steady phase {r['seconds']:.0f} s; PSS by process: {procs}; "
          f"the driver's own CPU: {r['driver_cpu_s']:.1f} s")
floor_text, floor_bench = cni_floor(c)
print(f"\n{floor_text}" if floor_text else "")
print("\n".join(bench + floor_bench))
