"""Predictions a run is placed by: Dask's own scheduling of a graph, simulated from the state its
scheduler is in (:func:`predict_dask`), and the guard of the ``adaptive`` scheduler, which keeps a
plan only where it is predicted to beat that, or Dask's own scheduling on a subset of the workers
(:func:`choose`)."""

from __future__ import annotations

from ..cluster import Cluster
from ..graph import TaskGraph
from ..scheduling import CHOICES, DASK, PLAN, SUBSET, AdaptiveOptions
from ..analysis import task_kind

__all__ = [
    "DASK_DRAWS",
    "PLAN",
    "DASK",
    "SUBSET",
    "CHOICES",
    "predict_dask",
    "predict_plan",
    "choose",
    "with_inputs",
    "dask_priorities",
    "fastest_workers",
    "narrow_rate",
    "narrow_pairs",
    "subsets",
    "uneven",
    "across_hosts",
]

# what runs a graph (its plan, Dask's own scheduling, or Dask's own held to a subset of the
# workers): defined once, where the adaptive scheduler declares them (taskflow.scheduling)
#: draws of Dask's set orders averaged by a prediction of Dask's own scheduling (fewer on big graphs)
DASK_DRAWS = 8
#: the first two draws within this share of each other: no more are drawn (in the scheduler's event
#: loop, a draw of a graph of 674 tasks takes 25-55 ms here, and on the suite's graphs the draws agree)
DRAWS_AGREE = 0.01


