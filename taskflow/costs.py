"""The one cost model everybody shares: schedulers, the simulator, the validator and the runtime.

``duration(task, worker)`` is the task's exact cost on that worker when the graph gives one
(``costs={worker: seconds}``), else ``cost / speed``, plus the cluster's ``task_overhead``; a task that needs more cores than a worker
has cannot run there (duration ``inf``). ``transfer(edge, a, b)`` is 0 when ``a == b``, else
``latency + size / bandwidth(a, b)``.

A :class:`CostModel` binds a graph to a cluster once and keeps the whole duration matrix
(tasks x workers) as a numpy array, so algorithms look durations up instead of re-deriving them.
"""

from __future__ import annotations

import numpy as np

from .cluster import Cluster
from .errors import GraphError
from .graph import TaskGraph

__all__ = ["CostModel"]


class CostModel:
    """Durations and transfer times of ``graph`` on ``cluster``.

    Raises
    ------
    GraphError
        A task's ``costs`` names a worker the cluster lacks, or a task needs more cores than any
        worker has.
    """

    def __init__(self, graph: TaskGraph, cluster: Cluster):
        self.graph = graph
        self.cluster = cluster
        a = self.arrays = graph.arrays
        W = len(cluster)
        self.num_workers = W
        with np.errstate(over="ignore"):
            d = a.cost[:, None] / cluster.speed[None, :]
        if a.costs:
            index = cluster.index
            for i, exact in a.costs.items():
                for w, secs in exact.items():
                    j = index.get(w)
                    if j is None:
                        raise GraphError(
                            f"task {a.ids[i]!r}: costs name worker {w!r} that the cluster lacks "
                            f"(workers: {', '.join(map(str, cluster.ids))})")
                    d[i, j] = secs
        if cluster.task_overhead:
            d += cluster.task_overhead
        self._check_finite(d, a, cluster)
        self._everywhere = True  # every task can run on every worker (no inf in the durations)
        if a.n and int(a.cores.max()) > 1:
            too_big = a.cores[:, None] > cluster.cores[None, :]
            d[too_big] = np.inf
            self._everywhere = not too_big.any()
            never = np.flatnonzero(too_big.all(axis=1))
            if never.size:
                i = int(never[0])
                raise GraphError(f"task {a.ids[i]!r} needs {int(a.cores[i])} cores; the largest worker "
                                 f"has {int(cluster.cores.max())}")
        d.flags.writeable = False
        #: seconds of task i on worker j (inf where it cannot run)
        self.durations = d
        self.inv_bandwidth = cluster.inv_bandwidth
        self.latency_matrix = cluster.latency_matrix
        self.latency = cluster.latency

    @staticmethod
    def _check_finite(d, a, cluster) -> None:
        """Durations, and their sum over the graph, must be finite floats: a cost near 1.8e308, or
        one over a tiny speed, would make every time after it infinite."""
        with np.errstate(over="ignore"):
            total = float(d.max(axis=1).sum()) if d.size else 0.0
            moved = float(a.size.sum()) * float(cluster.inv_bandwidth.max()) if a.m else 0.0
        if np.isfinite(total) and np.isfinite(moved):
            return
        if not np.isfinite(total):
            bad = np.argwhere(~np.isfinite(d))
            if bad.size:
                i, j = (int(x) for x in bad[0])
                raise GraphError(f"task {a.ids[i]!r} on worker {cluster.ids[j]!r}: its duration overflows "
                                 f"(cost {a.cost[i]:g} at speed {cluster.speed[j]:g})")
            raise GraphError(f"the tasks' durations add up past the largest float ({np.finfo(float).max:.3g} s): "
                             f"times in a schedule could not be represented")
        raise GraphError("the bytes on the graph's edges over the cluster's bandwidth add up past the largest "
                         "float: transfer times could not be represented")

    # ------------------------------------------------------------------ by id
    def duration(self, task, worker) -> float:
        """Seconds ``task`` takes on ``worker`` (ids); inf where it cannot run there.

        Parameters
        ----------
        task, worker : hashable
        """
        return float(self.durations[self.arrays.index[task], self.cluster.index[worker]])

    def transfer(self, edge, a, b) -> float:
        """Seconds to move edge ``(src, dst)``'s data from worker ``a`` to worker ``b``."""
        size = self.graph.edge_size(*edge)
        return self.cluster.transfer_time(size, a, b)

    # ------------------------------------------------------------------ by index (for algorithms)
    def transfer_idx(self, size, a, b):
        """Vectorised transfer time for sizes and worker indices (arrays broadcast)."""
        return self.latency_matrix[a, b] + size * self.inv_bandwidth[a, b]

    def transfer_row(self, size: float, a: int) -> np.ndarray:
        """Transfer time of ``size`` bytes from worker ``a`` to every worker (0 to itself)."""
        return self.latency_matrix[a] + size * self.inv_bandwidth[a]

    def feasible(self) -> np.ndarray:
        """``(tasks x workers)`` booleans: where a task can run (enough cores, a finite duration)."""
        return np.isfinite(self.durations)

    def min_duration(self) -> np.ndarray:
        """Per task, its shortest duration over the workers that can run it."""
        return self.durations.min(axis=1) if self.num_workers else np.zeros(0)

    def mean_duration(self) -> np.ndarray:
        """Per task, its mean duration over the workers that can run it."""
        d = self.durations
        if self._everywhere:  # the same sums, without two more arrays of n x W
            return d.sum(axis=1) / self.num_workers if self.num_workers else np.zeros(len(d))
        fin = np.isfinite(d)
        return np.where(fin, d, 0.0).sum(axis=1) / fin.sum(axis=1)

    def mean_transfer(self, size) -> np.ndarray:
        """Mean transfer time of ``size`` bytes over ordered pairs of distinct workers."""
        W = self.num_workers
        if W < 2:
            return np.zeros_like(np.asarray(size, dtype=np.float64))
        return self.cluster.mean_latency() + np.asarray(size, dtype=np.float64) * self.cluster.mean_inv_bandwidth()

    def work(self) -> np.ndarray:
        """Per task, the least capacity it consumes: min over workers of duration x speed x cores,
        i.e. seconds at speed 1.0 times cores (its cost x cores without exact costs)."""
        d = self.durations * self.cluster.speed[None, :]
        return d.min(axis=1) * self.arrays.cores
