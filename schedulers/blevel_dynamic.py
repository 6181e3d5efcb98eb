"""``blevel-dynamic``: b-level list scheduling decided as the run unfolds (Estee's "blevel-gt").

Beránek et al., "Analysis of workflow schedulers in simulated distributed environments",
J. Supercomputing 78, 2022.

Ready tasks wait in one queue ordered by b-level (longest path to an exit by estimated mean
durations). Whenever a worker has free cores not already promised to a queued task, the ready task
of highest b-level goes to the worker with free cores that needs the fewest bytes moved to run it
(ties: the less loaded, then the lower index). Tasks are never assigned ahead of free capacity, so
nothing needs stealing.
"""

from __future__ import annotations

import heapq

from .base import DynamicScheduler, register
from .ranks import b_level

__all__ = ["BLevelDynamic"]


@register
class BLevelDynamic(DynamicScheduler):
    """Dynamic b-level (Estee's blevel-gt): ready tasks by b-level to free workers; see the module docstring."""

    name = "blevel-dynamic"
    summary = "highest b-level ready task to a free worker needing fewest bytes moved (dynamic)"

    def start(self, view):
        self.bl = b_level(view.cost_model).tolist()
        self.pending = []
        self.cores = view.arrays.cores.tolist()

    def priority(self, task):
        return self.bl[task]

    def _dispatch(self, view):
        cap = {}
        for w in view.alive_workers():
            # cores promised to queued tasks that can run (not those waiting for a recomputed input)
            c = view.free_cores(w) - sum(self.cores[i] for i in view.queued(w) if view.is_ready(i))
            if c > 0:
                cap[w] = c
        out = []
        skipped = []
        d = view.cost_model.durations
        while self.pending and cap:
            item = heapq.heappop(self.pending)
            i = item[2]
            if view.started(i) or view.assigned(i) >= 0:
                continue
            fits = [w for w, c in cap.items() if c >= self.cores[i] and d[i, w] < float("inf")]
            if not fits:
                skipped.append(item)
                continue
            w = min(fits, key=lambda x: (view.missing_bytes(i, x), view.occupancy(x) / view.cluster.cores[x], x))
            out.append((i, w))
            cap[w] -= self.cores[i]
            if cap[w] <= 0:
                del cap[w]
        for item in skipped:
            heapq.heappush(self.pending, item)
        return out

    def on_ready(self, tasks, view):
        for i in tasks:
            heapq.heappush(self.pending, (-self.bl[i], i, i))
        return self._dispatch(view)

    def on_finished(self, task, worker, view):
        return self._dispatch(view)

    def on_idle(self, worker, view):
        return self._dispatch(view)

    def on_worker_lost(self, worker, tasks, view):
        return []  # the lost tasks come back through on_ready once they are ready
