"""How long the static schedulers take to plan large graphs of the shapes that stress a list
scheduler: independent tasks (every worker busy back to back), a layered random DAG, a fan-in and
a fan-out of one task to all others, a chain.

    python benchmarks/bench_scale.py                                     # 100,000 tasks on 1,000 workers
    python benchmarks/bench_scale.py --tasks 200000 --workers 8 --shapes fan-in,fan-out,chain

Prints one line per scheduler and shape: the plan's makespan and the seconds to plan it (the numba
kernels compiled and loaded before the clock starts), and the peak resident memory of the process.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

import schedulers
from taskflow import Cluster, TaskGraph
from taskflow.jit import compiled

SHAPES = ("independent", "layered", "one-parent", "fan-in", "fan-out", "chain")


def one_parent(n: int, layers: int = 100, seed: int = 0) -> TaskGraph:
    """``n`` tasks in ``layers`` layers (a million: 100 layers of 10,000), each task past the first
    layer with one parent in the layer before (chosen at random, seeded); costs uniform in [1, 10] s,
    1 MB on every other edge: the graph a user of a million tasks tried."""
    rng = np.random.default_rng(seed)
    width = max(1, n // layers)
    dst = np.arange(min(width, n), n)
    src = (dst // width - 1) * width + rng.integers(0, width, len(dst))
    size = np.where(np.arange(len(dst)) % 2 == 0, 1e6, 0.0)
    return TaskGraph.from_arrays(
        f"one-parent-{n}",
        [f"t{i}" for i in range(n)],
        rng.uniform(1, 10, n),
        np.zeros(n),
        src.tolist(),
        dst.tolist(),
        size.tolist(),
    )


def shape_graph(shape: str, n: int, seed: int = 0) -> TaskGraph:
    """A graph of ``n`` tasks of ``shape``: costs uniform in [1, 10] s, 1 MB on every edge (every
    other edge for ``one-parent``)."""
    if shape == "one-parent":
        return one_parent(n, seed=seed)
    if shape == "layered":
        from workflows.scientific import random_layered

        return random_layered(n, seed=seed)
    rng = np.random.default_rng(seed)
    cost = rng.uniform(1, 10, n)
    if shape == "independent":
        src, dst = [], []
    elif shape == "fan-in":
        src, dst = list(range(n - 1)), [n - 1] * (n - 1)
    elif shape == "fan-out":
        src, dst = [0] * (n - 1), list(range(1, n))
    elif shape == "chain":
        src, dst = list(range(n - 1)), list(range(1, n))
    else:
        raise SystemExit(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    return TaskGraph.from_arrays(shape, [f"t{i}" for i in range(n)], cost, np.full(n, 1e6), src, dst, [1e6] * len(src))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--shapes", default="independent,layered")
    ap.add_argument("--schedulers", default="heft,adaptive")
    args = ap.parse_args()
    cluster = Cluster.homogeneous(args.workers, bandwidth=1e8)
    names = args.schedulers.split(",")
    t0 = time.perf_counter()
    with compiled():  # load every kernel once, outside the figures
        for name in names:
            schedulers.get_scheduler(name).schedule(shape_graph("layered", 200), Cluster.homogeneous(4))
    print(f"kernels compiled or loaded in {time.perf_counter() - t0:.1f} s")
    for shape in args.shapes.split(","):
        g = shape_graph(shape, args.tasks)
        for name in names:
            t0 = time.perf_counter()
            plan = schedulers.get_scheduler(name).schedule(g, cluster)
            secs = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(
                f"{name:10s} {shape:12s} {args.tasks:>9,} tasks {args.workers:>5} workers  "
                f"makespan {plan.makespan:12.1f}  plan {secs:6.2f} s  peak RSS {peak:6.0f} MiB",
                flush=True,
            )


if __name__ == "__main__":
    main()
