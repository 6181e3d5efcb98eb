"""``mct``: Minimum Completion Time.

T. D. Braun et al., "A comparison of eleven static heuristics for mapping a class of independent
tasks onto heterogeneous distributed computing systems", JPDC 61(6), 2001.

Tasks in topological order (no priority), each to the worker where it completes earliest counting
input transfers; appended to the worker (no gap filling). A greedy baseline.
"""

from __future__ import annotations

from .base import Scheduler, list_schedule, register, to_schedule, topological_priority

__all__ = ["MCT"]


@register
class MCT(Scheduler):
    """Minimum Completion Time: topological order, each task to its earliest-finish worker."""

    name = "mct"
    summary = "topological order, minimum completion time worker (greedy baseline)"
    plans_lazily = True  # a row of durations at a time: a million tasks need no 8 GB matrix

    def plan(self, cost_model):
        return to_schedule(
            cost_model, list_schedule(cost_model, topological_priority(cost_model), insertion=False), self.name
        )
