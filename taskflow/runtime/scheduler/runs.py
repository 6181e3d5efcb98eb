"""A run inside the scheduler plugin, as a small state machine.

A *run* is a set of Dask keys with a cost model and a scheduler (see :mod:`.plugin`). Its states:

=============  =====================================================================================
``registered``  known, its costs to be estimated from what Dask knows once its tasks arrive; no plan
``planned``     planned on the live workers; its tasks have not arrived yet
``running``     its tasks are in the scheduler, each restricted to its planned worker, in plan order
``replanning``  a worker left or joined: its unfinished part is being planned again
``finished``    every key is finished (in memory, erred, or forgotten by Dask)
``failed``      it could not be planned
=============  =====================================================================================

The allowed moves are :data:`TRANSITIONS`; the plugin carries each out in one method
(``TaskflowPlugin._transition_<from>_<to>``) and checks every move against the table. A run
knows which of its keys are finished from the task transitions the plugin sees, so it is
finished the moment its last key is: a worker leaving afterwards re-plans nothing, and a cluster
shutting down after the work is done has no run left waiting for a worker.
"""

from __future__ import annotations

import enum
import heapq
import math
import time

from ...cluster import Cluster
from ...errors import TaskflowError
from ...graph import TaskGraph
from ..adaptive_state import AdaptiveState

__all__ = [
    "GraphRun",
    "RunState",
    "signature",
    "Unplannable",
    "plan_maker",
    "REGISTERED",
    "PLANNED",
    "RUNNING",
    "REPLANNING",
    "FINISHED",
    "FAILED",
    "STATES",
    "TRANSITIONS",
    "UNFINISHED_KEY",
    "MOVABLE",
    "FINISHED_KEY",
    "AGAIN",
    "LIVE",
]


class RunState(str, enum.Enum):
    """A run's state (see the module docstring); its value is its name in messages."""

    REGISTERED = "registered"
    PLANNED = "planned"
    RUNNING = "running"
    REPLANNING = "replanning"
    FINISHED = "finished"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


REGISTERED, PLANNED, RUNNING, REPLANNING, FINISHED, FAILED = RunState
STATES = tuple(RunState)

#: every allowed move of a run (from, to)
TRANSITIONS = frozenset(
    {
        (REGISTERED, PLANNED),
        (REGISTERED, RUNNING),
        (REGISTERED, FAILED),
        (PLANNED, RUNNING),
        (PLANNED, REPLANNING),
        (PLANNED, FAILED),
        (RUNNING, REPLANNING),
        (RUNNING, FINISHED),
        (RUNNING, FAILED),
        (REPLANNING, PLANNED),
        (REPLANNING, RUNNING),
        (REPLANNING, FAILED),
    }
)

#: the states in which a run still has work a worker's loss or arrival can concern
LIVE = frozenset({PLANNED, RUNNING})

#: Dask task states of a key not yet finished and not running on a worker (it can be placed)
UNFINISHED_KEY = frozenset(("released", "waiting", "no-worker", "queued"))
#: the Dask states of a key a new plan or decision reaches (one processing: sent to a worker, maybe not started)
MOVABLE = UNFINISHED_KEY | {"processing"}
#: Dask task states of a finished key
FINISHED_KEY = frozenset(("memory", "erred", "forgotten"))
#: Dask task states a finished key moves to when it is to be computed again
AGAIN = frozenset(("waiting", "processing", "no-worker", "queued"))


