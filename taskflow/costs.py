"""The one cost model everybody shares: schedulers, the simulator, the validator and the runtime.

``duration(task, worker)`` is the task's exact cost on that worker when the graph gives one
(``costs={worker: seconds}``), else ``cost / speed``, plus the cluster's ``task_overhead``; a task that needs more cores than a worker
has cannot run there (duration ``inf``). ``transfer(edge, a, b)`` is 0 when ``a == b``, else
``latency + size / bandwidth(a, b)``.

A :class:`CostModel` binds a graph to a cluster once and keeps the whole duration matrix
(tasks x workers) as a numpy array, so algorithms look durations up instead of re-deriving them.
Above :data:`DENSE_LIMIT` entries (a million tasks on a thousand workers would take 8 GB) the
matrix is a :class:`Durations`: the same numbers computed when they are looked up (a row, an
entry, a list of entries), which the simulator and the dynamic schedulers use as they would the
array; a static scheduler, which needs the whole matrix, gets it as one array when it fits in half the
memory available (:meth:`CostModel.densified`), else a clear error instead of exhausting memory.
"""

from __future__ import annotations

import copy

import numpy as np

from .cluster import Cluster
from .errors import GraphError
from .graph import TaskGraph

__all__ = ["CostModel", "Durations", "DENSE_LIMIT", "available_memory"]


def available_memory() -> float:
    """Bytes of memory available to a new allocation now (psutil's ``available``)."""
    import psutil

    return float(psutil.virtual_memory().available)


#: the most tasks x workers entries a cost model keeps as one dense array (1 GB of float64)
DENSE_LIMIT = 125_000_000
_CHUNK = 1 << 16  # entries per block when a reduction walks the rows of a Durations


