"""The scheduler interface and the registry that maps names to schedulers.

A *static* scheduler (:class:`Scheduler`) turns ``(graph, cluster)`` into a whole
:class:`~taskflow.Schedule`. A *dynamic* scheduler (:class:`DynamicScheduler`) answers events as a run
unfolds (tasks became ready, a task finished, a worker went idle or was lost) with assignments; the
simulator and the runtime drive it, so one scheduler serves both.

Schedulers are found by name. The package ``schedulers`` registers ours; any installed package can
add its own under the entry-point group ``taskflow.schedulers`` (name = the scheduler's ``name``,
value = ``module:Class``), for example in its ``setup.cfg``::

    [options.entry_points]
    taskflow.schedulers =
        my-scheduler = my_package.scheduler:MyScheduler

The registry loads an entry point the first time its name is asked for, so the core never imports
a scheduler module itself. A class can also be registered at run time with :func:`register`.
"""

from __future__ import annotations

import dataclasses

from .cluster import Cluster
from .costs import CostModel
from .errors import SchedulerError, TaskflowError, UnknownSchedulerError
from .graph import TaskGraph
from .schedule import Schedule

__all__ = [
    "CHOICES",
    "PLAN",
    "DASK",
    "SUBSET",
    "AdaptiveOptions",
    "Scheduler",
    "DynamicScheduler",
    "register",
    "get_scheduler",
    "scheduler_class",
    "available",
    "require_runnable",
    "canonical_name",
    "ALIASES",
    "ENTRY_POINT_GROUP",
]

#: the entry-point group through which installed packages provide schedulers
ENTRY_POINT_GROUP = "taskflow.schedulers"

_REGISTRY: dict = {}
_ENTRY_POINTS: dict | None = None  # name -> importlib.metadata.EntryPoint, read once


#: what an adaptive scheduler may run a graph by inside Dask: its plan, Dask's own scheduling, or
#: Dask's own held to a subset of the workers (the fastest, or one group joined by wide links)
PLAN, DASK, SUBSET = "plan", "dask", "subset"
CHOICES = (PLAN, DASK, SUBSET)


