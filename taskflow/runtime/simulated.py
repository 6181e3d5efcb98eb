"""The ``adaptive`` scheduler in the simulator: its decision core
(:class:`~taskflow.runtime.decide.AdaptiveCore`), the object the Dask plugin drives, fed
the facts of a graph and a cluster, and its decision carried out by the simulator: Dask's own
scheduling (``dask-model``, stealing included), Dask's own held to a subset of the workers, or the
plan. :func:`simulate_adaptive` is what ``taskflow.simulate`` runs for ``adaptive``, and so
``taskflow simulate --scheduler adaptive``, ``compare`` and the benchmarks.

A simulated run is one of work whose costs were learned exactly (the graph's own): the decision of
a first run of its kind is the guard's among Dask's own choices; given the same ``core``, the runs
after it follow the measured runs of the same work (tries, a close second measured again, then the
shortest kept), as in Dask's scheduler.
"""

from __future__ import annotations

import math

from ..analysis import task_kind
from ..scheduling import get_scheduler
from ..simulator import simulate
from .predict import DASK, PLAN, SUBSET, dask_priorities
from .decide import AdaptiveCore, Decision, GraphFacts, RunRecord

__all__ = ["simulate_adaptive"]


def simulate_adaptive(
    graph, cluster, *, scheduler=None, core: AdaptiveCore | None = None, state=None, signature=None, **options
):
    """Simulate ``graph`` on ``cluster`` as the ``adaptive`` scheduler runs it: decided by ``core``
    (a fresh one: a first run of this work), then carried out. ``core`` keeps what the run
    measured (its makespan, under its decision) for the next run of the same work.

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
        The declared cluster (speeds, network): what the run sees.
    scheduler : Adaptive, optional
        With its options (default: ``adaptive``'s defaults).
    core : AdaptiveCore, optional
    state : dict, optional
        What Dask's scheduler knows before the graph (:func:`.scheduler.reading.dask_state`;
        None: Dask's defaults).
    signature : tuple, optional
        The kind of work, under which ``core`` keeps the runs (default: the graph's task kinds
        and its size to within a factor of two, as Dask's task prefixes make it in the plugin).
    **options
        What :func:`taskflow.simulator.simulate` takes (``network`` default ``"maxmin"``, the
        network a decision predicts with; ``seed``, ``noise``, ``fail``, ...); ``scheduler_options``
        go to the scheduler that carries the decision out (``dask-model``, or the plan's).

    Returns
    -------
    tuple
        ``(trace, decision)``: the :class:`~taskflow.simulator.Trace` (its scheduler named
        ``adaptive (<choice>)``) and the :class:`~.decide.Decision`.
    """
    sched = scheduler if scheduler is not None else get_scheduler("adaptive")
    core = core if core is not None else AdaptiveCore()
    r = RunRecord(graph, sched, cluster)
    prefixes = {t: task_kind(graph, t) for t in graph.ids}
    r.adapt.named(signature or (frozenset(prefixes.values()), int(math.log2(max(1, len(graph))))))
    one_host = not cluster.bandwidths and cluster.racks is None
    speeds = [w.speed for w in cluster.workers]
    spread = max(speeds) / min(speeds) if min(speeds) > 0 else 1.0
    keys = list(graph.ids)
    worth = core.worth_planning(r, keys, cluster, spread=spread, p2p=False, one_host=one_host)
    if worth:
        facts = GraphFacts(prefixes, one_host=one_host, state=(lambda: state) if state is not None else None)
        decision = core.decide(r, graph, cluster, lambda: sched.schedule(graph, cluster), facts)
    else:
        decision = Decision(DASK, float("nan"))
    core.decided(r, decision.choice)
    options.setdefault("network", "maxmin")
    if decision.choice == PLAN:
        plan = decision.plan() if callable(decision.plan) else decision.plan
        trace = simulate(graph, cluster, sched, plan=plan, plan_order="ready", **options)
    else:
        held = decision.held if decision.choice == SUBSET else None
        given = dict(options.pop("scheduler_options", None) or {})
        trace = simulate(
            graph,
            cluster,
            "dask-model",
            scheduler_options={"priorities": dask_priorities(graph), **given, "within": held},
            **options,
        )
    r.started, r.finished_at = 0.0, sorted(float(run.finish) for run in trace.runs)
    core.record(r, float(trace.makespan))
    trace.scheduler = f"adaptive ({decision.choice})"
    return trace, decision