def predict_dask(
    graph: TaskGraph,
    cluster: Cluster,
    state: dict | None,
    time_scale: float = 1.0,
    size_scale: float = 1.0,
    draws: int | None = None,
    keys: dict | None = None,
    pinned: dict | None = None,
    within=None,
    priorities: dict | None = None,
) -> float:
    """The makespan (scaled seconds) of ``graph`` on ``cluster`` under Dask's own scheduling: the
    simulator's model of Dask's decisions (:class:`schedulers.dask_model.DaskModel`) started from
    ``state`` (:func:`taskflow.runtime.scheduler.reading.dask_state`, read from the scheduler just before the
    graph is submitted; None: Dask's defaults), with the max-min network, averaged over ``draws``
    orders of Dask's sets of tasks (its hashes, random per scheduler process); two when the first
    two agree within :data:`DRAWS_AGREE`.

    Parameters
    ----------
    graph : TaskGraph
        With costs in the model's (unscaled) seconds and bytes.
    cluster : Cluster
        Its workers carry their Dask addresses.
    state : dict or None
    time_scale, size_scale : float
        Real seconds (bytes) per cost-model second (byte).
    draws : int, optional
        Default :data:`DASK_DRAWS`, fewer above 2,000 tasks.
    keys : dict, optional
        Task id -> the Dask key it was submitted under (``dask.order``, which gives Dask's
        priorities, breaks ties by key).
    pinned : dict, optional
        Task id -> the worker id its output sits on (mid-run: :func:`with_inputs`).
    within : list, optional
        Worker ids the other tasks are held to (Dask's own scheduling on a subset, by
        restrictions, as Dask holds them).
    priorities : dict, optional
        :func:`.dask_graph.dask_priorities` of ``graph`` (with ``keys``), where the caller has
        them already (``dask.order`` of 674 tasks takes 30 ms).
    """
    from ..simulator import simulate

    ts = float(time_scale)
    opts = {"unknown_duration": 0.5 / ts, "steal_interval": 1.0 / ts, "steal_latency": 0.1 / ts, "min_victim": 0.2 / ts}
    if state:
        by_address = {w.address: w.id for w in cluster.workers if w.address}
        opts.update(
            n_tasks=state["n_tasks"],
            order=[by_address[a] for a in state["workers"] if a in by_address],
            tie_order=[by_address[a] for a in state["ties"] if a in by_address],
            durations={p: d / ts for p, d in state["durations"].items() if d is not None},
            unknown_duration=state["unknown"] / ts,
            bandwidth=state["bandwidth"] * ts / float(size_scale),
            saturation=state["saturation"],
            rootish=tuple(state["rootish"]),
            steal_latency=state["steal_latency"] / ts,
            steal_interval=state["steal_interval"] / ts if state["steal_interval"] else None,
            steal_phase=state["steal_phase"] / ts if state["steal_phase"] is not None else None,
        )
    opts["priorities"] = dask_priorities(graph, keys) if priorities is None else priorities
    opts["pinned"], opts["within"] = pinned, within
    k = draws if draws is not None else max(1, min(DASK_DRAWS, 16_000 // max(1, len(graph))))
    spans = []
    for d in range(k):
        spans.append(simulate(graph, cluster, "dask-model", network="maxmin", scheduler_options=opts, seed=d).makespan)
        if d == 1 and abs(spans[0] - spans[1]) <= DRAWS_AGREE * max(spans):
            break  # two orders of Dask's sets agree: the order does not matter to this graph here
    return sum(spans) / len(spans) * ts


def with_inputs(graph: TaskGraph, inputs: dict) -> tuple:
    """``graph`` (the unfinished part of a run) with the outputs it reads from tasks already run:
    each a task of no cost whose output sits on its worker. Returns ``(graph, pinned)``, ``pinned``
    for :func:`predict_dask`: mid-run, Dask's own scheduling places a task beside its inputs where
    they are, and holding it to a group of workers moves the inputs held outside the group.

    Parameters
    ----------
    graph : TaskGraph
    inputs : dict
        Task id (not in ``graph``) -> ``(worker id, bytes, ids in graph reading it)``.
    """
    a = graph.arrays
    ids = list(a.ids)
    index = a.index
    extra = [k for k in inputs if k not in index]
    src, dst, size = a.src.tolist(), a.dst.tolist(), a.size.tolist()
    for j, k in enumerate(extra):
        _, nbytes, readers = inputs[k]
        for t in readers:
            if t in index:
                src.append(len(ids) + j)
                dst.append(index[t])
                size.append(float(nbytes))
    metas = graph.metas()
    meta = [metas.get(i) for i in range(len(ids))] + [None] * len(extra)
    out = graph.from_arrays(
        graph.name,
        ids + extra,
        a.cost.tolist() + [0.0] * len(extra),
        a.output_size.tolist() + [float(inputs[k][1]) for k in extra],
        src,
        dst,
        size,
        meta=meta,
        cores=a.cores.tolist() + [1] * len(extra),
    )
    return out, {k: inputs[k][0] for k in extra}


def predict_plan(graph: TaskGraph, cluster: Cluster, plan, scheduler=None) -> float:
    """The makespan of ``plan`` carried out by Dask on ``cluster`` as the simulator predicts it
    (max-min network, each worker's tasks in the plan's order as they become ready).

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    plan : Schedule
    scheduler : Scheduler or str, optional
        What made it (default: the name it carries).
    """
    from ..simulator import simulate

    return simulate(
        graph, cluster, scheduler or plan.scheduler, network="maxmin", plan=plan, plan_order="ready"
    ).makespan


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


def fastest_workers(cluster: Cluster, spread: float) -> list | None:
    """The ids of the workers at least ``1 / spread`` as fast as the fastest one, where that
    leaves some out (else None). A worker many times slower than the others lengthens a run
    wherever it holds the last task of a chain or the last of a wave (Dask's stealing moves only
    tasks that wait, never one that runs), and what it adds is little: a quarter-speed worker
    beside a full-speed one adds a fifth of the cluster's speed.

    Parameters
    ----------
    cluster : Cluster
    spread : float
    """
    top = max(w.speed for w in cluster.workers)
    fast = [w.id for w in cluster.workers if w.speed * spread >= top]
    return fast if len(fast) < len(cluster.workers) else None


def across_hosts(cluster: Cluster, keep=None) -> Cluster:
    """``cluster`` without the per-pair rates between workers of one host (their addresses name
    the same host), except those in ``keep`` (``{sender: {receiver, ...}}``, declared ones): two
    workers of one machine move bytes through its memory, at the pace of the receiver's CPU,
    which holding Dask to one of them does not make faster. On one machine's loopback a busy
    receiver took the suite's shuffle in at about 200 MB/s, and its graph counted that narrow.

    Parameters
    ----------
    cluster : Cluster
    keep : dict, optional
    """
    from distributed.comm import get_address_host

    def host(w):
        try:
            return get_address_host(w.address) if w.address else None
        except (ValueError, TypeError):
            return None

    hosts = {w.id: host(w) for w in cluster.workers}
    keep = keep or {}
    rows = {
        a: {
            b: v for b, v in row.items() if b in keep.get(a, ()) or hosts.get(a) is None or hosts.get(a) != hosts.get(b)
        }
        for a, row in cluster.bandwidths.items()
    }
    return cluster.replace(bandwidths={a: row for a, row in rows.items() if row})


def narrow_rate(graph: TaskGraph, ccr: float = 1.0) -> float:
    """Bytes per second below which a link is *narrow* for ``graph``: moving its mean edge's
    bytes over it takes more than ``ccr`` times as long as its mean task computes (a
    communication-to-computation ratio above ``ccr`` on that link); 0 for a graph without edges
    or costs.

    Parameters
    ----------
    graph : TaskGraph
    ccr : float
    """
    arr = graph.arrays
    if not arr.m or not arr.n:
        return 0.0
    mean_cost = float(arr.cost.mean())
    return float(arr.size.mean()) / (mean_cost * ccr) if mean_cost > 0 else 0.0


def narrow_pairs(cluster: Cluster, rate: float) -> set:
    """The pairs ``(a, b)`` of ``cluster``'s workers whose declared or learned rate is below
    ``rate`` (:func:`narrow_rate`): ``racks`` count by their uplink.

    Parameters
    ----------
    cluster : Cluster
    rate : float
    """
    out = {(a, b) for a, row in cluster.bandwidths.items() for b, v in row.items() if v < rate}
    if cluster.racks is not None and cluster.uplink is not None and cluster.uplink < rate:
        out |= {
            (a.id, b.id) for a in cluster.workers for b in cluster.workers if cluster.racks[a.id] != cluster.racks[b.id]
        }
    return out


def subsets(cluster: Cluster, spread: float, rate: float = 0.0, most: int = 4) -> list:
    """Sets of workers Dask's own scheduling may be held to (:data:`SUBSET`), each a list of
    ids leaving some worker out: the fastest ones (:func:`fastest_workers`); and the groups of
    workers joined by links that are not narrow (:func:`narrow_pairs` below ``rate``: two racks
    joined by a narrow link are two groups), the ``most`` fastest in total speed.

    Parameters
    ----------
    cluster : Cluster
    spread : float
    rate : float
    most : int
    """
    out = []
    fast = fastest_workers(cluster, spread)
    if fast is not None:
        out.append(fast)
    narrow = narrow_pairs(cluster, rate) if rate > 0 else set()
    if narrow:
        group = {w.id: w.id for w in cluster.workers}

        def root(x):
            while group[x] != x:
                group[x] = group[group[x]]
                x = group[x]
            return x

        for a in cluster.workers:
            for b in cluster.workers:
                if a.id != b.id and (a.id, b.id) not in narrow and (b.id, a.id) not in narrow:
                    group[root(a.id)] = root(b.id)
        parts: dict = {}
        for w in cluster.workers:
            parts.setdefault(root(w.id), []).append(w)
        if len(parts) > 1:
            ranked = sorted(parts.values(), key=lambda ws: (-sum(w.speed * w.cores for w in ws), str(ws[0].id)))
            out += [[w.id for w in ws] for ws in ranked[:most] if [w.id for w in ws] not in out]
    return out


def choose(
    graph: TaskGraph,
    cluster: Cluster,
    plan,
    state: dict | None,
    options: AdaptiveOptions,
    *,
    choices=None,
    candidates=None,
    predictions: dict | None = None,
    unwatched=(),
    incumbent: str = DASK,
    inputs: dict | None = None,
    scheduler=None,
) -> tuple:
    """What runs ``graph``, of ``choices``: :data:`PLAN` (``plan``), :data:`DASK` (Dask's own
    scheduling) or :data:`SUBSET` (Dask's own scheduling held to the best predicted of
    :func:`subsets`: the fastest workers, or a group of them joined by links that are not narrow
    for this graph). Each is simulated from the same costs (:func:`predict_plan`,
    :func:`predict_dask` from ``state``); the plan only on a cluster where a list scheduler has
    something to win (the fastest worker more than ``spread`` times the slowest, or a network
    with per-pair rates or racks: :func:`uneven`). The shortest predicted wins, but Dask's own
    scheduling (where it is a choice; or the ``incumbent``) gives way only to one predicted at
    least ``margin`` (a fraction) shorter. Choices in ``unwatched`` are predicted (into
    ``predictions``) but not taken while another of ``choices`` is. Above ``limit`` tasks nothing
    is simulated: the plan on an uneven cluster, else Dask's own.

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    plan : Schedule or None
        None where :data:`PLAN` is not among ``choices``.
    state : dict or None
        :func:`taskflow.runtime.scheduler.reading.dask_state`.
    options : AdaptiveOptions
        Its ``margin``, ``limit`` and ``spread``.
    choices : iterable of str, optional
        Of :data:`CHOICES` (default: the options'); where none applies (only :data:`SUBSET`, with
        no subset), Dask's own.
    candidates : list of lists, optional
        The subsets weighed (default :func:`subsets` with links narrow at a ratio of 1).
    predictions : dict, optional
        Filled with each simulated choice's predicted makespan.
    unwatched : iterable of str
        Choices predicted but not taken where another of ``choices`` can be.
    incumbent : str
        What runs now, which the others must beat by ``margin`` (Dask's own where it is not
        predicted: a choice not among ``choices``, or a plan not simulated).
    inputs : dict, optional
        Mid-run, the outputs of tasks already run that ``graph`` reads (:func:`with_inputs`):
        Dask's own choices are simulated with them where they sit, a subset by restrictions on
        the whole cluster.
    scheduler : Scheduler, optional
        What made ``plan``.

    Returns
    -------
    tuple
        ``(choice, predicted makespan of what runs, predicted makespan of Dask's own or None,
        the subset's worker ids or None)``.
    """
    margin, limit, spread = options.margin, options.limit, options.spread
    choices = tuple(options.choices if choices is None else choices)
    takes = tuple(c for c in choices if c not in unwatched) or choices
    if len(graph) > limit:
        keep = PLAN in takes and (uneven(cluster, spread) or DASK not in takes)
        return (PLAN if keep else DASK), (float("nan") if plan is None else float(plan.makespan)), None, None
    placed, pinned = with_inputs(graph, inputs) if inputs else (graph, None)
    order = dask_priorities(placed)  # once for every simulation of Dask's own of ``placed``
    dask = predict_dask(placed, cluster, state, draws=1, pinned=pinned, priorities=order)
    preds, held = {DASK: dask}, None
    if PLAN in choices and (DASK not in choices or uneven(cluster, spread)):
        preds[PLAN] = predict_plan(graph, cluster, plan, scheduler)
    if SUBSET in choices:
        need = int(graph.arrays.cores.max(initial=1))
        for ids in subsets(cluster, spread, narrow_rate(graph)) if candidates is None else candidates:
            if int(cluster.subset(ids).cores.max(initial=0)) < need:
                continue  # a task needs more cores than any of these workers has: it would wait forever
            few = (
                predict_dask(placed, cluster, state, draws=1, pinned=pinned, within=ids, priorities=order)
                if pinned
                else predict_dask(
                    graph.restrict_costs(ids),
                    cluster.subset(ids),
                    state,
                    draws=1,
                    priorities=order if placed is graph else None,
                )
            )
            if SUBSET not in preds or few < preds[SUBSET]:
                preds[SUBSET], held = few, ids
    if predictions is not None:
        predictions.update(preds)
    base = incumbent if incumbent in preds and incumbent in takes else DASK
    guarded = base in choices
    eligible = {
        c: v for c, v in preds.items() if c in takes and (c == base or not guarded or v <= (1.0 - margin) * preds[base])
    }
    if not eligible:
        return DASK, dask, dask, None
    best = min(eligible, key=lambda c: (eligible[c], CHOICES.index(c)))
    return best, eligible[best], dask, (held if best == SUBSET else None)


def dask_priorities(graph: TaskGraph, keys: dict | None = None) -> dict:
    """Task id -> its position in ``dask.order`` (lower runs first), as Dask orders the graph when
    it is submitted: the order in which Dask's own scheduling decides and runs ready tasks.

    Parameters
    ----------
    graph : TaskGraph
    keys : dict, optional
        Task id -> its Dask key: ``dask.order`` breaks ties by key, so the keys a run submits give
        Dask's own order (default: ``"<kind>-<id>"``).
    """
    from dask.order import order

    a = graph.arrays
    ptr, idx = a.pred_ptr.tolist(), a.pred_idx.tolist()
    ids = graph.ids
    names = [keys[t] for t in ids] if keys else [f"{task_kind(graph, t)}-{t}" for t in ids]
    dsk = {names[i]: (_placeholder, *[names[p] for p in idx[ptr[i] : ptr[i + 1]]]) for i in range(a.n)}
    pos = order(dsk)
    return {t: pos[names[i]] for i, t in enumerate(ids)}


def _placeholder(*args):  # pragma: no cover - the callable of dask.order's graph, never called
    return None
