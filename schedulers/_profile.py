"""The pieces every list-scheduling kernel is built of (compiled by numba for large inputs, see
:mod:`taskflow.jit`): a worker's resource profile, and the steps of a list scheduler.

**The resource profile.** A worker is sorted segment start times with the cores in use on each
segment; the last segment (usage 0) runs to infinity. A task needing ``c`` of a worker's ``C``
cores for ``d`` seconds fits at ``t`` when every segment overlapping ``[t, t + d)`` has at most
``C - c`` cores in use. :func:`earliest_start` with ``insertion=True`` finds the earliest such
``t`` at or after the data-ready time (HEFT's insertion policy, generalised to multi-core workers);
``insertion=False`` also starts after the last segment without room (append: no back-filling).
This is exactly the rule ``Schedule.validate`` checks, so a plan made of these steps is valid by
construction. :func:`occupy_on` marks a placement; :func:`start_avoiding` also keeps clear of
tentative placements not yet in the profile.

**The steps of a list scheduler.** :func:`empty_plan` (the per-task result arrays and a profile
per worker), :func:`ready_heap` (the entry tasks by priority), :func:`data_ready` (when task
``i``'s inputs can be on each worker: producer finish + latency + size / bandwidth) and
:func:`place` (record a placement, occupy the worker, release the successors). Each loop is
written out in the module of the scheduler it belongs to, so the algorithm reads in one place:

- ``schedulers.base``: the shared loop (HEFT, CPOP, PEFT, b-level, MCT, ...): the ready task of
  highest priority, to a forced worker or the one of earliest finish (+ a per-worker bias);
- ``schedulers._greedy``: ETF and min-min, every ready task against every worker at each step;
- ``schedulers.heft_contention``: HEFT whose transfers wait for the network ports they share;
- ``schedulers.lookahead``: HEFT that places each task where its children finish earliest;
- ``schedulers.heft_dup``: HEFT that copies a task's critical parent onto its worker.
"""

from __future__ import annotations

import heapq

import numpy as np
from taskflow.jit import List, kernel

__all__ = [
    "INF",
    "duration_row",
    "earliest_start",
    "first_free",
    "occupy",
    "occupy_on",
    "start_avoiding",
    "empty_plan",
    "plan_arrays",
    "ready_heap",
    "data_ready",
    "place",
    "max_degree",
]

INF = np.inf


@kernel(cache=True)
def _find(times, K, t):
    """Largest k < K with times[k] <= t (times[0] == 0 <= t)."""
    lo, hi = 0, K - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if times[mid] <= t:
            lo = mid
        else:
            hi = mid - 1
    return lo


@kernel(cache=True)
def earliest_start(times, usage, K, ready, d, c, cap, insertion):
    """Earliest start >= ready for a task of ``d`` seconds on ``c`` of ``cap`` cores."""
    if d <= 0.0:
        return ready  # a zero-length task occupies no core time
    if not insertion:
        m = K - 1
        while m >= 0 and usage[m] + c <= cap:
            m -= 1
        if m >= 0 and times[m + 1] > ready:
            ready = times[m + 1]
        return ready
    k = _find(times, K, ready)
    t = ready
    while True:
        end = t + d
        m = k
        ok = True
        while m < K and times[m] < end:
            if usage[m] + c > cap:
                ok = False
                break
            m += 1
        if ok:
            return t
        k = m + 1  # the next candidate: the end of the conflicting segment
        t = times[k]


@kernel(cache=True)
def first_free(times, usage, K, cap, since=0.0):
    """When a core of the profile is first free: no task of positive length starts before. Every
    segment before ``since`` is known to be full (the first free time only moves later as tasks
    are placed), so the search starts there."""
    for k in range(_find(times, K, since), K):
        if usage[k] < cap:
            return times[k]
    return times[K - 1]


@kernel(cache=True)
def _split(times, usage, K, t):
    k = _find(times, K, t)
    if times[k] == t:
        return k, K
    for m in range(K, k + 1, -1):
        times[m] = times[m - 1]
        usage[m] = usage[m - 1]
    times[k + 1] = t
    usage[k + 1] = usage[k]
    return k + 1, K + 1


@kernel(cache=True)
def occupy(times, usage, K, s, f, c):
    """Mark ``c`` cores busy on ``[s, f)``; returns (times, usage, K), arrays possibly grown."""
    if f <= s:
        return times, usage, K
    if K + 2 > times.shape[0]:
        nt = np.empty(times.shape[0] * 2)
        nu = np.zeros(times.shape[0] * 2, np.int64)
        nt[:K] = times[:K]
        nu[:K] = usage[:K]
        times, usage = nt, nu
    k0, K = _split(times, usage, K, s)
    k1, K = _split(times, usage, K, f)
    for m in range(k0, k1):
        usage[m] += c
    # neighbours of equal use become one segment (only the two ends of [s, f) can have come to be
    # equal): a worker busy back to back is one segment, so a search across it is one step, not
    # one per task placed there (wide graphs made the insertion search quadratic)
    K = _merge(times, usage, K, k1)
    K = _merge(times, usage, K, k0)
    return times, usage, K


