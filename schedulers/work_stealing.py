"""``work-stealing``: a model of Dask distributed's own scheduling, for the simulator.

M. Rocklin, "Dask: parallel computation with blocked algorithms and task scheduling", SciPy 2015;
distributed's ``decide_worker`` / ``worker_objective`` and ``stealing.py``.

* A task that becomes ready goes to the worker where it would start earliest by the scheduler's
  estimate: that worker's occupancy (estimated seconds of work assigned and not finished) over its
  cores, plus the time to bring the task's missing inputs there. Ties: the lower worker index.
* A worker that goes idle steals not-yet-started tasks from the most loaded worker, cheapest to
  move first (input transfer time over duration), as long as each steal is expected to finish the
  task sooner on the thief and the thief stays below the victim's load.

Option ``knows_speeds`` (default True): with False the scheduler's estimates ignore worker speeds,
as Dask's do (its duration estimates are per task prefix, averaged over whichever workers ran
it): every task is estimated at its mean duration over the workers. The runtime predicts Dask's
own scheduling with ``knows_speeds=False``.

Where it differs from Dask (documented in docs/schedulers/work-stealing.md): durations are the
simulator's estimates rather than learned per task prefix; stealing happens when a worker goes idle
rather than on a 100 ms balancing cycle; no root-task queuing; workers run their runnable tasks in
assignment order rather than dask.order priority.
"""

from __future__ import annotations

import numpy as np
from taskflow.costs import Durations
from taskflow.stealing import earliest, rank, take, victim

from taskflow.scheduling import DynamicScheduler, register

__all__ = ["WorkStealing"]


@register
class WorkStealing(DynamicScheduler):
    """A model of Dask's scheduling for the simulator: earliest estimated start, idle workers steal."""

    name = "work-stealing"
    option_names = ("knows_speeds",)
    summary = "Dask-like: earliest estimated start on ready, idle workers steal (dynamic)"

    #: candidates looked at per steal (Dask also bounds its search)
    max_candidates = 64
    #: the simulator's compiled loop makes this class's decisions itself (taskflow.simulator.fastpath)
    compiled_model = "work-stealing"

    def start(self, view):
        m = view.cost_model
        self.d = m.durations
        if not self.options.get("knows_speeds", True):  # Dask's view: one estimate per task, any worker
            mean = m.mean_duration()
            if m.dense:
                self.d = np.where(np.isfinite(self.d), mean[:, None], np.inf)
            else:
                d = self.d
                self.d = Durations(mean, np.ones(len(m.cluster)), 0.0, {}, d.need, d.cores)
        self.cores = m.cluster.cores.astype(float)
        self.occ = np.zeros(len(m.cluster))
        self.feasible = m.feasible_row
        self.dead = np.zeros(len(self.occ))  # +inf for a lost worker

    def on_ready(self, tasks, view):
        out = []
        load = self.occ / self.cores
        for i in tasks:
            move = view.transfer_estimates(i)
            w = earliest(load, self.dead, self.feasible(i), move)
            if not view.is_alive(w):  # a loss not yet reported: refresh the mask and choose again
                self.dead[[x for x in range(len(self.dead)) if not view.is_alive(x)]] = np.inf
                w = earliest(load, self.dead, self.feasible(i), move)
            self.occ[w] += self.d[i, w]
            load[w] = self.occ[w] / self.cores[w]
            out.append((i, w))
        return out

    def on_finished(self, task, worker, view):
        self.occ[worker] = max(0.0, self.occ[worker] - self.d[task, worker])
        return []

    def on_idle(self, worker, view):
        thief = worker
        load = self.occ / self.cores
        counts = view.queued_counts()
        vic = victim(load, self.dead, counts, thief)
        while vic >= 0 and not view.is_alive(vic):  # a loss not yet reported to this scheduler
            self.dead[vic] = np.inf
            vic = victim(load, self.dead, counts, thief)
        if vic < 0:
            return []
        cands = view.queued(vic)[: self.max_candidates]
        n = len(cands) + 1
        score, moves, ranked = np.empty(n), np.empty(n), np.empty(n, np.int64)
        m = 0
        for i in cands:
            if not np.isfinite(self.d[i, thief]):
                continue
            move = view.transfer_estimate(i, thief)
            m = rank(score, moves, ranked, m, move / max(self.d[i, thief], 1e-12), move, i)
        d_thief = np.array([self.d[i, thief] for i in ranked[:m]] + [0.0])
        d_victim = np.array([self.d[i, vic] for i in ranked[:m]] + [0.0])
        bi, bw = np.empty(n, np.int64), np.empty(n, np.int64)
        k = take(self.occ, self.cores, vic, thief, ranked, moves, d_thief, d_victim, m, bi, bw)
        return [(int(bi[x]), int(bw[x])) for x in range(k)]

    def on_worker_lost(self, worker, tasks, view):
        self.occ[worker] = 0.0
        self.dead[worker] = np.inf
        return []
