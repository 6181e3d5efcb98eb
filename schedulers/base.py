"""The scheduler interface and the registry that maps names to scheduler classes.

A *static* scheduler turns ``(graph, cluster)`` into a whole :class:`~taskflow.Schedule`. Every
tool takes ``--scheduler NAME``; :func:`get_scheduler` builds one by name with keyword options.
"""

from __future__ import annotations

from taskflow.cluster import Cluster
from taskflow.costs import CostModel
from taskflow.errors import UnknownSchedulerError
from taskflow.graph import TaskGraph
from taskflow.schedule import Schedule

__all__ = ["Scheduler", "DynamicScheduler", "register", "get_scheduler", "scheduler_class", "available", "list_schedule",
           "topological_priority", "to_schedule"]

_REGISTRY: dict = {}


class Scheduler:
    """Base class. Subclasses set ``name`` and implement :meth:`plan`.

    Parameters
    ----------
    seed : int, optional
        For policies that draw random numbers; the same seed gives the same schedule.
    """

    name = "base"
    kind = "static"
    #: one line for ``taskflow schedulers``
    summary = ""

    def __init__(self, seed: int | None = None, **options):
        self.seed = seed
        self.options = options

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed!r})"

    def schedule(self, graph: TaskGraph, cluster: Cluster, model: CostModel | None = None) -> Schedule:
        """Plan ``graph`` on ``cluster`` and return the schedule."""
        model = model or CostModel(graph, cluster)
        return self.plan(model)

    def plan(self, model: CostModel) -> Schedule:  # pragma: no cover - abstract
        raise NotImplementedError


def register(cls):
    """Class decorator: make a scheduler reachable by its ``name``."""
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"scheduler name {cls.name!r} is taken by {_REGISTRY[cls.name].__name__}")
    _REGISTRY[cls.name] = cls
    return cls


def scheduler_class(name: str):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownSchedulerError(name, _REGISTRY) from None


def get_scheduler(name, **options) -> Scheduler:
    """A scheduler instance by name (an instance passes through unchanged).

    Raises
    ------
    UnknownSchedulerError
        The name is not registered; the message lists the known ones.
    """
    if isinstance(name, Scheduler):
        return name
    return scheduler_class(name)(**options)


def available(kind: str | None = None) -> list:
    """Registered scheduler names, sorted (optionally only ``static`` or ``dynamic`` ones)."""
    return sorted(n for n, c in _REGISTRY.items() if kind is None or c.kind == kind)


def list_schedule(model: CostModel, priority, fixed=None, bias=None, insertion: bool = True):
    """Run the shared compiled list-scheduling loop (see :mod:`schedulers._kernels`).

    Returns per-task-index arrays ``(worker, start, finish)``.
    """
    import numpy as np

    from ._kernels import list_schedule as kernel

    a = model.arrays
    n = a.n
    fixed = np.full(n, -1, dtype=np.int64) if fixed is None else np.asarray(fixed, dtype=np.int64)
    use_bias = bias is not None
    bias = np.zeros((1, 1)) if bias is None else np.ascontiguousarray(bias, dtype=np.float64)
    return kernel(np.ascontiguousarray(model.durations), a.cores, model.cluster.cores, a.pred_ptr, a.pred_idx,
                  np.ascontiguousarray(a.size[a.pred_eid]), a.succ_ptr, a.succ_idx, model.latency_matrix,
                  model.inv_bandwidth, np.asarray(priority, dtype=np.float64), fixed, bias, use_bias,
                  bool(insertion))


def topological_priority(model: CostModel):
    """A priority that makes the ready heap follow the graph's topological order."""
    import numpy as np

    a = model.arrays
    prio = np.empty(a.n)
    prio[a.topo] = -np.arange(a.n, dtype=np.float64)
    return prio


def to_schedule(model: CostModel, result, name: str, extra: dict | None = None) -> Schedule:
    worker, start, finish = result
    return Schedule.from_indices(model.graph, model.cluster, worker, start, finish, scheduler=name, extra=extra)


class DynamicScheduler(Scheduler):
    """A policy that decides as the run unfolds, through events from the simulator (or a runtime).

    Each hook returns a list of ``(task, worker)`` index pairs: an unassigned ready task is
    assigned; a task already assigned but not started is moved (stolen). The ``view`` argument
    answers questions about the current state (see :class:`taskflow.simulator.SimView`): ``now``,
    ``model`` (the *estimated* costs), ``alive_workers()``, ``queued(w)``, ``occupancy(w)``,
    ``free_cores(w)``, ``missing_bytes(task, w)``, ``transfer_estimate(task, w)``, ...
    """

    kind = "dynamic"

    def start(self, view) -> None:
        """Called once before anything runs."""

    def on_ready(self, tasks, view) -> list:
        """``tasks`` (indices) have every input computed and no worker yet."""
        return []

    def on_finished(self, task, worker, view) -> list:
        return []

    def on_idle(self, worker, view) -> list:
        """``worker`` has nothing running and nothing queued."""
        return []

    def on_worker_lost(self, worker, tasks, view) -> list:
        """``worker`` died; ``tasks`` were queued or running there and need a new home once ready."""
        return []

    def priority(self, task) -> float:
        """Order of a worker's runnable tasks: higher first (ties: order of assignment)."""
        return 0.0

    def plan(self, model: CostModel) -> Schedule:
        """Run the policy in the simulator (exact costs, no contention) and return what ran."""
        from taskflow.simulator import simulate

        return simulate(model.graph, model.cluster, self, network="simple").to_schedule()
