"""``blevel``: critical-path-first list scheduling by b-level (HLFET-style).

T. L. Adam, K. M. Chandy, J. R. Dickson, "A comparison of list schedules for parallel processing
systems", CACM 17(12), 1974 (highest level first); as evaluated by Beránek et al., "Analysis of
workflow schedulers in simulated distributed environments", J. Supercomputing 78, 2022 (Estee),
who found it among the most competitive.

Among ready tasks, the one with the highest b-level (longest path to an exit by mean durations,
communication left out, as in Estee) goes next, to the worker where it finishes earliest counting
its input transfers; tasks are appended to a worker's queue (no gap filling), as a worker that runs
tasks in arrival order would.
"""

from __future__ import annotations

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import b_level

__all__ = ["BLevel"]


@register
class BLevel(Scheduler):
    """b-level list scheduling (HLFET-style), append placement; the rule is in the module docstring."""

    name = "blevel"
    summary = "highest b-level ready task to its earliest-finish worker, append (Estee's best)"
    plans_lazily = True  # a row of durations at a time: a million tasks need no 8 GB matrix

    def plan(self, cost_model):
        return to_schedule(cost_model, list_schedule(cost_model, b_level(cost_model), insertion=False), self.name)
