"""Learning a graph's costs from what a run measured."""

from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..graph import TaskGraph

__all__ = ["learn_costs"]


def learn_costs(graph: TaskGraph, report, cluster: Cluster | None = None) -> TaskGraph:
    """A copy of ``graph`` whose costs are what ``report`` (a RunReport or Trace) measured, per task
    name prefix (``meta['category']``, else the id up to its first ``-``/``_``/digit) and per worker:
    a task gets exact costs on the workers where its prefix ran (their mean duration, in unscaled
    seconds), and ``cost`` = the prefix's mean duration x speed elsewhere.

    Parameters
    ----------
    graph : TaskGraph
    report : RunReport or Trace
    cluster : Cluster, optional
        Worker speeds (default: the report's cluster).

    Returns
    -------
    TaskGraph
    """
    trace = report.trace if hasattr(report, "trace") else report
    scale = getattr(report, "time_scale", 1.0) or 1.0
    cluster = cluster or getattr(report, "cluster", None)
    speed = {str(w.id): w.speed for w in cluster.workers} if cluster is not None else {}
    by = {}
    for r in trace.runs:
        p = _task_prefix(graph, r.task)
        by.setdefault(p, {}).setdefault(str(r.worker), []).append((r.finish - r.start) / scale)
    cost, costs = {}, {}
    for t in graph.ids:
        p = _task_prefix(graph, t)
        if p not in by:
            continue
        per = {w: float(np.mean(v)) for w, v in by[p].items()}
        norm = [d * speed.get(w, 1.0) for w, d in per.items()]
        cost[t] = float(np.mean(norm))
        wid = {str(w.id): w.id for w in cluster.workers} if cluster is not None else {w: w for w in per}
        costs[t] = {wid[w]: d for w, d in per.items() if w in wid}
    return graph.with_costs(cost=cost, costs=costs)


def _task_prefix(graph: TaskGraph, t) -> str:
    md = graph.task(t).meta or {}
    if md.get("category"):
        return str(md["category"])
    s = str(t)
    for k, ch in enumerate(s):
        if ch in "-_#" or ch.isdigit():
            return s[:k] or s
    return s
