"""``round-robin``: tasks in topological order dealt to workers in turn (skipping workers that lack
the cores a task needs); each starts as soon as its inputs have arrived (append, no gap filling).
A baseline that ignores costs and communication."""

from __future__ import annotations

import numpy as np

from .base import Scheduler, list_schedule, register, to_schedule, topological_priority

__all__ = ["RoundRobinScheduler"]


@register
class RoundRobinScheduler(Scheduler):
    """A baseline: tasks in topological order dealt to workers in turn."""

    name = "round-robin"
    summary = "workers in turn, topological order (baseline)"

    def plan(self, cost_model):
        a = cost_model.arrays
        feasible = cost_model.feasible().tolist()
        W = cost_model.num_workers
        fixed = np.empty(a.n, dtype=np.int64)
        nxt = 0
        for i in a.topo.tolist():
            while not feasible[i][nxt % W]:
                nxt += 1
            fixed[i] = nxt % W
            nxt += 1
        return to_schedule(
            cost_model,
            list_schedule(cost_model, topological_priority(cost_model), fixed=fixed, insertion=False),
            self.name,
        )
