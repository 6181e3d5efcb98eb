"""Graph measures that need no schedule: critical path, lower bound, sequential time.

The lower bound on any schedule's makespan is ``max(critical path, work bound)``: the critical path
with every task at its shortest duration over the workers and no communication, and the total work
(seconds at speed 1.0 x cores) over the cluster's total capacity (sum of speed x cores).
"""

from __future__ import annotations

import numpy as np

from .cluster import Cluster
from .costs import CostModel
from .graph import GraphArrays, TaskGraph
from .jit import kernel

__all__ = ["longest_path", "critical_path", "lower_bound", "sequential_time", "graph_summary", "task_kind"]


def longest_path(arrays: GraphArrays, weight: np.ndarray, edge_weight: np.ndarray | None = None):
    """Longest path through the DAG by node (and optionally edge) weights.

    Parameters
    ----------
    arrays : GraphArrays
    weight : numpy.ndarray
        Per task.
    edge_weight : numpy.ndarray, optional
        Per edge.

    Returns
    -------
    (length, path) : (float, list of int)
        ``path`` lists task indices from a source to a sink.
    """
    n = arrays.n
    if n == 0:
        return 0.0, []
    dist = np.array(weight, dtype=np.float64)
    ew = np.zeros(0) if edge_weight is None else np.ascontiguousarray(edge_weight, dtype=np.float64)
    parent = np.full(n, -1, np.int64)
    _longest(arrays.topo, arrays.pred_ptr, arrays.pred_idx, arrays.pred_eid, ew, edge_weight is not None, dist, parent)
    end = int(np.argmax(dist))  # the first of the longest
    path = [end]
    while parent[path[-1]] >= 0:
        path.append(int(parent[path[-1]]))
    path.reverse()
    return float(dist[end]), path


@kernel(cache=True)
def _longest(topo, ptr, pidx, peid, ew, weighted, dist, parent):
    """``dist[v]``: the longest path ending at ``v`` (its weight added to its heaviest input's),
    ``parent[v]`` that input (the first of equal ones), in topological order."""
    for v in topo:
        lo, hi = ptr[v], ptr[v + 1]
        if lo == hi:
            continue
        best, arg = -1.0, -1
        for k in range(lo, hi):
            p = pidx[k]
            x = dist[p] + ew[peid[k]] if weighted else dist[p]
            if x > best:
                best, arg = x, p
        dist[v] += best
        parent[v] = arg


def critical_path(graph: TaskGraph, cluster: Cluster | None = None, cost_model: CostModel | None = None):
    """Critical path length and task ids: each task at its cost (no cluster) or at its shortest
    duration over the cluster's workers; no communication.

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster, optional
    cost_model : CostModel, optional

    Returns
    -------
    (float, list)

    Examples
    --------
    >>> g = TaskGraph(); a = g.add_task("a", cost=2); b = g.add_task("b", cost=3); g.add_edge("a", "b")
    >>> critical_path(g)
    (5.0, ['a', 'b'])
    """
    a = graph.arrays
    if cluster is None and cost_model is None:
        w = a.cost
    else:
        w = (cost_model or CostModel(graph, cluster)).min_duration()
    length, path = longest_path(a, w)
    return float(length), [a.ids[i] for i in path]


def lower_bound(
    graph: TaskGraph, cluster: Cluster, cost_model: CostModel | None = None, critical: float | None = None
) -> float:
    """``max(critical path on the fastest worker, total work / total speed)``: no schedule is shorter.

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    cost_model : CostModel, optional
    critical : float, optional
        The critical path's length (:func:`critical_path` with this cost model), where known.
    """
    cost_model = cost_model or CostModel(graph, cluster)
    cp = critical_path(graph, cost_model=cost_model)[0] if critical is None else critical
    work = float(cost_model.work().sum()) / cluster.total_speed
    return max(cp, work)


def sequential_time(graph: TaskGraph, cluster: Cluster, cost_model: CostModel | None = None) -> float:
    """The whole graph run one task at a time on the single best worker (speedup's numerator).

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    cost_model : CostModel, optional
    """
    cost_model = cost_model or CostModel(graph, cluster)
    if graph.arrays.n == 0:
        return 0.0
    return float(cost_model.durations.sum(axis=0).min())


def graph_summary(graph: TaskGraph) -> dict:
    """The numbers ``taskflow info`` prints.

    Parameters
    ----------
    graph : TaskGraph

    Returns
    -------
    dict
        name, tasks, edges, total cost, critical path (length and tasks), sources, sinks, bytes on
        edges, largest core count, tasks with exact costs, parallelism.
    """
    a = graph.arrays
    cp, path = critical_path(graph)
    indeg = np.diff(a.pred_ptr)
    outdeg = np.diff(a.succ_ptr)
    return {
        "name": graph.name,
        "tasks": a.n,
        "edges": a.m,
        "total_cost": float(a.cost.sum()),
        "critical_path": cp,
        "critical_path_tasks": len(path),
        "sources": int((indeg == 0).sum()),
        "sinks": int((outdeg == 0).sum()),
        "total_bytes": float(a.size.sum()),
        "max_cores": int(a.cores.max()) if a.n else 0,
        "exact_costs": len(a.costs),
        "parallelism": (float(a.cost.sum()) / cp) if cp > 0 else None,
    }


def task_kind(graph: TaskGraph, t) -> str:
    """A task's kind: its category, else its id up to the first digit, ``-``, ``_`` or ``#``
    (``mProject`` for ``mProject_ID0000001``; the whole id when that leaves nothing). Costs are
    learned per kind, and a run's Dask keys lead with it (Dask's task prefix).

    Parameters
    ----------
    graph : TaskGraph
    t : hashable
        A task id of ``graph``.
    """
    md = graph.metas().get(graph.arrays.index[t]) or {}
    if md.get("category"):
        return str(md["category"])
    s = str(t)
    for k, ch in enumerate(s):
        if ch in "-_#" or ch.isdigit():
            return s[:k] or s
    return s
