"""Which cluster to rent: simulate a workflow over a catalog's configurations and prices.

``taskflow.advise(graph_or_training, catalog, deadline=..., budget=...)`` searches node types x
counts (and the pairs of types the catalog lets mix) and schedulers, simulates each configuration
its lower bounds leave open (:mod:`.search`), and returns an :class:`Advice`: the Pareto front of
makespan and cost, the cheapest configuration that meets the deadline (or the fastest within the
budget), and for each other configuration why it lost. With ``noise``, the front's configurations
are simulated ``samples`` times with per-task noise, and the answer is the cheapest whose chance
of meeting the deadline is at least ``confidence``.

:mod:`.catalog` reads and checks catalogs; :mod:`.workloads` holds the training workloads (their
graph depends on the configuration's GPUs); :mod:`.report` prints and plots an advice.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import UsageError
from ..graph import TaskGraph
from .catalog import CATALOG_FORMAT, CATALOGS, Catalog, NodeType, catalog_from_dict, load_catalog
from .report import Advice
from .search import Candidate, Configuration, Evaluator, configurations, search
from .workloads import FixedWorkload, Training, profiled

__all__ = [
    "advise",
    "Advice",
    "Catalog",
    "NodeType",
    "load_catalog",
    "catalog_from_dict",
    "CATALOGS",
    "CATALOG_FORMAT",
    "Training",
    "FixedWorkload",
    "Configuration",
    "Candidate",
    "configurations",
    "profiled",
    "DEFAULT_SCHEDULERS",
]

#: the schedulers tried when none are named: a static plan and Dask-like work stealing (a graph);
#: each rank on its own GPU (training)
DEFAULT_SCHEDULERS = {"graph": ("heft", "work-stealing"), "training": ("placed",)}


def advise(
    workload,
    catalog,
    *,
    deadline: float | None = None,
    budget: float | None = None,
    schedulers=None,
    max_nodes: int | None = None,
    types=None,
    network: str = "maxmin",
    profile=None,
    noise: float = 0.0,
    samples: int = 20,
    confidence: float = 0.9,
    tolerance: float = 0.02,
    seed: int = 0,
    progress=None,
) -> Advice:
    """Search the catalog's configurations for ``workload``; see the module docstring.

    Parameters
    ----------
    workload : TaskGraph or Training
    catalog : Catalog, str or path
        A catalog, a catalog file, or a shipped catalog's name.
    deadline : float, optional
        Seconds the run must finish in.
    budget : float, optional
        Most the run may cost (catalog currency).
    schedulers : list of str, optional
        Default :data:`DEFAULT_SCHEDULERS`.
    max_nodes : int, optional
        Most nodes in a configuration.
    types : list of str, optional
        Only these node types.
    network : {"maxmin", "simple"}
    profile : CostProfile or path, optional
        Task costs measured on a real run (``taskflow run --profile``) instead of the declared ones:
        seconds on the profiled machine, the catalog's speed 1.0.
    noise : float
        Per-task duration noise ``x exp(N(0, noise))``; > 0 gives each front configuration
        ``samples`` noisy simulations and a chance of missing the deadline.
    samples : int
    confidence : float
        With noise and a deadline: the answer meets it at least this often.
    tolerance : float
        Epsilon of the bound-based pruning (0: the exact front).
    seed : int
    progress : callable, optional
        ``progress(done, total)`` during the search.

    Returns
    -------
    Advice

    Raises
    ------
    TaskflowError
        A bad catalog, option, scheduler or workload (one line).
    """
    from ..scheduling import get_scheduler
    from ..simulator import NETWORKS

    cat = catalog if isinstance(catalog, Catalog) else load_catalog(catalog)
    named = "the cost profile"
    if profile is not None and not hasattr(profile, "apply"):
        from ..runtime import CostProfile

        named = f"cost profile {os.fspath(profile)!r}"
        profile = CostProfile.load(os.fspath(profile))
    if profile is not None and not (profile.tasks or profile.prefixes or profile.models):
        # planning with it would silently plan with the declared costs: not what was asked
        raise UsageError(
            f"{named} holds no measured task: run the job with a profile first (taskflow run or "
            f"taskflow train --profile FILE)"
        )
    if isinstance(workload, TaskGraph):
        kind = "graph"
        workload = FixedWorkload(profiled(workload.validate(), profile) if profile is not None else workload)
    elif isinstance(workload, (Training, FixedWorkload)):
        kind = "training" if isinstance(workload, Training) else "graph"
        if profile is not None and isinstance(workload, Training):
            workload.profile = profile
    else:
        raise UsageError(f"advise needs a TaskGraph or a Training workload, got {type(workload).__name__}")
    _check_options(deadline, budget, max_nodes, network, NETWORKS, noise, samples, confidence, tolerance)
    schedulers = list(schedulers or DEFAULT_SCHEDULERS[kind])
    for p in schedulers:
        get_scheduler(p)  # an unknown name fails here, once
    if types is not None:
        for t in types:
            cat.type(t)
    configs = configurations(cat, max_nodes, types)
    if kind == "training":
        configs = [c for c in configs if all(t.gpus for t, _ in c.parts)]  # one rank per GPU
    if not configs:
        raise UsageError(
            "no configuration to search: "
            + (
                "the training workload needs GPU node types"
                if kind == "training"
                else "check --max-nodes and the catalog's counts"
            )
        )
    ev = Evaluator(workload, cat, schedulers, network=network, seed=seed)
    cands, stats = search(
        ev, configs, deadline, budget, tolerance, progress, prune_answer=not (noise > 0 and deadline is not None)
    )
    for k in cands:
        if k.status in ("front", "simulated"):
            _explain(ev, k)
    front = sorted((k for k in cands if k.status == "front"), key=lambda k: k.cost)
    if noise > 0:
        _sample(ev, front, deadline, noise, samples, confidence, seed, progress)
    choice = _choose(front, deadline, budget, confidence if noise > 0 else None)
    return Advice(
        workload=workload.describe(),
        catalog=cat,
        candidates=cands,
        front=front,
        choice=choice,
        deadline=deadline,
        budget=budget,
        schedulers=schedulers,
        network=network,
        noise=noise,
        confidence=confidence,
        stats=stats,
    )


def _check_options(deadline, budget, max_nodes, network, networks, noise, samples, confidence, tolerance) -> None:
    for name, v in (("deadline", deadline), ("budget", budget)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf")):
            raise UsageError(f"{name} must be a positive number, got {v!r}")
    if max_nodes is not None and (isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or max_nodes < 1):
        raise UsageError(f"max_nodes must be an integer >= 1, got {max_nodes!r}")
    if network not in networks:
        raise UsageError(f"unknown network {network!r}; known: {', '.join(networks)}")
    if not 0 <= noise <= 10 or not 1 <= samples <= 10_000 or not 0 < confidence <= 1 or not 0 <= tolerance < 1:
        raise UsageError("noise must be in [0, 10], samples 1..10000, confidence in (0, 1], tolerance in [0, 1)")


def _explain(ev: Evaluator, k: Candidate) -> None:
    """What held ``k``'s run back: the network (moving data added >= 20% to a network-free run of
    the same scheduler), compute (cores busy >= 75% of the time at the work bound), the critical
    path (>= 75% of the makespan), else idle cores (the graph cannot keep them busy)."""
    free = ev.simulate(k.config, k.scheduler, network="simple", free=True)
    k.network_share = max(0.0, (k.time - free) / k.time) if k.time > 0 else 0.0
    cps, works = [], []
    for g, _ in ev.workload.graphs(k.config):
        cp, work = ev.bounds(g, k.config)
        cps.append(cp)
        works.append(work)
    work = ev.workload.bound([0.0] * len(cps), works)
    cp = cps[-1]
    k.utilisation = work / k.time if k.time > 0 else 1.0
    if k.network_share >= 0.2:
        k.bound = "network"
    elif k.utilisation >= 0.75:
        k.bound = "compute"
    elif k.time > 0 and cp / k.time >= 0.75:
        k.bound = "critical path"
    else:
        k.bound = "idle"


#: the most task simulations the noisy samples may take (some 20 s on one core)
MAX_NOISY_TASKS = 250_000


def _sample(
    ev: Evaluator, front: list, deadline, noise: float, samples: int, confidence: float, seed: int, progress=None
) -> None:
    """Noisy simulations of the front's configurations (all without a deadline; with one, cheapest
    first until one meets it often enough). Refused before the first where those it must sample
    (all of them, or with a deadline the first) would simulate more than :data:`MAX_NOISY_TASKS`
    tasks; ``progress(done, total)`` after each."""
    todo = [k for k in front if deadline is None or k.time <= deadline]
    must = todo if deadline is None else todo[:1]
    tasks = sum(sum(len(g) for g, _ in ev.workload.graphs(k.config)) for k in must)
    if tasks * samples > MAX_NOISY_TASKS:
        raise UsageError(
            f"{samples:,} noisy samples of {len(must)} front configuration(s) would simulate "
            f"{tasks * samples:,} tasks, more than {MAX_NOISY_TASKS:,}: give fewer samples "
            f"(at most {max(1, MAX_NOISY_TASKS // max(1, tasks)):,} here)"
        )
    done, total = 0, len(todo) * samples
    for k in todo:
        k.samples = []
        for s in range(samples):
            k.samples.append(ev.simulate(k.config, k.scheduler, noise=noise, seed=seed + 1 + s))
            done += 1
            if progress is not None:
                progress(done, total)
        if deadline is not None:
            k.p_miss = float(np.mean([t > deadline for t in k.samples]))
            if 1.0 - k.p_miss >= confidence:
                break


def _choose(front: list, deadline, budget, confidence):
    """The cheapest front configuration meeting the deadline (with noise: at least ``confidence``
    of its samples), else the fastest within the budget, else None."""
    if deadline is not None:
        for k in front:  # cheapest first
            if k.time <= deadline and (confidence is None or (k.p_miss is not None and 1 - k.p_miss >= confidence)):
                return k
        return None
    if budget is not None:
        within = [k for k in front if k.cost <= budget]
        return min(within, key=lambda k: k.time) if within else None
    return None
