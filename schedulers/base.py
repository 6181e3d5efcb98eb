"""Helpers every static scheduler shares: the list-scheduling loop (compiled for large inputs) and
schedule assembly. The loop's steps and the other schedulers' loops: :mod:`schedulers._profile`.

The interface (:class:`~taskflow.scheduling.Scheduler`, :class:`~taskflow.scheduling.DynamicScheduler`) and
the name registry live in :mod:`taskflow.scheduling`; they are re-exported here for scheduler modules.
"""

from __future__ import annotations

import heapq

import numpy as np

from taskflow.costs import CostModel
from taskflow.jit import kernel
from taskflow.scheduling import DynamicScheduler, Scheduler, available, get_scheduler, register, scheduler_class
from taskflow.schedule import Schedule

from ._profile import INF, data_ready, duration_row, earliest_start, first_free, place, plan_arrays, ready_heap

__all__ = [
    "Scheduler",
    "DynamicScheduler",
    "register",
    "get_scheduler",
    "scheduler_class",
    "available",
    "list_schedule",
    "kernel_inputs",
    "duration_inputs",
    "topological_priority",
    "to_schedule",
]


def kernel_inputs(cost_model: CostModel, durations: bool = True) -> tuple:
    """The arguments every compiled list-scheduling loop starts with: durations, task cores,
    worker cores, predecessor CSR with each edge's size, successor CSR, latency and inverse
    bandwidth matrices (contiguous, as the kernels want them).

    Parameters
    ----------
    cost_model : CostModel
    durations : bool
        False: None in the durations' place (a loop that reads them by :func:`duration_inputs`).
    """
    a = cost_model.arrays
    return (
        np.ascontiguousarray(cost_model.durations) if durations else None,
        a.cores,
        cost_model.cluster.cores,
        a.pred_ptr,
        a.pred_idx,
        np.ascontiguousarray(a.size[a.pred_eid]),
        a.succ_ptr,
        a.succ_idx,
        cost_model.latency_matrix,
        cost_model.inv_bandwidth,
    )


@kernel(cache=True)
def _finish_bound(d, c, cap, drt, free, tail, hole, hole_end, insertion):
    """The earliest a task of ``d`` seconds on ``c`` of ``cap`` cores can finish on a worker whose
    data are ready at ``drt``, whose first free core is at ``free``, whose last task ends at
    ``tail`` with no idle stretch longer than ``hole`` before it, the latest ending at
    ``hole_end``: no start before the data or a free core, nor, for a task of every core appended
    (no insertion), longer than every idle stretch or ready after the last one, before the last
    task's end (then exactly there)."""
    if d <= 0.0:
        return drt
    if c >= cap and (not insertion or d > hole or drt >= hole_end):
        return max(drt, tail) + d
    return max(drt, free) + d


def duration_inputs(cost_model: CostModel) -> tuple:
    """How a list-scheduling kernel reads durations (:func:`._profile.duration_row`): the dense
    matrix where the cost model holds one, else an empty one and what each entry is computed from
    (task costs, worker speeds, the overhead, each task's exact per-worker seconds as CSR), so a
    graph of a million tasks on a thousand workers is planned without its 8 GB matrix.

    Parameters
    ----------
    cost_model : CostModel
    """
    d = cost_model.durations
    cluster = cost_model.cluster
    if cost_model.dense:
        empty = np.zeros(0)
        return (
            np.ascontiguousarray(d),
            np.zeros(d.shape[0]),
            np.ones(d.shape[1]),
            0.0,
            np.zeros(d.shape[0] + 1, np.int64),
            np.zeros(0, np.int64),
            empty,
        )
    n = d.shape[0]
    counts = np.zeros(n + 1, np.int64)
    for i, row in d.exact.items():
        counts[i + 1] = len(row)
    ptr = np.cumsum(counts)
    ex_w = np.zeros(int(ptr[-1]), np.int64)
    ex_s = np.zeros(int(ptr[-1]))
    for i, row in d.exact.items():
        k = int(ptr[i])
        for j, secs in row.items():
            ex_w[k], ex_s[k] = j, secs
            k += 1
    return (
        np.zeros((0, 0)),
        np.asarray(d.cost, np.float64),
        np.asarray(cluster.speed, np.float64),
        d.overhead,
        ptr,
        ex_w,
        ex_s,
    )


