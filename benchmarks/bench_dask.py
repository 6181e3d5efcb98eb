"""Runtime benchmarks on a real Dask cluster, each in one run.

    python benchmarks/bench_dask.py [--tasks 2000 20000] [--big 50000] [--workers 2] [--repeat 3]
                                    [--only overhead,big,hetero,array,small] [--array N/CHUNK/WORKERS ...] [--slow 0.25]

1. Dispatch overhead: no-op tasks (a layered DAG, about 2 parents each) run by ``taskflow.run`` with
   a HEFT plan (placed inside Dask's scheduler by the plugin, task stream and transfer records read,
   every result gathered) against plain ``client.get`` of the same graph (every result gathered), a
   fresh cluster per measurement, the order rotating, medians. Target: ratio <= 1.05. A third side,
   plain ``client.get`` pinned to the placement Dask itself chose in an earlier run, shows what a
   static placement costs by itself; a fourth, plain ``client.get`` with Python's garbage collector
   held as ``taskflow.run`` holds it during a run (``frozen_heap``), what that alone is worth.
2. Scale: a ``--big``-task emulated graph on 4 workers, ``taskflow.run`` with HEFT and plain
   ``client.get`` of the same emulated tasks, each in its own process against a ``dask scheduler``
   and ``dask worker`` processes of its own on loopback: wall time, the client process's and the
   scheduler process's peak memory.
3. Heterogeneous emulated cluster: 4 local workers declared at speeds 1, 1, 2, 4 (emulation sleeps
   cost / speed), a communication-heavy graph (CCR 2 at 100 MB/s; the bytes are real): HEFT,
   planning with the declared speeds and the bandwidth and latency measured on the cluster
   (``cluster_from_dask(calibrate=True, speeds=...)``, converted to the emulation's scales), against
   Dask's own scheduling (work stealing), a fresh cluster per run, the order alternating, medians of
   ``--repeat``.
4. Heterogeneous real cluster, a dask.array workload: one-thread workers, the first unlimited, the
   others held to ``--slow`` of a core each by a cgroup CPU quota (needs root): HEFT through the plugin
   (``taskflow.compute`` with calibrated speeds, then the speeds it learns from task durations)
   against Dask's own scheduling (``dask.compute`` on the same cluster), one unmeasured run of each
   first, then alternating, medians of ``--repeat``.
5. A small computation in an interactive session: ``taskflow.compute`` on a small dask.array (8 chunks)
   with a client already open (a notebook's), which it reuses, against ``dask.compute`` on the
   same client; and ``taskflow.compute`` without any client, which starts a cluster of its own.
   Medians of 5 x ``--repeat``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dask  # noqa: E402
from distributed import Client  # noqa: E402

import schedulers  # noqa: E402
from taskflow import TaskGraph, run  # noqa: E402
from taskflow.runtime import cluster_from_dask  # noqa: E402
from taskflow.runtime.client.dask_graph import keys_for  # noqa: E402
from taskflow.runtime.launch.local import local_cluster  # noqa: E402
from taskflow.runtime.client.session import frozen_heap  # noqa: E402
from taskflow.runtime.messages import workers_info  # noqa: E402
from workflows.scientific import random_layered  # noqa: E402


def noop(*args):
    return None


def noop_graph(n):
    shape = random_layered(n, shape=1.0, out_degree=2, seed=3)
    g = TaskGraph("noop")
    handles = {}
    a = shape.arrays
    for i in a.topo.tolist():
        t = a.ids[i]
        handles[t] = g.add_task(t, fn=noop, args=tuple(handles[a.ids[p]] for p in a.preds(i).tolist()), cost=0.001)
    return g


def plain_dsk(g):
    """The graph as plain Dask tuples, keyed as ``taskflow.run`` keys it (led by the task's kind,
    which Dask takes as the prefix): both sides give Dask's scheduler the same task prefixes and
    groups (keyed by bare task ids, plain Dask had one prefix and group per task, which costs its
    scheduler more)."""
    a = g.arrays
    key = keys_for(g, "plain", 0)
    return {key[t]: (noop, *[key[a.ids[p]] for p in a.preds(a.index[t]).tolist()]) for t in g.ids}


def _fresh_cluster(workers):
    return local_cluster(workers, 1, work_stealing=False)


def dasks_placement(dsk, workers) -> dict:
    """Key -> the name of the worker plain Dask ran it on, in one unmeasured run on a fresh cluster."""
    from distributed import get_task_stream

    with _fresh_cluster(workers) as lc, Client(lc) as c:
        c.get({"warm": (noop,)}, ["warm"])
        name = {a: str(w["name"]) for a, w in workers_info(c).items()}
        with get_task_stream(client=c) as ts:
            c.get(dict(dsk), list(dsk))
    return {r["key"]: name[r["worker"]] for r in ts.data if r["key"] in dsk}


def overhead(n, workers, repeat):
    """Each measurement on a fresh cluster (a scheduler that has already run graphs is slower: in one
    session plain ``client.get`` of the same 5,000 tasks took 31 s first and 60 s fifth), and the
    order alternates, so no side always runs first.

    A third side separates what a static placement costs from what taskflow adds: plain
    ``client.get`` with every task pinned (``dask.annotate(workers=...)``, no plugin, no taskflow
    code) to the worker Dask itself chose for it in an earlier run. A fourth gives plain
    ``client.get`` the one thing ``taskflow.run`` does to the client's process (which hosts the
    local cluster's scheduler): no full garbage collection during the run."""
    g = noop_graph(n)
    dsk = plain_dsk(g)
    keys = list(dsk)
    where = dasks_placement(dsk, workers)

    def plain(c):
        c.get(dict(dsk), keys)

    def ours(c):
        rep = run(g, "heft", client=c, quiet=True)
        assert len(rep.results) == n

    def pinned(c):
        addr = {str(w["name"]): a for a, w in workers_info(c).items()}
        with dask.annotate(workers=lambda k: [addr[where[k]]], allow_other_workers=False):
            c.get(dict(dsk), keys)

    def plain_frozen(c):
        with frozen_heap():
            c.get(dict(dsk), keys)

    sides = {"plain": plain, "ours": ours, "pinned": pinned, "plain-frozen": plain_frozen}
    times = {k: [] for k in sides}
    for r in range(repeat):
        order = list(sides)[r % len(sides) :] + list(sides)[: r % len(sides)]
        for name in order if r % 2 == 0 else order[::-1]:
            with _fresh_cluster(workers) as lc, Client(lc) as c:
                c.get({"warm": (noop,)}, ["warm"])
                t0 = time.perf_counter()
                sides[name](c)
                times[name].append(time.perf_counter() - t0)
    p, o, q, z = (statistics.median(times[k]) for k in ("plain", "ours", "pinned", "plain-frozen"))
    each = "; ".join(f"{k} " + ", ".join(f"{x:.1f}" for x in v) for k, v in times.items())
    print(
        f"1. {n} no-op tasks on {workers} workers (median of {repeat}, a fresh cluster each, order rotating; "
        f"{each} s): plain client.get {p:.2f} s, taskflow.run with a HEFT plan {o:.2f} s, ratio {o / p:.2f} "
        f"(target <= 1.05: {'met' if o / p <= 1.05 else 'MISSED'}); plain client.get pinned to Dask's own "
        f"placement of an earlier run {q:.2f} s, ratio {q / p:.2f} (what a static placement itself costs); plain "
        f"client.get with the garbage collector held as taskflow.run holds it (taskflow.runtime.client.waiting.frozen_heap) "
        f"{z:.2f} s, ratio {z / p:.2f} (what that alone is worth)"
    )