class Durations:
    """A (tasks x workers) duration matrix computed on demand, entry for entry equal to the dense
    one: ``cost / speed``, a task's exact per-worker costs instead where it has them, plus the
    overhead; ``inf`` where a task needs more cores than the worker has.

    Indexing as an array: ``d[i, w]`` (a float), ``d[i]`` (a row), ``d[rows, cols]`` with two
    integer arrays (the entries), ``d[rows]`` (a block); ``min`` / ``max`` / ``sum`` over
    ``axis=1``. Turning it into one array raises :class:`~taskflow.errors.GraphError` naming the
    size.

    Parameters
    ----------
    cost, speed : numpy.ndarray
        Per task, per worker.
    overhead : float
        Seconds added to every duration.
    exact : dict
        Task index -> {worker index: seconds}.
    need, cores : numpy.ndarray
        Cores per task, per worker.
    """

    ndim = 2
    dtype = np.dtype(np.float64)

    def __init__(self, cost, speed, overhead, exact, need, cores):
        self.cost, self.speed, self.overhead = cost, speed, float(overhead)
        self.exact, self.need, self.cores = exact, need, cores
        self.shape = (len(cost), len(speed))
        self.size = self.shape[0] * self.shape[1]
        self.multi = bool(len(need) and int(need.max()) > 1)
        # d[i, w] with Python ints (the simulator's event loop asks for millions): plain lists
        self._plain = None if (exact or self.multi) else (cost.tolist(), speed.tolist())

    def __len__(self):
        return self.shape[0]

    def block(self, rows) -> np.ndarray:
        """The dense rows ``rows`` (an integer array or a slice)."""
        rows = np.arange(*rows.indices(self.shape[0])) if isinstance(rows, slice) else np.asarray(rows, np.int64)
        with np.errstate(over="ignore"):
            b = self.cost[rows, None] / self.speed[None, :]
        if self.exact:
            for k, i in enumerate(rows.tolist()):
                for j, secs in self.exact.get(i, {}).items():
                    b[k, j] = secs
        if self.overhead:
            b += self.overhead
        if self.multi:
            b[self.need[rows, None] > self.cores[None, :]] = np.inf
        return b

    def entries(self, rows, cols) -> np.ndarray:
        """``d[rows[k], cols[k]]`` for each k."""
        rows, cols = np.asarray(rows, np.int64), np.asarray(cols, np.int64)
        with np.errstate(over="ignore"):
            v = self.cost[rows] / self.speed[cols]
        if self.exact:
            for k in np.flatnonzero(np.isin(rows, np.fromiter(self.exact, np.int64, len(self.exact)))).tolist():
                secs = self.exact[int(rows[k])].get(int(cols[k]))
                if secs is not None:
                    v[k] = secs
        if self.overhead:
            v += self.overhead
        if self.multi:
            v[self.need[rows] > self.cores[cols]] = np.inf
        return v

    def __getitem__(self, key):
        if type(key) is tuple and len(key) == 2 and self._plain is not None:
            i, j = key
            if type(i) is int and type(j) is int and i >= 0 and j >= 0:
                return self._plain[0][i] / self._plain[1][j] + self.overhead
        if isinstance(key, tuple) and len(key) == 2:
            i, j = key
            if (type(i) is int or isinstance(i, np.integer)) and (type(j) is int or isinstance(j, np.integer)):
                if self.multi and self.need[i] > self.cores[j]:
                    return np.inf
                exact = self.exact.get(int(i)) if self.exact else None
                v = exact[int(j)] if exact and int(j) in exact else self.cost[i] / self.speed[j]
                return v + self.overhead if self.overhead else v
            if isinstance(i, (int, np.integer)):
                return self.block([i])[0][j]
            if isinstance(j, (int, np.integer)) or isinstance(j, slice):
                return self.block(i)[:, j]
            return self.entries(*np.broadcast_arrays(np.asarray(i), np.asarray(j)))
        if isinstance(key, (int, np.integer)):
            return self.block([key])[0]
        return self.block(key)

    def _reduce(self, fn) -> np.ndarray:
        step = max(1, _CHUNK // max(1, self.shape[1]))
        return np.concatenate(
            [fn(self.block(slice(k, k + step))) for k in range(0, self.shape[0], step)] or [np.zeros(0)]
        )

    def distinct(self, extremes: bool = False):
        """``(d, cols)``: these durations on the workers ``cols`` only, one of each kind (speed and
        cores), so that a task's smallest or largest duration over ``d``'s workers is the one over
        all of them; with ``extremes``, for the smallest and largest only, the fastest and slowest
        worker of each core count (a task's duration falls as speed rises: ``cost / speed`` is
        rounded monotonically). None where tasks have exact per-worker costs, or every worker is
        of its own kind."""
        if self.exact or not self.shape[1]:
            return None
        speed, cores = self.speed, self.cores if self.multi else np.zeros(len(self.speed), np.int64)
        order = np.lexsort((speed, cores))
        if extremes:  # the first and last of each core count, by speed
            c = cores[order]
            first = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
            last = np.r_[first[1:] - 1, len(c) - 1]
            cols = np.unique(order[np.concatenate([first, last])])
        else:
            s, c = speed[order], cores[order]
            cols = np.sort(order[np.flatnonzero(np.r_[True, (s[1:] != s[:-1]) | (c[1:] != c[:-1])])])
        if len(cols) == self.shape[1]:
            return None
        few = Durations(self.cost, self.speed[cols], self.overhead, {}, self.need, self.cores[cols])
        few.multi = self.multi  # (off while a cost model checks the durations before the cores' inf)
        return few, cols

    def min(self, axis=None):
        """Per task (``axis=1``) or per worker (``axis=0``), the smallest duration."""
        return self._along(axis, lambda b, k: b.min(axis=k), np.minimum)

    def max(self, axis=None):
        """Per task (``axis=1``) or per worker (``axis=0``), the largest duration."""
        return self._along(axis, lambda b, k: b.max(axis=k), np.maximum)

    def sum(self, axis=None):
        """Per task (``axis=1``) or per worker (``axis=0``), the sum of the durations (per worker:
        the sum of the tasks' costs over its speed where no task has exact costs or more cores
        than a worker, equal to the entries' sum but for rounding)."""
        if axis == 0 and not self.exact and not self.multi:
            return float(np.sum(self.cost)) / self.speed + self.overhead * self.shape[0]
        return self._along(axis, lambda b, k: b.sum(axis=k), np.add)

    def _along(self, axis, fn, combine):
        if axis == 1:
            if combine is not np.add:  # a smallest or largest: over one worker of each kind
                few = self.distinct(extremes=True)
                if few is not None:
                    return few[0]._reduce(lambda b: fn(b, 1))
            return self._reduce(lambda b: fn(b, 1))
        if axis != 0:
            raise TypeError("a Durations reduces along axis=1 (per task) or axis=0 (per worker) only")
        step = max(1, _CHUNK // max(1, self.shape[1]))
        out = None
        for k in range(0, self.shape[0], step):
            part = fn(self.block(slice(k, k + step)), 0)
            out = part if out is None else combine(out, part)
        return np.zeros(self.shape[1]) if out is None else out

    def __array__(self, dtype=None, copy=None):
        n, W = self.shape
        raise GraphError(
            f"{n:,} tasks x {W:,} workers: the whole duration matrix would take "
            f"{n * W * 8 / 2**30:.1f} GiB (more than the dense limit of {DENSE_LIMIT:,} entries); "
            f"use a dynamic scheduler (e.g. work-stealing) or fewer workers"
        )


def _exact_costs(a, cluster) -> dict:
    """Task index -> {worker index: seconds} of the tasks' exact per-worker costs."""
    index = cluster.index
    exact = {}
    for i, costs in (a.costs or {}).items():
        for w, secs in costs.items():
            j = index.get(w)
            if j is None:
                raise GraphError(
                    f"task {a.ids[i]!r}: costs name worker {w!r} that the cluster lacks "
                    f"(workers: {', '.join(map(str, cluster.ids))})"
                )
            exact.setdefault(i, {})[j] = float(secs)
    return exact


def _fits_somewhere(a, cluster) -> None:
    """Raise GraphError for the first task needing more cores than the largest worker has."""
    never = np.flatnonzero(a.cores > int(cluster.cores.max())) if a.n else []
    if len(never):
        i = int(never[0])
        raise GraphError(
            f"task {a.ids[i]!r} needs {int(a.cores[i])} cores; the largest worker has {int(cluster.cores.max())}"
        )


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
        exact = _exact_costs(a, cluster)
        #: seconds of task i on worker j (inf where it cannot run)
        self.durations = self._lazy(a, cluster, exact) if a.n * W > DENSE_LIMIT else self._dense(a, cluster, exact)
        self.inv_bandwidth = cluster.inv_bandwidth
        self.latency_matrix = cluster.latency_matrix
        self.latency = cluster.latency

    def _dense(self, a, cluster, exact) -> np.ndarray:
        """The durations as one array, checked."""
        with np.errstate(over="ignore"):
            d = a.cost[:, None] / cluster.speed[None, :]
        for i, row in exact.items():
            for j, secs in row.items():
                d[i, j] = secs
        if cluster.task_overhead:
            d += cluster.task_overhead
        self._check_finite(d, a, cluster)
        self._everywhere = True  # every task can run on every worker (no inf in the durations)
        if a.n and int(a.cores.max()) > 1:
            too_big = a.cores[:, None] > cluster.cores[None, :]
            d[too_big] = np.inf
            self._everywhere = not too_big.any()
            _fits_somewhere(a, cluster)
        d.flags.writeable = False
        return d

    def _lazy(self, a, cluster, exact) -> "Durations":
        """The durations as a :class:`Durations` (too many entries for one array), checked alike."""
        d = Durations(a.cost, cluster.speed, cluster.task_overhead, exact, a.cores, cluster.cores)
        _fits_somewhere(a, cluster)
        multi, d.multi = d.multi, False  # checked before the cores' inf, as the dense matrix is
        self._check_finite(d, a, cluster)
        d.multi = multi
        self._everywhere = not multi or bool((a.cores <= int(cluster.cores.min())).all())
        return d

    def densified(self) -> "CostModel":
        """This cost model with its durations as one numpy array: what a static scheduler plans from.

        Raises
        ------
        GraphError
            The array would take more than half the memory available now (the size is named).
        """
        if self.dense:
            return self
        d = self.durations
        need = d.size * 8
        avail = available_memory()
        if need > avail / 2:
            raise GraphError(
                f"{d.shape[0]:,} tasks x {d.shape[1]:,} workers: a static scheduler plans from the whole "
                f"duration matrix, {need / 2**30:.1f} GiB, more than half the memory available "
                f"({avail / 2**30:.1f} GiB); use a dynamic scheduler (e.g. work-stealing) or fewer workers"
            )
        m = copy.copy(self)
        m.durations = d.block(slice(None))
        m.durations.flags.writeable = False
        return m

    @property
    def dense(self) -> bool:
        """Whether the durations are one numpy array (else a :class:`Durations`)."""
        return isinstance(self.durations, np.ndarray)

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
            if isinstance(d, np.ndarray):
                bad = np.argwhere(~np.isfinite(d))
            else:  # the first row with an overflow, then its column
                rows = np.flatnonzero(~np.isfinite(d.max(axis=1)))[:1]
                bad = np.argwhere(~np.isfinite(d.block(rows)))
                bad[:, 0] = rows[0] if rows.size else 0
            if bad.size:
                i, j = (int(x) for x in bad[0])
                raise GraphError(
                    f"task {a.ids[i]!r} on worker {cluster.ids[j]!r}: its duration overflows "
                    f"(cost {a.cost[i]:g} at speed {cluster.speed[j]:g})"
                )
            raise GraphError(
                f"the tasks' durations add up past the largest float ({np.finfo(float).max:.3g} s): "
                f"times in a schedule could not be represented"
            )
        raise GraphError(
            "the bytes on the graph's edges over the cluster's bandwidth add up past the largest "
            "float: transfer times could not be represented"
        )

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
        d = self.durations
        return np.isfinite(d if isinstance(d, np.ndarray) else d.block(slice(None)))

    @property
    def everywhere(self) -> bool:
        """Every task can run on every worker (no duration is ``inf``)."""
        return self._everywhere

    def feasible_row(self, i: int) -> np.ndarray:
        """The workers task ``i`` can run on (booleans; read-only, possibly shared)."""
        if self._everywhere:
            if getattr(self, "_all", None) is None:
                self._all = np.ones(self.num_workers, bool)
                self._all.flags.writeable = False
            return self._all
        return np.isfinite(self.durations[i])

    def min_duration(self) -> np.ndarray:
        """Per task, its shortest duration over the workers that can run it."""
        return self.durations.min(axis=1) if self.num_workers else np.zeros(0)

    def mean_duration(self) -> np.ndarray:
        """Per task, its mean duration over the workers that can run it."""
        d = self.durations
        if self._everywhere:  # the same sums, without two more arrays of n x W
            return d.sum(axis=1) / self.num_workers if self.num_workers else np.zeros(len(d))
        if not isinstance(d, np.ndarray):
            return d._reduce(lambda b: np.where(np.isfinite(b), b, 0.0).sum(axis=1) / np.isfinite(b).sum(axis=1))
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
        d = self.durations
        if not isinstance(d, np.ndarray):
            speed = self.cluster.speed
            few = d.distinct()  # the same products over one worker of each kind
            if few is not None:
                d, speed = few[0], speed[few[1]]
            return d._reduce(lambda b: (b * speed[None, :]).min(axis=1)) * self.arrays.cores
        return (d * self.cluster.speed[None, :]).min(axis=1) * self.arrays.cores
