"""Where a graph runs: workers with a speed and a number of cores, and the network between them.

Bandwidth is in bytes per second: one scalar for every pair, optionally overridden per ordered pair
(``bandwidths={a: {b: B}}`` is the rate from ``a`` to ``b``; the other direction keeps the scalar
unless given too). ``latency`` is seconds added to every transfer between two distinct workers.
``backplane`` (optional) caps the bytes per second of all transfers together: the one host that
every worker of a LocalCluster shares (its cores copy every byte), or a cluster's switch; the
``maxmin`` network shares it max-min fairly, ``simple`` ignores it.

``racks`` (optional, worker id -> rack label) with ``uplink`` (bytes per second) describes a
two-level network: the flows leaving a rack share its uplink, the flows entering a rack share its
downlink (each at ``uplink``), as in a rack switch joined to a core switch, or two switches joined
by one cable. A pair in different racks never gets more than ``uplink`` (every network model sees that);
``maxmin`` also shares the uplinks among concurrent flows, which per-pair bandwidths cannot say.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Iterable

import numpy as np

from .checks import MAX_CORES
from .errors import ClusterError

__all__ = ["Worker", "Cluster", "DEFAULT_BANDWIDTH", "MAX_WORKERS"]

#: Bytes per second used when none is given: 1 GB/s (about a 10 Gbit/s link).
DEFAULT_BANDWIDTH = 1e9

#: The most workers a cluster may have (the network is held as worker x worker matrices).
MAX_WORKERS = 4096


def _as_float(value, what: str, unit: str = "") -> float:
    """``value`` as a float, or a ClusterError: text and booleans are not numbers."""
    kind = f"a number of {unit}" if unit else "a number"
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise ClusterError(f"{what} must be {kind}, got {value!r}"[:200])
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ClusterError(f"{what} must be {kind}, got {value!r}"[:200]) from None
    except OverflowError:
        raise ClusterError(f"{what} is too large for a number") from None


@dataclass(frozen=True)
class Worker:
    """A worker: ``speed`` relative to 1.0 (a task of cost c takes c / speed seconds), ``cores``
    tasks at once. ``address`` is the Dask worker address when the cluster is a real one."""

    id: Hashable
    speed: float = 1.0
    cores: int = 1
    address: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if not isinstance(self.id, (str, int)) or isinstance(self.id, bool):
            raise ClusterError(f"worker id must be a str or int, got {self.id!r}")
        speed = _as_float(self.speed, f"worker {self.id!r}: speed")
        if not (0 < speed < math.inf):
            raise ClusterError(f"worker {self.id!r}: speed must be finite and > 0, got {self.speed!r}")
        object.__setattr__(self, "speed", speed)
        c = self.cores
        if isinstance(c, float) and c.is_integer():
            c = int(c)
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 1 <= c <= MAX_CORES:
            raise ClusterError(
                f"worker {self.id!r}: cores must be an integer from 1 to {MAX_CORES}, got {self.cores!r}"[:200]
            )
        object.__setattr__(self, "cores", int(c))


def _rate(value, where: str) -> float:
    b = _as_float(value, where, "bytes/s")
    if not b > 0:  # also false for NaN; +inf means free transfers
        raise ClusterError(f"{where} must be > 0 bytes/s, got {value!r}")
    return b


def _seconds(value, field: str) -> float:
    """``value`` as seconds (finite, >= 0), or a ClusterError naming ``field``."""
    v = _as_float(value, field, "seconds")
    if not (0 <= v < math.inf):
        raise ClusterError(f"{field} must be finite and >= 0, got {value!r}")
    return v


class Cluster:
    """A set of workers and the network between them.

    Parameters
    ----------
    workers : iterable of Worker
    bandwidth : float
        Bytes per second between any two distinct workers (``inf`` for free transfers).
    bandwidths : dict, optional
        ``{a: {b: bytes_per_s}}`` overrides for ordered pairs.
    latency : float
        Seconds added to every transfer between two distinct workers.
    task_overhead : float
        Seconds added to every task's duration on any worker: what the runtime spends per task
        besides its work (Dask's dispatch, a few ms on a small machine). 0 by default;
        ``cluster_from_dask(calibrate=True)`` measures it.
    backplane : float, optional
        Bytes per second of all concurrent transfers together (None: no shared limit).
    racks : dict, optional
        Worker id -> rack label (str or int); every worker named. Needs ``uplink``.
    uplink : float, optional
        Bytes per second of each rack's uplink and of its downlink, shared by the flows that
        leave (enter) the rack.

    Examples
    --------
    >>> c = Cluster.homogeneous(2, bandwidth=100.0, latency=0.5)
    >>> c.ids, c.transfer_time(200, "w0", "w1"), c.transfer_time(200, "w0", "w0")
    (['w0', 'w1'], 2.5, 0.0)
    """

    def __init__(
        self,
        workers: Iterable[Worker],
        bandwidth: float = DEFAULT_BANDWIDTH,
        bandwidths: dict | None = None,
        latency: float = 0.0,
        name: str = "cluster",
        task_overhead: float = 0.0,
        backplane: float | None = None,
        racks: dict | None = None,
        uplink: float | None = None,
    ):
        self.name = name
        self.workers = tuple(workers)
        if not self.workers:
            raise ClusterError("cluster has no workers (need at least 1)")
        if len(self.workers) > MAX_WORKERS:
            raise ClusterError(f"cluster has {len(self.workers):,} workers, more than the limit of {MAX_WORKERS:,}")
        for w in self.workers:
            if not isinstance(w, Worker):
                raise ClusterError(f"not a Worker: {w!r}")
        self.index = {}
        for i, w in enumerate(self.workers):
            if w.id in self.index:
                raise ClusterError(f"duplicate worker id {w.id!r}")
            self.index[w.id] = i
        self.bandwidth = _rate(bandwidth, "bandwidth")
        self.latency = _seconds(latency, "latency")
        self.task_overhead = _seconds(task_overhead, "task_overhead")
        self.backplane = None if backplane is None else _rate(backplane, "backplane")
        self.bandwidths = {}
        for a, row in (bandwidths or {}).items():
            if a not in self.index:
                raise ClusterError(f"bandwidths: unknown worker {a!r}")
            if not isinstance(row, dict):
                raise ClusterError(f"bandwidths[{a!r}] must be a mapping worker -> bytes/s")
            for b, v in row.items():
                if b not in self.index:
                    raise ClusterError(f"bandwidths[{a!r}]: unknown worker {b!r}")
                if a != b:
                    self.bandwidths.setdefault(a, {})[b] = _rate(v, f"bandwidths[{a!r}][{b!r}]")
        n = len(self.workers)
        self.racks, self.uplink = None, None
        #: rack index per worker (-1: no racks)
        self.rack_index = np.full(n, -1, dtype=np.int64)
        if racks is not None or uplink is not None:
            if not isinstance(racks, dict) or uplink is None:
                raise ClusterError("racks (worker -> rack label) and uplink (bytes/s) go together")
            unknown = [a for a in racks if a not in self.index]
            if unknown:
                raise ClusterError(f"racks: unknown worker {unknown[0]!r}")
            missing = [w.id for w in self.workers if w.id not in racks]
            if missing:
                raise ClusterError(f"racks: worker {missing[0]!r} has no rack")
            labels = {}
            for a, r in racks.items():
                if isinstance(r, bool) or not isinstance(r, (str, int)):
                    raise ClusterError(f"racks[{a!r}]: a rack label must be a str or int, got {r!r}")
                self.rack_index[self.index[a]] = labels.setdefault(r, len(labels))
            self.racks = {w.id: racks[w.id] for w in self.workers}
            self.uplink = _rate(uplink, "uplink")
        self.speed = np.array([w.speed for w in self.workers], dtype=np.float64)
        self.cores = np.array([w.cores for w in self.workers], dtype=np.int64)
        inv = np.full((n, n), 1.0 / self.bandwidth)
        for a, row in self.bandwidths.items():
            for b, v in row.items():
                inv[self.index[a], self.index[b]] = 1.0 / v
        if self.racks is not None:  # a pair across racks gets at most the uplink
            cross = self.rack_index[:, None] != self.rack_index[None, :]
            inv = np.where(cross, np.maximum(inv, 1.0 / self.uplink), inv)
        np.fill_diagonal(inv, 0.0)
        #: seconds per byte from worker i to worker j (0 on the diagonal)
        self.inv_bandwidth = inv
        #: latency per ordered pair (0 on the diagonal)
        self.latency_matrix = np.full((n, n), self.latency)
        np.fill_diagonal(self.latency_matrix, 0.0)
        for arr in (self.speed, self.cores, self.inv_bandwidth, self.latency_matrix, self.rack_index):
            arr.flags.writeable = False

    # ------------------------------------------------------------------ constructors
    @classmethod
    def homogeneous(
        cls,
        n: int,
        speed: float = 1.0,
        cores: int = 1,
        bandwidth: float = DEFAULT_BANDWIDTH,
        latency: float = 0.0,
        prefix: str = "w",
        name: str | None = None,
    ) -> "Cluster":
        """``n`` identical workers named ``w0 .. w{n-1}``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ClusterError(f"cluster has no workers: need n >= 1, got {n!r}")
        return cls(
            [Worker(f"{prefix}{i}", speed, cores) for i in range(n)],
            bandwidth=bandwidth,
            latency=latency,
            name=name or f"{n}x{prefix}",
        )

    @classmethod
    def heterogeneous(
        cls,
        speeds: Iterable[float],
        cores: int = 1,
        bandwidth: float = DEFAULT_BANDWIDTH,
        latency: float = 0.0,
        prefix: str = "w",
        name: str | None = None,
    ) -> "Cluster":
        """One worker per speed, named ``w0 ..``."""
        speeds = list(speeds)
        return cls(
            [Worker(f"{prefix}{i}", s, cores) for i, s in enumerate(speeds)],
            bandwidth=bandwidth,
            latency=latency,
            name=name or f"hetero-{len(speeds)}",
        )

    def __len__(self) -> int:
        return len(self.workers)

    def __iter__(self):
        return iter(self.workers)

    def __repr__(self) -> str:
        return f"<Cluster {self.name!r}: {len(self)} workers, bandwidth {self.bandwidth:g} B/s, latency {self.latency:g} s>"

    def __eq__(self, other):
        return (
            isinstance(other, Cluster)
            and self.workers == other.workers
            and self.bandwidth == other.bandwidth
            and self.bandwidths == other.bandwidths
            and self.latency == other.latency
            and self.task_overhead == other.task_overhead
            and self.backplane == other.backplane
            and self.racks == other.racks
            and self.uplink == other.uplink
        )

    @property
    def rack_count(self) -> int:
        """How many racks (0 without racks); :attr:`rack_index` numbers them 0 .. count - 1."""
        return int(self.rack_index.max()) + 1 if self.racks is not None else 0

    @property
    def ids(self) -> list:
        """Worker ids in order."""
        return [w.id for w in self.workers]

    def worker(self, id) -> Worker:
        """The worker with this id.

        Parameters
        ----------
        id : hashable

        Raises
        ------
        ClusterError
            No such worker.
        """
        try:
            return self.workers[self.index[id]]
        except KeyError:
            raise ClusterError(f"unknown worker {id!r}") from None

    def bandwidth_between(self, a, b) -> float:
        """Bytes per second from worker ``a`` to worker ``b`` (inf on the same worker).

        Parameters
        ----------
        a, b : hashable
            Worker ids.
        """
        if a == b:
            return math.inf
        try:
            inv = float(self.inv_bandwidth[self.index[a], self.index[b]])
        except KeyError as e:
            raise ClusterError(f"unknown worker {e.args[0]!r}") from None
        return 1.0 / inv if inv > 0 else math.inf

    def transfer_time(self, size: float, a, b) -> float:
        """Seconds to move ``size`` bytes from worker ``a`` to ``b``: 0 on the same worker, else
        latency + size / bandwidth(a, b)."""
        i, j = self.index[a], self.index[b]
        if i == j:
            return 0.0
        return self.latency + size * float(self.inv_bandwidth[i, j])

    @property
    def total_speed(self) -> float:
        """Sum of speed x cores: the work (seconds at speed 1) the cluster does per second."""
        return float(np.sum(self.speed * self.cores))

    @property
    def total_cores(self) -> int:
        """Cores of all workers together."""
        return int(self.cores.sum())

    def mean_inv_bandwidth(self) -> float:
        """Mean seconds per byte over ordered pairs of distinct workers (0 for one worker)."""
        n = len(self.workers)
        if n < 2:
            return 0.0
        return float(self.inv_bandwidth.sum() / (n * (n - 1)))

    def mean_latency(self) -> float:
        """Latency averaged over ordered pairs of distinct workers (0 for one worker)."""
        return self.latency if len(self.workers) > 1 else 0.0

    def subset(self, ids: Iterable) -> "Cluster":
        """The cluster restricted to the workers ``ids`` (e.g. the survivors of a failure)."""
        keep = set(ids)
        ws = [w for w in self.workers if w.id in keep]
        bws = {a: {b: v for b, v in row.items() if b in keep} for a, row in self.bandwidths.items() if a in keep}
        racks = {a: r for a, r in self.racks.items() if a in keep} if self.racks is not None else None
        return self.replace(workers=ws, bandwidths=bws, racks=racks)

    def on_workers(self, live: Iterable[Worker]) -> "Cluster":
        """This declared cluster over the workers actually there (Dask's live workers, by name,
        compared as strings): a worker it declares keeps its speed and takes the live cores and
        address; one it does not declare (it joined) comes as given, on a rack of its own; pairs
        and racks of workers not there are dropped. The network, latency and overhead stay.

        Parameters
        ----------
        live : iterable of Worker
        """
        mine = {str(w.id): w for w in self.workers}
        ws = []
        for w in live:
            d = mine.get(str(w.id))
            ws.append(
                Worker(
                    w.id,
                    d.speed if d is not None else w.speed,
                    w.cores,
                    address=w.address or (d.address if d is not None else None),
                )
            )
        named = {str(w.id): w.id for w in ws}
        pairs = {
            named[str(a)]: {named[str(b)]: v for b, v in row.items() if str(b) in named}
            for a, row in self.bandwidths.items()
            if str(a) in named
        }
        racks = None
        if self.racks is not None:
            label = {str(a): r for a, r in self.racks.items()}
            racks = {w.id: label.get(str(w.id), f"joined:{w.id}") for w in ws}
        return self.replace(
            workers=ws,
            bandwidths={a: row for a, row in pairs.items() if row},
            racks=racks,
            uplink=self.uplink if racks is not None else None,
        )

    def with_task_overhead(self, seconds: float) -> "Cluster":
        """The same cluster with another per-task overhead."""
        return self.replace(task_overhead=seconds)

    def replace(self, **changes) -> "Cluster":
        """A copy with some constructor arguments changed (``workers``, ``bandwidth``,
        ``bandwidths``, ``latency``, ``name``, ``task_overhead``, ``backplane``, ``racks``,
        ``uplink``).

        Parameters
        ----------
        **changes
            Constructor arguments.
        """
        args = dict(
            workers=self.workers,
            bandwidth=self.bandwidth,
            bandwidths=self.bandwidths,
            latency=self.latency,
            name=self.name,
            task_overhead=self.task_overhead,
            backplane=self.backplane,
            racks=self.racks,
            uplink=self.uplink,
        )
        unknown = set(changes) - set(args)
        if unknown:
            raise TypeError(f"Cluster.replace: unknown argument(s) {sorted(unknown)}")
        args.update(changes)
        return Cluster(**args)
