"""How fast the job-level simulator replays a shared cluster's trace: 10,000 jobs on 1,024 workers.

    python benchmarks/bench_jobs.py                                 # every job scheduler, load 0.9 and 1.5
    python benchmarks/bench_jobs.py --jobs 20000 --scheduler las,gittins --loads 2

The trace is :func:`taskflow.jobs.generate_trace`'s (seeded: log-normal durations of median 20
minutes, Philly's sizes, Poisson arrivals offering ``load`` times the workers) on a cluster of 8
racks x 16 nodes x 8 workers. Each scheduler runs in a fresh process (its peak resident memory is
its own) on one core; the clock covers the simulation and its metrics, not the trace's generation.
Prints per run: seconds, peak resident MiB, events the scheduler decided on, preemptions,
and the average job completion time (so that a faster run is seen to be the same run). The target:
at most 60 s per scheduler.
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

DEFAULT = "fifo,sjf,srtf,las,gittins,gandiva"


def one(name: str, jobs: int, load: float, seed: int) -> dict:
    """Simulate ``name`` on the generated trace in this process; the figures as a dict."""
    from taskflow.app.jobs import job_scheduler_for
    from taskflow.jobs import JobCluster, generate_trace, simulate_jobs

    cluster = JobCluster(8, 16, 8)
    trace = generate_trace(jobs, seed, cluster, load=load)
    scheduler = job_scheduler_for(name, trace)
    calls = [0]
    decide = scheduler.decide

    def counted(event, view):
        calls[0] += 1
        return decide(event, view)

    scheduler.decide = counted
    t0 = time.perf_counter()
    run = simulate_jobs(trace, cluster, scheduler)
    m = run.metrics()
    seconds = time.perf_counter() - t0
    return {
        "scheduler": name,
        "jobs": jobs,
        "load": load,
        "seconds": seconds,
        "decisions": calls[0],
        "preemptions": m["preemptions"],
        "avg_jct": m["avg_jct"],
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--loads", default="0.9,1.5", help="offered loads, a comma list (default 0.9,1.5)")
    ap.add_argument("--scheduler", default=DEFAULT, help=f"a comma list (default {DEFAULT})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # NAME:LOAD, in a fresh process
    args = ap.parse_args()
    if args.one:
        name, load = args.one.split(":")
        print(json.dumps(one(name, args.jobs, float(load), args.seed)))
        return
    print(f"{args.jobs:,} jobs on 1,024 workers (8 racks x 16 nodes x 8), seed {args.seed}")
    print(
        f"{'scheduler':<10} {'load':>5} {'seconds':>8} {'peak MiB':>9} {'decisions':>10} {'preempt.':>9} "
        f"{'avg JCT s':>11}"
    )
    worst = 0.0
    for load in args.loads.split(","):
        for name in args.scheduler.split(","):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--one",
                    f"{name}:{load}",
                    "--jobs",
                    str(args.jobs),
                    "--seed",
                    str(args.seed),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.splitlines()[-1])
            worst = max(worst, r["seconds"])
            print(
                f"{name:<10} {r['load']:>5} {r['seconds']:>8.1f} {r['peak_mib']:>9.0f} {r['decisions']:>10,} "
                f"{r['preemptions']:>9,} {r['avg_jct']:>11,.0f}",
                flush=True,
            )
    print(f"slowest: {worst:.1f} s (target: at most 60 s)")


if __name__ == "__main__":
    main()
