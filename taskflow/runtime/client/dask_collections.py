"""Dask collections (dask.array, dask.bag, dask.delayed, ...) planned by a static scheduler inside Dask's scheduler."""

from __future__ import annotations

import time
import uuid

from ...cluster import Cluster
from ...errors import SchedulerError, TaskflowError
from ...graph import TaskGraph
from ...scheduling import get_scheduler, require_runnable
from .calibrate import attach_addresses, cluster_from_dask
from ..messages import cluster_message, graph_payload
from .report import decision_note, report_from_stream
from .connecting import connect, say_dashboard
from .records import stream_index, stream_since, workers_records
from .session import call, check_call, check_flags, ensure_plugin
from .waiting import Watchdog, close_quietly, frozen_heap, gather, wait_for, workers_reachable

__all__ = ["compute"]


def compute(
    *collections,
    scheduler="adaptive",
    client=None,
    costs: dict | None = None,
    cluster: Cluster | None = None,
    address: str | None = None,
    scheduler_file: str | None = None,
    workers: int = 2,
    threads_per_worker: int = 1,
    timeout: float | None = None,
    report: bool = False,
    dashboard=False,
):
    """Plan the task graph of Dask collections with ``scheduler`` inside the Dask scheduler and
    return exactly what ``dask.compute(*collections)`` returns.

    The taskflow scheduler plugin estimates each task's duration from what Dask has measured for
    its task-name prefix (Dask's default for prefixes it has not seen run yet; ``costs`` wins) and
    each output's size from ``nbytes`` of data in memory, plans when the graph arrives, and
    re-plans the unfinished part on the survivors when a worker is lost.

    Parameters
    ----------
    *collections
        Dask collections (and other objects, passed through as ``dask.compute`` does).
    scheduler : str or Scheduler
        A static scheduler (default ``adaptive``: HEFT where it is predicted to beat Dask's own
        scheduling, Dask's own elsewhere), or ``work-stealing`` (Dask's own scheduling).
    client : distributed.Client, optional
        Default: the active client if there is one, else ``address`` / ``scheduler_file``, else an
        embedded LocalCluster of ``workers`` processes with ``threads_per_worker`` threads.
    costs : dict, optional
        Task-name prefix (the part of a key before its token) -> seconds, e.g. from
        :func:`learn_costs` on a previous run.
    cluster : Cluster, optional
        Declared worker speeds and network (by worker name); default: what Dask reports.
    address, scheduler_file : str, optional
    workers, threads_per_worker : int
    timeout : float, optional
        Seconds before giving up.
    report : bool
        Also return a :class:`RunReport` (placement fidelity, the measured trace).
    dashboard : bool or str
        Serve the embedded cluster's Dask dashboard (True, or HOST:PORT) and print its link.

    Returns
    -------
    tuple
        What ``dask.compute`` returns; with ``report=True``, ``(that, RunReport)``.

    Raises
    ------
    TaskFailed
        A task raised.
    RunTimeout, SchedulerLost, WorkersLost
        As for :func:`taskflow.run`.
    TaskflowError
        (the base of all of these) A simulator-only scheduler, an unknown name.
    """
    from dask._expr import FinalizeCompute
    from dask.base import collections_to_expr, unpack_collections
    from dask.core import flatten

    check_call(client, cluster, address, scheduler_file, workers, threads_per_worker, timeout, costs)
    check_flags(report=report)
    started = time.monotonic()  # the timeout counts from here: starting a cluster is part of the call
    scheduler = get_scheduler(scheduler)
    require_runnable(scheduler, "dask")
    colls, repack = unpack_collections(*collections)
    if not colls:
        return (collections, None) if report else collections
    expr = FinalizeCompute(collections_to_expr(colls, True)).optimize()
    keys = list(flatten(expr.__dask_keys__()))
    dsk = dict(expr.__dask_graph__())
    g, name_of = _graph_of(dsk)
    if client is None and not (address or scheduler_file):
        client = _active_client()
    c, owned = connect(
        client,
        address,
        scheduler_file,
        workers,
        threads_per_worker,
        work_stealing=scheduler.name == "work-stealing",
        dashboard=dashboard,
    )
    if dashboard:
        say_dashboard(c)
    run_id = f"compute-{uuid.uuid4().hex[:12]}"
    static = scheduler.kind == "static"
    key_of = {name: k for k, name in name_of.items()}
    finished = False
    with frozen_heap():
        try:
            ensure_plugin(c)
            cluster = attach_addresses(cluster, c) if cluster is not None else None
            if static:
                reply = call(
                    c,
                    "taskflow_register",
                    run=run_id,
                    graph=graph_payload(g, key_of),
                    scheduler=scheduler.name,
                    options={"seed": scheduler.seed, **scheduler.options},
                    cluster=cluster_message(cluster) if cluster is not None else None,
                    client=c.id,
                    estimate=True,
                    prefix_costs=dict(costs or {}),
                )
                if reply.get("status") != "OK":
                    raise SchedulerError(reply.get("error", "the scheduler plugin refused the graph"))
            watchdog = Watchdog(c, run_id if static else None)
            direct = workers_reachable(c)
            index = stream_index(c) if report else None
            t_submit = time.time()
            futs = c.get(expr, keys, sync=False)
            flat = list(flatten(futs)) if isinstance(futs, (list, tuple)) else [futs]
            try:
                wait_for(
                    flat,
                    watchdog,
                    None if timeout is None else max(0.05, timeout - (time.monotonic() - started)),
                    said=timeout,
                )
                results = gather(c, futs, direct=direct)
            except BaseException:
                if c.status == "running":
                    c.cancel(flat, force=True)
                raise
            info = None
            if report:
                records = stream_since(c, index)
                seen = workers_records(c, t_submit)
                status = call(c, "taskflow_status", run=run_id, plan=True) if static else {}
                planned = {name_of[tuple(k) if isinstance(k, list) else k]: w for k, w in status.get("plan", [])}
                info = report_from_stream(
                    g,
                    records,
                    scheduler=scheduler.name,
                    client=c,
                    cluster=cluster or cluster_from_dask(c),
                    key_of=key_of,
                    task_of=name_of,
                    plan=None,
                    predicted=(float(status["predicted"]) if status.get("predicted") else None),
                    planned_worker=planned,
                    results={},
                    replans=status.get("replans", 0),
                    t_submit=t_submit,
                    time_scale=1.0,
                    size_scale=1.0,
                    incoming=seen.transfers,
                    clocks=seen.clocks,
                )
                if info.prediction is None:
                    info.no_prediction = (
                        _why_no_prediction(scheduler.name, status)
                        if static
                        else "Dask's own scheduling: taskflow neither plans nor predicts it"
                    )
                if status.get("decision"):
                    info.notes.append(decision_note(scheduler.name, status["decision"], status.get("redecisions", 0)))
            finished = True
        finally:
            if static:
                try:
                    call(c, "taskflow_forget", timeout=2.0, limit=2.0, run=run_id)
                except TaskflowError:
                    pass
            close_quietly(owned, now=not finished)  # an abandoned call's workers are ended, not waited for
    out = repack(results)
    return (out, info) if report else out


