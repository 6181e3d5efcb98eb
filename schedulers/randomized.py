"""``random``: each task, in topological order, to a uniformly drawn worker that can run it.

A baseline that any real policy must beat. Seeded: the same ``seed`` gives the same schedule.
"""

from __future__ import annotations

import numpy as np

from .base import Scheduler, register
from .placement import AppendTimeline


@register
class RandomScheduler(Scheduler):
    name = "random"
    summary = "uniform random worker per task, topological order (seeded baseline)"

    def plan(self, model):
        rng = np.random.default_rng(self.seed)
        tl = AppendTimeline(model)
        feasible = model.feasible()
        for i in model.arrays.topo.tolist():
            choices = np.flatnonzero(feasible[i])
            tl.place(i, int(choices[rng.integers(len(choices))]))
        return tl.schedule(self.name)
