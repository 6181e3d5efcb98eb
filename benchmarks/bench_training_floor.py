"""The floor of a training iteration: the fused training graph's shape (per iteration one task per
rank, each taking every rank's previous task) with bodies that do nothing, run by ``taskflow.run``
under ``placed`` on our own cluster, against the same graph through plain Dask (``client.get``) on
a plain ``LocalCluster``, in one run.

    python benchmarks/bench_training_floor.py [--ranks 2] [--iterations 200] [--repeats 3]

Prints milliseconds per iteration for each repeat and their median: what Dask's scheduling costs an
iteration whatever the model (the target is under 5 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import taskflow  # noqa: E402


def noop(*args):
    return 0


def graph(ranks: int, iterations: int) -> taskflow.TaskGraph:
    g = taskflow.TaskGraph("floor")
    last = [g.add_task(f"it0.w{r}", fn=noop, cost=1e-4, output_size=8, meta={"rank": r}) for r in range(ranks)]
    for t in range(1, iterations):
        last = [
            g.add_task(f"it{t}.w{r}", fn=noop, args=tuple(last), cost=1e-4, output_size=8, meta={"rank": r})
            for r in range(ranks)
        ]
    return g


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from distributed import Client, LocalCluster

    from taskflow.runtime.launch.local import local_cluster, prompt_messages

    g = graph(args.ranks, args.iterations)
    ours, plain = [], []
    with local_cluster(args.ranks, 1) as lc, Client(lc) as c:
        prompt_messages(c)
        for k in range(args.repeats + 1):
            t0 = time.perf_counter()
            taskflow.run(g, "placed", client=c, quiet=True)
            if k:  # the first warms the cluster
                ours.append((time.perf_counter() - t0) / args.iterations * 1e3)
    with (
        LocalCluster(
            n_workers=args.ranks,
            threads_per_worker=1,
            dashboard_address=None,
            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
        ) as lc,
        Client(lc) as c,
    ):
        dsk = {t: (noop, *g.predecessors(t)) for t in g.ids}
        for k in range(args.repeats + 1):
            t0 = time.perf_counter()
            c.get(dsk, [f"it{args.iterations - 1}.w{r}" for r in range(args.ranks)])
            if k:
                plain.append((time.perf_counter() - t0) / args.iterations * 1e3)
    print(
        f"{args.ranks} ranks, {args.iterations} iterations of one no-op task per rank, each taking every "
        f"rank's previous task; ms per iteration (wall, submission included):"
    )
    print(
        f"  taskflow.run, placed, our cluster: {', '.join(f'{x:.2f}' for x in ours)}; median "
        f"{statistics.median(ours):.2f}"
    )
    print(
        f"  plain Dask client.get, LocalCluster: {', '.join(f'{x:.2f}' for x in plain)}; median "
        f"{statistics.median(plain):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
