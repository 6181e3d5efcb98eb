"""The scheduler plugin with many workers: how long planning a large run, and re-planning it after
a worker is lost, block Dask's scheduler event loop.

    python benchmarks/bench_plugin_scale.py                      # 200 workers, 50,000 tasks, heft
    python benchmarks/bench_plugin_scale.py --workers 50 --tasks 10000 --schedulers heft,adaptive

An in-process LocalCluster (threads, one event loop for the scheduler and its workers) of
``--workers`` one-thread workers; an emulated layered graph of ``--tasks`` tasks of 20 ms on
average, run with ``taskflow.run``. A coroutine on the scheduler's event loop wakes every 5 ms and
records how late it woke: the longest lateness while the run is registered and planned, and after
one worker is closed once a tenth of the tasks are done (the plugin re-plans the unfinished part).
Target: at most 1 s each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TICK = 0.005


def measure(workers: int, tasks: int, scheduler: str) -> dict:
    """One run on a fresh in-process cluster; the longest event-loop blocks by phase, seconds."""
    import dask
    from distributed import Client, LocalCluster

    from taskflow import run
    from workflows.scientific import random_layered

    g = random_layered(
        tasks, shape=1.0, out_degree=2, ccr=0.1, seed=5, mean_cost=0.02, bandwidth=1e6, name="plugin-scale"
    )
    with dask.config.set({"distributed.scheduler.work-stealing": False}):
        lc = LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=None, memory_limit=0
        )  # one process: a per-worker share of its memory means nothing
    client = Client(lc)
    worst = {}
    phase = {"now": "idle"}
    blocks = []  # (seconds since start, lateness, phase) of every block over 0.5 s
    t_start = time.perf_counter()

    async def monitor():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            late = now - last - TICK
            worst[phase["now"]] = max(worst.get(phase["now"], 0.0), late)
            if late > 0.5:
                blocks.append((round(last - t_start, 1), round(late, 2), phase["now"]))
            last = now

    lc.loop.add_callback(monitor)
    out = {}

    def go():
        t0 = time.perf_counter()
        try:
            rep = run(g, scheduler, client=client, quiet=True, timeout=3600)
            out["replans"] = rep.replans
        except Exception as e:  # noqa: BLE001 - printed
            out["error"] = f"{type(e).__name__}: {e}"
        out["seconds"] = time.perf_counter() - t0

    try:
        phase["now"] = "plan"
        th = threading.Thread(target=go)
        th.start()
        sched = lc.scheduler
        while th.is_alive() and sum(ts.state == "memory" for ts in list(sched.tasks.values())) < tasks // 10:
            if any(ts.state == "processing" for ts in list(sched.tasks.values())):
                phase["now"] = "run"
            time.sleep(0.2)
        phase["now"] = "re-plan"
        victim = list(lc.workers.values())[len(lc.workers) // 2]
        lc.loop.add_callback(victim.close)
        time.sleep(3.0)
        phase["now"] = "run"
        while th.is_alive() and any(ts.state != "memory" for ts in list(sched.tasks.values())):
            time.sleep(0.2)
        phase["now"] = "results and report"
        th.join()
    finally:
        phase["now"] = "closing"
        client.close()
        lc.close()
    return {"worst": worst, "blocks": blocks, **out}


def main() -> None:
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)  # a lost worker's tasks, named one by one
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=50_000)
    ap.add_argument("--schedulers", default="heft")
    args = ap.parse_args()
    for scheduler in args.schedulers.split(","):
        r = measure(args.workers, args.tasks, scheduler)
        w = r["worst"]
        status = r.get("error", f"{r['seconds']:.1f} s, {r.get('replans', 0)} re-plan(s)")
        print(
            f"{scheduler:10s} {args.tasks:,} tasks on {args.workers} workers: run {status}; longest event-loop "
            f"block while planning {w.get('plan', 0):.2f} s, after the worker loss {w.get('re-plan', 0):.2f} s, "
            f"otherwise {w.get('run', 0):.2f} s, fetching results {w.get('results and report', 0):.2f} s "
            f"(target <= 1 s)",
            flush=True,
        )
        print("   blocks over 0.5 s (s since start, seconds, phase):", r["blocks"])


if __name__ == "__main__":
    main()