@dataclasses.dataclass(frozen=True)
class AdaptiveOptions:
    """What the scheduler plugin reads of an adaptive scheduler (:attr:`Scheduler.adaptive`): the
    options of its guard and its re-decisions, checked once, here. See :mod:`schedulers.adaptive`.

    Parameters
    ----------
    margin : float
        Keep a choice over Dask's own only where predicted at least this fraction shorter.
    drift : float
        Re-decide when a measured duration or speed is this fraction off what a decision used.
    interval : float
        Seconds between two re-decisions of a run, at least.
    replans : int
        Re-decisions per run at most.
    limit : int
        Tasks above which the guard does not simulate.
    spread : float
        Plan only where the fastest worker is more than this many times the slowest (or the
        network is declared uneven).
    steal : bool
        Let Dask's work stealing move a planned task to an idle worker.
    choices : tuple of str
        Of :data:`CHOICES`, in that order.
    ccr : float
        A link is narrow for a graph when moving its mean edge takes more than this many times
        its mean task.

    Raises
    ------
    SchedulerError
        An option out of its range (named).
    """

    margin: float = 0.15
    drift: float = 0.3
    interval: float = 0.25
    replans: int = 8
    limit: int = 3000
    spread: float = 2.0
    steal: bool = False
    choices: tuple = CHOICES
    ccr: float = 10.0

    def __post_init__(self):
        for name, low, high in (
            ("margin", 0.0, 1.0),
            ("drift", 0.0, float("inf")),
            ("interval", 0.0, float("inf")),
            ("spread", 1.0, float("inf")),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value < high:
                raise SchedulerError(f"adaptive: {name} must be a number in [{low:g}, {high:g}), got {value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("replans", "limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SchedulerError(f"adaptive: {name} must be an integer >= 0, got {value!r}")
        ccr = self.ccr
        if isinstance(ccr, bool) or not isinstance(ccr, (int, float)) or not 0 < ccr < float("inf"):
            raise SchedulerError(f"adaptive: ccr must be a finite number > 0, got {ccr!r}")
        choices = self.choices
        if not isinstance(choices, (list, tuple)) or not choices or not all(c in CHOICES for c in choices):
            raise SchedulerError(f"adaptive: choices must be a non-empty list of {', '.join(CHOICES)}, got {choices!r}")
        if not isinstance(self.steal, bool):
            raise SchedulerError(f"adaptive: steal must be True or False, got {self.steal!r}")
        object.__setattr__(self, "ccr", float(ccr))
        object.__setattr__(self, "steal", bool(self.steal))
        object.__setattr__(self, "choices", tuple(c for c in CHOICES if c in set(choices)))

    def as_options(self) -> dict:
        """The options as keyword arguments (they travel with the scheduler's name to Dask's
        scheduler, where the plugin makes the scheduler again)."""
        out = dataclasses.asdict(self)
        out["choices"] = list(self.choices)
        return out


class Scheduler:
    """A static scheduler. Subclasses set ``name`` (and ``summary``) and implement :meth:`plan`.

    Parameters
    ----------
    seed : int, optional
        For schedulers that draw random numbers; the same seed gives the same schedule (default 0:
        a plan is reproducible unless another seed is asked for).
    **options
        Scheduler-specific options, kept in ``self.options``.
    """

    name = "base"
    kind = "static"
    #: one line for ``taskflow schedulers``
    summary = ""
    #: whether its plans may run a task more than once (``Schedule.copies``): such plans are
    #: validated and written like any other, but neither the simulator nor the Dask runtime
    #: carries them out (see :func:`require_runnable`)
    duplicates = False
    #: the options of the scheduler plugin's run-by-run decisions between its plan and Dask's own
    #: scheduling (:class:`AdaptiveOptions`), or None where it only plans: a capability declared,
    #: not looked for
    adaptive: AdaptiveOptions | None = None
    #: whether :meth:`plan` reads durations only a task's row at a time (``list_schedule`` and the
    #: ranks): a cost model too large for one tasks x workers array (``DENSE_LIMIT``) is planned as
    #: it is, not made dense first
    plans_lazily = False
    #: the options it reads (beyond ``seed``); another one is refused, with the nearest known
    #: (None: any, for a scheduler whose options a runtime fills in)
    option_names: tuple | None = ()

    def __init__(self, seed: int | None = None, **options):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise SchedulerError(f"{self.name}: seed must be an integer >= 0, got {seed!r}")
        if self.option_names is not None:
            for key in options:
                if key not in self.option_names:
                    import difflib
                    import inspect

                    known = [
                        "seed",
                        *(
                            p
                            for p in inspect.signature(type(self).__init__).parameters
                            if p not in ("self", "seed", "options")
                        ),
                        *self.option_names,
                    ]
                    near = difflib.get_close_matches(key, known, n=1)
                    raise SchedulerError(
                        f"{self.name}: unknown option {key!r}"
                        + (f"; did you mean {near[0]!r}?" if near else "")
                        + f" (its options: {', '.join(known)})"
                    )
        self.seed = 0 if seed is None else seed
        self.options = options

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed!r})"

    def schedule(self, graph: TaskGraph, cluster: Cluster, cost_model: CostModel | None = None) -> Schedule:
        """Plan ``graph`` on ``cluster``.

        Parameters
        ----------
        graph : TaskGraph
        cluster : Cluster
        cost_model : CostModel, optional
            The cost model of ``(graph, cluster)`` when the caller has built it already.

        Returns
        -------
        Schedule
            Not yet validated: callers check it with :meth:`Schedule.validate`.
        """
        cost_model = cost_model or CostModel(graph, cluster)
        return self.plan(cost_model if self.plans_lazily else cost_model.densified())

    def plan(self, cost_model: CostModel) -> Schedule:  # pragma: no cover - abstract
        """The scheduler itself: a schedule for ``cost_model.graph`` on ``cost_model.cluster``."""
        raise NotImplementedError


class DynamicScheduler(Scheduler):
    """A scheduler that decides as the run unfolds, through events from the simulator (or a runtime).

    Each hook returns a list of ``(task, worker)`` index pairs: an unassigned ready task is
    assigned; a task already assigned but not started is moved (stolen). The ``view`` argument
    answers questions about the current state (see :class:`taskflow.simulator.SimView`): ``now``,
    ``cost_model`` (the *estimated* costs), ``alive_workers()``, ``queued(w)``, ``occupancy(w)``,
    ``free_cores(w)``, ``missing_bytes(task, w)``, ``transfer_estimate(task, w)``, ...

    A dynamic scheduler has no plan before it runs: :func:`taskflow.plan` gives the schedule of a
    simulated run with exact costs and no contention.
    """

    kind = "dynamic"

    #: seconds between two calls of :meth:`on_tick` (None: never called), as a scheduler's
    #: periodic callback (Dask balances its workers by stealing on one); set in :meth:`start`
    tick = None
    #: seconds until the first :meth:`on_tick` (None: :attr:`tick`)
    tick_phase = None

    def start(self, view) -> None:
        """Called once before anything runs."""

    def on_ready(self, tasks, view) -> list:
        """``tasks`` (indices) have every input computed and no worker yet."""
        return []

    def on_finished(self, task, worker, view) -> list:
        """``task`` finished on ``worker``."""
        return []

    def on_idle(self, worker, view) -> list:
        """``worker`` has nothing running and nothing queued."""
        return []

    def on_worker_lost(self, worker, tasks, view) -> list:
        """``worker`` died; ``tasks`` were queued or running there and need a new home once ready."""
        return []

    def on_tick(self, view) -> list:
        """The periodic call, every :attr:`tick` seconds while tasks are unfinished and anything
        else is still to happen (first at :attr:`tick_phase`)."""
        return []

    def priority(self, task) -> float:
        """Order of a worker's runnable tasks: higher first (ties: order of assignment)."""
        return 0.0

    def plan(self, cost_model: CostModel) -> Schedule:
        """A dynamic scheduler makes its decisions during a run; see :func:`taskflow.plan`.

        Raises
        ------
        TaskflowError
            Always.
        """
        raise SchedulerError(
            f"{self.name!r} is a dynamic scheduler: it decides during a run; "
            f"taskflow.plan(graph, cluster, {self.name!r}) gives the schedule of a simulated run"
        )