def heterogeneous(time_scale, repeat, size_scale=0.05):
    speeds = {"0": 1.0, "1": 1.0, "2": 2.0, "3": 4.0}
    g = random_layered(120, shape=1.0, out_degree=3, ccr=2.0, seed=7, mean_cost=1.0, bandwidth=100e6, name="comm-heavy")
    out = {"heft": [], "work-stealing": []}
    comm = []
    for r in range(repeat):
        for name in ("heft", "work-stealing") if r % 2 == 0 else ("work-stealing", "heft"):
            lc = local_cluster(4, 1, work_stealing=name == "work-stealing")
            with lc, Client(lc) as c:
                # the model: declared speeds (what the emulation sleeps by), bandwidth and latency
                # measured, in the model's units (emulated seconds and bytes are scaled differently:
                # edges carry up to 400 MB, which emulated outputs really hold)
                real = cluster_from_dask(c, calibrate=True, speeds=speeds)
                model = real.replace(
                    bandwidth=real.bandwidth * time_scale / size_scale, latency=real.latency / time_scale
                )
                rep = run(g, name, client=c, cluster=model, time_scale=time_scale, size_scale=size_scale, quiet=True)
            out[name].append(rep.measured_makespan)
            busy = sum(x.finish - x.start for x in rep.trace.runs)
            moving = sum(x.finish - x.start for x in rep.trace.transfers)
            comm.append(moving / busy)
            predicted = rep.predicted_makespan or float("nan")
            print(
                f"   {name:<14} measured {rep.measured_makespan:6.2f} s (predicted {predicted:6.2f} s), "
                f"{len(rep.trace.transfers)} transfers, {sum(x.bytes for x in rep.trace.transfers) / 1e6:.0f} MB, "
                f"transfer time / compute time {moving / busy:.2f}; network measured "
                f"{real.bandwidth / 1e9:.2f} GB/s, latency {real.latency * 1e3:.1f} ms",
                flush=True,
            )
    h, w = statistics.median(out["heft"]), statistics.median(out["work-stealing"])
    print(
        f"3. heterogeneous emulated (speeds 1,1,2,4), {len(g)} tasks, declared CCR 2 (real transfer/compute "
        f"time {min(comm):.2f}-{max(comm):.2f}): HEFT {h:.2f} s vs Dask work stealing {w:.2f} s (medians of "
        f"{repeat}): HEFT {100 * (w - h) / w:+.0f}% shorter"
    )


