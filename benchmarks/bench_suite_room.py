"""How much room the real-workload suite leaves a scheduler on a cluster, and how far two runs of the
same thing differ there: each workload of ``taskflow bench --suite dask`` run, alternating on one
cluster, by

- ``dask``: Dask's own scheduling;
- ``again``: Dask's own scheduling once more (``again / dask`` is the runs' own spread: what a
  scheduler that changes nothing would measure);
- ``heft``: ``taskflow.use(client, "heft")``, HEFT's plan on costs learned from earlier runs;
- ``subset``: ``taskflow.use(client, "adaptive", choices=["subset"])``, Dask's own scheduling held
  to the fastest workers (those at least half as fast as the fastest, by speeds learned from
  earlier runs: on the heterogeneous cluster, the first worker alone).

    python benchmarks/bench_suite_room.py                           # heterogeneous (root), 5 runs each
    python benchmarks/bench_suite_room.py --cluster homogeneous --workloads df-merge,bag-text

Prints each workload's medians over Dask's own, then the geometric means of ``again / dask`` and of
the best of ``dask``, ``heft`` and ``subset`` per workload over ``dask`` (the room the default
scheduler, ``adaptive``, has: what choosing among its three choices per workload, knowing the answer,
would give).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SIDES = ("dask", "again", "heft", "subset")
#: what ``taskflow.use`` places each side with (None: Dask's own scheduling)
SCHEDULERS = {"heft": ("heft", {}), "subset": ("adaptive", {"choices": ["subset"]})}


def _run(client, w, folder, side) -> float:
    import taskflow

    scheduler = SCHEDULERS.get(side)
    if scheduler is not None:
        taskflow.use(client, scheduler[0], **scheduler[1])
    try:
        colls = w.build(folder)
        t0 = time.perf_counter()
        client.compute(colls, sync=True)
        return time.perf_counter() - t0
    finally:
        if scheduler is not None:
            taskflow.use(client, None)


def measure(kind: str, names, repeat: int) -> list:
    """``[(workload, {side: median seconds})]`` on one fresh cluster of ``kind``."""
    from taskflow.app.dask_suite import _Cluster, _same_shuffles_quiet
    from taskflow.app.dask_workloads import WORKLOADS

    chosen = [w for w in WORKLOADS if not names or w.name in names]
    cluster = _Cluster(kind, 2)
    out = []
    try:
        with _same_shuffles_quiet():  # Dask's P2P shuffle warns each time one runs again, as here by design
            for w in chosen:
                with tempfile.TemporaryDirectory(prefix="taskflow-room-") as folder:
                    if w.prepare is not None:
                        w.prepare(folder)
                    for side in SIDES:  # warm-up: Dask learns durations, taskflow its costs
                        _run(cluster.client, w, folder, side)
                    times = {side: [] for side in SIDES}
                    for r in range(repeat):
                        for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                            times[side].append(_run(cluster.client, w, folder, side))
                med = {side: statistics.median(v) for side, v in times.items()}
                out.append((w.name, med))
                print(
                    f"{w.name:<17} " + "  ".join(f"{s} {med[s]:.2f} ({med[s] / med['dask']:.2f})" for s in SIDES),
                    flush=True,
                )
    finally:
        cluster.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", default="heterogeneous", choices=("homogeneous", "heterogeneous"))
    ap.add_argument("--workloads", default="", help="comma-separated (default all)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    if args.cluster == "heterogeneous":
        from taskflow.testbed import cpu_limits_available

        why = cpu_limits_available()
        if why:
            print(f"heterogeneous cluster unavailable: {why}")
            return 2
    names = [n.strip() for n in args.workloads.split(",") if n.strip()]
    rows = measure(args.cluster, names, args.repeat)

    def geomean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    spread = [m["again"] / m["dask"] for _, m in rows]
    best = [min(m["dask"], m["heft"], m["subset"]) / m["dask"] for _, m in rows]
    print(
        f"{args.cluster}: Dask's own against itself geomean {geomean(spread):.3f} "
        f"(range {min(spread):.2f}-{max(spread):.2f}); best of dask, heft, subset per workload: "
        f"geomean {geomean(best):.3f} of Dask's own"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