def register(cls):
    """Class decorator: make a scheduler reachable by its ``name``.

    Raises
    ------
    ValueError
        Another class holds the name already.
    """
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"scheduler name {cls.name!r} is taken by {_REGISTRY[cls.name].__name__}")
    _REGISTRY[cls.name] = cls
    return cls


def _entry_points() -> dict:
    global _ENTRY_POINTS
    if _ENTRY_POINTS is None:
        from importlib.metadata import entry_points

        _ENTRY_POINTS = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return _ENTRY_POINTS


def _load(name: str):
    ep = _entry_points()[name]
    try:
        cls = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken plugin is reported, whatever it raised
        raise SchedulerError(
            f"scheduler {name!r}: entry point {ep.value!r} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise SchedulerError(f"scheduler {name!r}: entry point {ep.value!r} is not a Scheduler class")
    if cls.name != name:
        raise SchedulerError(f"scheduler {name!r}: entry point {ep.value!r} names a class called {cls.name!r}")
    return register(cls)


def scheduler_class(name: str):
    """The class registered (or provided by an entry point) under ``name``.

    Parameters
    ----------
    name : str

    Raises
    ------
    UnknownSchedulerError
        No such name; the message lists the known ones.
    TaskflowError
        The entry point for the name is broken.
    """
    cls = _REGISTRY.get(name)
    if cls is not None:
        return cls
    if isinstance(name, str) and name in _entry_points():
        return _load(name)
    canonical = canonical_name(name)
    if canonical is not None and canonical != name:
        return scheduler_class(canonical)
    raise UnknownSchedulerError(name, available())


#: Other names users reach for: the terms of the field and of our mission.
ALIASES = {"critical-path": "cpop", "criticalpath": "cpop", "b-level": "blevel", "roundrobin": "round-robin"}


def canonical_name(name) -> str | None:
    """The registered name ``name`` means, spelled any case, with ``_`` or spaces for ``-``, or as a
    known alias (``critical-path`` is CPOP); None if none. ("dask" names no scheduler: Dask's own
    scheduling is ``work-stealing``, and ``dask`` is one of the adaptive scheduler's choices.)

    Parameters
    ----------
    name : object
    """
    if not isinstance(name, str):
        return None
    key = "-".join(name.strip().lower().replace("_", "-").split())
    known = {n.lower(): n for n in available()}
    if key in known:
        return known[key]
    alias = ALIASES.get(key) or ALIASES.get(key.replace("-", ""))
    return alias if alias in known.values() else None


def get_scheduler(name, **options) -> Scheduler:
    """A scheduler instance by name (an instance passes through unchanged).

    Parameters
    ----------
    name : str or Scheduler
    **options
        Passed to the class (``seed=...`` and scheduler options).

    Raises
    ------
    UnknownSchedulerError
        The name is not registered; the message lists the known ones.
    """
    if isinstance(name, Scheduler):
        return name
    cls = scheduler_class(name)
    return cls(**options)


def available(kind: str | None = None) -> list:
    """Known scheduler names, sorted: registered ones and installed entry points.

    Parameters
    ----------
    kind : {"static", "dynamic"}, optional
        Only schedulers of this kind (loads their classes; one that fails to load is left out).
    """
    names = set(_REGISTRY) | set(_entry_points())
    if kind is None:
        return sorted(names)
    out = []
    for n in sorted(names):
        try:
            cls = scheduler_class(n)
        except TaskflowError:
            continue  # a broken plugin is reported when it is asked for by name, not here
        if cls.kind == kind:
            out.append(n)
    return out


def require_runnable(scheduler: Scheduler, where: str) -> None:
    """Raise a one-line :class:`TaskflowError` when ``where`` cannot carry out scheduler ``scheduler``: a plan
    that runs tasks more than once (:attr:`Scheduler.duplicates`) anywhere but a plan; a dynamic
    scheduler other than Dask's own work stealing on Dask.

    Parameters
    ----------
    scheduler : Scheduler
    where : {"dask", "simulator"}

    Raises
    ------
    TaskflowError
        The scheduler cannot run there (the message says what to use instead).
    """
    if scheduler.duplicates:
        place = "the Dask runtime" if where == "dask" else "the simulator"
        raise SchedulerError(
            f"scheduler {scheduler.name!r} runs some tasks more than once (task duplication), and "
            f"{place} runs each task once: use its plan with `taskflow schedule` or "
            f"taskflow.plan"
        )
    if where == "dask" and scheduler.kind == "dynamic" and scheduler.name != "work-stealing":
        raise SchedulerError(
            f"scheduler {scheduler.name!r} runs in the simulator only; on Dask use a static "
            f"scheduler or 'work-stealing' (Dask's own)"
        )
