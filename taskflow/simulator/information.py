"""What a scheduler is told of costs, as opposed to what the simulated world does.

* ``exact``: the graph's costs.
* ``mean``: every task at the mean cost (exact per-worker costs dropped).
* ``blind``: every task costs 1 (exact per-worker costs dropped).
* ``user``: a task's ``meta["expected_cost"]`` where given (as Estee graphs carry), else its cost.
"""

from __future__ import annotations

from ..errors import UsageError
from ..graph import TaskGraph

__all__ = ["INFORMATION", "estimated_graph"]

INFORMATION = ("exact", "mean", "blind", "user")


def estimated_graph(graph: TaskGraph, information: str) -> TaskGraph:
    """The graph as the scheduler is told it.

    Parameters
    ----------
    graph : TaskGraph
    information : {"exact", "mean", "blind", "user"}

    Returns
    -------
    TaskGraph
        ``graph`` itself for ``exact``, else a copy with the told costs.

    Raises
    ------
    TaskflowError
        Unknown mode.
    """
    if information == "exact":
        return graph
    a = graph.arrays
    if information == "mean":
        mean = float(a.cost.mean()) if a.n else 0.0
        return graph.with_costs(cost={t: mean for t in a.ids}, costs={a.ids[i]: None for i in a.costs})
    if information == "blind":
        return graph.with_costs(cost={t: 1.0 for t in a.ids}, costs={a.ids[i]: None for i in a.costs})
    if information == "user":
        expected = {a.ids[i]: md["expected_cost"] for i, md in graph.metas().items() if "expected_cost" in md}
        return graph.with_costs(cost=expected)
    raise UsageError(f"unknown information mode {information!r}; known: {', '.join(INFORMATION)}")
