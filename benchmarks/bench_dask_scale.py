"""A large graph through Dask: plain Dask (``client.get``), ``taskflow.run`` (HEFT, planned inside
Dask's scheduler) and ``taskflow.use`` (the adaptive scheduler placing a client's graphs), on
``--workers`` one-thread workers; each mode in a fresh process with a fresh cluster whose
scheduler runs in a process of its own (``SubprocessCluster``), so the client's memory is the
client's alone.

    python benchmarks/bench_dask_scale.py                         # 100,000 tasks on 8 workers
    python benchmarks/bench_dask_scale.py --tasks 10000 --modes dask,use

Per mode: the wall time from submission to the last result, the client process's peak resident
memory, and the longest time Dask's scheduler's event loop was blocked (a coroutine on it wakes
every 5 ms; its lateness), while the graph ran. The graph: the one-parent layered graph of
``bench_scale.py`` (100 layers), every task a no-op returning None.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

MODES = ("dask", "run", "use")


def noop(*args):
    """A task that does nothing with its inputs."""
    return None


def _start_monitor(dask_scheduler=None):
    """On Dask's scheduler: a coroutine that wakes every 5 ms and keeps its worst lateness."""
    import asyncio

    state = {"worst": 0.0}

    async def tick():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            state["worst"] = max(state["worst"], now - last - 0.005)
            last = now

    dask_scheduler._bench_block = state
    dask_scheduler._bench_task = asyncio.get_running_loop().create_task(tick())
    return True


def _worst(reset: bool = False, dask_scheduler=None) -> float:
    state = dask_scheduler._bench_block
    out = state["worst"]
    if reset:
        state["worst"] = 0.0
    return out


def one_mode(mode: str, n: int, workers: int) -> dict:
    """Run the graph once under ``mode`` in this process; its figures."""
    import logging
    import resource

    from distributed import Client
    from distributed.deploy.subprocess import SubprocessCluster

    import taskflow
    from bench_scale import one_parent

    logging.getLogger("distributed").setLevel(logging.ERROR)
    g = one_parent(n)
    a = g.arrays
    ids = g.ids
    preds = [[ids[p] for p in a.pred_idx[a.pred_ptr[i] : a.pred_ptr[i + 1]].tolist()] for i in range(n)]
    dsk = {ids[i]: (noop, *preds[i]) for i in range(n)}
    sinks = [ids[i] for i in range(n) if a.succ_ptr[i + 1] == a.succ_ptr[i]]
    with (
        SubprocessCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        client.wait_for_workers(workers, timeout=120)
        client.run_on_scheduler(_start_monitor)
        client.run_on_scheduler(_worst, True)
        t0 = time.perf_counter()
        if mode == "dask":
            client.get(dsk, sinks)
        elif mode == "use":
            taskflow.use(client, "adaptive")
            client.get(dsk, sinks)
        else:
            cheap = g.with_costs(cost={t: 1e-4 for t in ids})
            taskflow.run(cheap, "heft", client=client, quiet=True, time_scale=1e-3, size_scale=1e-6, timeout=7200)
        secs = time.perf_counter() - t0
        block = client.run_on_scheduler(_worst)
    return {
        "mode": mode,
        "seconds": secs,
        "client_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "longest_block": block,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--one", nargs=3, metavar=("MODE", "TASKS", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_mode(args.one[0], int(args.one[1]), int(args.one[2]))))
        return
    rows = []
    for mode in args.modes.split(","):
        out = subprocess.run(
            [sys.executable, __file__, "--one", mode, str(args.tasks), str(args.workers)],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            print(f"{mode}: failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}", flush=True)
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(
            f"{mode:5s} {args.tasks:,} tasks on {args.workers} workers: {r['seconds']:7.1f} s "
            f"({args.tasks / r['seconds']:6.0f} tasks/s), client peak {r['client_peak_mib']:6.0f} MiB, "
            f"longest event-loop block {r['longest_block']:.2f} s",
            flush=True,
        )
    base = next((r for r in rows if r["mode"] == "dask"), None)
    if base:
        for r in rows:
            if r is not base:
                print(f"{r['mode']} / dask: {r['seconds'] / base['seconds']:.2f}x the time")


if __name__ == "__main__":
    main()
