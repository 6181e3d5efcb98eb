"""A task graph (or part of it) as a Dask graph."""

from __future__ import annotations


from ...cluster import Cluster
from ...graph import TaskGraph
from ..worker.calls import emulate, Opaque, task_call
from ..learn import task_kind

__all__ = ["keys_for", "dask_graph", "emulated_sizes"]


def keys_for(graph: TaskGraph, run_token: str, gen: int) -> dict:
    """Dask keys unique to this run and submission (a key still in memory from an earlier run
    would otherwise be reused instead of computed), each led by its task's kind (its category, else
    its id up to the first digit, ``-`` or ``_``: ``mProject`` for ``mProject_ID0000001``), which
    Dask takes as the key's prefix, as it takes a function's name in Dask's own collections. Dask
    then groups tasks by kind in its dashboard and, under its own scheduling, estimates a task's
    duration from the ones of its kind that ran before, on this cluster, in this run or an earlier
    one (with the task id as prefix every task was new to it: it planned with its 0.5 s default).

    Parameters
    ----------
    graph : TaskGraph
    run_token : str
        Unique to the run.
    gen : int
        The submission (0, then one more per re-plan).
    """
    suffix = f"~{run_token}.{gen}"
    return {t: f"{task_kind(graph, t)}-{t if isinstance(t, str) else f'#{t}'}{suffix}" for t in graph.ids}


def dask_graph(graph: TaskGraph, todo, key_of: dict, cluster: Cluster, time_scale: float, size_scale: float, kept=None):
    """The Dask graph of the tasks ``todo``; a dependency outside ``todo`` is its kept Future.

    Parameters
    ----------
    graph : TaskGraph
    todo : list
        The task ids to submit.
    key_of : dict
        Task id -> Dask key.
    cluster : Cluster
        Declared speeds (emulated tasks sleep by them).
    time_scale, size_scale : float
        Shrink emulated durations and outputs.
    kept : dict, optional
        Task id -> Future of a result kept from an earlier submission.
    """
    a = graph.arrays
    inside = set(todo)
    kept = kept or {}
    speeds = {str(w.id): w.speed for w in cluster.workers}
    calls = graph.calls()
    emitted = emulated_sizes(graph)
    dsk = {}
    for t in todo:
        i = a.index[t]
        preds = [a.ids[p] for p in a.preds(i).tolist()]
        deps = [key_of[p] if p in inside else kept[p] for p in preds]
        call = calls.get(i)
        if call is not None:
            run, payload = task_call(*call, preds)
            dsk[key_of[t]] = (run, payload, *deps)
        else:
            costs = {str(w): v for w, v in (a.costs.get(i) or {}).items()}
            dsk[key_of[t]] = (
                emulate,
                Opaque((float(a.cost[i]), costs, speeds, float(time_scale), float(emitted[i]) * size_scale)),
                *deps,
            )
    return dsk


def emulated_sizes(graph: TaskGraph):
    """Bytes each emulated task returns: its output size, or more when one of its out-edges says a
    consumer needs more (the cost model moves an edge's size; Dask moves the whole output).

    Parameters
    ----------
    graph : TaskGraph

    Returns
    -------
    numpy.ndarray
        Per task index.
    """
    import numpy as np

    a = graph.arrays
    out = a.output_size.copy()
    if a.m:
        np.maximum.at(out, a.src, a.size)
    return out
