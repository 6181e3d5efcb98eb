"""Training-workflow figures: how fast the generators build, and two results from the literature
re-run in the simulator.

    python benchmarks/bench_training.py [--skip-build] [--skip-tictac] [--skip-crossover]

1. Build: ``data_parallel("resnet50", workers=64, iterations=1000)`` with tree and parameter-server
   allreduce (target <= 10 s), and the ring variant's size.
2. TicTac (Hashemi et al., MLSys 2019, up to 19% more throughput): ``priority="layer-order"`` vs
   ``"none"`` on comm-bound data-parallel iterations (4 ranks; parameter server on a 5th worker with
   the TensorFlow-like barrier, and ring allreduce), max-min network, per scheduler.
3. CrossoverScheduler (Luo et al. 2021, about 20%): two identical data-parallel jobs on the same 4
   workers, interleaved in one graph (``workflows.multijob``) vs back to back (twice one job's
   makespan), per scheduler; ``placed+A-first`` gives job A's tasks priority 1 (planned first, B
   fills A's idle time; A's bytes first on the network).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import schedulers  # noqa: E402
from taskflow import Cluster, simulate  # noqa: E402
from workflows.multijob import multijob  # noqa: E402
from workflows.training import allreduce_tasks, data_parallel, model_profile  # noqa: E402

SCHEDULERS = ("placed", "heft", "work-stealing")
CROSSOVER = ("placed", "placed+A-first", "heft", "work-stealing")
MODELS = (("resnet50", 0.3e9), ("vgg16", 1.25e9), ("bert-base", 1.25e9), ("gpt2-small", 1.25e9))


def build():
    print("== build: data_parallel('resnet50', workers=64, iterations=1000) ==")
    for kind in ("tree", "ps"):
        gc.collect()
        t0 = time.perf_counter()
        g = data_parallel("resnet50", workers=64, iterations=1000, allreduce=kind)
        t1 = time.perf_counter()
        g.validate()
        t2 = time.perf_counter()
        print(
            f"{kind:<5} {len(g):>10,} tasks {g.num_edges:>10,} edges  build {t1 - t0:5.2f} s  "
            f"+ validate {t2 - t1:4.2f} s  = {t2 - t0:5.2f} s (target 10 s)"
        )
        del g
    L, N, T, B, S = len(model_profile("resnet50")), 64, 1000, 2, 4
    ring = N * L + T * (N * (S + 2 * L + 1 + B + L) + allreduce_tasks("ring", N, B))
    gc.collect()
    t0 = time.perf_counter()
    g = data_parallel("resnet50", workers=64, iterations=20, allreduce="ring")
    dt = time.perf_counter() - t0
    print(
        f"ring  {ring:>10,} tasks at 1000 iterations (2(N-1)N chunk tasks per bucket); 20 iterations "
        f"({len(g):,} tasks) build in {dt:.2f} s"
    )
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def tictac():
    print("\n== TicTac: layer-order transfer priority vs none (3 iterations, 6 buckets, maxmin) ==")
    print("throughput gain = makespan(none) / makespan(layer-order) - 1")
    gains = {s: [] for s in SCHEDULERS}
    for kind, extra in (("ps", 1), ("ring", 0)):
        for model, bw in MODELS:
            c = Cluster.homogeneous(4 + extra, bandwidth=bw)
            row = []
            for s in SCHEDULERS:
                span = {}
                for pr in ("none", "layer-order"):
                    g = data_parallel(
                        model, workers=4, iterations=3, allreduce=kind, buckets=6, priority=pr, barrier=kind == "ps"
                    )
                    span[pr] = simulate(g, c, s, network="maxmin").makespan
                gain = span["none"] / span["layer-order"] - 1
                gains[s].append(gain)
                row.append(f"{s} {span['none']:.3f}->{span['layer-order']:.3f} s {gain:+6.1%}")
            print(f"{kind:<4} {model:<10} {bw / 1e9:4.2f} GB/s  " + " | ".join(row))
    print("median gain: " + ", ".join(f"{s} {statistics.median(v):+.1%}" for s, v in gains.items()))


def crossover():
    print("\n== CrossoverScheduler: two jobs interleaved vs back to back (3 iterations, 4 buckets, maxmin) ==")
    print("gain = 2 x makespan(one job) / makespan(both in one graph) - 1")
    gains = {s: [] for s in CROSSOVER}
    for kind in ("ring", "ps"):
        for model, bw in MODELS + (("resnet50", 2.5e9), ("bert-base", 2.5e9)):
            c = Cluster.homogeneous(4, bandwidth=bw)
            job = data_parallel(model, workers=4, iterations=3, allreduce=kind, buckets=4)
            both = multijob([job, job], names=["A", "B"])
            first = multijob([job, job], names=["A", "B"], priorities=[1, 0])
            row = []
            for s in CROSSOVER:
                alone = simulate(job, c, s.split("+")[0], network="maxmin").makespan
                inter = simulate(
                    first if s.endswith("A-first") else both, c, s.split("+")[0], network="maxmin"
                ).makespan
                gain = 2 * alone / inter - 1
                gains[s].append(gain)
                row.append(f"{s} {2 * alone:.3f}->{inter:.3f} s {gain:+6.1%}")
            print(f"{kind:<4} {model:<10} {bw / 1e9:4.2f} GB/s  " + " | ".join(row))
    print("median gain: " + ", ".join(f"{s} {statistics.median(v):+.1%}" for s, v in gains.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-build", action="store_true")
    ap.add_argument("--skip-tictac", action="store_true")
    ap.add_argument("--skip-crossover", action="store_true")
    args = ap.parse_args()
    schedulers.warm_up()
    if not args.skip_build:
        build()
    if not args.skip_tictac:
        tictac()
    if not args.skip_crossover:
        crossover()


if __name__ == "__main__":
    main()
