"""The papers' placement comparisons in the job simulator: contention-aware against oblivious
placement on narrow uplinks, interference-aware packing against consolidation, and Gandiva's
time-slicing against first come first served.

    python benchmarks/bench_placement.py
    python benchmarks/bench_placement.py --jobs 400 --seed 3

1. **Shared uplinks** (Wang, Shi, Chu et al.): a generated trace of ResNet-50, VGG-16 and BERT-base
   jobs (Philly's sizes, up to 16 workers) on 4 racks x 2 nodes x 4 workers, each worker's link 100
   Gb/s and each rack's uplink ``--uplink`` Gb/s; a job's iteration time on its racks and share of
   the uplinks from its own training task graph on the max-min network. FIFO under ``spread``
   (oblivious: every job over many nodes and racks), ``consolidated`` and ``contention-aware``.
2. **Interference** (Gandiva, Section 3.3): the same sizes on 16 nodes of 4 workers, models that
   slow each other on a node by the table below (a job beside its own kind keeps 0.6 of its speed,
   beside the lighter one 0.9); FIFO consolidated (oblivious) against FIFO interference-aware and
   Gandiva (time-slicing and packing).
3. **Time-slicing** on a loaded heavy-tailed trace: FIFO, Gandiva, LAS and SRTF (the oracle).
4. **Crossover** (Luo et al. 2021): the same loaded sizes and models on 16 nodes x 4 workers with
   10 Gb/s links, each model's share of an iteration spent communicating from its training graph;
   FIFO and LAS without and with Crossover.

Prints a table per comparison: average and 95th percentile job completion time, makespan,
preemptions; and the seconds each simulation took.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

#: a job beside one of the other model on its node keeps this share of its speed
TABLE = {
    ("resnet50", "resnet50"): 0.6,
    ("vgg16", "vgg16"): 0.6,
    ("bert-base", "bert-base"): 0.6,
    ("resnet50", "vgg16"): 0.7,
    ("vgg16", "resnet50"): 0.7,
    ("resnet50", "bert-base"): 0.9,
    ("bert-base", "resnet50"): 0.9,
    ("vgg16", "bert-base"): 0.9,
    ("bert-base", "vgg16"): 0.8,
}
MODELS = ("resnet50", "vgg16", "bert-base")
SIZES = {1: 0.4, 2: 0.2, 4: 0.2, 8: 0.15, 16: 0.05}


def table(rows: list) -> str:
    head = f"{'run':<34} {'avg JCT':>9} {'p95 JCT':>9} {'makespan':>9} {'preempt.':>8} {'seconds':>8}"
    lines = [head, "-" * len(head)]
    for label, run, seconds in rows:
        m = run.metrics()
        lines.append(
            f"{label:<34} {m['avg_jct']:>9,.0f} {m['p95_jct']:>9,.0f} {m['makespan']:>9,.0f} "
            f"{m['preemptions']:>8,} {seconds:>8.2f}"
        )
    return "\n".join(lines)


def timed(label, *args, **kwargs):
    from taskflow.jobs import simulate_jobs

    t = time.perf_counter()
    run = simulate_jobs(*args, **kwargs)
    assert run.violations() == [], run.violations()[:3]
    return label, run, time.perf_counter() - t


def main() -> None:
    from taskflow.jobs import Interference, JobCluster, JobNetwork, generate_trace
    from taskflow.jobscheduling import get_job_scheduler
    from taskflow.training.jobnet import comm_shares, graph_iterations

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--uplink", type=float, default=10.0, help="Gb/s of each rack's uplink (default 10)")
    ap.add_argument("--load", type=float, default=0.7, help="offered load of comparisons 1 and 2 (default 0.7)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    racks = JobCluster(4, 2, 4, uplink=args.uplink * 1.25e8, name="4 racks x 2 nodes x 4 workers")
    trace = generate_trace(
        args.jobs, args.seed, racks, load=args.load, median_duration=1800, sizes=SIZES, models=MODELS
    )
    t = time.perf_counter()
    net = JobNetwork(racks, graph_iterations(racks))
    rows = [
        timed(f"fifo {how}", trace, racks, get_job_scheduler("fifo", placement=how), network=net)
        for how in ("spread", "consolidated", "contention-aware")
    ]
    ordered = JobNetwork(racks, net.iteration, ordered=True)
    rows.append(
        timed(
            "fifo contention-aware, ordered",
            trace,
            racks,
            get_job_scheduler("fifo", placement="contention-aware"),
            network=ordered,
        )
    )
    print(
        f"1. shared uplinks: {len(trace)} jobs on {racks.name}, uplinks {args.uplink:g} Gb/s "
        f"({time.perf_counter() - t:.1f} s with the task-graph timings)"
    )
    print(table(rows), flush=True)

    nodes = JobCluster(1, 16, 4, name="16 nodes x 4 workers")
    trace = generate_trace(
        args.jobs, args.seed + 1, nodes, load=args.load, median_duration=1800, sizes=SIZES, models=MODELS
    )
    slow = Interference(TABLE)
    rows = [
        timed("fifo consolidated (oblivious)", trace, nodes, "fifo", interference=slow),
        timed(
            "fifo interference-aware",
            trace,
            nodes,
            get_job_scheduler("fifo", placement="interference-aware", interference=slow),
            interference=slow,
        ),
        timed(
            "gandiva (slicing, packing)",
            trace,
            nodes,
            get_job_scheduler("gandiva", interference=slow, round=600),
            interference=slow,
            restore=30,
        ),
    ]
    print(f"\n2. interference: {len(trace)} jobs on {nodes.name}")
    print(table(rows), flush=True)

    loaded = generate_trace(args.jobs, args.seed + 2, nodes, load=1.5, median_duration=1800, sizes=SIZES)
    rows = [
        timed(name, loaded, nodes, get_job_scheduler(name, **opts), restore=30)
        for name, opts in (("fifo", {}), ("gandiva", {"round": 600}), ("las", {"thresholds": (3600,)}), ("srtf", {}))
    ]
    print(f"\n3. time-slicing: {len(loaded)} jobs at load 1.5 on {nodes.name} (restore 30 s)")
    print(table(rows), flush=True)

    slow_links = JobCluster(1, 16, 4, bandwidth=1.25e9, name="16 nodes x 4 workers, 10 Gb/s links")
    comm = comm_shares(slow_links, MODELS)
    loaded = generate_trace(
        args.jobs, args.seed + 3, slow_links, load=1.5, median_duration=1800, sizes=SIZES, models=MODELS
    )
    rows = [
        timed(
            f"{name}{' + crossover' if cross else ''}",
            loaded,
            slow_links,
            get_job_scheduler(name, crossover=comm if cross else None, **opts),
            restore=30,
        )
        for name, opts in (("fifo", {}), ("las", {"thresholds": (3600,)}))
        for cross in (False, True)
    ]
    print(
        f"\n4. crossover: {len(loaded)} jobs at load 1.5 on {slow_links.name}; communication shares "
        + ", ".join(f"{m} {v:.2f}" for m, v in comm.items())
    )
    print(table(rows), flush=True)


if __name__ == "__main__":
    main()
