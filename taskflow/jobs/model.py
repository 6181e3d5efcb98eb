"""A shared cluster and a trace of jobs: :class:`JobCluster`, :class:`JobTrace`, and the checks
every trace passes before a job scheduler sees it (one line naming the job and the field)."""

from __future__ import annotations

import dataclasses
import math

from ..errors import FormatError
from ..jobscheduling import Job

__all__ = ["JobCluster", "JobTrace", "check_job"]


@dataclasses.dataclass(frozen=True)
class JobCluster:
    """Racks of nodes of workers (the papers' switches, machines and GPUs).

    Parameters
    ----------
    racks, nodes_per_rack, workers_per_node : int
    cores_per_node : int
        CPU cores of a node (Tiresias' ``num_cpu_p_node``; 0: not said).
    memory_per_node : float
        GB of memory of a node (0: not said).
    bandwidth : float
        Bytes per second of a worker's link inside its rack (default 12.5e9: 100 Gb/s).
    uplink : float
        Bytes per second of each rack's uplink, shared by the jobs whose allreduces cross it
        (0: not said, no contention between racks modelled).
    name : str

    Raises
    ------
    FormatError
        A count below 1 (a cluster of no worker).
    """

    racks: int = 1
    nodes_per_rack: int = 1
    workers_per_node: int = 8
    cores_per_node: int = 0
    memory_per_node: float = 0.0
    bandwidth: float = 12.5e9
    uplink: float = 0.0
    name: str = "cluster"

    def __post_init__(self):
        for f in ("racks", "nodes_per_rack", "workers_per_node"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise FormatError(
                    f"cluster {self.name!r}: {f} must be an integer >= 1 (a cluster needs workers), got {v!r}"
                )
        for f, low in (("bandwidth", False), ("uplink", True)):
            v = getattr(self, f)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v < 0
                or (v == 0 and not low)
            ):
                raise FormatError(
                    f"cluster {self.name!r}: {f} must be bytes per second {'>= 0' if low else '> 0'}, got {v!r}"
                )

    @property
    def workers(self) -> int:
        """Workers in all."""
        return self.racks * self.nodes_per_rack * self.workers_per_node

    @property
    def nodes(self) -> tuple:
        """``nodes[w]``: the node of worker ``w`` (workers numbered node by node)."""
        return tuple(w // self.workers_per_node for w in range(self.workers))

    def rack(self, worker: int) -> int:
        """The rack of ``worker``.

        Parameters
        ----------
        worker : int
        """
        return worker // (self.workers_per_node * self.nodes_per_rack)

    @property
    def worker_racks(self) -> tuple:
        """``worker_racks[w]``: the rack of worker ``w``."""
        return tuple(self.rack(w) for w in range(self.workers))

    def to_dict(self) -> dict:
        """JSON-ready."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class JobTrace:
    """Jobs in arrival order, and the cluster they share (``cluster`` None: the caller's).

    Parameters
    ----------
    jobs : list of Job
    cluster : JobCluster, optional
    name : str
    """

    jobs: list
    cluster: JobCluster | None = None
    name: str = "trace"

    def __post_init__(self):
        seen = set()
        for j in self.jobs:
            if j.id in seen:
                raise FormatError(f"trace {self.name!r}: job {j.id!r} appears twice")
            seen.add(j.id)
        self.jobs = sorted(self.jobs, key=lambda j: (j.arrival, j.id))

    def __len__(self) -> int:
        return len(self.jobs)

    def fit(self, cluster: JobCluster, skip: bool = False) -> tuple:
        """``(jobs that fit, [(job, why)] rejected)``: a job asking for more workers than
        ``cluster`` has is an error naming it, or with ``skip`` set aside with its reason.

        Parameters
        ----------
        cluster : JobCluster
        skip : bool

        Raises
        ------
        FormatError
        """
        keep, rejected = [], []
        for j in self.jobs:
            if j.workers > cluster.workers:
                why = f"asks for {j.workers} workers, the cluster has {cluster.workers}"
                if not skip:
                    raise FormatError(f"trace {self.name!r}: job {j.id!r} {why} (skip such jobs to run the rest)")
                rejected.append((j, why))
            else:
                keep.append(j)
        return keep, rejected


def _number(where: str, field: str, value, low: float = 0.0, strict: bool = False, integer: bool = False):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FormatError(f"{where}: {field} must be a number, got {value!r}")
    if integer and value != int(value):
        raise FormatError(f"{where}: {field} must be a whole number, got {value!r}")
    if value < low or (strict and value == low):
        raise FormatError(f"{where}: {field} must be {'>' if strict else '>='} {low:g}, got {value!r}")
    return int(value) if integer else float(value)


def check_job(where: str, id, arrival, workers, duration, **rest) -> Job:
    """A :class:`~taskflow.jobscheduling.Job` from a trace's fields, each checked: times numbers
    >= 0, workers a whole number >= 1, duration > 0.

    Parameters
    ----------
    where : str
        How errors name the job (``trace.csv line 4, job 'j3'``).
    id, arrival, workers, duration
    **rest
        ``model``, ``iterations``, ``batch``, ``user``, ``priority``, ``deadline``, ``min_workers``,
        ``max_workers``.

    Raises
    ------
    FormatError
    """
    if id is None or str(id) == "":
        raise FormatError(f"{where}: a job needs an id")
    rest = {k: v for k, v in rest.items() if v is not None}
    for k in ("iterations", "batch", "min_workers", "max_workers"):
        if k in rest:
            rest[k] = _number(where, k, rest[k], 1, integer=True)
    n = _number(where, "workers", workers, 1, integer=True)
    if rest.get("min_workers", n) > n or rest.get("max_workers", n) < n:
        raise FormatError(
            f"{where}: an elastic job's min_workers <= workers <= max_workers, got "
            f"{rest.get('min_workers', n)}, {n}, {rest.get('max_workers', n)}"
        )
    if "priority" in rest:
        rest["priority"] = _number(where, "priority", rest["priority"], -math.inf)
    if "deadline" in rest:
        rest["deadline"] = _number(where, "deadline", rest["deadline"])
    for k in ("model", "user"):
        if k in rest:
            rest[k] = str(rest[k])
    return Job(
        str(id),
        _number(where, "arrival", arrival),
        _number(where, "workers", workers, 1, integer=True),
        _number(where, "duration", duration, 0.0, strict=True),
        **rest,
    )
