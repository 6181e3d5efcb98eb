"""What a dynamic scheduler may ask about the simulated world (task and worker indices, estimated costs).

The transfer-time estimate lives here for schedulers: :meth:`SimView.transfer_estimates` prices
bringing a task's computed inputs to every worker (each input from its source, :meth:`Simulator.source_of`,
at latency + bytes / bandwidth, one input after another), by the kernel the compiled loop's work
stealing prices them with (:func:`._datamoves.fetch_times`); schedulers use it rather than their own.
"""

from __future__ import annotations

import numpy as np

from ._datamoves import fetch_time, fetch_times, inputs_to_fetch
from .states import DONE, RUNNING

__all__ = ["SimView"]

_INPUTS_TO_FETCH, _FETCH_TIME = inputs_to_fetch.plain, fetch_time.plain


class SimView:
    """A dynamic scheduler's window on one simulation (see :class:`~taskflow.scheduling.DynamicScheduler`).

    Attributes
    ----------
    cost_model : CostModel
        The *estimated* costs (what the scheduler is told).
    arrays : GraphArrays
    cluster : Cluster
    """

    def __init__(self, sim):
        self._s = sim
        self.cost_model = sim.cost_model
        self.arrays = sim.a
        self.cluster = sim.cluster
        W = len(sim.cluster)
        width = int(np.diff(sim.a.pred_ptr).max(initial=0)) + 1
        # scratch for pricing a task's inputs (what inputs_to_fetch lists)
        self._fx = (
            np.zeros(width, np.int64),
            np.zeros(width),
            np.zeros(width * W, np.int64),
            np.zeros(width + 1, np.int64),
        )
        self._lat = sim.cost_model.latency_matrix
        self._inv = sim.cost_model.inv_bandwidth
        self._here = np.zeros(W, np.bool_)

    @property
    def now(self) -> float:
        """The simulated time."""
        return self._s.now

    def alive_workers(self) -> list:
        """Indices of the workers not lost."""
        return [w for w, ok in enumerate(self._s.alive) if ok]

    def is_alive(self, w: int) -> bool:
        """Whether worker ``w`` is not lost."""
        return self._s.alive[w]

    def assigned(self, task: int) -> int:
        """The worker ``task`` is assigned to, or -1."""
        return self._s.assigned[task]

    def is_ready(self, task: int) -> bool:
        """Every input of ``task`` has been computed (it may still have to be moved)."""
        return self._s.npred[task] == 0

    def start_time(self, task: int) -> float:
        """When ``task``'s latest run started (0.0 before it first starts)."""
        return self._s.start_time[task]

    def started(self, task: int) -> bool:
        """``task`` is running or done."""
        return self._s.status[task] >= RUNNING

    def queued(self, w: int) -> list:
        """Tasks assigned to ``w`` that have not started, in assignment order."""
        return self._s.queued_on(w)

    def running(self, w: int) -> list:
        """Tasks running on ``w``."""
        return list(self._s.running[w])

    def free_cores(self, w: int) -> int:
        """Cores of ``w`` not used by running tasks."""
        return self._s.free[w]

    def occupancy(self, w: int) -> float:
        """Estimated seconds of work on ``w``: queued tasks plus what is left of running ones."""
        s = self._s
        d = s.est_d
        now = s.now
        occ = 0.0
        for i in s.running[w]:
            occ += max(0.0, float(d[i, w]) - (now - s.start_time[i]))
        return occ + s.queued_est[w]

    def nqueued(self, w: int) -> int:
        """How many tasks are queued on ``w``."""
        return int(self._s.nqueued[w])

    def queued_counts(self) -> np.ndarray:
        """How many tasks are queued on each worker (read only: the simulator's own array)."""
        a = self._s.nqueued.view()
        a.flags.writeable = False
        return a

    def locations(self, task: int) -> list:
        """Workers holding (some of) ``task``'s output."""
        return self._s.holders(task)

    def missing_bytes(self, task: int, w: int) -> float:
        """Bytes of ``task``'s computed inputs not yet on ``w``."""
        s = self._s
        total = 0.0
        for k in range(s.pred_ptr[task], s.pred_ptr[task + 1]):
            p = s.pred_idx[k]
            if s.status[p] == DONE and s.holds(p, w) < s.pred_size[k]:
                total += s.pred_size[k]
        return total

    def transfer_estimates(self, task: int) -> np.ndarray:
        """Estimated seconds to bring ``task``'s computed inputs to each worker, one after another.

        As in Dask, an output is on a worker or not: an input costs nothing where a copy of it is,
        elsewhere it comes from its source (:meth:`Simulator.source_of`, the worker the simulated
        world fetches from) at latency + bytes / bandwidth."""
        s, fx = self._s, self._fx
        k = _INPUTS_TO_FETCH(s.G, s.T, s.F, s.K, task, *fx)
        out = np.empty(len(self.cluster))
        fetch_times(*fx, k, self._lat, self._inv, out, self._here)  # (a kernel call: compiled where it pays)
        return out

    def transfer_estimate(self, task: int, w: int) -> float:
        """Estimated seconds to bring ``task``'s computed inputs to ``w`` (see :meth:`transfer_estimates`;
        the same sum, for one worker)."""
        s = self._s
        return float(_FETCH_TIME(s.G, s.T, s.F, s.K, self._lat, self._inv, task, w))