def _peak_mib(pid) -> float:
    """A process's peak resident memory (VmHWM), MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def big_child(kind, n, workers):
    """One side of the scale measurement, in its own process, against a ``dask scheduler`` and
    ``dask worker`` processes of its own on loopback: prints seconds, this (the client's) process's
    peak RSS and the scheduler process's peak RSS (MiB)."""
    import resource
    import tempfile

    from taskflow.app.loopback import Loopback
    from workflows.scientific import random_layered as rl

    g = rl(n, shape=1.0, out_degree=2, ccr=0.1, seed=5, mean_cost=0.002, bandwidth=1e6, name="big")
    with tempfile.TemporaryDirectory() as tmp:
        lb = Loopback(
            tmp, [f"w{i}" for i in range(workers)], env={"DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING": "False"}
        )
        try:
            lb.start()
            with Client(lb.address) as c:
                c.get({"warm": (noop,)}, ["warm"])
                t0 = time.perf_counter()
                if kind == "ours":
                    rep = run(g, "heft", client=c, quiet=True, timeout=3600)
                    assert len(rep.results) == n and len(rep.trace.runs) == n
                else:
                    from taskflow.runtime.client.calibrate import cluster_from_dask as cfd
                    from taskflow.runtime.client.dask_graph import dask_graph, keys_for

                    key_of = keys_for(g, "plain", 0)
                    dsk = dask_graph(g, g.ids, key_of, cfd(c), 1.0, 1.0)
                    out = c.get(dsk, list(dsk))
                    assert len(out) == n
                secs = time.perf_counter() - t0
                sched = _peak_mib(lb.scheduler.pid)
        finally:
            lb.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{secs:.2f} {peak:.0f} {sched:.0f}")


def big(n, workers, cap=3600.0):
    """Ours first, then plain Dask, stopped after twice our time (plain Dask slows down faster than
    linearly with the graph's size on a small machine)."""
    import subprocess

    res = {}
    for kind in ("ours", "plain"):
        limit = cap if kind == "ours" else max(60.0, 2 * res["ours"][0])
        t0 = time.perf_counter()
        try:
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, "--big", str(n), "--workers", str(workers)],
                capture_output=True,
                text=True,
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            res[kind] = None
            print(f"   {kind}: stopped after {time.perf_counter() - t0:.0f} s (the limit: twice ours)")
            continue
        if out.returncode != 0:
            print(f"2. {kind} failed: {out.stderr.strip().splitlines()[-1:]}")
            return
        res[kind] = [float(x) for x in out.stdout.split()[-3:]]
    ot, om, osch = res["ours"]
    plain = (
        f"plain client.get {res['plain'][0]:.1f} s, client peak {res['plain'][1]:.0f} MiB, scheduler peak "
        f"{res['plain'][2]:.0f} MiB (time ratio {ot / res['plain'][0]:.2f}, scheduler memory ratio "
        f"{osch / res['plain'][2]:.2f})"
        if res["plain"]
        else "plain client.get did not finish within twice that"
    )
    print(
        f"2. {n}-task emulated graph on {workers} workers: taskflow.run with HEFT {ot:.1f} s, client peak "
        f"{om:.0f} MiB, scheduler peak {osch:.0f} MiB; {plain}"
    )


