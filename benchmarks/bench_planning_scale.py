"""Every static scheduler's planning time against graph size and worker count: 10^4 .. 10^6 tasks
(the one-parent layered graph of ``bench_scale.py``: 100 layers) on 8 .. 1,000 workers (alike,
100 MB/s). Each point is one fresh process with a time budget (``--budget``, default 60 s); a
scheduler whose point ran past it, or whose fitted slope predicts the next point past it, is not
run at larger sizes ("-" in the table). Prints the seconds per point and the log-log slope in tasks
(at the most workers measured) and in workers (at the most tasks), and draws both.

    python benchmarks/bench_planning_scale.py                               # every static scheduler
    python benchmarks/bench_planning_scale.py --schedulers heft,adaptive --tasks 10000,100000,1000000 \\
        --workers 1000 --plot docs/img/planning-scale.png

The numba kernels are compiled (or loaded from the cache) in each process before its clock starts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))


def one_point(name: str, n: int, workers: int) -> dict:
    """Plan one graph in this process: seconds and the plan's makespan (the kernels warmed first)."""
    import resource

    import schedulers
    from bench_scale import one_parent
    from taskflow import Cluster
    from taskflow.jit import compiled

    cluster = Cluster.homogeneous(workers, bandwidth=1e8)
    with compiled():  # compile or load the kernels: small inputs would run them as Python
        schedulers.get_scheduler(name).schedule(one_parent(200), Cluster.homogeneous(4))
    g = one_parent(n)
    t0 = time.perf_counter()
    plan = schedulers.get_scheduler(name).schedule(g, cluster)
    secs = time.perf_counter() - t0
    return {
        "seconds": secs,
        "makespan": float(plan.makespan),
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def slope(points: dict) -> float | None:
    """The least-squares slope of log(seconds) against log(size) over ``points`` (size -> seconds)."""
    xs = [(math.log(k), math.log(v)) for k, v in points.items() if v and v > 0]
    if len(xs) < 2:
        return None
    mx = sum(x for x, _ in xs) / len(xs)
    my = sum(y for _, y in xs) / len(xs)
    den = sum((x - mx) ** 2 for x, _ in xs)
    return sum((x - mx) * (y - my) for x, y in xs) / den if den else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default="", help="comma list (default: every static scheduler)")
    ap.add_argument("--tasks", default="10000,100000,1000000")
    ap.add_argument("--workers", default="8,100,1000")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds a point may take")
    ap.add_argument("--plot", help="a PNG of seconds against tasks and against workers, log-log")
    ap.add_argument("--one", nargs=3, metavar=("SCHEDULER", "TASKS", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_point(args.one[0], int(args.one[1]), int(args.one[2]))))
        return
    import schedulers

    names = (
        args.schedulers.split(",")
        if args.schedulers
        else [
            n
            for n in schedulers.available("static")
            if not schedulers.scheduler_class(n).duplicates and n not in ("placed",)
        ]
    )
    sizes = sorted(int(x) for x in args.tasks.split(","))
    widths = sorted(int(x) for x in args.workers.split(","))
    results: dict = {}
    for name in names:
        for w in widths:
            done: dict = {}
            for n in sizes:
                fit = slope(done)
                if done:
                    last_n = max(done)
                    if done[last_n] is None or done[last_n] * (n / last_n) ** (fit or 1.0) > args.budget:
                        results[name, n, w] = None
                        done[n] = None
                        continue
                try:
                    out = subprocess.run(
                        [sys.executable, __file__, "--one", name, str(n), str(w)],
                        capture_output=True,
                        text=True,
                        timeout=args.budget + 60,
                    )
                    point = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
                except (subprocess.TimeoutExpired, IndexError, ValueError):
                    point = None
                secs = point["seconds"] if point else None
                if secs is not None and secs > args.budget:
                    secs = None
                results[name, n, w] = point
                done[n] = secs
                shown = f"{secs:8.2f} s  peak {point['peak_mib']:6.0f} MiB" if secs is not None else "       -"
                print(f"{name:16s} {n:>9,} tasks {w:>5} workers {shown}", flush=True)
    print()
    print(
        f"{'scheduler':16s} "
        + " ".join(f"{'slope in tasks, ' + str(w) + ' workers':>28s}" for w in widths)
        + f" {'slope in workers':>17s}"
    )
    slopes = {}
    for name in names:
        per_w = [
            slope(
                {
                    n: results[name, n, w]["seconds"]
                    for n in sizes
                    if results.get((name, n, w)) and results[name, n, w]["seconds"] <= args.budget
                }
            )
            for w in widths
        ]
        most_n = max([n for n in sizes if all(results.get((name, n, w)) for w in widths)], default=None)
        at_n = {w: results[name, most_n, w]["seconds"] for w in widths} if most_n else {}
        slopes[name] = (per_w[-1], slope(at_n))
        shown = [f"{x:28.2f}" if x is not None else f"{'-':>28s}" for x in per_w]
        b = slopes[name][1]
        print(f"{name:16s} " + " ".join(shown) + (f" {b:17.2f}" if b is not None else f" {'-':>17s}"))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        from taskflow.formats._util import save_figure

        fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
        for name in names:
            xs = [n for n in sizes if results.get((name, n, widths[-1]))]
            if xs:
                left.plot(
                    xs,
                    [results[name, n, widths[-1]]["seconds"] for n in xs],
                    marker="o",
                    label=f"{name} ({slopes[name][0]:.2f})" if slopes[name][0] is not None else name,
                )
            ws = [w for w in widths if results.get((name, sizes[0], w))]
            if ws:
                right.plot(ws, [results[name, sizes[0], w]["seconds"] for w in ws], marker="o", label=name)
        left.set(
            xscale="log",
            yscale="log",
            xlabel="tasks",
            ylabel="seconds to plan",
            title=f"on {widths[-1]} workers (legend: slope)",
        )
        right.set(xscale="log", yscale="log", xlabel="workers", ylabel="seconds to plan", title=f"{sizes[0]:,} tasks")
        left.legend(fontsize=7)
        right.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, args.plot, plt.close)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
