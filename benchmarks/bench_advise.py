"""How long the advisor takes on 1,000-task workflows over the ``aws`` catalog's CPU node types
(8 types, 3 mixed pairs: 2,216 configurations), with and without a deadline.

    python benchmarks/bench_advise.py [--tasks 1000] [--tolerance 0.02] [--schedulers heft,work-stealing]

Workflows (generated, seeded): a random layered DAG (HEFT paper generator, 1 s mean cost, about
0.1 GB per edge) and a 1000Genome-shaped workflow, each of about ``--tasks`` tasks.
Each is searched three ways: the front alone, the cheapest meeting a deadline (the front's median
makespan), the fastest within a budget (the front's median cost); plus one training job
(``--train resnet50``, 1,000 steps) over the GPU types. Prints configurations, how many were
simulated, and seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

CPU = (
    "c6i.xlarge",
    "c6i.2xlarge",
    "c6i.4xlarge",
    "c6i.8xlarge",
    "c6i.16xlarge",
    "c6in.8xlarge",
    "m6i.4xlarge",
    "r6i.4xlarge",
)


def workflows(n: int) -> dict:
    from workflows.scientific import genome_like, random_layered

    per = len(genome_like(chromosomes=1, individuals=40, populations=7))  # tasks per chromosome
    chrom = max(1, round(n / per))
    return {
        "layered": random_layered(n, ccr=0.1, mean_cost=1.0, bandwidth=1.0e9, seed=1),
        "genome-like": genome_like(chromosomes=chrom, individuals=40, populations=7, seed=1),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--schedulers", default="heft,work-stealing")
    args = ap.parse_args()
    from taskflow.advisor import Training, advise, configurations, load_catalog

    cat = load_catalog("aws")
    schedulers = args.schedulers.split(",")
    print(
        f"catalog aws: {len(configurations(cat, types=CPU))} CPU configurations; schedulers {', '.join(schedulers)}; "
        f"tolerance {args.tolerance}"
    )
    print(f"{'workflow':<14} {'tasks':>6} {'query':<10} {'simulated':>9} {'seconds':>8}  answer")
    worst = 0.0
    for name, g in workflows(args.tasks).items():
        t0 = time.perf_counter()
        front = advise(g, cat, types=CPU, schedulers=schedulers, tolerance=args.tolerance)
        runs = [("front", front, time.perf_counter() - t0)]
        mid = front.front[len(front.front) // 2]
        for query, kw in (("deadline", {"deadline": mid.time}), ("budget", {"budget": mid.cost})):
            t0 = time.perf_counter()
            a = advise(g, cat, types=CPU, schedulers=schedulers, tolerance=args.tolerance, **kw)
            runs.append((query, a, time.perf_counter() - t0))
        for query, a, secs in runs:
            worst = max(worst, secs)
            print(
                f"{name:<14} {len(g):>6} {query:<10} {a.stats['simulated']:>9} {secs:>8.1f}  {a.answer()[:90]}",
                flush=True,
            )
    t0 = time.perf_counter()
    a = advise(Training("resnet50", steps=1000, batch=64), cat, deadline=60)
    secs = time.perf_counter() - t0
    worst = max(worst, secs)
    print(
        f"{'train resnet50':<14} {'-':>6} {'deadline':<10} {a.stats['simulated']:>9} {secs:>8.1f}  "
        f"{a.answer()[:90]}  ({a.stats['configurations']} GPU configurations)"
    )
    print(f"slowest answer: {worst:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
