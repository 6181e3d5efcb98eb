"""What a run's records say of the cluster and the graph's costs, for :class:`~.learn.CostProfile`
and the scheduler plugin: each worker's speed relative to the others (:func:`relative_speeds`,
:func:`learned_speeds`, :func:`speeds_on`), per task-name prefix a fit of durations to declared costs
(:func:`duration_models`), the network's latency and rates (:func:`network_of`) and Dask's cost
per task (:func:`dispatch_gap`).
"""

from __future__ import annotations

import math

import numpy as np

from ..analysis import task_kind
from ..graph import TaskGraph

__all__ = [
    "MODEL_R2",
    "duration_models",
    "units_on",
    "speeds_on",
    "learned_speeds",
    "last_compute",
    "relative_speeds",
    "SMALL_TRANSFER",
    "network_of",
    "aggregate_rate",
    "dispatch_gap",
]


#: a prefix gets a duration model when its declared costs explain at least this share of the variance
#: of its measured durations around each worker's mean (the fit's R squared beyond the workers' own
#: levels). Emulated runs, whose declared costs are exact, gave 0.36-0.96 (layered-ccr1 of the quick
#: suite, 18 runs: a run's noise is heavy-tailed); durations unrelated to the costs reached 0.3 in
#: 2% of 300 random trials on four workers of speeds 1, 1, 2 and 4, and 0.5 in 0.3%.
MODEL_R2 = 0.3


def duration_models(graph: TaskGraph, runs, scale: float = 1.0, prefix_of: dict | None = None) -> dict:
    """Per task-name prefix, the least-squares fit of its measured durations (unscaled seconds) as
    ``fixed + declared cost x unit[worker]``: one fixed part for the prefix (not below 0) and one
    time per unit of declared cost on each worker. Kept for the prefixes whose declared costs vary
    and explain at least :data:`MODEL_R2` of the durations' variance around each worker's mean,
    with every unit > 0; see :class:`CostProfile` (``models``).

    Why: a duration has a part that does not depend on the worker's speed (Dask's call of the
    task, allocating its output). Scaling a task's whole measured duration by the ratio of worker
    speeds when a plan moves it makes a move to a faster worker look better than it is. And a
    task measured once carries that run's noise (on a loaded 2-core machine a 0.1 s task took up
    to 0.3 s longer than its work, at random): a planner given every task's own sample puts the
    tasks that happened to be quick on its critical path and is then surprised. In the quick
    suite's replays of second runs from the first runs' measurements (18 plans and their 18 twin
    runs), the fit took the mean error from +3.5% to +1.7% and the worst from 19.6% to 12.3%.

    Parameters
    ----------
    graph : TaskGraph
    runs : list of Run
    scale : float
        The run's time scale (durations are divided by it).
    prefix_of : dict, optional
        Task id -> prefix (default: :func:`task_kind`).

    Returns
    -------
    dict
        Prefix -> ``{"fixed": s, "unit": {worker name: s}, "r2": float}``.
    """
    a = graph.arrays
    by: dict = {}
    for r in runs:
        p = prefix_of[r.task] if prefix_of is not None else task_kind(graph, r.task)
        by.setdefault(p, []).append(r)
    out = {}
    for p, rs in by.items():
        workers = sorted({str(r.worker) for r in rs})
        col = {w: k + 1 for k, w in enumerate(workers)}
        c = np.array([float(a.cost[a.index[r.task]]) for r in rs])
        y = np.array([(r.finish - r.start) / scale for r in rs])
        if len(rs) < len(workers) + 2 or np.ptp(c) <= 0 or np.ptp(y) <= 0:
            continue  # the declared costs cannot explain anything
        w_of = np.array([col[str(r.worker)] for r in rs])
        x = np.zeros((len(rs), len(workers) + 1))
        x[:, 0] = 1.0
        x[np.arange(len(rs)), w_of] = c
        if np.linalg.matrix_rank(x) < x.shape[1]:
            continue
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        if coef[0] < 0:  # no fixed part: the units alone
            coef = np.r_[0.0, np.linalg.lstsq(x[:, 1:], y, rcond=None)[0]]
        # what the costs explain beyond each worker's own mean duration (heterogeneous workers'
        # levels alone would make unrelated costs look explanatory)
        level = (np.bincount(w_of, weights=y) / np.maximum(np.bincount(w_of), 1))[w_of]
        within = float(((y - level) ** 2).sum())
        if within <= 0:
            continue
        r2 = 1.0 - float(((y - x @ coef) ** 2).sum()) / within
        if r2 >= MODEL_R2 and (coef[1:] > 0).all():
            out[p] = {"fixed": float(coef[0]), "unit": {w: float(coef[col[w]]) for w in workers}, "r2": r2}
    return out


