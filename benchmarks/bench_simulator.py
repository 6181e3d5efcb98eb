"""Simulator speed: a 100,000-task layered DAG on 32 workers.

    python benchmarks/bench_simulator.py [--tasks 100000] [--workers 32]

Targets on the 2-core development machine: a static HEFT plan in <= 5 s with the simple network and
<= 15 s with maxmin; work stealing <= 15 s. Prints tasks per second (Estee, the peer, simulates
about 1,000 tasks per 0.05-1.5 s on this machine). Planning time is printed apart.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import schedulers  # noqa: E402
from taskflow import Cluster, simulate  # noqa: E402
from workflows.scientific import random_layered  # noqa: E402

TARGETS = {
    ("heft", "simple"): 5.0,
    ("heft", "maxmin"): 15.0,
    ("work-stealing", "maxmin"): 15.0,
    ("work-stealing", "simple"): 15.0,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=32)
    args = ap.parse_args()
    schedulers.warm_up()
    g = random_layered(args.tasks, shape=1.0, out_degree=2, ccr=1.0, seed=1, bandwidth=1e8)
    cluster = Cluster.heterogeneous([1.0 + (i % 4) for i in range(args.workers)], bandwidth=1e8, latency=1e-4)
    t0 = time.perf_counter()
    plan = schedulers.get_scheduler("heft").schedule(g, cluster)
    print(
        f"graph: {len(g)} tasks, {g.num_edges} edges, {args.workers} workers; HEFT plan in "
        f"{time.perf_counter() - t0:.2f} s, planned makespan {plan.makespan:.1f} s"
    )
    print(f"{'scheduler':<14} {'network':<7} {'seconds':>8} {'tasks/s':>9} {'makespan':>10} {'transfers':>9}  note")
    for name, network in (
        ("heft", "simple"),
        ("heft", "maxmin"),
        ("work-stealing", "simple"),
        ("work-stealing", "maxmin"),
    ):
        t0 = time.perf_counter()
        tr = simulate(g, cluster, name, network=network, plan=plan if name == "heft" else None)
        dt = time.perf_counter() - t0
        target = TARGETS.get((name, network))
        note = f"target <= {target:g} s: {'met' if dt <= target else 'MISSED'}" if target else ""
        print(f"{name:<14} {network:<7} {dt:8.2f} {len(g) / dt:9.0f} {tr.makespan:10.1f} {tr.num_transfers:9d}  {note}")


if __name__ == "__main__":
    main()