def array_workload(repeat, n=4000, chunk=1000, workers=2, slow=0.25):
    """One-thread workers, the first unlimited, the others held to ``slow`` of a core each by a
    cgroup CPU quota (really slower, as a CPU-limited container is): HEFT through the plugin
    (``taskflow.compute``, calibrated speeds, then what it learns from task durations) against Dask's
    own scheduling (``dask.compute`` on the same cluster, with the garbage collector held as
    ``taskflow.compute`` holds it, so that only the scheduling differs). One unmeasured run of each
    first (Dask learns its prefix durations, the plugin its speeds), then alternating, medians."""
    import dask.array as da
    import numpy as np

    from taskflow import compute
    from taskflow.testbed import CpuLimits, cpu_limits_available
    from taskflow.runtime.client.session import call

    why = cpu_limits_available()
    if why:
        print(f"4. skipped: {why}")
        return
    x = da.random.RandomState(0).random((n, n), chunks=chunk)
    work = ((x @ x.T) + x).sum(axis=0)
    expected = work.compute(scheduler="sync")
    out = {"heft": [], "dask": []}
    with local_cluster(workers, 1, work_stealing=True) as lc, Client(lc) as c:
        info = workers_info(c)
        pids = {str(info[a]["name"]): pid for a, pid in c.run(os.getpid).items()}
        names = sorted(pids)
        with CpuLimits({pids[nm]: slow for nm in names[1:]}):
            model = cluster_from_dask(c, calibrate=True)
            speeds = ", ".join(f"{w.id}: {w.speed:.2f}" for w in model.workers)

            def once(name):
                t0 = time.perf_counter()
                if name == "heft":
                    got = compute(work, scheduler="heft", client=c, cluster=model)[0]
                else:
                    with frozen_heap():
                        got = dask.compute(work)[0]
                assert np.allclose(got, expected)
                return time.perf_counter() - t0

            warm = {name: once(name) for name in ("dask", "heft")}
            for r in range(repeat):
                for name in ("heft", "dask") if r % 2 == 0 else ("dask", "heft"):
                    out[name].append(once(name))
            learned = call(c, "taskflow_status")["learned_speeds"]
    h, d = statistics.median(out["heft"]), statistics.median(out["dask"])
    print(
        f"4. dask.array ((x @ x.T) + x).sum(axis=0), {n}x{n} in {chunk}-chunks, {workers} one-thread workers "
        f"(worker {names[0]} unlimited, {', '.join(names[1:])} held to {slow:g} of a core each): calibrated speeds "
        f"{speeds}; learned from task durations by the end "
        f"{', '.join(f'{k}: {v:.2f}' for k, v in sorted(learned.items()))}; unmeasured first runs HEFT "
        f"{warm['heft']:.2f} s, Dask {warm['dask']:.2f} s; HEFT {h:.2f} s vs Dask's own {d:.2f} s (medians of "
        f"{repeat}: {', '.join(f'{v:.2f}' for v in out['heft'])} / {', '.join(f'{v:.2f}' for v in out['dask'])}): "
        f"HEFT {100 * (d - h) / d:+.0f}% shorter",
        flush=True,
    )


def small(repeat, workers=2):
    """Per-call time of taskflow.compute against dask.compute on a small array, one client open."""
    import dask.array as da
    import numpy as np

    from taskflow import compute

    x = da.arange(400_000, chunks=25_000).reshape(800, 500).rechunk((200, 250))
    work = (x * 2 + 1).sum()
    expected = work.compute(scheduler="sync")
    times = {"taskflow.compute": [], "dask.compute": []}
    with local_cluster(workers, 1) as lc, Client(lc):  # the active client, as in a notebook
        compute(work)  # the plugin's first install and imports: once per cluster
        for r in range(5 * repeat):
            for name in ("taskflow.compute", "dask.compute") if r % 2 == 0 else ("dask.compute", "taskflow.compute"):
                t0 = time.perf_counter()
                got = compute(work)[0] if name == "taskflow.compute" else dask.compute(work)[0]
                times[name].append(time.perf_counter() - t0)
                assert np.allclose(got, expected)
    t0 = time.perf_counter()
    assert np.allclose(compute(work, workers=workers)[0], expected)
    cold = time.perf_counter() - t0
    t, d = statistics.median(times["taskflow.compute"]), statistics.median(times["dask.compute"])
    print(
        f"5. small dask.array ({x.npartitions} chunks, {len(dict(work.__dask_graph__()))} tasks), one client open: "
        f"taskflow.compute {t * 1e3:.0f} ms vs dask.compute {d * 1e3:.0f} ms per call (medians of {5 * repeat}; "
        f"ratio {t / d:.2f}); without a client taskflow.compute starts its own cluster: {cold:.1f} s"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, nargs="+", default=[2_000, 20_000])
    ap.add_argument("--big", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--only", default="overhead,big,hetero,array,small")
    ap.add_argument(
        "--array",
        type=lambda v: tuple(int(x) for x in v.split("/")),
        nargs="+",
        default=[(4000, 1000, 2), (4000, 2000, 2), (6000, 2000, 3)],
        help="dask.array runs: N/CHUNK/WORKERS ...",
    )
    ap.add_argument(
        "--slow",
        type=float,
        default=0.25,
        help="dask.array runs: the cores each worker but the first may use (default 0.25)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    schedulers.warm_up()
    if args.child:
        big_child(args.child, args.big, args.workers)
        return
    only = set(args.only.split(","))
    if "overhead" in only:
        for n in args.tasks:
            overhead(n, args.workers, args.repeat)
    if "big" in only:
        big(args.big, 4)
    if "hetero" in only:
        heterogeneous(args.time_scale, args.repeat)
    if "array" in only:
        for n, chunk, nw in args.array:
            array_workload(args.repeat, n, chunk, nw, args.slow)
    if "small" in only:
        small(args.repeat, args.workers)


if __name__ == "__main__":
    main()
