"""Schedulers and network models on real shaped networks (the testbed: network namespaces, veth,
bridges, tc; needs root).

    python benchmarks/bench_network.py [--reps 3] [--out taskflow-out/network] [--target 3]
                                       [--topologies uniform,two-racks] [--workflows ...] [--append]
                                       [--workers 4] [--schedulers heft,...]
    python benchmarks/bench_network.py --workers 16 --topologies racks-2,racks-4 --workflows comm-heavy \
                                       --schedulers heft,heft-contention,work-stealing --reps 1

(About 55 minutes on 2 cores with the defaults: two-rack runs of the communication-heavy workflows
take 15-45 s each. ``--append`` adds rows to an earlier run's CSV, e.g. the repetitions of one
workflow that a run did not finish.)

For each topology (``--workers``, 4 by default; ``uniform``: every link 200 Mbit/s; ``two-racks``:
the same links, the first and the second half of the workers in two racks joined by a 20 Mbit/s
link, 10:1; ``racks-2`` / ``racks-4``: 2 or 4 racks of consecutive workers, each joined to a core
switch by a 40 Mbit/s uplink and downlink), a testbed is made and this script
runs again inside its client namespace, where it

1. calibrates the cluster per worker pair (``cluster_from_dask(calibrate=True, pairs=True)``,
   speeds declared equal: the workers are alike, the network is what differs);
2. runs each workflow under heft, cpop, blevel and heft-contention (planned with that model:
   per-pair rates, and the racks with their shared uplink where calibration found them) and
   Dask's own work stealing, ``--reps`` times, in an order that rotates;
3. predicts each run with the simulator: the same plan (static schedulers) or, for Dask's own
   work stealing, the simulator's model of Dask's decisions (``dask-model``; with ``maxmin``,
   started from the state Dask's scheduler was in when the graph was submitted, as
   ``taskflow.run`` predicts it), on the same model, with the ``simple`` and the ``maxmin`` network.

Workflows (emulated: tasks sleep their cost, outputs are real byte buffers of their size):

- ``comm-heavy``: a random layered DAG, 10 tasks per worker, CCR 2 at 200 Mbit/s (HEFT paper generator);
- ``montage``: the 25-task Montage DAX shipped with the package (its runtimes and file sizes,
  compute-bound at these rates);
- ``dp-ring`` / ``dp-ps``: one iteration of data-parallel ResNet-50 training, one rank per worker, with ring
  and with parameter-server allreduce, gradients scaled so communication is twice the compute at
  200 Mbit/s.

Every workflow is scaled so HEFT's plan on the uniform model takes ``--target`` seconds. Rows go to
``network.csv``; the summary (prediction error of each network model, median and worst; makespans
per scheduler; HEFT and CPOP against work stealing) is printed and written to ``summary.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _testbed import inside_or_unavailable  # noqa: E402

from taskflow import TaskGraph  # noqa: E402
from taskflow.runtime.messages import workers_info  # noqa: E402

SCHEDULERS = ("heft", "cpop", "blevel", "heft-contention", "work-stealing")
WORKFLOWS = ("comm-heavy", "montage", "dp-ring", "dp-ps")
TOPOLOGIES = {
    "uniform": dict(topology="uniform", bandwidth="200mbit"),
    "two-racks": dict(topology="two-racks", bandwidth="200mbit", inter_rack="20mbit"),
    "racks-2": dict(topology="racks", racks=2, bandwidth="200mbit", inter_rack="40mbit"),
    "racks-4": dict(topology="racks", racks=4, bandwidth="200mbit", inter_rack="40mbit"),
}
LINK = 25e6  # bytes/s of a worker link (200 Mbit/s)
FIELDS = [
    "topology",
    "workflow",
    "tasks",
    "scheduler",
    "rep",
    "measured",
    "predicted_simple",
    "predicted_maxmin",
    "error_simple",
    "error_maxmin",
    "planned",
    "placement_fidelity",
    "transfers",
    "bytes_moved",
]


def scaled(g: TaskGraph, time_scale: float, size_scale: float, name=None) -> TaskGraph:
    """``g`` with every cost multiplied by ``time_scale`` and every size by ``size_scale``, and
    every edge carrying its producer's whole output (what Dask moves: one object per task)."""
    from taskflow.runtime.client.dask_graph import emulated_sizes

    a = g.arrays
    ids = list(a.ids)
    out = emulated_sizes(g) * size_scale
    metas = {t: g.task(t).meta for t in ids if g.task(t).meta}
    return TaskGraph.from_columns(
        name or g.name,
        ids,
        [float(c) * time_scale for c in a.cost],
        [float(s) for s in out],
        cores=[int(c) for c in a.cores],
        src=[ids[i] for i in a.src],
        dst=[ids[i] for i in a.dst],
        size=[float(out[i]) for i in a.src],
        meta=metas,
    )


