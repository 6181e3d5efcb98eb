"""``round-robin``: tasks in topological order dealt to workers in turn (skipping workers that lack
the cores a task needs). A baseline that ignores costs and communication."""

from __future__ import annotations

from .base import Scheduler, register
from .placement import AppendTimeline


@register
class RoundRobinScheduler(Scheduler):
    name = "round-robin"
    summary = "workers in turn, topological order (baseline)"

    def plan(self, model):
        tl = AppendTimeline(model)
        feasible = model.feasible()
        W = model.num_workers
        nxt = 0
        for i in model.arrays.topo.tolist():
            while not feasible[i, nxt % W]:
                nxt += 1
            tl.place(i, nxt % W)
            nxt += 1
        return tl.schedule(self.name)