def units_on(unit: dict, speeds: dict) -> dict:
    """Worker name -> unit time for every worker in ``speeds``: the measured ones as measured, the
    others from the measured ones' (unit x speed), geometric mean, over their speed; {} when the
    profile saw none of these workers.

    Parameters
    ----------
    unit : dict
        Worker name -> measured seconds per unit of declared cost.
    speeds : dict
        Worker name -> speed.
    """
    known = [w for w in unit if w in speeds]
    if not known:
        return {}
    base = float(np.exp(np.mean([np.log(unit[w] * speeds[w]) for w in known])))
    return {w: unit[w] if w in unit else base / s for w, s in speeds.items()}


def speeds_on(declared: dict, learned: dict) -> dict:
    """Worker name -> speed: the learned ones; a worker never measured keeps its declared speed
    relative to the measured ones (declared x the geometric mean of learned / declared over them).

    Parameters
    ----------
    declared, learned : dict
        Worker name -> speed.
    """
    known = [w for w in declared if w in learned]
    if not known:
        return declared
    k = float(np.exp(np.mean([np.log(learned[w] / declared[w]) for w in known])))
    return {w: learned[w] if w in learned else s * k for w, s in declared.items()}


def learned_speeds(graph: TaskGraph, runs, prefix_of: dict | None = None) -> dict:
    """Relative worker speeds from what ran. Per task-name prefix and worker: seconds per unit of
    declared cost (total duration over total declared cost; with costs unknown, all alike, the mean
    duration). Over the prefixes that ran on several workers, a worker's speed is the mean of
    log(the prefix's geometric mean over its workers / its value on this worker), weighted by the
    prefix's measured seconds, exponentiated. Normalising by the declared cost keeps a scheduler that
    gives the big tasks to the fast workers from making them look slow; weighting by seconds keeps
    prefixes of millisecond tasks, whose durations are mostly Dask's own overhead, from flattening
    the differences.

    Parameters
    ----------
    graph : TaskGraph
    runs : list
        The run's task records.
    prefix_of : dict, optional
        Task id -> its prefix (default: its kind).
    """
    per: dict = {}
    a = graph.arrays
    for r in runs:
        cost = float(a.cost[a.index[r.task]])
        d = r.finish - r.start
        if d > 0:
            p = prefix_of[r.task] if prefix_of is not None else task_kind(graph, r.task)
            cell = per.setdefault(p, {}).setdefault(str(r.worker), [0.0, 0.0])
            cell[0] += d
            cell[1] += cost if cost > 0 else 1.0
    return relative_speeds(per)


def last_compute(startstops) -> tuple | None:
    """``(start, stop)`` of the latest ``compute`` entry of a task's ``startstops``, or None.

    A worker that computes a key again (the same Dask collection computed twice, a result
    recomputed after a loss) appends to the startstops it kept for that key: only the last entry
    belongs to the run at hand, and summing or spanning them all counts earlier runs too.

    Parameters
    ----------
    startstops : iterable of dict
        ``{"action", "start", "stop", ...}`` entries, oldest first.
    """
    last = None
    for ss in startstops or ():
        if ss.get("action") == "compute":
            last = ss
    return None if last is None else (last["start"], last["stop"])


def relative_speeds(per: dict, min_work: float = 0.0, min_secs: float = 0.0) -> dict:
    """Worker name -> relative speed from ``{prefix: {worker: [seconds, work]}}`` (measured seconds
    and declared work of the tasks of a prefix on a worker); see :func:`learned_speeds`.

    Parameters
    ----------
    per : dict
    min_work : float
        Count a prefix on a worker only with at least this much work there (the plugin's tables
        count tasks: a few tasks on a loaded machine say little).
    min_secs : float
        ... and only with at least this many seconds measured there (tasks of a millisecond
        measure the machine's hiccups, not the worker's speed).
    """
    logs: dict = {}
    for row in per.values():
        rate = {
            w: secs / work
            for w, (secs, work) in row.items()
            if secs > 0 and secs >= min_secs and work > 0 and work >= min_work
        }
        if len(rate) < 2:
            continue
        weight = sum(secs for secs, _ in row.values())
        ln = {w: math.log(m) for w, m in rate.items()}  # math, not numpy: called per finished task on a few values
        ref = sum(ln.values()) / len(ln)
        for w, x in ln.items():
            logs.setdefault(w, []).append((ref - x, weight))
    return {w: math.exp(sum(x * wt for x, wt in v) / sum(wt for _, wt in v)) for w, v in logs.items()}


