"""Scheduler comparison benchmark: workflows x clusters x network models x schedulers x seeds, in the
simulator, in parallel processes, resumable (rows already in ``results.csv`` are skipped).

Outputs in the chosen folder: ``results.csv`` (one row per run), ``summary.md`` (geometric-mean SLR
per scheduler and workflow family with the best marked, win/tie/loss counts), ``normalised.png``
(makespan over the best per instance, per family), ``gantt.png`` (a representative run) and
``report.html`` (all of it in one self-contained page).
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ..errors import FormatError, LaunchError, TaskflowWarning, UsageError
from ..files import open_append
from .bench_report import write_outputs
from .suite import (
    BW,
    DEFAULT_SCHEDULERS,
    FIELDS,
    REAL_FIELDS,
    REAL_SCHEDULERS,
    REAL_SPEEDS,
    SUITES,
    build_workflow,
    clusters,
    real_workflows,
    workflows,
)

__all__ = ["read_results", "run_real", "run_suite"]


def _row(job) -> dict:
    """One simulation (runs in a worker process)."""
    from taskflow.cluster import Cluster, Worker
    from taskflow import simulate  # (the adaptive scheduler's own decisions: taskflow.runtime.simulated)

    import schedulers

    (wname, family, spec), (cname, speeds, cores, bw), network, sname, seed = job
    g = build_workflow(spec, seed)
    c = Cluster(
        [Worker(f"w{i}", s, max(cores, int(g.arrays.cores.max()))) for i, s in enumerate(speeds)],
        bandwidth=bw,
        latency=1e-3,
        name=cname,
    )
    scheduler = schedulers.get_scheduler(sname, seed=seed)
    t0 = time.perf_counter()
    plan = scheduler.schedule(g, c) if scheduler.kind == "static" and scheduler.name != "adaptive" else None
    sched_time = time.perf_counter() - t0
    trace = simulate(g, c, scheduler, network=network, plan=plan, seed=seed)
    if plan is None:
        sched_time = time.perf_counter() - t0  # a dynamic scheduler decides during the whole run
    valid = not trace.problems(g, c, limit=1)
    m = (
        trace.metrics(
            g,
            c,
        )
        if valid
        else {k: float("nan") for k in ("lower_bound", "slr", "speedup", "efficiency")}
    )
    return {
        "workflow": wname,
        "family": family,
        "cluster": cname,
        "network": network,
        "scheduler": sname,
        "seed": seed,
        "tasks": len(g),
        "makespan": trace.makespan,
        "lower_bound": m["lower_bound"],
        "slr": m["slr"],
        "speedup": m["speedup"],
        "efficiency": m["efficiency"],
        "scheduling_time": sched_time,
        "valid": valid,
    }


def _key(r) -> tuple:
    return (str(r["workflow"]), str(r["cluster"]), str(r["network"]), str(r["scheduler"]), str(r["seed"]))


#: the numeric columns of results.csv (a row whose cell is not a number was cut or edited)
NUMERIC = ("seed", "tasks", "makespan")


def read_results(path) -> list:
    """The complete rows of a ``results.csv`` to resume from. A row cut short (the run was
    killed while writing it) or with a number that is not one is dropped, and the file rewritten
    (atomically) with the complete rows, so appending continues a consistent file.

    Parameters
    ----------
    path : Path

    Raises
    ------
    TaskflowError
        Not a results file of this suite: not UTF-8 text, or other columns (named).
    """
    from ..formats import atomic_write

    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise FormatError(
            f"{path}: not a results file of taskflow bench (not UTF-8 text); move it away or choose another --output"
        ) from None
    reader = csv.DictReader(text.splitlines())
    if reader.fieldnames is None:
        return []
    if list(reader.fieldnames) != FIELDS:
        raise FormatError(
            f"{path}: not a results file of this version of taskflow bench (its columns: "
            f"{', '.join(map(str, reader.fieldnames))[:120]}); move it away or choose another --output"
        )
    rows, dropped = [], 0
    for r in reader:
        ok = all(r.get(k) not in (None, "") for k in ("workflow", "cluster", "network", "scheduler", "seed"))
        try:
            ok = ok and all(r.get(k) is not None and float(r[k]) == float(r[k]) for k in NUMERIC)
        except ValueError:
            ok = False
        if ok and None not in r and all(v is not None for v in r.values()):
            rows.append(r)
        else:
            dropped += 1
    if dropped:
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
        atomic_write(path, out.getvalue())
    return rows


def run_suite(
    suite: str = "quick",
    out="taskflow-out/bench",
    scheduler_names=None,
    jobs: int | None = None,
    progress: bool = True,
    real: bool = False,
) -> list:
    """Run (or resume) a suite; returns every row (old and new) and writes the outputs. ``real``
    also runs a subset on Dask in emulation (:func:`run_real`, rows in ``real.csv``).

    Parameters
    ----------
    suite : {"quick", "standard", "full"}
    out : path
        The output folder (created).
    scheduler_names : list of str, optional
        Default: :data:`~taskflow.app.suite.DEFAULT_SCHEDULERS`.
    jobs : int, optional
        Worker processes (default: every core).
    progress : bool
    real : bool

    Raises
    ------
    TaskflowError
        An unknown suite or scheduler.
    """
    if suite not in SUITES:
        raise UsageError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    import schedulers

    names = list(scheduler_names or DEFAULT_SCHEDULERS)
    for n in names:
        schedulers.scheduler_class(n)  # unknown names fail before anything runs
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = {"quick": [0], "standard": [0, 1, 2], "full": list(range(5))}[suite]
    todo_all = [
        (w, c, net, s, seed)
        for w in workflows(suite)
        for c in clusters(suite)
        for net in ("simple", "maxmin")
        for s in names
        for seed in seeds
    ]
    csv_path = out / "results.csv"
    rows = read_results(csv_path) if csv_path.exists() else []
    done = {_key(r) for r in rows}
    todo = [j for j in todo_all if (j[0][0], j[1][0], j[2], j[3], str(j[4])) not in done]
    if progress:
        print(f"suite {suite}: {len(todo_all)} runs, {len(todo_all) - len(todo)} already done, {len(todo)} to run")
    new_file = not csv_path.exists()
    with open_append(csv_path) as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        if todo:
            jobs = jobs or os.cpu_count() or 1
            t0 = time.perf_counter()
            pool = ProcessPoolExecutor(max_workers=jobs, initializer=_pool_worker)
            try:
                for k, r in enumerate(pool.map(_row, todo, chunksize=4), 1):
                    writer.writerow(r)
                    f.flush()  # a rerun resumes after the last finished row
                    rows.append({kk: str(v) for kk, v in r.items()})
                    if progress and (k % 25 == 0 or k == len(todo)):
                        print(
                            f"\r  [{'#' * (30 * k // len(todo)):<30}] {k}/{len(todo)} runs "
                            f"{time.perf_counter() - t0:5.1f} s",
                            end="",
                            flush=True,
                        )
            except BaseException:  # Ctrl-C, SIGTERM, a failed row: the pool's workers go now, not after the suite
                _abandon(pool)
                raise
            pool.shutdown()
            if progress:
                print()
    real_rows = (
        run_real(suite, out, [n for n in names if n in REAL_SCHEDULERS] or None, progress=progress) if real else None
    )
    write_outputs(rows, out, names, real_rows)
    return rows


def _pool_worker() -> None:
    """A pool worker leaves Ctrl-C to the command (which ends the pool) and dies quietly on
    SIGTERM (a forked worker would inherit the command's handler and print a traceback)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _abandon(pool) -> None:
    """End ``pool``'s worker processes at once, its queued rows cancelled."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    with contextlib.suppress(RuntimeError):  # interrupted while it started its manager thread
        pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:  # SIGKILL: a worker forked a moment ago may still hold the command's SIGTERM handler
        with contextlib.suppress(Exception):
            p.kill()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(5)


# ---------------------------------------------------------------------- a subset on Dask
def run_real(
    suite: str = "quick",
    out="taskflow-out/bench",
    scheduler_names=None,
    target_seconds: float = 3.0,
    progress: bool = True,
    only=None,
) -> list:
    """Run the subset on an embedded 4-worker LocalCluster in emulation (each task sleeps its
    duration on the worker's declared speed and returns its output's bytes, scaled so a run takes
    about ``target_seconds``), each workflow three times: planned with its declared costs, then
    twice with the cost profile the first run measured (the same plan twice: how far two runs of
    one plan differ is the noise any prediction is up against). Resumable: rows already in
    ``real.csv`` are skipped. Returns all rows.

    Parameters
    ----------
    suite : str
    out : path
    scheduler_names : list of str, optional
        Default: heft, cpop, blevel and Dask's work stealing.
    target_seconds : float
    progress : bool
    only : set of str, optional
        Only these workflows.
    """
    from distributed import Client

    import schedulers

    from ..cluster import Cluster, Worker
    from ..runtime import run
    from ..runtime.client.dask_graph import emulated_sizes
    from ..runtime.launch.local import local_cluster, warm_cluster
    from ..simulator import simulate

    names = [
        n
        for n in (scheduler_names or REAL_SCHEDULERS)
        if schedulers.scheduler_class(n).kind == "static" or n == "work-stealing"
    ]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "real.csv"
    rows = []
    if path.exists():
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader) if reader.fieldnames == REAL_FIELDS else []
        if not rows:
            path.unlink()  # an older layout (or empty): start afresh
    done = {(r["workflow"], r["scheduler"]) for r in rows}
    wfs = [w for w in real_workflows(suite) if only is None or w[0] in only]
    todo = [(w, n) for w in wfs for n in names if (w[0], n) not in done]
    if progress:
        print(
            f"on Dask: {len(wfs) * len(names)} runs, {len(todo)} to run "
            f"(4 local workers declared at speeds {REAL_SPEEDS}, emulated)"
        )
    if not todo:
        return rows
    cluster = Cluster(
        [Worker(str(k), s) for k, s in enumerate(REAL_SPEEDS)], bandwidth=BW, latency=1e-3, name="hetero-4"
    )
    new_file = not path.exists()
    t0 = time.perf_counter()
    with local_cluster(len(REAL_SPEEDS), 1, work_stealing=True) as lc, Client(lc) as client, open_append(path) as f:
        warm_cluster(client)
        writer = csv.DictWriter(f, fieldnames=REAL_FIELDS)
        if new_file:
            writer.writeheader()
        for k, ((wname, family, spec), sname) in enumerate(todo, 1):
            _all_workers_back(client, len(REAL_SPEEDS))
            g = build_workflow(spec, 0)
            span = simulate(g, cluster, "heft", network="simple").makespan
            scale = target_seconds / span if span > 0 else 1.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TaskflowWarning)  # the first run's costs are declared, not measured
                rep = run(
                    g,
                    sname,
                    client=client,
                    cluster=cluster,
                    time_scale=scale,
                    size_scale=scale,
                    quiet=True,
                    timeout=120,
                )
            # the same workflow again, planned with what the first run measured
            learned = run(
                g,
                sname,
                client=client,
                cluster=cluster,
                time_scale=scale,
                size_scale=scale,
                quiet=True,
                timeout=120,
                profile=rep.profile,
            )
            sizes = emulated_sizes(g)
            ok = all(
                getattr(x.results[t], "nbytes", -1) == int(float(sizes[i]) * scale)
                for x in (rep, learned)
                for i, t in enumerate(g.arrays.ids)
            )
            learned.results = rep.results = None  # the bytes are checked: let them go before the next run
            again = run(
                g,
                sname,
                client=client,
                cluster=cluster,
                time_scale=scale,
                size_scale=scale,
                quiet=True,
                timeout=120,
                profile=rep.profile,
            )
            again.results = None
            r = {
                "workflow": wname,
                "family": family,
                "cluster": "hetero-4",
                "scheduler": sname,
                "tasks": len(g),
                "time_scale": scale,
                "predicted_makespan": rep.predicted_makespan,
                "measured_makespan": rep.measured_makespan,
                "measured_over_predicted": rep.measured_makespan / rep.predicted_makespan,
                "placement_fidelity": "" if rep.placement_fidelity is None else rep.placement_fidelity,
                "outputs_ok": ok,
                "learned_predicted": learned.predicted_makespan,
                "learned_measured": learned.measured_makespan,
                "first_error": rep.prediction_error,
                "learned_error": learned.prediction_error,
                "again_measured": again.measured_makespan,
                "again_error": again.prediction_error,
            }
            writer.writerow(r)
            f.flush()
            rows.append({kk: str(v) for kk, v in r.items()})
            if progress:
                print(
                    f"\r  [{'#' * (30 * k // len(todo)):<30}] {k}/{len(todo)} runs {time.perf_counter() - t0:5.1f} s",
                    end="",
                    flush=True,
                )
    if progress:
        print()
    return rows


#: seconds :func:`run_real` waits for a worker the embedded cluster lost to come back
WORKER_WAIT = 60.0


def _all_workers_back(client, n: int) -> None:
    """Wait (at most :data:`WORKER_WAIT` s) until the cluster has its ``n`` workers again: a worker
    the nanny restarted between two runs comes back under its name. (Twice a suite run stopped
    because all four workers seemed gone between two runs: the client's cached list of workers,
    read in a race with the client's own refresh; see :func:`taskflow.runtime.messages.workers_info`.)"""
    try:
        client.wait_for_workers(n, timeout=WORKER_WAIT)
    except TimeoutError as exc:  # asyncio's and distributed's timeouts are TimeoutError
        from ..runtime.messages import workers_info

        have = len(workers_info(client))
        raise LaunchError(
            f"the embedded cluster has {have} of its {n} workers after waiting "
            f"{WORKER_WAIT:.0f} s for the lost ones to come back"
        ) from exc