def _graph_of(dsk: dict):
    """The structure of a Dask graph as a TaskGraph (names: ``str(key)``, made unique), with
    placeholder costs (the plugin estimates them)."""
    g = TaskGraph("dask-collection")
    name_of = {}
    taken = set()
    for k in dsk:
        name = str(k)
        if name in taken:
            name = repr(k)
        taken.add(name)
        name_of[k] = name
    for k in dsk:
        g.add_task(name_of[k], cost=1.0, meta={"category": _prefix(k)})
    for k, v in dsk.items():
        for d in _dependencies(v, dsk):
            g.add_edge(name_of[d], name_of[k], size=0)
    return g, name_of


def _active_client():
    """The client this process already has (a notebook's, a ``with Client()`` block's), or None."""
    from distributed import default_client

    try:
        return default_client()
    except ValueError:
        return None


def _prefix(key) -> str:
    from dask.utils import key_split

    return key_split(key)


def _dependencies(task, dsk) -> set:
    deps = getattr(task, "dependencies", None)
    if deps is not None:
        return {d for d in deps if d in dsk}
    from dask.core import get_dependencies

    return set(get_dependencies(dsk, task=task))


def _why_no_prediction(scheduler: str, status: dict) -> str:
    """Why the scheduler plugin has no prediction for a run (a report says it instead of a NaN)."""
    decision = status.get("decision")
    if decision and decision != "plan":
        return f"{scheduler} left this run to Dask's own scheduling, which taskflow does not predict"
    return f"{scheduler} made no prediction for this run"
