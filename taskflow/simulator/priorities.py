"""Transfer-priority classes from the tasks' ``meta["priority"]``."""

from __future__ import annotations

import math

from ..errors import GraphError
from ..graph import TaskGraph

__all__ = ["transfer_classes"]


def transfer_classes(graph: TaskGraph):
    """Each task's transfer-priority class: 0 for the highest ``meta["priority"]``, then 1, ...

    Parameters
    ----------
    graph : TaskGraph

    Returns
    -------
    (list or None, int)
        The class per task index (None when every task has the same priority) and how many classes.

    Raises
    ------
    TaskflowError
        A priority that is not a finite number (the task is named).
    """
    n = graph.arrays.n
    ids = graph.arrays.ids
    prio = [0.0] * n
    for i, md in graph.metas().items():
        v = md.get("priority")
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise GraphError(f"task {ids[i]!r}: meta priority must be a finite number, got {v!r}")
            prio[i] = float(v)
    levels = sorted(set(prio), reverse=True)
    rank = {v: c for c, v in enumerate(levels)}
    return ([rank[v] for v in prio] if len(levels) > 1 else None), len(levels)
