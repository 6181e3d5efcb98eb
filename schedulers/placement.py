"""Append-only list-scheduling state shared by the simple policies.

Each worker keeps the times at which its cores become free (sorted); a task needing ``c`` cores
starts on a worker once its inputs have arrived there and ``c`` cores are free, and is appended
after what the worker already runs (no insertion into idle gaps).
"""

from __future__ import annotations

import bisect

import numpy as np

from taskflow.costs import CostModel
from taskflow.schedule import Schedule


class AppendTimeline:
    def __init__(self, model: CostModel):
        self.model = model
        a = self.arrays = model.arrays
        self.core_free = [[0.0] * int(c) for c in model.cluster.cores.tolist()]
        self.worker = np.full(a.n, -1, dtype=np.int64)
        self.start = np.zeros(a.n)
        self.finish = np.zeros(a.n)
        self._lat = model.latency_matrix
        self._inv = model.inv_bandwidth

    def data_ready(self, i: int) -> np.ndarray:
        """When all of task ``i``'s inputs could be on each worker (its predecessors are placed)."""
        a = self.arrays
        lo, hi = a.pred_ptr[i], a.pred_ptr[i + 1]
        if lo == hi:
            return np.zeros(self.model.num_workers)
        ps = a.pred_idx[lo:hi]
        wp = self.worker[ps]
        sizes = a.size[a.pred_eid[lo:hi]]
        t = self.finish[ps][:, None] + self._lat[wp] + sizes[:, None] * self._inv[wp]
        return t.max(axis=0)

    def earliest_start(self, i: int, w: int, ready: float) -> float:
        c = int(self.arrays.cores[i])
        return max(ready, self.core_free[w][c - 1])

    def commit(self, i: int, w: int, start: float) -> float:
        finish = start + float(self.model.durations[i, w])
        free = self.core_free[w]
        c = int(self.arrays.cores[i])
        del free[:c]
        for _ in range(c):
            bisect.insort(free, finish)
        self.worker[i] = w
        self.start[i] = start
        self.finish[i] = finish
        return finish

    def place(self, i: int, w: int, ready: np.ndarray | None = None) -> float:
        r = self.data_ready(i) if ready is None else ready
        return self.commit(i, w, self.earliest_start(i, w, float(r[w])))

    def schedule(self, name: str) -> Schedule:
        return Schedule.from_indices(self.model.graph, self.model.cluster, self.worker, self.start,
                                     self.finish, scheduler=name)
