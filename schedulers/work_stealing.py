"""``work-stealing``: a model of Dask distributed's own scheduling, for the simulator.

M. Rocklin, "Dask: parallel computation with blocked algorithms and task scheduling", SciPy 2015;
distributed's ``decide_worker`` / ``worker_objective`` and ``stealing.py``.

* A task that becomes ready goes to the worker where it would start earliest by the scheduler's
  estimate: that worker's occupancy (estimated seconds of work assigned and not finished) over its
  cores, plus the time to bring the task's missing inputs there. Ties: the lower worker index.
* A worker that goes idle steals not-yet-started tasks from the most loaded worker, cheapest to
  move first (input transfer time over duration), as long as each steal is expected to finish the
  task sooner on the thief and the thief stays below the victim's load.

Where it differs from Dask (documented in docs/schedulers/work-stealing.md): durations are the
simulator's estimates rather than learned per task prefix; stealing happens when a worker goes idle
rather than on a 100 ms balancing cycle; no root-task queuing; workers run their runnable tasks in
assignment order rather than dask.order priority.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .base import DynamicScheduler, register


@njit(cache=True)
def _earliest(load, dead, feasible, lat, inv, srcs, sizes, locs, ptr, k):  # pragma: no cover - compiled
    """The worker with the earliest estimated start: load + dead + the time to bring the ``k``
    located inputs (source ``srcs[j]``, ``sizes[j]`` bytes, already on ``locs[ptr[j]:ptr[j+1]]``)."""
    W = load.shape[0]
    best = np.inf
    arg = 0
    for w in range(W):
        acc = 0.0
        for j in range(k):
            here = False
            for x in range(ptr[j], ptr[j + 1]):
                if locs[x] == w:
                    here = True
                    break
            if not here:
                src = srcs[j]
                acc += lat[src, w] + sizes[j] * inv[src, w]
        e = load[w] + acc
        e += dead[w]
        if not feasible[w]:
            e = np.inf
        if e < best:
            best = e
            arg = w
    return arg


@register
class WorkStealing(DynamicScheduler):
    name = "work-stealing"
    summary = "Dask-like: earliest estimated start on ready, idle workers steal (dynamic)"

    #: candidates looked at per steal (Dask also bounds its search)
    max_candidates = 64

    def start(self, view):
        m = view.model
        self.d = m.durations
        self.cores = m.cluster.cores.astype(float)
        self.occ = np.zeros(len(m.cluster))
        self.lat = m.latency_matrix
        self.inv = m.inv_bandwidth
        a = view.arrays
        self.pred_ptr, self.pred_idx = a.pred_ptr.tolist(), a.pred_idx.tolist()
        self.pred_size = a.size[a.pred_eid].tolist()
        self.finite = np.isfinite(self.d)
        self.where = {}
        self.dead = np.zeros(len(self.occ))  # +inf for a lost worker
        W = len(self.occ)
        width = max([self.pred_ptr[i + 1] - self.pred_ptr[i] for i in range(a.n)], default=0) + 1
        self.b_src = np.zeros(width, np.int64)
        self.b_size = np.zeros(width)
        self.b_ptr = np.zeros(width + 1, np.int64)
        self.b_locs = np.zeros(width * W, np.int64)

    def _inputs(self, i, view) -> int:
        """Fill the buffers with task i's located inputs; return how many."""
        k = 0
        n = 0
        src_b, size_b, ptr_b, locs_b = self.b_src, self.b_size, self.b_ptr, self.b_locs
        for e in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
            locs = view.locations(self.pred_idx[e])
            if not locs:
                continue
            src_b[k] = locs[0]
            size_b[k] = self.pred_size[e]
            for w in locs:
                locs_b[n] = w
                n += 1
            k += 1
            ptr_b[k] = n
        return k

    def _move_time(self, i, w, view) -> float:
        """Estimated seconds to bring task i's inputs to worker w (what _transfer_vector()[w] is)."""
        t = 0.0
        for e in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
            locs = view.locations(self.pred_idx[e])
            if locs and w not in locs:
                src = locs[0]
                t += self.lat[src, w] + self.pred_size[e] * self.inv[src, w]
        return t

    def on_ready(self, tasks, view):
        out = []
        load = self.occ / self.cores
        for i in tasks:
            k = self._inputs(i, view)
            w = _earliest(load, self.dead, self.finite[i], self.lat, self.inv, self.b_src, self.b_size, self.b_locs,
                          self.b_ptr, k)
            if not view.is_alive(w):  # a loss not yet reported: refresh the mask and choose again
                self.dead[[x for x in range(len(self.dead)) if not view.is_alive(x)]] = np.inf
                w = _earliest(load, self.dead, self.finite[i], self.lat, self.inv, self.b_src, self.b_size,
                              self.b_locs, self.b_ptr, k)
            self.occ[w] += self.d[i, w]
            load[w] = self.occ[w] / self.cores[w]
            self.where[i] = w
            out.append((i, w))
        return out

    def on_finished(self, task, worker, view):
        self.occ[worker] = max(0.0, self.occ[worker] - self.d[task, worker])
        self.where.pop(task, None)
        return []

    def on_idle(self, worker, view):
        thief = worker
        load = self.occ / self.cores
        order = [w for w in np.argsort(-load).tolist() if w != thief and view.is_alive(w) and view.nqueued(w) > 0]
        if not order:
            return []
        victim = order[0]
        cands = view.queued(victim)[: self.max_candidates]
        scored = []
        for i in cands:
            if not np.isfinite(self.d[i, thief]):
                continue
            move = float(self._move_time(i, thief, view))
            scored.append((move / max(self.d[i, thief], 1e-12), move, i))
        scored.sort()
        out = []
        thief_load = self.occ[thief] / self.cores[thief]
        for _, move, i in scored:
            victim_load = self.occ[victim] / self.cores[victim]
            if thief_load >= victim_load:
                break
            finish_thief = thief_load + move + self.d[i, thief]
            finish_victim = victim_load  # the task waits behind the victim's queue on average
            if finish_thief < finish_victim:
                out.append((i, thief))
                self.occ[victim] -= self.d[i, victim]
                self.occ[thief] += self.d[i, thief]
                self.where[i] = thief
                thief_load = self.occ[thief] / self.cores[thief]
        return out

    def on_worker_lost(self, worker, tasks, view):
        self.occ[worker] = 0.0
        self.dead[worker] = np.inf
        for i in tasks:
            self.where.pop(i, None)
        return []