@kernel(cache=True)
def _merge(times, usage, K, k):
    """Fold segment ``k`` into ``k - 1`` where their use is equal; returns the new count."""
    if k <= 0 or k >= K or usage[k] != usage[k - 1]:
        return K
    for m in range(k, K - 1):
        times[m] = times[m + 1]
        usage[m] = usage[m + 1]
    return K - 1


@kernel(cache=True)
def occupy_on(w, times, usage, K, s, f, c):
    """Mark ``c`` cores of worker ``w`` busy on ``[s, f)`` in the per-worker profiles (grown in place)."""
    t, u, k = occupy(times[w], usage[w], K[w], s, f, c)
    times[w] = t
    usage[w] = u
    K[w] = k


@kernel(cache=True)
def plan_arrays(n, W):
    """``(worker, start, finish, times, usage, K)`` for ``n`` tasks on ``W`` workers: no task placed
    (worker -1), and an empty resource profile per worker."""
    worker = np.full(n, -1, np.int64)
    times = List()
    usage = List()
    for _ in range(W):
        times.append(np.zeros(16))
        usage.append(np.zeros(16, np.int64))
    return worker, np.zeros(n), np.zeros(n), times, usage, np.ones(W, np.int64)


@kernel(cache=True)
def empty_plan(durations):
    """``(n, W, worker, start, finish, times, usage, K)``: no task placed (worker -1), and an empty
    resource profile per worker."""
    n, W = durations.shape
    worker, start, finish, times, usage, K = plan_arrays(n, W)
    return n, W, worker, start, finish, times, usage, K


@kernel(cache=True)
def duration_row(i, dense, cost, speed, overhead, ex_ptr, ex_w, ex_s, tcores, wcores, out):
    """Fill ``out[w]``: task ``i``'s duration on each worker, from the dense matrix where it has rows,
    else computed as :class:`taskflow.costs.Durations` does (``cost / speed``, a task's exact
    per-worker seconds where it has them, plus the overhead; ``inf`` where it needs more cores than
    the worker has): entry for entry the dense matrix's value, without its tasks x workers memory."""
    W = out.shape[0]
    if dense.shape[0] > 0:
        for w in range(W):
            out[w] = dense[i, w]
        return
    c = cost[i]
    for w in range(W):
        out[w] = c / speed[w]
    for k in range(ex_ptr[i], ex_ptr[i + 1]):
        out[ex_w[k]] = ex_s[k]
    if overhead != 0.0:
        for w in range(W):
            out[w] += overhead
    need = tcores[i]
    if need > 1:
        for w in range(W):
            if need > wcores[w]:
                out[w] = INF


@kernel(cache=True)
def max_degree(ptr):
    """The largest row of a CSR index (at least 1): the most inputs (or outputs) of one task."""
    m = 1
    for i in range(ptr.shape[0] - 1):
        if ptr[i + 1] - ptr[i] > m:
            m = ptr[i + 1] - ptr[i]
    return m


@kernel(cache=True)
def ready_heap(pred_ptr, priority, remaining):
    """The ready heap of a list scheduler at the start: every entry task, by ``-priority``; fills
    ``remaining`` (unplaced predecessors per task)."""
    heap = [(0.0, 0)]
    heap.pop()
    for i in range(remaining.shape[0]):
        remaining[i] = pred_ptr[i + 1] - pred_ptr[i]
        if remaining[i] == 0:
            heapq.heappush(heap, (-priority[i], i))
    return heap


@kernel(cache=True)
def place(i, w, s, d, c, worker, start, finish, times, usage, K, succ_ptr, succ_idx, remaining, priority, heap):
    """Place task ``i`` on worker ``w`` over ``[s, s + d)`` with ``c`` cores and release the
    successors it was the last unplaced predecessor of into ``heap``."""
    worker[i] = w
    start[i] = s
    finish[i] = s + d
    occupy_on(w, times, usage, K, s, s + d, c)
    for e in range(succ_ptr[i], succ_ptr[i + 1]):
        j = succ_idx[e]
        remaining[j] -= 1
        if remaining[j] == 0:
            heapq.heappush(heap, (-priority[j], j))


@kernel(cache=True)
def data_ready(i, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, out):
    """Fill ``out[w]``: when every input of task ``i`` (its predecessors placed) can be on worker
    ``w``, each sent alone (no contention)."""
    for w in range(W):
        out[w] = 0.0
    for k in range(pred_ptr[i], pred_ptr[i + 1]):
        p = pred_idx[k]
        wp = worker[p]
        fp = finish[p]
        sz = pred_size[k]
        for w in range(W):
            t = fp if w == wp else fp + lat[wp, w] + sz * inv[wp, w]
            if t > out[w]:
                out[w] = t


@kernel(cache=True)
def start_avoiding(times, usage, K, ready, d, c, cap, ex_s, ex_f, nex):
    """Earliest start (insertion) at or after ``ready`` on a worker whose profile also has
    ``nex`` tentative tasks ``[ex_s, ex_f)``, each taken to hold the whole worker."""
    t = ready
    while True:
        t = earliest_start(times, usage, K, t, d, c, cap, True)
        moved = False
        for k in range(nex):
            if ex_s[k] < t + d and t < ex_f[k] and ex_f[k] > ex_s[k]:
                t = ex_f[k]
                moved = True
        if not moved or d <= 0.0:
            return t
