"""``random``: each task to a uniformly drawn worker that has the cores it needs; tasks start in
topological order as soon as their inputs have arrived (append, no gap filling).

A baseline that any real scheduler must beat. Seeded: the same ``seed`` gives the same schedule.
"""

from __future__ import annotations

import numpy as np

from .base import Scheduler, list_schedule, register, to_schedule, topological_priority

__all__ = ["RandomScheduler"]


@register
class RandomScheduler(Scheduler):
    """A seeded baseline: each task to a uniformly drawn worker that can run it."""

    name = "random"
    summary = "uniform random worker per task, topological order (seeded baseline)"

    def plan(self, cost_model):
        rng = np.random.default_rng(self.seed)
        feasible = cost_model.feasible()
        # draw among feasible workers: scale a uniform draw to each row's count of choices
        counts = feasible.sum(axis=1)
        pick = (rng.random(cost_model.arrays.n) * counts).astype(np.int64)
        cum = np.cumsum(feasible, axis=1) - 1
        fixed = np.argmax((cum == pick[:, None]) & feasible, axis=1)
        return to_schedule(
            cost_model,
            list_schedule(cost_model, topological_priority(cost_model), fixed=fixed, insertion=False),
            self.name,
        )
