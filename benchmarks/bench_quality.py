"""Schedule quality: mean SLR per scheduler on the HEFT paper's random graphs and on real traces.

    python benchmarks/bench_quality.py [--seeds 3] [--markdown out.md]

* Random layered DAGs (workflows.scientific.random_layered, the generator of Topcuoglu et al. 2002):
  v in {100, 1000}, CCR in {0.1, 1, 10}, heterogeneity beta in {0.1, 1}, shape in {0.5, 1, 2},
  out-degree 3, ``--seeds`` seeds; exact per-worker costs (the paper's cost matrix) on 4 and 8
  workers, bandwidth 1 (sizes are time units), no latency.
* The WfCommons traces in ../shared/data/wfinstances on 4 and 8 heterogeneous workers (speeds
  1, 1.5, 2, 3, repeated), 125 MB/s links (1 Gbit/s), 1 ms latency.

SLR = makespan / critical path at each task's fastest duration (lower is better; >= 1).

    python benchmarks/bench_quality.py --real [--schedulers heft,cpop,blevel,peft,heft-search] [--budget N]
                                              [--exact-budget UNITS] [--prove SECONDS]

The real-workflow family instead: every real workflow in ../shared/data (the WfCommons traces, the
Pegasus DAX files, the Kasahara STG graph, Estee's graph set, the HEFT paper's example), or the
copies shipped in the package when that folder is absent, each on two heterogeneous clusters
(4 workers at speeds 1, 2, 3, 4 and 8 workers at 1, 1, 2, 2, 3, 3, 4, 4; 125 MB/s, 1 ms; as many
cores each as the graph's largest task needs), and
the HEFT paper's graph also on its own three processors with their unrelated costs. Printed:
geometric-mean makespan / HEFT's per family and overall, wins / ties / losses against HEFT, time
per instance; and each scheduler's time on a 20,000-task random DAG on 8 workers against HEFT's.
With ``optimal`` among the schedulers (it is by default) a second bound is printed: per instance the
larger of the graph's lower bound and the bound CP-SAT proved, so that the geometric mean says how
short any schedule that runs each task once can be on this family. ``--prove SECONDS`` searches each
instance that ``optimal`` did not prove again, with 8 search workers for that long, for a tighter
bound (a bound holds however it was found; how tight it gets depends on the machine).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import schedulers  # noqa: E402
from taskflow import Cluster, CostModel, load_graph, lower_bound  # noqa: E402
from workflows.scientific import random_layered  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def instances(seeds: int):
    for v, ccr, beta, shape, W, seed in itertools.product(
        (100, 1000), (0.1, 1.0, 10.0), (0.1, 1.0), (0.5, 1.0, 2.0), (4, 8), range(seeds)
    ):
        cluster = Cluster.homogeneous(W, bandwidth=1.0, prefix="p")
        g = random_layered(
            v, shape=shape, out_degree=3, ccr=ccr, beta=beta, workers=cluster.ids, seed=seed * 1000 + v + W
        )
        yield f"random v={v}", f"ccr={ccr:g}", g, cluster
    for path in sorted((SHARED / "wfinstances").glob("*.json")):
        g = load_graph(path)
        for W in (4, 8):
            speeds = [(1.0, 1.5, 2.0, 3.0)[i % 4] for i in range(W)]
            yield "wfcommons", path.stem.split("-")[0], g, Cluster.heterogeneous(speeds, bandwidth=125e6, latency=1e-3)


def real_instances():
    """(family, label, graph, cluster) of every real workflow, two heterogeneous clusters each."""
    from taskflow import load_cluster, load_graphs
    from workflows.samples import path as sample

    files = []
    if SHARED.exists():
        for family, sub, pattern in (
            ("wfcommons", "wfinstances", "*.json"),
            ("dax", "dax", "*.xml"),
            ("stg", "stg", "*.stg"),
            ("estee", "estee", "*.zip"),
            ("heft-paper", "native", "*.graph.json"),
        ):
            files += [(family, p) for p in sorted((SHARED / sub).glob(pattern))]
    else:  # the copies shipped in the package
        files = [
            ("wfcommons", sample("montage")),
            ("wfcommons", sample("epigenomics")),
            ("dax", sample("montage-dax")),
            ("estee", sample("estee-elementary")),
            ("heft-paper", sample("heft-paper")),
        ]

    def clusters(cores):
        return [
            Cluster.heterogeneous([1, 2, 3, 4], cores=cores, bandwidth=125e6, latency=1e-3, name="speeds 1-4 x4"),
            Cluster.heterogeneous(
                [1, 1, 2, 2, 3, 3, 4, 4], cores=cores, bandwidth=125e6, latency=1e-3, name="speeds 1-4 x8"
            ),
        ]

    for family, p in files:
        for g in load_graphs(p):
            if family == "heft-paper":  # its own unrelated machines, and the speed clusters on mean costs
                yield family, g.name, g, load_cluster(str(p).replace(".graph.json", ".cluster.json"))
                g = g.with_costs(costs={t: None for t in g.ids})
            for c in clusters(max(1, int(g.arrays.cores.max()))):  # workers big enough for every task
                yield family, g.name, g, c


def _options(name, budget, exact_budget=None):
    if name == "heft-search" and budget:
        return {"budget": budget}
    if name == "optimal" and exact_budget:
        return {"budget": exact_budget}
    return {}


#: the reference row of :func:`real_main`: HEFT on the same cluster with every transfer free
FREE = "heft, transfers free"
#: the bound row for schedules with task copies (the proven bound with every transfer free)
COPIES = "bound with copies"


def real_main(names, budget=None, exact_budget=None, prove=None) -> None:
    """The real-workflow family: makespan / HEFT's, win/tie/loss, time; and time at 20,000 tasks."""
    import math
    import statistics

    ratio = defaultdict(lambda: defaultdict(list))  # family -> scheduler -> [makespan / heft]
    secs = defaultdict(list)
    wtl = defaultdict(lambda: [0, 0, 0])
    status = defaultdict(int)
    proving = []
    count = 0
    for family, label, g, cluster in real_instances():
        cost_model = CostModel(g, cluster)
        mk = {}
        for name in names:
            t0 = time.perf_counter()
            s = schedulers.get_scheduler(name, seed=0, **_options(name, budget, exact_budget)).schedule(
                g, cluster, cost_model=cost_model
            )
            secs[name].append(time.perf_counter() - t0)
            s.validate(g, cluster, cost_model=cost_model)
            mk[name] = s.makespan
            if name == "optimal":
                if prove and s.extra["status"] == "feasible":  # more time, for the bound alone
                    t1 = time.perf_counter()
                    longer = (
                        schedulers.get_scheduler("optimal", seed=0, budget=1e9, seconds=prove, threads=8)
                        .schedule(g, cluster, cost_model=cost_model)
                        .validate(g, cluster, cost_model=cost_model)
                    )
                    proving.append(time.perf_counter() - t1)
                    s = longer if longer.extra["lower_bound"] > s.extra["lower_bound"] else s
                    if longer.extra["status"] == "optimal":
                        s.extra["status"] = "optimal after --prove"
                status[s.extra["status"]] += 1
                proved = s.extra["lower_bound"]
        mk["lower bound"] = lower_bound(g, cluster)
        # a reference, not a bound: HEFT's own rule with every transfer free (what task copies could
        # save at most, if they removed every transfer of HEFT's plan)
        free = Cluster(cluster.workers, bandwidth=float("inf"), latency=0.0, name=cluster.name)
        mk[FREE] = schedulers.get_scheduler("heft").schedule(g, free).makespan
        bounds = ["lower bound", FREE]
        if "optimal" in names:  # the larger of the two bounds: no schedule is shorter than either
            mk["proven bound"] = max(mk["lower bound"], proved)
            bounds.append("proven bound")
            # copies (task duplication) can at most make every transfer free: no schedule, copies or
            # not, is shorter than the optimum with free transfers, whose bound optimal proves too
            loose = schedulers.get_scheduler("optimal", seed=0, **_options("optimal", budget, exact_budget)).schedule(
                g, free
            )
            mk[COPIES] = max(mk["lower bound"], loose.extra["lower_bound"])
            bounds.append(COPIES)
        for name in [*names, *bounds]:
            r = mk[name] / mk["heft"] if mk["heft"] > 0 else 1.0
            ratio[family][name].append(r)
            wtl[name][0 if r < 1 - 1e-9 else (1 if r <= 1 + 1e-9 else 2)] += 1
        count += 1

    def geo(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    fams = list(ratio)
    lines = [
        f"{count} instances (real workflows x clusters) x {len(names)} schedulers",
        "",
        "Geometric-mean makespan / HEFT's (lower is better):",
        "",
        "| scheduler | "
        + " | ".join(f"{f} (n={len(ratio[f]['heft'])})" for f in fams)
        + " | all | wins / ties / losses vs HEFT | mean time per instance |",
        "|---" * (len(fams) + 4) + "|",
    ]
    bounds = ["lower bound", "proven bound", COPIES] if "optimal" in names else ["lower bound"]
    for n in [*names, FREE, *bounds]:
        every = sum((ratio[f][n] for f in fams), [])
        if n == FREE:
            lines.append(
                f"| *{n}* | "
                + " | ".join(f"{geo(ratio[f][n]):.4f}" for f in fams)
                + f" | {geo(every):.4f} | (a reference, not a bound) | |"
            )
            continue
        if n in bounds:
            which = (
                "with copies or without"
                if n == COPIES
                else "that runs each task once"
                if n == "proven bound"
                else "at all"
            )
            lines.append(
                f"| *{n}* | "
                + " | ".join(f"{geo(ratio[f][n]):.4f}" for f in fams)
                + f" | {geo(every):.4f} | (no schedule {which} is shorter) | |"
            )
            continue
        lines.append(
            f"| {n} | " + " | ".join(f"{geo(ratio[f][n]):.4f}" for f in fams) + f" | **{geo(every):.4f}** | "
            f"{wtl[n][0]} / {wtl[n][1]} / {wtl[n][2]} | {1e3 * statistics.mean(secs[n]):.1f} ms |"
        )
    searching = ("heft-search", "optimal")
    best = [
        geo(
            [
                min(ratio[f][n][k] for n in names if n not in searching)
                for f in fams
                for k in range(len(ratio[f]["heft"]))
            ]
        )
    ]
    lines += ["", f"Best of the other schedulers per instance (neither {' nor '.join(searching)}): {best[0]:.4f}", ""]
    if "optimal" in names:
        every = sum((ratio[f]["proven bound"] for f in fams), [])
        dup = sum((ratio[f][COPIES] for f in fams), [])
        lines += [
            f"optimal: {', '.join(f'{k} {v}' for k, v in sorted(status.items()))} (of {count} instances). "
            f"No schedule that runs each task once is shorter than {geo(every):.4f} x HEFT on the "
            f"geometric mean of this family (per instance the larger of the graph's lower bound and the "
            f"bound optimal proved"
            + (
                f"; --prove {prove:g}: {len(proving)} instances searched again, {sum(proving):.0f} s in all"
                if prove
                else ""
            )
            + f"); none with task copies either is shorter than {geo(dup):.4f} x HEFT "
            "(the same, with every transfer free: copies can at most save every transfer).",
            "",
        ]
    g = random_layered(20_000, shape=1.0, out_degree=3, ccr=1.0, beta=1.0, seed=7)
    c = Cluster.heterogeneous([1, 1.5, 2, 3, 1, 1.5, 2, 3], bandwidth=1.0)
    cost_model = CostModel(g, c)
    times = {}
    for name in names:
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            s = schedulers.get_scheduler(name, seed=0, **_options(name, budget, exact_budget)).schedule(
                g, c, cost_model=cost_model
            )
            runs.append(time.perf_counter() - t0)
        times[name] = statistics.median(runs)
        if s.extra.get("status") == "too large":
            times[name + " (too large to model: HEFT's plan)"] = times.pop(name)
    lines.append(
        "Time on a 20,000-task random DAG, 8 workers (median of 3): "
        + ", ".join(f"{n} {t:.3f} s ({t / times['heft']:.1f}x HEFT)" for n, t in times.items())
    )
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--schedulers", default=",".join(schedulers.available("static")))
    ap.add_argument("--markdown", help="also write the tables to this file")
    ap.add_argument("--real", action="store_true", help="the real-workflow family against HEFT")
    ap.add_argument("--budget", type=int, help="heft-search's budget in evaluations (default: its own)")
    ap.add_argument(
        "--prove",
        type=float,
        metavar="SECONDS",
        help="search each instance optimal did not prove again for this long (8 search workers), for a tighter bound",
    )
    ap.add_argument(
        "--exact-budget",
        type=float,
        help="optimal's budget (CP-SAT deterministic time, about seconds; default: its own)",
    )
    args = ap.parse_args()
    names = args.schedulers.split(",")
    schedulers.warm_up()
    if args.real:
        if "heft" not in names:
            names = ["heft", *names]
        real_main(names, args.budget, args.exact_budget, args.prove)
        return
    slr = defaultdict(lambda: defaultdict(list))  # family -> scheduler -> [slr]
    by_ccr = defaultdict(lambda: defaultdict(list))
    to_lb = defaultdict(list)  # scheduler -> [makespan / lower bound]
    pair = defaultdict(lambda: [0, 0, 0])  # (a, b) -> wins of a, ties, losses
    t0 = time.perf_counter()
    count = 0
    for family, sub, g, cluster in instances(args.seeds):
        cost_model = CostModel(g, cluster)
        mk = {}
        for name in names:
            s = schedulers.get_scheduler(name, seed=0).schedule(g, cluster, cost_model=cost_model)
            s.validate(g, cluster, cost_model=cost_model)
            m = s.metrics(g, cluster, cost_model=cost_model)
            slr[family][name].append(m["slr"])
            if family.startswith("random"):
                by_ccr[sub][name].append(m["slr"])
            mk[name] = m["makespan"]
            to_lb[name].append(m["makespan"] / m["lower_bound"])
        for a, b in (("heft", "cpop"), ("peft", "heft"), ("heft", "blevel")):
            if a in mk and b in mk:
                d = mk[a] - mk[b]
                pair[(a, b)][0 if d < -1e-9 * mk[b] else (1 if abs(d) <= 1e-9 * mk[b] else 2)] += 1
        count += 1
    elapsed = time.perf_counter() - t0
    lines = [f"{count} instances x {len(names)} schedulers in {elapsed:.0f} s", ""]
    fams = list(slr)
    lines.append("| scheduler | " + " | ".join(f"{f} (n={len(slr[f][names[0]])})" for f in fams) + " | all |")
    lines.append("|---" * (len(fams) + 2) + "|")
    overall = {n: sum((slr[f][n] for f in fams), []) for n in names}
    for n in sorted(names, key=lambda n: sum(overall[n]) / len(overall[n])):
        cells = [f"{sum(slr[f][n]) / len(slr[f][n]):.3f}" for f in fams]
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {sum(overall[n]) / len(overall[n]):.3f} |")
    lines += [
        "",
        "Mean SLR of the random graphs by CCR:",
        "",
        "| scheduler | " + " | ".join(by_ccr) + " |",
        "|---" * (len(by_ccr) + 1) + "|",
    ]
    for n in sorted(names, key=lambda n: sum(overall[n]) / len(overall[n])):
        lines.append(f"| {n} | " + " | ".join(f"{sum(by_ccr[c][n]) / len(by_ccr[c][n]):.3f}" for c in by_ccr) + " |")
    lines += [
        "",
        "Mean makespan / lower bound (max of critical path and work bound), all instances:",
        "",
        "| scheduler | makespan / lower bound |",
        "|---|---|",
    ]
    for n in sorted(names, key=lambda n: sum(to_lb[n]) / len(to_lb[n])):
        lines.append(f"| {n} | {sum(to_lb[n]) / len(to_lb[n]):.3f} |")
    lines += ["", "Head to head (shorter makespan wins; all instances):", ""]
    for (a, b), (w, t, l) in pair.items():
        lines.append(f"- {a} vs {b}: {w} wins, {t} ties, {l} losses")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
