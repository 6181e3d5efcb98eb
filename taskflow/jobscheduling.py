"""Job schedulers: which training job gets which workers of a shared cluster, and when.

Two levels, two words. A **job scheduler** (this module) decides which *job* runs on which workers,
who waits and who is preempted, as jobs arrive over time (the DL-cluster papers: Tiresias, Gandiva,
Themis, Gavel). A **task scheduler** (:mod:`taskflow.scheduling`) places one graph's *tasks* on the
workers it is given (HEFT, work stealing, ...). A job's workers are the papers' GPUs.

A job scheduler is a decision core, as distributed's worker state machine is: no clock and no I/O
of its own. The simulator (:mod:`taskflow.jobs.simulate`) and the Dask runner drive the same
object: each event (:class:`Arrived`, :class:`Finished`, :class:`Tick`: a round or lease ended,
:class:`WorkerLost`, :class:`WorkerAdded`) comes with a :class:`View` of the cluster at that moment, and :meth:`JobScheduler.decide` returns
decisions (:class:`Preempt` a running job, :class:`Start` a waiting one on named workers). The
driver checks every decision (no worker given to two jobs, no job started before it arrived, its
size) and carries them out, preemptions first.

Job schedulers are found by name, as task schedulers are: ours in the package ``schedulers.jobs``,
any installed package's under the entry-point group ``taskflow.job_schedulers``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from .errors import SchedulerError, UnknownSchedulerError
from .jobevents import Arrived, Finished, Preempt, Resize, Start, Tick, WorkerAdded, WorkerLost
from .jobplacement import PLACEMENTS, place, uplink_load

__all__ = [
    "Job",
    "JobState",
    "View",
    "Arrived",
    "Finished",
    "Tick",
    "WorkerLost",
    "WorkerAdded",
    "Start",
    "Resize",
    "Preempt",
    "JobScheduler",
    "register_job_scheduler",
    "get_job_scheduler",
    "job_scheduler_names",
    "place",
    "uplink_load",
    "check_positive",
    "crossover_speed",
    "PLACEMENTS",
    "COMMON_OPTIONS",
    "JOB_ENTRY_POINTS",
]

#: the entry-point group through which installed packages provide job schedulers
JOB_ENTRY_POINTS = "taskflow.job_schedulers"


@dataclasses.dataclass(frozen=True)
class Job:
    """A training job of a trace.

    Parameters
    ----------
    id : str
    arrival : float
        Seconds from the trace's start.
    workers : int
        Workers it asks for (the papers' GPUs); it runs on exactly that many unless elastic.
    duration : float
        Seconds it runs on ``workers`` workers, alone (a trace's, or its profile's).
    model : str, optional
        What it trains (a model of the library, or the trace's name for it).
    iterations : int, optional
    batch : int, optional
        Samples per iteration over all its workers (a real run's; default the runner's).
    user : str, optional
    priority : float
        Higher first where a job scheduler reads it.
    deadline : float, optional
        Seconds from the trace's start.
    min_workers, max_workers : int, optional
        An elastic job's bounds (Gandiva's grow-shrink, Pollux): it may run on any number of
        workers between them, at a speed in proportion (``duration`` is at ``workers``).
    """

    id: str
    arrival: float
    workers: int
    duration: float
    model: str | None = None
    iterations: int | None = None
    batch: int | None = None
    user: str | None = None
    priority: float = 0.0
    deadline: float | None = None
    min_workers: int | None = None
    max_workers: int | None = None

    @property
    def sizes(self) -> tuple:
        """``(fewest, most)`` workers it may run on."""
        return (self.min_workers or self.workers, self.max_workers or self.workers)

    @property
    def service(self) -> float:
        """Worker-seconds it needs (``workers x duration``)."""
        return self.workers * self.duration


class JobState(NamedTuple):
    """A job as the driver sees it at an event.

    Parameters
    ----------
    job : Job
    running : bool
    workers : tuple
        The workers it holds (empty while it waits).
    executed : float
        Seconds of its duration done so far.
    attained : float
        Worker-seconds it has held (Tiresias' attained service: workers x seconds, a restore included).
    waited : float
        Seconds it has waited since it last ran (or since it arrived).
    last_run : float
        Seconds its last run lasted (0 before any).
    remaining : float or None
        Seconds of its duration left: given only to a scheduler that knows durations
        (:attr:`JobScheduler.knows_durations`), None to the others.
    preemptions : int
    beside : str or None
        The job it shares its workers with (Crossover), if any.
    """

    job: Job
    running: bool
    workers: tuple
    executed: float
    attained: float
    waited: float
    last_run: float
    remaining: float | None
    preemptions: int
    beside: str | None = None


@dataclasses.dataclass(frozen=True)
class View:
    """The cluster at an event: the time, the free workers, each worker's node and rack, every job
    that has arrived and not finished.

    Parameters
    ----------
    now : float
    free : tuple
        Worker indices, ascending.
    nodes : tuple
        ``nodes[w]``: the node worker ``w`` sits in.
    jobs : tuple of JobState
        In arrival order.
    racks : tuple
        ``racks[w]``: the rack of worker ``w`` (empty: one rack).
    down : tuple
        Workers lost and not back: neither free nor held.
    """

    now: float
    free: tuple
    nodes: tuple
    jobs: tuple
    racks: tuple = ()
    down: tuple = ()

    @property
    def waiting(self) -> list:
        """The jobs that wait, in arrival order."""
        return [j for j in self.jobs if not j.running]

    @property
    def running(self) -> list:
        """The jobs that run, in arrival order."""
        return [j for j in self.jobs if j.running]


class JobScheduler:
    """The interface of a job scheduler (see the module docstring).

    A subclass sets :attr:`name`, :attr:`summary`, :attr:`preemptive` (whether it ever preempts),
    :attr:`knows_durations` (it reads :attr:`JobState.remaining`: an oracle) and :attr:`option_names`,
    and implements :meth:`decide`. Options are keyword arguments, checked by the subclass.

    Parameters
    ----------
    **options
        The scheduler's own (:attr:`option_names`).

    Raises
    ------
    SchedulerError
        An option it does not take.
    """

    name = "?"
    summary = ""
    preemptive = False
    knows_durations = False
    option_names: tuple = ()
    #: seconds between two :class:`Tick` events (a round or lease); None: decide on arrivals and
    #: finishes alone
    round: float | None = None
    #: where a job's workers go unless the ``placement`` option says (:data:`PLACEMENTS`)
    default_placement = "consolidated"

    def __init__(self, **options):
        unknown = sorted(set(options) - set(self.option_names) - set(COMMON_OPTIONS))
        if unknown:
            raise SchedulerError(
                f"job scheduler {self.name!r} takes no option {unknown[0]!r} (it takes: "
                f"{', '.join(self.option_names + COMMON_OPTIONS)})"
            )
        self.options = options
        self.placement = options.get("placement", self.default_placement)
        if self.placement not in PLACEMENTS:
            raise SchedulerError(f"placement must be one of {', '.join(PLACEMENTS)}; got {self.placement!r}")
        #: the slowdowns of jobs sharing a node (``interference-aware`` placement reads it)
        self.interference = options.get("interference")
        if self.placement == "interference-aware" and self.interference is None:
            raise SchedulerError("interference-aware placement needs the interference table (option interference)")
        #: model -> the share of an iteration it spends communicating, where jobs may share workers
        #: under Crossover (None: they do not)
        self.crossover = _comm_shares(options.get("crossover"))

    def decide(self, event, view: View) -> list:
        """The decisions for ``event``, seeing ``view``.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View

        Returns
        -------
        list of Start and Preempt
        """
        raise NotImplementedError

    def greedy(self, order, view: View, preempt: bool) -> list:
        """Decisions that give workers to jobs in ``order`` (a list of :class:`JobState`, the
        first most entitled): each job that fits in what the jobs before it left runs; with
        ``preempt``, a running job that no longer fits is preempted (its workers go to the jobs
        before it), else running jobs keep theirs and the order only says who starts next.
        Jobs that do not fit are passed over (backfilling), as Tiresias' simulator does.

        Parameters
        ----------
        order : list of JobState
        view : View
        preempt : bool
        """
        total = len(view.nodes) - len(view.down)
        if preempt:
            keep, left = set(), total
            for j in order:
                if j.running and j.beside in keep:  # on its Crossover partner's workers: no more taken
                    keep.add(j.job.id)
                elif j.job.workers <= left:
                    left -= j.job.workers
                    keep.add(j.job.id)
            out = [Preempt(j.job.id) for j in view.running if j.job.id not in keep]
            held = {w for j in view.running if j.job.id in keep for w in j.workers}
            free = sorted(
                (set(view.free) | {w for j in view.running if j.job.id not in keep for w in j.workers}) - held
            )
            starting = [j for j in order if j.job.id in keep and not j.running]
        else:
            out, free = [], list(view.free)
            starting = [j for j in order if not j.running]
        placed = [j for j in view.running if not preempt or j.job.id in keep]
        for j in starting:
            if j.job.workers <= len(free):
                ws = self.where(j.job, free, view, placed)
                out.append(Start(j.job.id, ws))
                placed.append(j._replace(running=True, workers=ws))
                free = [w for w in free if w not in set(ws)]
        if self.crossover is not None:
            out += self.pair_up(
                [j for j in order if not j.running and j.job.id not in {d.job_id for d in out}],
                [j for j in view.running if not preempt or j.job.id in keep],
            )
        return out

    def pair_up(self, waiting, running) -> list:
        """Crossover: each of ``waiting`` (in order) on the workers of a job of ``running`` of its
        size that shares them with nobody, the partner with whom the two go fastest, where two
        together do more than one alone (:func:`crossover_speed`).

        Parameters
        ----------
        waiting, running : list of JobState
        """
        out, taken = [], {j.beside for j in running if j.beside} | {j.job.id for j in running if j.beside}
        for j in waiting:
            mine = self.crossover(j.job.model)
            best = max(
                (
                    (crossover_speed(mine, self.crossover(k.job.model)), k)
                    for k in running
                    if k.job.id not in taken and len(k.workers) == j.job.workers
                ),
                key=lambda sk: (sk[0], -sk[1].job.arrival),
                default=(0.0, None),
            )
            if best[1] is not None and 2 * best[0] > 1.0 + 1e-9:
                out.append(Start(j.job.id, tuple(best[1].workers), beside=best[1].job.id))
                taken |= {j.job.id, best[1].job.id}
        return out

    def where(self, job: Job, free, view: View, placed) -> tuple:
        """The workers of ``free`` that ``job`` gets under this scheduler's placement.

        Parameters
        ----------
        job : Job
        free : list of int
        view : View
        placed : list of JobState
            The jobs that hold workers once the decisions so far are carried out.
        """
        load = cost = None
        if self.placement == "contention-aware":
            load = uplink_load(placed, view.racks)
        elif self.placement == "interference-aware":
            cost = {}
            for j in placed:
                for n in {view.nodes[w] for w in j.workers}:
                    mine = self.interference.speed(job, [j.job])
                    theirs = self.interference.speed(j.job, [job])
                    cost[n] = cost.get(n, 0.0) + (1.0 / mine - 1.0) + (1.0 / theirs - 1.0)
        return place(free, job.workers, view.nodes, self.placement, view.racks, load, cost)


#: the options every job scheduler takes beside its own
COMMON_OPTIONS = ("placement", "interference", "crossover")


def crossover_speed(comm_a: float, comm_b: float) -> float:
    """The share of its solo speed each of two jobs keeps on the same workers under Crossover
    (Luo et al., "CrossoverScheduler", 2021): each iteration computes then communicates (``comm``:
    the share of an iteration alone spent communicating, the rest computing); the workers compute
    one job's step while the other's gradients move. With iterations of one length, a cycle of one
    iteration of each takes ``max(compute a + compute b, comm a + comm b, 1)`` solo iterations.

    Parameters
    ----------
    comm_a, comm_b : float
        In [0, 1).

    Examples
    --------
    >>> crossover_speed(0.3, 0.3)  # each at 1/1.4 of its speed: 1.43 iterations per cycle, not 1
    0.7142857142857143
    >>> crossover_speed(0.0, 0.0)  # nothing to overlap: plain time-sharing
    0.5
    """
    return 1.0 / max(2.0 - comm_a - comm_b, comm_a + comm_b, 1.0)


def _comm_shares(value):
    """The ``crossover`` option: None (off), one share for every job, or ``{model: share}`` (the
    key None: the share of a model not named, default 0)."""
    if value is None or value is False:
        return None
    table = value if isinstance(value, dict) else {None: value}
    for k, v in table.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise SchedulerError(f"crossover: a communication share must be a number in [0, 1), got {v!r} for {k!r}")
    return lambda model: float(table.get(model, table.get(None, 0.0)))


_REGISTRY: dict = {}


def register_job_scheduler(cls):
    """Register a :class:`JobScheduler` subclass under its ``name`` (a class decorator).

    Parameters
    ----------
    cls : type
    """
    _REGISTRY[cls.name] = cls
    return cls


def _entry_points() -> dict:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=JOB_ENTRY_POINTS)}


def job_scheduler_names() -> list:
    """Every job scheduler's name (registered, or an installed package's entry point), sorted."""
    return sorted(set(_REGISTRY) | set(_entry_points()))


def get_job_scheduler(name, **options) -> JobScheduler:
    """A new job scheduler by name.

    Parameters
    ----------
    name : str
    **options
        Its options.

    Raises
    ------
    UnknownSchedulerError
        No job scheduler of that name.
    SchedulerError
        A bad option.
    """
    key = str(name).strip().lower()
    cls = _REGISTRY.get(key)
    if cls is None:
        ep = _entry_points().get(key)
        if ep is None:
            raise UnknownSchedulerError(name, job_scheduler_names())
        try:
            cls = ep.load()
        except Exception as e:  # noqa: BLE001 - a broken plugin: name it
            raise SchedulerError(f"job scheduler {key!r} ({ep.value}) cannot be loaded: {e}") from None
        _REGISTRY[key] = cls
    return cls(**options)


def check_positive(name: str, value, allow_zero: bool = False) -> float:
    """``value`` as a float, finite and > 0 (>= 0 with ``allow_zero``): a job scheduler's option.

    Parameters
    ----------
    name : str
        The option, to name it.
    value : object
    allow_zero : bool

    Raises
    ------
    SchedulerError
    """
    ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        raise SchedulerError(f"{name} must be a number {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)
