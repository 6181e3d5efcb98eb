"""Scheduler speed: HEFT, CPOP, blevel, PEFT (and the greedy baselines) on random layered DAGs with
about two parents per task (the HEFT paper's generator, workflows.scientific.random_layered).

    python benchmarks/bench_schedulers.py               # 1k, 10k, 20k x 8 workers; 100k x 32
    python benchmarks/bench_schedulers.py --quick       # 1k and 10k only

Targets on the 2-core development machine: HEFT on 20,000 tasks x 8 workers <= 0.5 s; 100,000 x 32
<= 10 s; CPOP, blevel, PEFT within 2x HEFT. Times exclude building the graph and the cost model
(printed apart) and the one-off load of the compiled kernels. Peak memory is the process's
resident-set high-water mark after each size.
"""

from __future__ import annotations

import argparse
import os
import json
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import schedulers  # noqa: E402
from taskflow import Cluster, CostModel, save_graph  # noqa: E402
from workflows.scientific import random_layered  # noqa: E402

TARGETS = {(20_000, 8): 0.5, (100_000, 32): 10.0}


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_peer(python, g, speeds):
    """The anrg-saga package's HEFT on the same graph, in its own interpreter (peer_saga_heft.py)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.json")
        save_graph(g, path)
        out = subprocess.run(
            [
                python,
                os.path.join(os.path.dirname(__file__), "peer_saga_heft.py"),
                path,
                "--speeds",
                ",".join(map(str, speeds)),
                "--bandwidth",
                "1",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(sizes, names, repeat, peer_python=None, peer_max=2000):
    schedulers.warm_up()
    print(
        f"{'tasks':>7} {'edges':>7} {'workers':>7} {'scheduler':<10} {'seconds':>8} {'x heft':>7} "
        f"{'us/(E*W)':>9} {'makespan':>10}  note"
    )
    for v, W in sizes:
        t0 = time.perf_counter()
        g = random_layered(v, shape=1.0, out_degree=2, ccr=1.0, seed=1)
        speeds = [1.0 + (i % 4) for i in range(W)]
        cluster = Cluster.heterogeneous(speeds, bandwidth=1.0)
        g.validate()
        cost_model = CostModel(g, cluster)
        setup = time.perf_counter() - t0
        heft_t = None
        for name in names:
            sch = schedulers.get_scheduler(name)
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                plan = sch.schedule(g, cluster, cost_model=cost_model)
                best = min(best, time.perf_counter() - t)
            if name == "heft":
                heft_t = best
            plan.validate(g, cluster, cost_model=cost_model)
            ratio = f"{best / heft_t:7.2f}" if heft_t else "      -"
            note = ""
            if name == "heft" and (v, W) in TARGETS:
                target = TARGETS[(v, W)]
                note = f"target <= {target:g} s: {'met' if best <= target else 'MISSED'}"
            elif name in ("cpop", "blevel", "peft") and heft_t:
                note = "within 2x: " + ("met" if best <= 2 * heft_t else "MISSED")
            per = best / (g.num_edges * W) * 1e6
            print(
                f"{v:>7} {g.num_edges:>7} {W:>7} {name:<10} {best:8.3f} {ratio} {per:9.3f} {plan.makespan:10.1f}  {note}"
            )
        if peer_python and v <= peer_max:
            peer = run_peer(peer_python, g, speeds)
            ratio = peer["seconds"] / heft_t if heft_t else float("nan")
            print(
                f"{v:>7} {g.num_edges:>7} {W:>7} {'saga-heft':<10} {peer['seconds']:8.3f} {ratio:7.0f} "
                f"{peer['seconds'] / (g.num_edges * W) * 1e6:9.3f} {peer['makespan']:10.1f}  peer: anrg-saga HEFT"
            )
        print(f"{'':>7} (graph + cost model built in {setup:.2f} s; peak RSS {peak_rss_mib():.0f} MiB)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    ap.add_argument("--schedulers", default="heft,cpop,blevel,peft,mct,etf,minmin")
    ap.add_argument(
        "--peer-python",
        help="an interpreter with anrg-saga installed: runs its HEFT on the same graphs up to --peer-max tasks",
    )
    ap.add_argument("--peer-max", type=int, default=2000)
    args = ap.parse_args()
    sizes = (
        [(1_000, 8), (10_000, 8)]
        if args.quick
        else [(1_000, 8), (2_000, 8), (10_000, 8), (20_000, 8), (100_000, 8), (100_000, 32)]
    )
    run(sizes, args.schedulers.split(","), args.repeat, args.peer_python, args.peer_max)


if __name__ == "__main__":
    main()
