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
from taskflow.jit import kernel

from taskflow.scheduling import DynamicScheduler, register

__all__ = ["WorkStealing"]


@kernel(cache=True)
def _earliest(load, dead, feasible, move):  # pragma: no cover - compiled
    """The worker with the earliest estimated start: its load, plus the time to bring the task's
    inputs there (``move``, from :meth:`SimView.transfer_estimates`); lost (``dead`` = inf) and
    infeasible workers never; ties: the lower index."""
    best = np.inf
    arg = 0
    for w in range(load.shape[0]):
        e = load[w] + move[w]
        e += dead[w]
        if not feasible[w]:
            e = np.inf
        if e < best:
            best = e
            arg = w
    return arg


@kernel(cache=True)
def _victim(load, dead, nqueued, thief):  # pragma: no cover - compiled
    """The most loaded worker other than ``thief`` with queued tasks and not lost (``dead`` = inf);
    ties: the lower index; -1 when there is none."""
    best = -np.inf
    arg = -1
    for w in range(load.shape[0]):
        if w != thief and nqueued[w] > 0 and dead[w] == 0.0 and load[w] > best:
            best = load[w]
            arg = w
    return arg


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
            w = _earliest(load, self.dead, self.feasible(i), move)
            if not view.is_alive(w):  # a loss not yet reported: refresh the mask and choose again
                self.dead[[x for x in range(len(self.dead)) if not view.is_alive(x)]] = np.inf
                w = _earliest(load, self.dead, self.feasible(i), move)
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
        victim = _victim(load, self.dead, counts, thief)
        while victim >= 0 and not view.is_alive(victim):  # a loss not yet reported to this scheduler
            self.dead[victim] = np.inf
            victim = _victim(load, self.dead, counts, thief)
        if victim < 0:
            return []
        cands = view.queued(victim)[: self.max_candidates]
        scored = []
        for i in cands:
            if not np.isfinite(self.d[i, thief]):
                continue
            move = view.transfer_estimate(i, thief)
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
                thief_load = self.occ[thief] / self.cores[thief]
        return out

    def on_worker_lost(self, worker, tasks, view):
        self.occ[worker] = 0.0
        self.dead[worker] = np.inf
        return []