SMALL_TRANSFER = 64 * 1024  # bytes: below this a transfer's time is mostly latency


def network_of(transfers) -> tuple:
    """``(latency, {source: {destination: bytes per second}}, backplane)`` from measured transfers
    (see :class:`~.learn.CostProfile` for each estimate).

    Parameters
    ----------
    transfers : list
        Measured transfers.
    """
    xs = [t for t in transfers if t.finish > t.start]
    small = [t.finish - t.start for t in xs if t.bytes < SMALL_TRANSFER]
    latency = float(np.median(small)) if small else None
    bw: dict = {}
    for t in xs:
        secs = t.finish - t.start - (latency or 0.0)
        if t.bytes >= SMALL_TRANSFER and secs > 0:
            bw.setdefault(str(t.source), {}).setdefault(str(t.destination), []).append(t.bytes / secs)
    pairs = {a: {b: float(np.percentile(v, 90)) for b, v in row.items()} for a, row in bw.items()}
    big = [t for t in xs if t.bytes >= SMALL_TRANSFER]
    return latency, pairs, aggregate_rate(big) if big else None


def aggregate_rate(transfers, q: float = 90.0) -> float:
    """The ``q``-th percentile, weighted by time, of the summed average rates of the transfers under
    way, over the time at least one was.

    Parameters
    ----------
    transfers : list
        Measured transfers (``start``, ``finish``, ``bytes``), each of some duration.
    q : float
    """
    edges = []
    for t in transfers:
        r = t.bytes / (t.finish - t.start)
        edges += [(t.start, 1, r), (t.finish, -1, -r)]
    edges.sort()
    level, n, spans = 0.0, 0, []
    for (t0, dn, dr), (t1, _, _) in zip(edges, edges[1:]):
        n += dn
        level = level + dr if n else 0.0  # exactly 0 between transfers (no rounding residue)
        if t1 > t0 and n:
            spans.append((level, t1 - t0))
    spans.sort()
    levels = np.array([s[0] for s in spans])
    cum = np.cumsum([s[1] for s in spans])
    return float(levels[min(len(levels) - 1, np.searchsorted(cum, cum[-1] * q / 100.0))])


def dispatch_gap(graph: TaskGraph, runs, transfers) -> float | None:
    """Dask's time per task besides its work: the mean gap between two consecutive tasks on one
    worker when the second was ready (its inputs computed and moved there) before the first ended.

    The mean, not the median: a makespan adds these gaps up along its chains, and n gaps add up to
    n times their mean. They are heavy-tailed on a loaded machine (the quick suite's fft-16 on 4
    workers sharing 2 cores: median 1.3 ms, mean 10.3 ms, largest 158 ms), so the median left about
    0.5 s of a 3.3 s run's critical chain out of the prediction.

    Parameters
    ----------
    graph : TaskGraph
    runs, transfers : list
        The run's task records and transfers.
    """
    finish = {r.task: r.finish for r in runs}
    where = {r.task: r.worker for r in runs}
    arrived = {(t.task, t.destination): t.finish for t in transfers}
    by_worker: dict = {}
    for r in runs:
        by_worker.setdefault(r.worker, []).append(r)
    gaps = []
    for w, rs in by_worker.items():
        rs.sort(key=lambda r: r.start)
        for a, b in zip(rs, rs[1:]):
            ready = max(
                (
                    finish.get(p, 0.0) if where.get(p) == w else arrived.get((p, w), float("inf"))
                    for p in graph.predecessors(b.task)
                ),
                default=0.0,
            )
            if ready <= a.finish and b.start >= a.finish:
                gaps.append(b.start - a.finish)
    return float(np.mean(gaps)) if gaps else None
