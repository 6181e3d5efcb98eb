"""``minmin``: Min-Min.

O. H. Ibarra, C. E. Kim, "Heuristic algorithms for scheduling independent tasks on nonidentical
processors", JACM 24(2), 1977; with precedence as in Braun et al., JPDC 61(6), 2001.

At each step the ready task whose best completion time is smallest is scheduled on that worker.
Appended (no gap filling). O(V R) with R ready tasks.
"""

from __future__ import annotations

from ._greedy import greedy
from .base import Scheduler, register, to_schedule

__all__ = ["MinMin"]


@register
class MinMin(Scheduler):
    """Min-Min (Ibarra and Kim 1977); the rule is in the module docstring."""

    name = "minmin"
    summary = "ready task with the smallest best completion time first (Ibarra & Kim 1977)"

    def plan(self, cost_model):
        return to_schedule(cost_model, greedy(cost_model, mode=1), self.name)