class GraphRun:
    """One graph's run inside the scheduler plugin (a task's own execution record is
    :class:`taskflow.trace.Run`): its keys, cost model, scheduler, latest plan, state and what
    happened to it.

    Parameters
    ----------
    run_id : str
    graph : TaskGraph
        Its cost model; task ids are the Dask keys.
    scheduler : Scheduler
    cluster : Cluster, optional
        The declared cluster (speeds by worker name, network, task overhead); None: all alike.
    client : str, optional
    owned : bool
        Made by the plugin for a client's graph under ``taskflow.use`` (forgotten once finished).
    estimate : bool
        Its costs are placeholders, estimated from what Dask knows when its tasks arrive.
    prefix_costs : dict, optional
        Task-name prefix -> seconds, declared by the user (with ``estimate``).
    """

    __slots__ = (
        "id",
        "graph",
        "scheduler",
        "cluster",
        "client",
        "plan",
        "prio",
        "addr",
        "replans",
        "error",
        "owned",
        "estimate",
        "prefix_costs",
        "learned",
        "predicted",
        "state",
        "done",
        "before",
        "started",
        "ended",
        "finished_at",
        "adapt",
        "only",
    )

    def __init__(
        self,
        run_id,
        graph: TaskGraph,
        scheduler,
        cluster: Cluster | None,
        client: str | None,
        owned: bool,
        estimate: bool = False,
        prefix_costs: dict | None = None,
    ):
        self.id = run_id
        self.graph = graph
        self.scheduler = scheduler
        self.cluster = cluster  # declared: speeds by worker name, network, task overhead
        # the worker names it is held to (``run(..., hold=True)``: a job given its workers), or None
        self.only: frozenset | None = None
        self.client = client
        self.plan: dict = {}  # key -> worker name
        self.prio: dict = {}  # key -> priority (higher runs first)
        self.addr: dict = {}  # worker name -> address, of the latest plan
        self.replans = 0
        self.error: str | None = None
        self.owned = owned
        self.estimate = estimate
        self.prefix_costs = prefix_costs or {}
        # costs come from Dask's measurements: worker speeds too, from the durations the plugin saw
        self.learned = estimate or owned
        self.predicted: float | None = None  # the makespan the first plan of all its tasks predicts
        self.state = RunState.REGISTERED
        self.done: set = set()  # its keys that are finished (running runs only)
        self.before: RunState | None = None  # while replanning: the state to go back to
        self.started = 0.0  # when it began running (monotonic seconds, in the scheduler)
        self.ended = 0.0  # when its last key finished (monotonic seconds, in the scheduler)
        # when each of its keys finished (monotonic seconds, in the order they did), for its progress
        # curve (:func:`progress_curve`)
        self.finished_at: list = []
        #: the adaptive scheduler's state of it (:mod:`..adaptive_state`): phase, decisions, what they used
        self.adapt = AdaptiveState()

    def __repr__(self) -> str:
        return f"<GraphRun {self.id!r} {self.state}, {len(self.done)}/{len(self.graph)} keys finished>"

    def unfinished(self, tasks) -> list:
        """Its keys still to be placed: not finished and not running on a worker. Before its tasks
        arrive a key Dask does not know is still to come; once it runs, one Dask forgot is done.

        Parameters
        ----------
        tasks : dict
            The scheduler's tasks (key -> TaskState).
        """
        arrived = self.state == RUNNING or (self.state == REPLANNING and self.before == RUNNING)
        out = []
        for k in self.graph.ids:
            ts = tasks.get(k)
            if ts is None:
                if not arrived:
                    out.append(k)
            elif ts.state in UNFINISHED_KEY and not (arrived and k in self.done):
                out.append(k)
        return out

    def queued(self, tasks) -> list:
        """Its keys sent to a worker and, as far as Dask's scheduler can tell, not started there:
        on each worker, all but its threads' worth of highest priority (a worker runs its tasks by
        priority) and those its last heartbeat said were executing.

        Parameters
        ----------
        tasks : dict
            The scheduler's tasks (key -> TaskState).
        """
        mine = [tasks[k] for k in self.graph.ids if k in tasks and tasks[k].state == "processing"]
        started = set()
        for ws in {ts.processing_on for ts in mine if ts.processing_on is not None}:
            started.update(ws.executing)
            started.update(heapq.nsmallest(ws.nthreads, ws.processing, key=lambda t: t.priority or ()))
        return [ts.key for ts in mine if ts.processing_on is not None and ts not in started]

    def count_done(self, tasks) -> None:
        """Set :attr:`done` from the scheduler's tasks (as its tasks arrive).

        Parameters
        ----------
        tasks : dict
        """
        self.done = {k for k in self.graph.ids if k not in tasks or tasks[k].state in FINISHED_KEY}

    def key_moved(self, key, finish: str) -> bool:
        """One of its keys moved to Dask state ``finish``; True when that finished the run.

        Parameters
        ----------
        key : str
        finish : str
        """
        if finish in FINISHED_KEY:
            if key not in self.done:
                self.finished_at.append(time.monotonic())
            self.done.add(key)
            return len(self.done) == len(self.graph)
        if finish in AGAIN:
            self.done.discard(key)  # lost with its worker, or wanted again: to be computed again
        # ``released`` after ``memory``: its consumers have what they need; Dask forgets it
        # only with them, so it stays done
        return False


def signature(graph, tasks) -> tuple:
    """What makes two runs the same work, for comparing their measured makespans: the task-name
    prefixes of ``graph``'s keys and its size to within a factor of two.

    Parameters
    ----------
    graph : TaskGraph
    tasks : dict
        Dask's task states by key.
    """
    names = frozenset(tasks[k].prefix.name for k in graph.ids if k in tasks)
    return names, int(math.log2(max(1, len(graph))))


class Unplannable(TaskflowError):
    """A run's scheduler could not plan it (the message names the scheduler, the workers and the error)."""


def plan_maker(r, graph: TaskGraph, cluster: Cluster, scheduler=None):
    """A callable that makes the plan of ``graph`` (part of run ``r``) on ``cluster`` with
    ``scheduler`` (default ``r``'s) when first called, and returns the same plan after: a run whose measured runs leave it
    to Dask's own scheduling needs none, and HEFT's list loop over hundreds of tasks blocks the
    scheduler's event loop for milliseconds. Raises :class:`Unplannable` where the scheduler fails.

    Parameters
    ----------
    r : GraphRun
    graph : TaskGraph
    cluster : Cluster
    scheduler : Scheduler, optional
        ``r``'s as it plans here (:meth:`schedulers.adaptive.Adaptive.inside_dask`).
    """
    made = []
    sched = scheduler if scheduler is not None else r.scheduler

    def make():
        if not made:
            try:
                made.append(sched.schedule(graph, cluster))
            except Exception as e:  # noqa: BLE001 - named in the run's error; the scheduler goes on
                raise Unplannable(
                    f"{sched.name} could not plan the run on workers {cluster.ids}: {type(e).__name__}: {e}"
                ) from e
        return made[0]

    return make
