"""How the simulator's time and memory grow with the graph: 10,000 to 1,000,000 tasks on 1,000
workers, max-min network, Dask-like work stealing.

    python benchmarks/bench_sim_scale.py                                   # 10k .. 1M, both shapes
    python benchmarks/bench_sim_scale.py --sizes 10000,100000 --plot sim-scale.png
    python benchmarks/bench_sim_scale.py --engine events --sizes 100000             # the Python event loop

Two shapes: ``layered`` (the HEFT paper's random layered DAG, out-degree 2, CCR 1) and ``genome``
(shaped like 1000Genome: per chromosome a fan-out of independent tasks, a fan-in, then a fan-out
per population; :func:`workflows.scientific.genome_like`). A heterogeneous cluster (speeds 1-4,
100 MB/s links, 0.1 ms latency). Each size runs in a fresh process, so its peak resident memory
is its own; the compiled kernels are loaded before the clock starts. By default the runs go through
the simulator's compiled loop (:mod:`taskflow.simulator.fastpath`); ``--engine events`` runs the
engine's Python event loop instead. Prints, per run: seconds to build the graph, seconds to
simulate, of which in the max-min rate solves (the Python event loop only: the compiled loop calls
them from compiled code), how many solves, tasks per second, the peak resident memory; ``--plot`` draws time and memory against tasks on log-log axes (needs
matplotlib).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SHAPES = ("layered", "genome")


def build(shape: str, n: int):
    """A graph of about ``n`` tasks of ``shape``."""
    from workflows.scientific import genome_like, random_layered

    if shape == "layered":
        return random_layered(n, shape=1.0, out_degree=2, ccr=1.0, seed=1, bandwidth=1e8)
    individuals, populations = 960, 19  # 1,000 tasks per chromosome
    return genome_like(max(1, round(n / (individuals + 2 + 2 * populations))), individuals, populations, seed=1)


def one(shape: str, n: int, workers: int, engine: str = "compiled") -> dict:
    """Build and simulate one graph in this process; the figures as a dict. ``engine``: the
    compiled loop (``compiled``) or the engine's Python event loop (``events``)."""
    import schedulers
    from taskflow import Cluster
    from taskflow.simulator import Simulator
    from taskflow.simulator.network import maxmin

    schedulers.warm_up()
    small = Cluster.heterogeneous([1.0, 2.0, 3.0], bandwidth=1e8)
    Simulator(build(shape, 1000), small, "work-stealing", "maxmin").run(compiled=engine == "compiled")  # kernels loaded
    solve = [0.0, 0]

    def timing(kernel):
        def timed(*args):
            t = time.perf_counter()
            try:
                return kernel(*args)
            finally:
                solve[0] += time.perf_counter() - t
                solve[1] += 1

        return timed

    # (the engine's) rate solves, each with the search for the next flow event it makes
    maxmin.MaxMinNetwork.next_time = timing(maxmin.MaxMinNetwork.next_time)
    t0 = time.perf_counter()
    g = build(shape, n)
    built = time.perf_counter() - t0
    cluster = Cluster.heterogeneous([1.0 + (i % 4) for i in range(workers)], bandwidth=1e8, latency=1e-4)
    t0 = time.perf_counter()
    sim = Simulator(g, cluster, "work-stealing", "maxmin")
    tr = sim.run(compiled=engine == "compiled")
    secs = time.perf_counter() - t0
    stats = sim.stats
    return {
        "shape": shape,
        "tasks": len(g),
        "edges": g.num_edges,
        "workers": workers,
        "engine": engine,
        "build_s": built,
        "sim_s": secs,
        "solve_s": None if engine == "compiled" else solve[0],
        "solves": stats["solves"],
        "makespan": tr.makespan,
        "transfers": tr.num_transfers,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def plot(rows, path) -> None:
    """Time and peak memory against tasks, log-log, one line per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for shape in SHAPES:
        rs = sorted((r for r in rows if r["shape"] == shape), key=lambda r: r["tasks"])
        if not rs:
            continue
        x = [r["tasks"] for r in rs]
        a.loglog(x, [r["sim_s"] for r in rs], "o-", label=f"{shape}: simulation")
        if all(r["solve_s"] is not None for r in rs):
            a.loglog(x, [r["solve_s"] for r in rs], "x--", label=f"{shape}: of which max-min solves")
        b.loglog(x, [r["peak_mib"] for r in rs], "o-", label=shape)
    a.set(xlabel="tasks", ylabel="seconds", title=f"simulating on {rows[0]['workers']} workers")
    b.set(xlabel="tasks", ylabel="peak resident MiB", title="memory")
    for ax in (a, b):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000,300000,1000000")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument(
        "--engine",
        choices=("compiled", "events"),
        default="compiled",
        help="the compiled loop (default) or the engine's Python event loop",
    )
    ap.add_argument("--plot", help="write the log-log plot here (PNG)")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # shape:tasks, run in this process
    args = ap.parse_args()
    if args.one:
        shape, n = args.one.split(":")
        print(json.dumps(one(shape, int(n), args.workers, args.engine)))
        return
    rows = []
    print(f"engine: {args.engine}")
    print(
        f"{'shape':8s} {'tasks':>10s} {'edges':>10s} {'build s':>8s} {'simulate s':>10s} {'max-min s':>9s} "
        f"{'solves':>9s} {'tasks/s':>8s} {'peak MiB':>8s}"
    )
    for shape in args.shapes.split(","):
        if shape not in SHAPES:
            raise SystemExit(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
        for n in (int(x) for x in args.sizes.split(",")):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    f"{shape}:{n}",
                    "--workers",
                    str(args.workers),
                    "--engine",
                    args.engine,
                ],
                capture_output=True,
                text=True,
            )
            if out.returncode:
                print(f"{shape:8s} {n:>10,} failed: {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            solved = "-" if r["solve_s"] is None else f"{r['solve_s']:.1f}"
            print(
                f"{shape:8s} {r['tasks']:>10,} {r['edges']:>10,} {r['build_s']:8.1f} {r['sim_s']:10.1f} "
                f"{solved:>9s} {r['solves']:>9,} {r['tasks'] / r['sim_s']:8.0f} {r['peak_mib']:8.0f}",
                flush=True,
            )
    if args.plot and rows:
        plot(rows, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
