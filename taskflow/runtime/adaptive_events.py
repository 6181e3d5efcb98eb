"""What the ``adaptive`` scheduler's decision core (:class:`~.decide.AdaptiveCore`) is told and
what it answers: the facts of a graph a decision reads (:class:`GraphFacts`), a finished task
(:class:`TaskDone`), a decision (:class:`Decision`), and the record of a run it reads and writes
(:class:`RunRecord`; the Dask plugin's :class:`~.scheduler.runs.GraphRun` is one too)."""

from __future__ import annotations

import dataclasses
from typing import Callable

from .adaptive_state import AdaptiveState

__all__ = ["GraphFacts", "TaskDone", "Decision", "RunRecord"]


@dataclasses.dataclass(frozen=True)
class GraphFacts:
    """What a decision on a run reads of where the run stands, as its driver sees it.

    Attributes
    ----------
    prefixes : dict
        Task id -> its kind (Dask's task prefix): the estimates a decision used are kept per kind.
    p2p : bool
        The graph holds tasks of Dask's peer-to-peer shuffles (no plan for them).
    one_host : bool
        Every worker is on one host and the run declares no rates or racks: no link is narrow.
    inputs : dict or None
        Mid-run on several hosts: the outputs of tasks already run that the graph reads, where
        they sit (:func:`taskflow.runtime.predict.with_inputs`).
    state : callable, optional
        Returns what Dask's scheduler knows before the graph (:func:`.scheduler.reading.dask_state`),
        read only where a prediction of Dask's own scheduling needs it (None: Dask's defaults).
    elapsed : float
        Seconds since the run began (a try of a plan races the plan's own timeline from there).
    """

    prefixes: dict
    p2p: bool = False
    one_host: bool = False
    inputs: dict | None = None
    state: Callable | None = None
    elapsed: float = 0.0


@dataclasses.dataclass(frozen=True)
class TaskDone:
    """A task of a run finished: what a decision within the run reads (the facts the driver can
    give only at a cost are callables, called only where the decision needs them).

    Attributes
    ----------
    prefix : str
        The task's kind.
    secs : float
        Its seconds of compute.
    worker : str
        The worker it ran on.
    now : float
        The driver's clock (the one ``r.adapt.decided_at`` is on).
    elapsed : float
        Seconds since the run began.
    speeds : callable
        Returns the workers' speeds learned so far (worker name -> speed).
    spread : callable
        Returns the fastest worker's speed over the slowest's, as learned.
    links : callable
        Returns the live cluster's links as a hold weighs them, or None (every worker on one host).
    estimate : callable
        Returns the unfinished part of the run as estimated now (a TaskGraph), or None.
    """

    prefix: str
    secs: float
    worker: str
    now: float
    elapsed: float
    speeds: Callable
    spread: Callable
    links: Callable
    estimate: Callable


@dataclasses.dataclass
class RunRecord:
    """What the core reads and writes of a run (the Dask plugin's
    :class:`~taskflow.runtime.scheduler.runs.GraphRun` is one too; the simulator makes these).

    Attributes
    ----------
    graph : TaskGraph
        The run's whole graph.
    scheduler : Adaptive
        Its options in ``scheduler.adaptive``.
    cluster : Cluster or None
        The declared cluster.
    adapt : AdaptiveState
    predicted : float or None
    started : float
        When it began (the driver's seconds).
    finished_at : list of float
        When each of its keys finished.
    done : set
        Its keys finished.
    """

    graph: object
    scheduler: object
    cluster: object = None
    adapt: AdaptiveState = dataclasses.field(default_factory=AdaptiveState)
    predicted: float | None = None
    started: float = 0.0
    finished_at: list = dataclasses.field(default_factory=list)
    done: set = dataclasses.field(default_factory=set)


@dataclasses.dataclass(frozen=True)
class Decision:
    """What runs the unfinished part of a run.

    Attributes
    ----------
    choice : str
        One of :data:`~taskflow.scheduling.CHOICES`.
    predicted : float
        The predicted makespan of what runs (nan where nothing was simulated).
    held : list or None
        :data:`SUBSET`: the ids of the workers Dask's own scheduling is held to.
    plan : Schedule, callable or None
        :data:`PLAN`: the plan, or what makes it where the decision did not need it made.
    """

    choice: str
    predicted: float
    held: list | None = None
    plan: object = None
