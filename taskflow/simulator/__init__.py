"""Discrete-event simulation of a task graph on a cluster, in seconds of simulated time.

Schedulers see *estimates*; the simulated world has its own truth:

* ``information``: what the scheduler is told of costs (:mod:`.information`): ``exact``, ``mean``,
  ``blind`` or ``user``.
* ``noise``, ``stragglers``, ``fail``: how the world departs from the cost model (:mod:`.faults`).
* ``network``: how long moving bytes takes (:mod:`.network`): ``simple`` or ``maxmin``.

With exact information, the ``simple`` network, no noise and no faults, the simulated makespan of
a static plan equals the plan's. The state machine, events and failure handling are described in
:mod:`.engine`; what a dynamic scheduler may ask is :class:`SimView`.
"""

from __future__ import annotations

from ..cluster import Cluster
from ..costs import CostModel
from ..graph import TaskGraph
from ..schedule import Schedule
from ..scheduling import get_scheduler
from ..trace import Trace
from .engine import Simulator
from .information import INFORMATION, estimated_graph
from .network import NETWORKS
from .states import TaskState
from .view import SimView

__all__ = ["simulate", "plan", "Simulator", "SimView", "TaskState", "estimated_graph", "INFORMATION", "NETWORKS"]


def simulate(
    graph: TaskGraph,
    cluster: Cluster,
    scheduler="heft",
    network: str = "maxmin",
    *,
    plan=None,
    noise: float = 0.0,
    stragglers=None,
    fail=None,
    information: str = "exact",
    seed: int = 0,
    scheduler_interval: float = 0.0,
    decision_latency: float = 0.0,
    scheduler_options=None,
    validate: bool = False,
    plan_order: str = "strict",
    fetch: str = "eager",
) -> Trace:
    """Simulate ``graph`` on ``cluster`` under ``scheduler`` (a name or an instance).

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    scheduler : str or Scheduler
        A static scheduler (its plan is carried out; re-planned after a loss) or a dynamic one.
    network : {"simple", "maxmin"}
        See :mod:`taskflow.simulator.network`.
    plan : Schedule, optional
        Execute this plan instead of asking a static scheduler (``scheduler`` then only re-plans
        after a failure).
    noise, stragglers, fail : optional
        See :mod:`taskflow.simulator.faults`.
    information : {"exact", "mean", "blind", "user"}
        See :mod:`taskflow.simulator.information`.
    seed : int
        Seeds the noise and the scheduler.
    scheduler_interval, decision_latency : float
        Seconds between two invocations of the scheduler, and from an invocation until its
        decisions take effect.
    scheduler_options : dict, optional
        Options for the scheduler's constructor.
    validate : bool
        Check every state transition's preconditions (slower; for tests).
    plan_order : {"strict", "ready"}
        How a worker carries out a static plan: ``strict``, its tasks in plan order (a later task
        waits for an earlier one); ``ready``, the earliest-planned of its tasks that can run, as Dask
        runs a plan (tasks restricted to the worker, ordered by priority; nothing waits for an
        earlier task that is not ready).
    fetch : {"eager", "ready"}
        When a planned task's inputs start moving to its worker: ``eager``, each as soon as it is
        computed; ``ready``, all once the last is computed, as under Dask's own scheduling (a task
        goes to its worker when it is ready, and the worker then fetches what it lacks).

    Returns
    -------
    Trace
        Per run worker, start, finish; every transfer; validates with :meth:`Trace.validate`.

    Raises
    ------
    TaskflowError
        Bad input: unknown scheduler, network or information mode, bad fault specification, a
        given plan that does not place every task once.

    Examples
    --------
    >>> from taskflow import TaskGraph, Cluster
    >>> g = TaskGraph(); a = g.add_task("a", cost=2, output_size=10); b = g.add_task("b", cost=1)
    >>> g.add_edge("a", "b")
    >>> simulate(g, Cluster.homogeneous(2, bandwidth=10.0), "heft", network="simple").makespan
    3.0
    """
    return Simulator(
        graph,
        cluster,
        scheduler,
        network,
        plan=plan,
        noise=noise,
        stragglers=stragglers,
        fail=fail,
        information=information,
        seed=seed,
        scheduler_interval=scheduler_interval,
        decision_latency=decision_latency,
        scheduler_options=scheduler_options,
        validate=validate,
        plan_order=plan_order,
        fetch=fetch,
    ).run()


def plan(
    graph: TaskGraph,
    cluster: Cluster,
    scheduler="heft",
    *,
    cost_model: CostModel | None = None,
    seed: int = 0,
    **options,
) -> Schedule:
    """The schedule of ``graph`` on ``cluster`` under any scheduler.

    A static scheduler plans; a dynamic one has no plan before it runs, so its schedule is that of a
    simulated run with exact costs and the contention-free ``simple`` network.

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    scheduler : str or Scheduler
    cost_model : CostModel, optional
        The cost model of ``(graph, cluster)`` when already built.
    seed : int
    **options
        Options for the scheduler's constructor.

    Returns
    -------
    Schedule
        Not validated: check it with :meth:`Schedule.validate`.

    Raises
    ------
    UnknownSchedulerError
        No scheduler has that name.

    Examples
    --------
    >>> from taskflow import TaskGraph, Cluster
    >>> g = TaskGraph(); a = g.add_task("a", cost=2); b = g.add_task("b", cost=1); g.add_edge("a", "b")
    >>> plan(g, Cluster.homogeneous(2), "work-stealing").makespan
    3.0
    """
    scheduler = get_scheduler(scheduler, seed=seed, **options)
    if scheduler.kind == "static":
        return scheduler.schedule(graph, cluster, cost_model=cost_model)
    return simulate(graph, cluster, scheduler, network="simple").to_schedule()
