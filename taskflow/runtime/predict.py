"""Predictions a run is placed by: Dask's own scheduling of a graph, simulated from the state its
scheduler is in (:func:`predict_dask`), and the guard of the ``adaptive`` policy, which keeps a
plan only where it is predicted to beat that (:func:`plan_or_dask`)."""

from __future__ import annotations

from ..cluster import Cluster
from ..graph import TaskGraph
from .dask_graph import dask_priorities

__all__ = ["DASK_DRAWS", "predict_dask", "predict_plan", "plan_or_dask", "uneven"]

#: draws of Dask's set orders averaged by a prediction of Dask's own scheduling (fewer on big graphs)
DASK_DRAWS = 8


def predict_dask(graph: TaskGraph, cluster: Cluster, state: dict | None, time_scale: float = 1.0,
                 size_scale: float = 1.0, draws: int | None = None, keys: dict | None = None) -> float:
    """The makespan (scaled seconds) of ``graph`` on ``cluster`` under Dask's own scheduling: the
    simulator's model of Dask's decisions (:class:`schedulers.dask_model.DaskModel`) started from
    ``state`` (:func:`taskflow.runtime.dask_hooks.dask_state`, read from the scheduler just before the
    graph is submitted; None: Dask's defaults), with the max-min network, averaged over ``draws``
    orders of Dask's sets of tasks (its hashes, random per scheduler process).

    Parameters
    ----------
    graph : TaskGraph
        With costs in the model's (unscaled) seconds and bytes.
    cluster : Cluster
        Its workers carry their Dask addresses.
    state : dict or None
    time_scale, size_scale : float
        Real seconds (bytes) per model second (byte).
    draws : int, optional
        Default :data:`DASK_DRAWS`, fewer above 2,000 tasks.
    keys : dict, optional
        Task id -> the Dask key it was submitted under (``dask.order``, which gives Dask's
        priorities, breaks ties by key).
    """
    from ..simulator import simulate

    ts = float(time_scale)
    opts = {"unknown_duration": 0.5 / ts, "steal_interval": 1.0 / ts, "steal_latency": 0.1 / ts,
            "min_victim": 0.2 / ts}
    if state:
        by_address = {w.address: w.id for w in cluster.workers if w.address}
        opts.update(
            n_tasks=state["n_tasks"], order=[by_address[a] for a in state["workers"] if a in by_address],
            tie_order=[by_address[a] for a in state["ties"] if a in by_address],
            durations={p: d / ts for p, d in state["durations"].items() if d is not None},
            unknown_duration=state["unknown"] / ts, bandwidth=state["bandwidth"] * ts / float(size_scale),
            saturation=state["saturation"], rootish=tuple(state["rootish"]), steal_latency=state["steal_latency"] / ts,
            steal_interval=state["steal_interval"] / ts if state["steal_interval"] else None,
            steal_phase=state["steal_phase"] / ts if state["steal_phase"] is not None else None)
    opts["priorities"] = dask_priorities(graph, keys)
    k = draws if draws is not None else max(1, min(DASK_DRAWS, 16_000 // max(1, len(graph))))
    spans = [simulate(graph, cluster, "dask-model", network="maxmin", scheduler_options=opts, seed=d).makespan
             for d in range(k)]
    return sum(spans) / len(spans) * ts


def predict_plan(graph: TaskGraph, cluster: Cluster, plan, policy=None) -> float:
    """The makespan of ``plan`` carried out by Dask on ``cluster`` as the simulator predicts it
    (max-min network, each worker's tasks in the plan's order as they become ready).

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    plan : Schedule
    policy : Scheduler or str, optional
        What made it (default: the name it carries).
    """
    from ..simulator import simulate

    return simulate(graph, cluster, policy or plan.scheduler, network="maxmin", plan=plan,
                    plan_order="ready").makespan


def plan_or_dask(graph: TaskGraph, cluster: Cluster, plan, state: dict | None, margin: float,
                 limit: int, policy=None, spread: float = 1.5) -> tuple:
    """Keep ``plan`` or leave ``graph`` to Dask's own scheduling. A plan is kept only on a cluster
    where a list scheduler has something to win (the fastest worker more than ``spread`` times the
    slowest, or a network with per-pair rates or racks: :func:`uneven`) and when its predicted
    makespan is at least ``margin`` (a fraction) shorter than Dask's own, both simulated from the
    same costs (:func:`predict_plan`, :func:`predict_dask` from ``state``). Above ``limit`` tasks
    nothing is simulated: an uneven cluster keeps the plan.

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    plan : Schedule
    state : dict or None
        :func:`taskflow.runtime.dask_hooks.dask_state`.
    margin : float
    limit : int
    policy : Scheduler, optional
        What made ``plan``.
    spread : float

    Returns
    -------
    tuple
        ``(keep, predicted makespan of what runs, predicted makespan of Dask's own or None)``.
    """
    if len(graph) > limit:
        keep = uneven(cluster, spread)
        return keep, float(plan.makespan), None
    dask = predict_dask(graph, cluster, state, draws=1)
    if not uneven(cluster, spread):
        return False, dask, dask
    ours = predict_plan(graph, cluster, plan, policy)
    keep = ours <= (1.0 - margin) * dask
    return keep, (ours if keep else dask), dask


def uneven(cluster: Cluster, spread: float) -> bool:
    """Whether a plan can win on ``cluster`` by more than the estimates' error: the fastest worker
    more than ``spread`` times the slowest, or a network with per-pair rates or racks. On workers
    alike joined alike, Dask's own decisions (its priorities from ``dask.order``, its stealing)
    lose little to a list scheduler, less than a plan's estimates are off; and speeds learned
    from a few tasks on a loaded machine differ by 10-30% between identical workers.

    Parameters
    ----------
    cluster : Cluster
    spread : float
    """
    speeds = [w.speed for w in cluster.workers]
    return (max(speeds) > spread * min(speeds)) or bool(cluster.bandwidths) or cluster.racks is not None