@kernel(cache=True)
def _list_loop(
    dense,
    cost,
    speed,
    overhead,
    ex_ptr,
    ex_w,
    ex_s,
    tcores,
    wcores,
    pred_ptr,
    pred_idx,
    pred_size,
    succ_ptr,
    succ_idx,
    lat,
    inv,
    priority,
    fixed,
    bias,
    use_bias,
    insertion,
):
    """Schedule every task; the ready task of highest ``priority`` (ties: lower index) goes next,
    to ``fixed[i]`` when >= 0, else to the worker minimising finish (+ ``bias[i, w]``). Durations
    come a task's row at a time (:func:`._profile.duration_row`)."""
    n = priority.shape[0]
    W = wcores.shape[0]
    worker, start, finish, times, usage, K = plan_arrays(n, W)
    row = np.empty(W)
    remaining = np.empty(n, np.int64)
    heap = ready_heap(pred_ptr, priority, remaining)
    drt = np.empty(W)
    free = np.zeros(W)  # per worker: when a core of it is first free (no task starts before)
    # per worker: when its last task ends; the longest idle stretch before that, and when the latest
    # one ends (upper bounds: a stretch is made only by a task placed after an idle wait, and
    # placements only shorten stretches). A task of all the worker's cores longer than every stretch,
    # or whose data are ready after the last stretch, starts after the last task.
    tail = np.zeros(W)
    hole = np.zeros(W)
    hole_end = np.zeros(W)
    while len(heap) > 0:
        i = heapq.heappop(heap)[1]  # the ready task of highest priority
        duration_row(i, dense, cost, speed, overhead, ex_ptr, ex_w, ex_s, tcores, wcores, row)
        data_ready(i, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, drt)
        c = tcores[i]
        best_w = -1
        best_s = 0.0
        f = fixed[i]
        if f >= 0 and row[f] < INF:
            best_w = f
            best_s = earliest_start(times[f], usage[f], K[f], drt[f], row[f], c, wcores[f], insertion)
        else:
            best_key = INF
            low = INF
            if not use_bias:
                # first the worker whose finish is bounded lowest (its data ready, a core of it free):
                # its finish bounds the search, so few others need their profile searched
                first = -1
                for w in range(W):
                    d = row[w]
                    if d < INF:
                        bound = _finish_bound(
                            d, c, wcores[w], drt[w], free[w], tail[w], hole[w], hole_end[w], insertion
                        )
                        if bound < low:
                            low = bound
                            first = w
                if first >= 0:
                    best_w = first
                    best_s = earliest_start(
                        times[first], usage[first], K[first], drt[first], row[first], c, wcores[first], insertion
                    )
                    best_key = best_s + row[first]
            # the first finishes at its bound: every other worker's bound is as late, and of those as
            # late, none of a lower index (the first is the lowest): nothing more to search
            done = not use_bias and best_w >= 0 and best_key <= low
            for w in range(0 if not done else W, W):
                d = row[w]
                if d == INF or w == best_w:
                    continue
                if not use_bias and best_w >= 0:
                    bound = _finish_bound(d, c, wcores[w], drt[w], free[w], tail[w], hole[w], hole_end[w], insertion)
                    if bound > best_key or (bound == best_key and w > best_w):
                        continue  # it starts then at the earliest: it cannot finish sooner than the best
                s = earliest_start(times[w], usage[w], K[w], drt[w], d, c, wcores[w], insertion)
                key = s + d
                if use_bias:
                    key += bias[i, w]
                # the earliest finish; of equal ones, the lowest worker index
                if best_w < 0 or key < best_key or (key == best_key and w < best_w):
                    best_key = key
                    best_w = w
                    best_s = s
        place(
            i,
            best_w,
            best_s,
            row[best_w],
            c,
            worker,
            start,
            finish,
            times,
            usage,
            K,
            succ_ptr,
            succ_idx,
            remaining,
            priority,
            heap,
        )
        free[best_w] = first_free(times[best_w], usage[best_w], K[best_w], wcores[best_w], free[best_w])
        if row[best_w] > 0.0:
            if best_s > tail[best_w]:
                hole[best_w] = max(hole[best_w], best_s - tail[best_w])
                hole_end[best_w] = best_s
            tail[best_w] = max(tail[best_w], best_s + row[best_w])
    return worker, start, finish


def list_schedule(cost_model: CostModel, priority, fixed=None, bias=None, insertion: bool = True):
    """Run the shared list-scheduling loop (:func:`_list_loop`, above).

    Returns per-task-index arrays ``(worker, start, finish)``.

    Parameters
    ----------
    cost_model : CostModel
    priority : array_like
        Per task; the ready task of highest priority goes next (ties: the lower index).
    fixed : array_like of int, optional
        Per task a worker index it must go to, or -1 (free).
    bias : numpy.ndarray, optional
        Tasks x workers, added to the finish time when choosing a worker.
    insertion : bool
        Search idle gaps (True, HEFT's scheduler) or append after a worker's last task.
    """
    a = cost_model.arrays
    n = a.n
    fixed = np.full(n, -1, dtype=np.int64) if fixed is None else np.asarray(fixed, dtype=np.int64)
    use_bias = bias is not None
    bias = np.zeros((1, 1)) if bias is None else np.ascontiguousarray(bias, dtype=np.float64)
    _, tcores, wcores, *graph_and_network = kernel_inputs(cost_model, durations=False)
    return _list_loop(
        *duration_inputs(cost_model),
        tcores,
        wcores,
        *graph_and_network,
        np.asarray(priority, dtype=np.float64),
        fixed,
        bias,
        use_bias,
        bool(insertion),
    )


def topological_priority(cost_model: CostModel):
    """A priority that makes the ready heap follow the graph's topological order.

    Parameters
    ----------
    cost_model : CostModel
    """
    a = cost_model.arrays
    prio = np.empty(a.n)
    prio[a.topo] = -np.arange(a.n, dtype=np.float64)
    return prio


def to_schedule(cost_model: CostModel, result, name: str, extra: dict | None = None) -> Schedule:
    """The :class:`Schedule` of a kernel's ``(worker, start, finish)`` index arrays.

    Parameters
    ----------
    cost_model : CostModel
    result : (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Worker index, start and finish per task index.
    name : str
        The scheduler's name.
    extra : dict, optional
    """
    worker, start, finish = result
    return Schedule.from_indices(
        cost_model.graph, cost_model.cluster, worker, start, finish, scheduler=name, extra=extra
    )
