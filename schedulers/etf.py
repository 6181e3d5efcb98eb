"""``etf``: Earliest Time First.

J.-J. Hwang, Y.-C. Chow, F. D. Anger, C.-Y. Lee, "Scheduling precedence graphs in systems with
interprocessor communication times", SIAM J. Computing 18(2), 1989.

At each step, of every (ready task, worker) pair the one that can start earliest is scheduled; ties
go to the task with the higher b-level. Appended (no gap filling). O(V R) with R ready tasks.
"""

from __future__ import annotations

from ._greedy import greedy
from .base import Scheduler, register, to_schedule

__all__ = ["ETF"]


@register
class ETF(Scheduler):
    """Earliest Time First (Hwang et al. 1989); the rule is in the module docstring."""

    name = "etf"
    summary = "earliest-start (ready task, worker) pair first (Hwang et al. 1989)"

    def plan(self, cost_model):
        return to_schedule(cost_model, greedy(cost_model, mode=0), self.name)