def workflows(target: float, workers: int = 4) -> dict:
    """Name -> graph in real seconds and bytes for this testbed (``workers`` workers)."""
    from taskflow import Cluster, load_graph, simulate
    from workflows.samples import path
    from workflows.scientific import random_layered
    from workflows.training import data_parallel

    raw = {
        "comm-heavy": random_layered(
            10 * workers, shape=1.0, out_degree=2, ccr=2.0, seed=3, bandwidth=LINK, mean_cost=1.0
        ),
        "montage": load_graph(path("montage-dax")),
    }
    for kind in ("ring", "ps"):
        g = data_parallel("resnet50", workers=workers, iterations=1, allreduce=kind, buckets=2)
        a = g.arrays
        # gradients shrunk so the bytes take twice the compute at the link rate
        raw[f"dp-{kind}"] = scaled(g, 1.0, 2.0 * float(a.cost.sum()) * LINK / float(a.size.sum()), f"dp-{kind}")
    uniform = Cluster.heterogeneous([1] * workers, bandwidth=LINK)
    out = {}
    for name, g in raw.items():
        s = target / simulate(g, uniform, "heft", network="maxmin").makespan
        out[name] = scaled(g, s, s, name)
    return out


def inside(config: dict) -> None:
    """In the testbed's client namespace: calibrate, run, predict, append rows."""
    import dask
    from distributed import Client

    from taskflow import TaskflowWarning, get_scheduler, run, simulate
    from taskflow.runtime import cluster_from_dask

    graphs = {k: v for k, v in workflows(config["target"], config["workers"]).items() if k in config["workflows"]}
    chosen = [s for s in SCHEDULERS if s in config["schedulers"]]
    with dask.config.set({"distributed.scheduler.work-stealing": True}), Client(timeout="30s") as client:
        names = sorted(w["name"] for w in workers_info(client).values())
        t0 = time.perf_counter()
        model = cluster_from_dask(client, calibrate=True, pairs=True, speeds={n: 1.0 for n in names})
        pairs = {
            a: {b: round(model.bandwidth_between(a, b) * 8 / 1e6, 1) for b in model.ids if b != a} for a in model.ids
        }
        print(
            f"[{config['topology']}] calibrated in {time.perf_counter() - t0:.0f} s: latency "
            f"{model.latency * 1e3:.1f} ms, per-task overhead {model.task_overhead * 1e3:.1f} ms, "
            f"Mbit/s per pair {json.dumps(pairs)}",
            flush=True,
        )
        with open(config["csv"], "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            for rep in range(config["reps"]):
                for wname, g in graphs.items():
                    k = rep % len(chosen)
                    order = chosen[k:] + chosen[:k]
                    for sname in order:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", TaskflowWarning)
                            rep_ = run(g, sname, client=client, cluster=model, quiet=True, timeout=300)
                        pred = {}
                        for net in ("simple", "maxmin"):
                            if rep_.plan is not None:
                                tr = simulate(
                                    g, model, get_scheduler(sname), network=net, plan=rep_.plan, plan_order="ready"
                                )
                            else:  # Dask's own: the simulator's model of its decisions
                                tr = simulate(g, model, get_scheduler("dask-model"), network=net)
                            pred[net] = tr.makespan
                        if rep_.plan is None:  # with max-min, from the state Dask's scheduler was in
                            pred["maxmin"] = rep_.predicted_makespan
                        m = rep_.measured_makespan
                        row = {
                            "topology": config["topology"],
                            "workflow": wname,
                            "tasks": len(g),
                            "scheduler": sname,
                            "rep": rep,
                            "measured": m,
                            "predicted_simple": pred["simple"],
                            "predicted_maxmin": pred["maxmin"],
                            "error_simple": (pred["simple"] - m) / m,
                            "error_maxmin": (pred["maxmin"] - m) / m,
                            "planned": rep_.plan.makespan if rep_.plan is not None else "",
                            "placement_fidelity": rep_.placement_fidelity if rep_.plan is not None else "",
                            "transfers": len(rep_.trace.transfers),
                            "bytes_moved": sum(t.bytes for t in rep_.trace.transfers),
                        }
                        writer.writerow(row)
                        f.flush()
                        print(
                            f"[{config['topology']}] rep {rep} {wname:<10} {sname:<13} measured {m:6.2f} s, "
                            f"simple {pred['simple']:6.2f} s, maxmin {pred['maxmin']:6.2f} s, "
                            f"{row['bytes_moved'] / 1e6:7.1f} MB moved",
                            flush=True,
                        )


def summary(rows: list) -> str:
    """The tables of the results."""

    def pct(x):
        return f"{100 * x:+.1f}%"

    out = [
        "## Prediction error of each network model (predicted - measured) / measured",
        "",
        "| topology | runs | simple: median abs | simple: worst | maxmin: median abs | maxmin: worst |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def line(label, rs):
        es = [float(r["error_simple"]) for r in rs]
        em = [float(r["error_maxmin"]) for r in rs]
        return (
            f"| {label} | {len(rs)} | {100 * statistics.median(map(abs, es)):.1f}% | "
            f"{pct(max(es, key=abs))} | {100 * statistics.median(map(abs, em)):.1f}% | {pct(max(em, key=abs))} |"
        )

    for topo in sorted({r["topology"] for r in rows}) + ["all"]:
        out.append(line(topo, [r for r in rows if topo in ("all", r["topology"])]))
    out += [
        "",
        "The same by scheduler (static plans are predicted by carrying out the plan; Dask's own work "
        "stealing by the simulator's model of Dask's decisions, dask-model):",
        "",
        "| scheduler | runs | simple: median abs | simple: worst | maxmin: median abs | maxmin: worst |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in SCHEDULERS:
        rs = [r for r in rows if r["scheduler"] == s]
        if rs:
            out.append(line(s, rs))
    out += [
        "",
        "## Measured makespan (median of the repetitions, seconds); the shortest in bold",
        "",
        "| topology | workflow | " + " | ".join(SCHEDULERS) + " | HEFT or CPOP vs work stealing "
        "| heft-contention vs work stealing |",
        "|---|---|" + "---:|" * len(SCHEDULERS) + "---:|---:|",
    ]
    for topo in sorted({r["topology"] for r in rows}):
        for wf in [w for w in WORKFLOWS if any(r["workflow"] == w for r in rows)]:
            med = {}
            for s in SCHEDULERS:
                xs = [
                    float(r["measured"])
                    for r in rows
                    if (r["topology"], r["workflow"], r["scheduler"]) == (topo, wf, s)
                ]
                med[s] = statistics.median(xs) if xs else float("nan")
            best = min(med.values())
            cells = [f"**{v:.2f}**" if v == best else f"{v:.2f}" for v in med.values()]
            static = min(med["heft"], med["cpop"])
            ws = med["work-stealing"]
            out.append(
                f"| {topo} | {wf} | " + " | ".join(cells) + f" | {100 * (ws - static) / ws:+.0f}% shorter "
                f"| {100 * (ws - med['heft-contention']) / ws:+.0f}% shorter |"
            )
    out += ["", "(HEFT or CPOP: the shorter of the two; every static scheduler planned with the calibrated model)"]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="taskflow-out/network")
    ap.add_argument("--target", type=float, default=3.0, help="seconds of HEFT's plan on the uniform model")
    ap.add_argument("--topologies", default="uniform,two-racks", help=f"of {', '.join(TOPOLOGIES)}")
    ap.add_argument("--workflows", default=",".join(WORKFLOWS))
    ap.add_argument("--append", action="store_true", help="add to the rows already in OUT/network.csv")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--inside", help=argparse.SUPPRESS)
    args = ap.parse_args()
    status = inside_or_unavailable(args, "bench_network", inside)
    if status is not None:
        return status
    from taskflow.testbed import Testbed

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "network.csv"
    if not (args.append and path.exists()):
        with open(path, "w", newline="") as f:
            csv.DictWriter(f, fieldnames=FIELDS).writeheader()
    t0 = time.perf_counter()
    for topo in args.topologies.split(","):
        with Testbed(workers=args.workers, timeout=180, **TOPOLOGIES[topo]) as tb:
            print(tb.describe(), flush=True)
            config = {
                "topology": topo,
                "reps": args.reps,
                "target": args.target,
                "csv": str(path.resolve()),
                "workflows": args.workflows.split(","),
                "workers": args.workers,
                "schedulers": args.schedulers.split(","),
            }
            p = tb.exec(
                [sys.executable, os.path.abspath(__file__), "--inside", json.dumps(config)],
                timeout=3600,
                stdout=None,
                stderr=None,
            )
            if p.returncode != 0:
                print(f"bench_network: the runs on {topo} failed (exit {p.returncode})", file=sys.stderr)
                return 1
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    text = summary(rows)
    (out / "summary.md").write_text(text + "\n")
    print(text)
    print(f"\n{len(rows)} runs in {time.perf_counter() - t0:.0f} s; rows in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
