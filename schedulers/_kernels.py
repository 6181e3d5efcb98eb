"""Compiled list-scheduling machinery shared by every static policy (numba).

A worker is a *resource profile*: sorted segment start times with the cores in use on each
segment; the last segment (usage 0) runs to infinity. A task needing ``c`` of a worker's ``C``
cores for ``d`` seconds fits at ``t`` when every segment overlapping ``[t, t + d)`` has at most
``C - c`` cores in use. ``insertion=True`` finds the earliest such ``t`` at or after the data-ready
time (HEFT's insertion policy, generalised to multi-core workers); ``insertion=False`` also starts
after the last segment without room (append: no back-filling). This is exactly the rule
``Schedule.validate`` checks, so a plan from here is valid by construction.

:func:`list_schedule` is the one list-scheduling loop: a ready heap ordered by a priority, the data-
ready time of the task on every worker (predecessor finish + latency + size / bandwidth), then
either a forced worker or the worker minimising finish time (+ an optional per-worker bias, PEFT's
optimistic cost table). :func:`greedy_schedule` is the ETF / min-min loop that looks at every ready
task against every worker at each step.
"""

from __future__ import annotations

import heapq

import numpy as np
from taskflow.jit import kernel
from taskflow.jit import List

_INF = np.inf


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
    return times, usage, K


@kernel(cache=True)
def _profiles(W):
    times = List()
    usage = List()
    for _ in range(W):
        times.append(np.zeros(16))
        usage.append(np.zeros(16, np.int64))
    return times, usage, np.ones(W, np.int64)



@kernel(cache=True)
def _ready_heap(pred_ptr, priority, remaining):
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
def _place(i, w, s, d, c, worker, start, finish, times, usage, K, succ_ptr, succ_idx, remaining, priority, heap):
    """Place task ``i`` on worker ``w`` over ``[s, s + d)`` with ``c`` cores and release the
    successors it was the last unplaced predecessor of into ``heap``."""
    worker[i] = w
    start[i] = s
    finish[i] = s + d
    t, u, k = occupy(times[w], usage[w], K[w], s, s + d, c)
    times[w] = t
    usage[w] = u
    K[w] = k
    for e in range(succ_ptr[i], succ_ptr[i + 1]):
        j = succ_idx[e]
        remaining[j] -= 1
        if remaining[j] == 0:
            heapq.heappush(heap, (-priority[j], j))


@kernel(cache=True)
def _data_ready(i, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, out):
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
def list_schedule(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx,
                  lat, inv, priority, fixed, bias, use_bias, insertion):
    """Schedule every task; the ready task of highest ``priority`` (ties: lower index) goes next,
    to ``fixed[i]`` when >= 0, else to the worker minimising finish (+ ``bias[i, w]``)."""
    n, W = durations.shape
    worker = np.full(n, -1, np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    times, usage, K = _profiles(W)
    remaining = np.empty(n, np.int64)
    heap = _ready_heap(pred_ptr, priority, remaining)
    drt = np.empty(W)
    while len(heap) > 0:
        item = heapq.heappop(heap)
        i = item[1]
        _data_ready(i, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, drt)
        c = tcores[i]
        best_w = -1
        best_s = 0.0
        f = fixed[i]
        if f >= 0 and durations[i, f] < _INF:
            best_w = f
            best_s = earliest_start(times[f], usage[f], K[f], drt[f], durations[i, f], c, wcores[f], insertion)
        else:
            best_key = _INF
            for w in range(W):
                d = durations[i, w]
                if d == _INF:
                    continue
                s = earliest_start(times[w], usage[w], K[w], drt[w], d, c, wcores[w], insertion)
                key = s + d
                if use_bias:
                    key += bias[i, w]
                if best_w < 0 or key < best_key:
                    best_key = key
                    best_w = w
                    best_s = s
        _place(i, best_w, best_s, durations[i, best_w], c, worker, start, finish, times, usage, K, succ_ptr, succ_idx,
               remaining, priority, heap)
    return worker, start, finish


@kernel(cache=True)
def greedy_schedule(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx,
                    lat, inv, level, mode):
    """ETF (mode 0): of all (ready task, worker) pairs the earliest start, ties to the higher
    ``level`` (b-level). Min-min (mode 1): the ready task whose best finish is earliest, there.
    Append placement. Start times of ready tasks are cached and refreshed only on the worker that
    just received a task, so a step costs O(ready) rather than O(ready x workers)."""
    n, W = durations.shape
    worker = np.full(n, -1, np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    times, usage, K = _profiles(W)
    remaining = np.empty(n, np.int64)
    ready = np.empty(n, np.int64)
    nready = 0
    drt = np.zeros((n, W))
    est = np.zeros((n, W))
    for i in range(n):
        remaining[i] = pred_ptr[i + 1] - pred_ptr[i]
        if remaining[i] == 0:
            ready[nready] = i
            nready += 1
            for w in range(W):
                est[i, w] = earliest_start(times[w], usage[w], K[w], 0.0, durations[i, w], tcores[i], wcores[w], False)
    for _ in range(n):
        bi = -1
        bw = -1
        bpos = -1
        bkey = _INF
        blev = -_INF
        for r in range(nready):
            i = ready[r]
            for w in range(W):
                d = durations[i, w]
                if d == _INF:
                    continue
                key = est[i, w] if mode == 0 else est[i, w] + d
                better = bi < 0 or key < bkey
                if not better and key == bkey:
                    if mode == 0:
                        better = level[i] > blev or (level[i] == blev and i < bi)
                    else:
                        better = i < bi
                if better:
                    bi, bw, bpos, bkey, blev = i, w, r, key, level[i]
        i, w = bi, bw
        d = durations[i, w]
        worker[i] = w
        start[i] = est[i, w]
        finish[i] = est[i, w] + d
        t, u, k = occupy(times[w], usage[w], K[w], start[i], finish[i], tcores[i])
        times[w] = t
        usage[w] = u
        K[w] = k
        ready[bpos] = ready[nready - 1]
        nready -= 1
        for r in range(nready):  # only worker w changed
            j = ready[r]
            if durations[j, w] < _INF:
                est[j, w] = earliest_start(times[w], usage[w], K[w], drt[j, w], durations[j, w], tcores[j], wcores[w], False)
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[e]
            remaining[j] -= 1
            if remaining[j] == 0:
                row = drt[j]
                _data_ready(j, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, row)
                for x in range(W):
                    if durations[j, x] < _INF:
                        est[j, x] = earliest_start(times[x], usage[x], K[x], row[x], durations[j, x], tcores[j], wcores[x], False)
                ready[nready] = j
                nready += 1
    return worker, start, finish


@kernel(cache=True)
def _route_ready(i, w, W, R, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, rack, free, tfree, avail,
                 order, commit):
    """Data-ready time of task ``i`` on worker ``w`` when every transfer it needs is scheduled on
    the ports it passes (the sender's upload, the receiver's download and, across racks, the two
    racks' uplink and downlink), each port busy with one transfer at a time, a transfer's bytes
    starting a latency after its producer has finished, once all its ports are free (Sinnen and Sousa's edge
    scheduling, end technique). An output already sent to ``w`` is not sent again. With
    ``commit``, the ports and ``avail`` keep what was scheduled; else ``free`` is untouched."""
    P = pred_ptr[i + 1] - pred_ptr[i]
    for k in range(P):
        order[k] = pred_ptr[i] + k
    # earliest producer first: that is the order in which the transfers can start
    for a in range(1, P):
        x = order[a]
        b = a - 1
        while b >= 0 and finish[pred_idx[order[b]]] > finish[pred_idx[x]]:
            order[b + 1] = order[b]
            b -= 1
        order[b + 1] = x
    nports = free.shape[0]
    for q in range(nports):
        tfree[q] = free[q]
    ready = 0.0
    for a in range(P):
        k = order[a]
        p = pred_idx[k]
        wp = worker[p]
        fp = finish[p]
        if wp == w:
            t = fp
        elif avail[p, w] < _INF:  # already sent there (but never sooner than this edge's own bytes allow)
            t = avail[p, w]
            alone = fp + lat[wp, w] + pred_size[k] * inv[wp, w]
            if alone > t:
                t = alone
        else:
            sz = pred_size[k] * inv[wp, w]  # seconds of bytes; the latency comes first and holds no port
            if sz <= 0.0:
                t = fp + lat[wp, w]
            else:
                s = fp + lat[wp, w]
                if tfree[wp] > s:
                    s = tfree[wp]
                if tfree[W + w] > s:
                    s = tfree[W + w]
                cross = R > 0 and rack[wp] != rack[w]
                if cross:
                    if tfree[2 * W + rack[wp]] > s:
                        s = tfree[2 * W + rack[wp]]
                    if tfree[2 * W + R + rack[w]] > s:
                        s = tfree[2 * W + R + rack[w]]
                t = s + sz
                tfree[wp] = t
                tfree[W + w] = t
                if cross:
                    tfree[2 * W + rack[wp]] = t
                    tfree[2 * W + R + rack[w]] = t
            if commit:
                avail[p, w] = t
        if t > ready:
            ready = t
    if commit:
        for q in range(nports):
            free[q] = tfree[q]
    return ready


@kernel(cache=True)
def list_schedule_contention(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx,
                             lat, inv, priority, rack, R, insertion):
    """:func:`list_schedule` (no forced workers, no bias) with the data-ready time of each
    candidate worker from :func:`_route_ready`: transfers wait for the ports they share."""
    n, W = durations.shape
    worker = np.full(n, -1, np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    times, usage, K = _profiles(W)
    remaining = np.empty(n, np.int64)
    free = np.zeros(2 * W + 2 * R)
    tfree = np.zeros(2 * W + 2 * R)
    avail = np.full((n, W), _INF)
    maxp = 1
    for i in range(n):
        if pred_ptr[i + 1] - pred_ptr[i] > maxp:
            maxp = pred_ptr[i + 1] - pred_ptr[i]
    order = np.empty(maxp, np.int64)
    heap = _ready_heap(pred_ptr, priority, remaining)
    while len(heap) > 0:
        item = heapq.heappop(heap)
        i = item[1]
        c = tcores[i]
        best_w = -1
        best_s = 0.0
        best_key = _INF
        for w in range(W):
            d = durations[i, w]
            if d == _INF:
                continue
            drt = _route_ready(i, w, W, R, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, rack, free,
                               tfree, avail, order, False)
            s = earliest_start(times[w], usage[w], K[w], drt, d, c, wcores[w], insertion)
            if best_w < 0 or s + d < best_key:
                best_key = s + d
                best_w = w
                best_s = s
        _route_ready(i, best_w, W, R, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, rack, free, tfree,
                     avail, order, True)
        _place(i, best_w, best_s, durations[i, best_w], c, worker, start, finish, times, usage, K, succ_ptr, succ_idx,
               remaining, priority, heap)
    return worker, start, finish


@kernel(cache=True)
def _start_avoiding(times, usage, K, ready, d, c, cap, ex_s, ex_f, nex):
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


@kernel(cache=True)
def lookahead_schedule(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx, lat, inv,
                       priority):
    """Lookahead HEFT (Bittencourt, Sakellariou, Madeira 2010): tasks in decreasing ``priority``;
    for each worker ``w``, the task is tentatively placed there (earliest finish, insertion), then
    each of its children, in decreasing priority, is tentatively placed by HEFT's rule (earliest
    finish over all workers) given the placements so far, the task's and the earlier children's
    included (a child's parents not yet placed are left out of its data-ready time). The task
    goes to the worker that minimises the latest of its children's finish times (its own finish
    when it has none); ties to the earliest own finish, then the lower worker."""
    n, W = durations.shape
    worker = np.full(n, -1, np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    times, usage, K = _profiles(W)
    remaining = np.empty(n, np.int64)
    maxs = 1
    for i in range(n):
        if succ_ptr[i + 1] - succ_ptr[i] > maxs:
            maxs = succ_ptr[i + 1] - succ_ptr[i]
    # tentative tasks per worker: at most the task and its children
    ex_s = np.empty((W, maxs + 1))
    ex_f = np.empty((W, maxs + 1))
    nex = np.zeros(W, np.int64)
    kids = np.empty(maxs, np.int64)
    tw = np.empty(maxs, np.int64)  # a child's tentative worker and finish
    tf = np.empty(maxs)
    heap = _ready_heap(pred_ptr, priority, remaining)
    drt = np.empty(W)
    while len(heap) > 0:
        item = heapq.heappop(heap)
        i = item[1]
        _data_ready(i, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, drt)
        c = tcores[i]
        # children in decreasing priority (ties: lower index)
        nk = 0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[e]
            b = nk
            while b > 0 and (priority[kids[b - 1]] < priority[j]
                             or (priority[kids[b - 1]] == priority[j] and kids[b - 1] > j)):
                kids[b] = kids[b - 1]
                b -= 1
            kids[b] = j
            nk += 1
        best_w = -1
        best_s = 0.0
        best_key = _INF
        best_own = _INF
        for w in range(W):
            d = durations[i, w]
            if d == _INF:
                continue
            s = earliest_start(times[w], usage[w], K[w], drt[w], d, c, wcores[w], True)
            f_own = s + d
            for q in range(W):
                nex[q] = 0
            ex_s[w, 0] = s
            ex_f[w, 0] = f_own
            nex[w] = 1
            worker[i] = w  # tentatively, for the children's data-ready times
            finish[i] = f_own
            key = f_own
            if nk > 0:
                key = 0.0
                for a in range(nk):
                    j = kids[a]
                    best_cf = _INF
                    best_cq = -1
                    best_cs = 0.0
                    for q in range(W):
                        dq = durations[j, q]
                        if dq == _INF:
                            continue
                        ready = 0.0
                        for k in range(pred_ptr[j], pred_ptr[j + 1]):
                            p = pred_idx[k]
                            wp = worker[p]
                            fp = finish[p]
                            if wp < 0:
                                # an earlier child placed tentatively?
                                found = -1
                                for b in range(a):
                                    if kids[b] == p:
                                        found = b
                                if found < 0:
                                    continue  # not placed yet: left out
                                wp = tw[found]
                                fp = tf[found]
                            t = fp if wp == q else fp + lat[wp, q] + pred_size[k] * inv[wp, q]
                            if t > ready:
                                ready = t
                        sq = _start_avoiding(times[q], usage[q], K[q], ready, dq, tcores[j], wcores[q],
                                             ex_s[q], ex_f[q], nex[q])
                        if sq + dq < best_cf:
                            best_cf = sq + dq
                            best_cq = q
                            best_cs = sq
                    if best_cq < 0:
                        continue
                    tw[a] = best_cq
                    tf[a] = best_cf
                    ex_s[best_cq, nex[best_cq]] = best_cs
                    ex_f[best_cq, nex[best_cq]] = best_cf
                    nex[best_cq] += 1
                    if best_cf > key:
                        key = best_cf
            worker[i] = -1
            if best_w < 0 or key < best_key or (key == best_key and f_own < best_own):
                best_key = key
                best_own = f_own
                best_w = w
                best_s = s
        _place(i, best_w, best_s, durations[i, best_w], c, worker, start, finish, times, usage, K, succ_ptr, succ_idx,
               remaining, priority, heap)
    return worker, start, finish


@kernel(cache=True)
def _arrival(p, w, sz, worker, finish, chead, cnext, cw, cf, lat, inv):
    """When ``p``'s output can be on worker ``w``: the earliest over its executions (the task and
    its copies) of finish + transfer time (nothing when it ran on ``w``)."""
    wp = worker[p]
    best = finish[p] if wp == w else finish[p] + lat[wp, w] + sz * inv[wp, w]
    k = chead[p]
    while k >= 0:
        q = cw[k]
        t = cf[k] if q == w else cf[k] + lat[q, w] + sz * inv[q, w]
        if t < best:
            best = t
        k = cnext[k]
    return best


@kernel(cache=True)
def _ran_on(p, w, worker, chead, cnext, cw):
    """Whether ``p`` or one of its copies runs on worker ``w``."""
    if worker[p] == w:
        return True
    k = chead[p]
    while k >= 0:
        if cw[k] == w:
            return True
        k = cnext[k]
    return False


@kernel(cache=True)
def list_schedule_dup(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx,
                      lat, inv, priority, max_copies):
    """List scheduling with critical-parent duplication. Tasks go in decreasing ``priority``; on
    each worker ``w`` the task's start is computed as usual, then up to ``max_copies`` times its
    *critical parent* (the input that arrives last on ``w``, when it does not run there) is copied
    onto ``w``, into the earliest gap after that parent's own inputs can be there: the candidate
    keeps the copies up to the last one that made the task finish earlier (a copy that changes
    nothing lets the next critical parent be tried; one that delays the task ends it). The task
    goes to the worker of the earliest finish (ties: fewer copies, then the lower worker); the
    copies that got it there are kept.

    Returns ``(worker, start, finish, copy_task, copy_worker, copy_start, copy_finish)``."""
    n, W = durations.shape
    worker = np.full(n, -1, np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    times, usage, K = _profiles(W)
    remaining = np.empty(n, np.int64)
    heap = _ready_heap(pred_ptr, priority, remaining)
    m = pred_idx.shape[0]
    cap = max(16, min(m, n * max_copies) + 1)
    ct = np.empty(cap, np.int64)
    cw = np.empty(cap, np.int64)
    cs = np.empty(cap)
    cf = np.empty(cap)
    cnext = np.empty(cap, np.int64)
    chead = np.full(n, -1, np.int64)
    nc = 0
    maxp = 1
    for i in range(n):
        if pred_ptr[i + 1] - pred_ptr[i] > maxp:
            maxp = pred_ptr[i + 1] - pred_ptr[i]
    arr = np.empty(maxp)  # each input's arrival on the worker under study
    ex_s = np.empty(max_copies + 1)
    ex_f = np.empty(max_copies + 1)
    ex_p = np.empty(max_copies + 1, np.int64)
    best_ex_s = np.empty(max_copies + 1)
    best_ex_f = np.empty(max_copies + 1)
    best_ex_p = np.empty(max_copies + 1, np.int64)
    while len(heap) > 0:
        item = heapq.heappop(heap)
        i = item[1]
        c = tcores[i]
        p0 = pred_ptr[i]
        np_ = pred_ptr[i + 1] - p0
        best_w = -1
        best_s = 0.0
        best_f = _INF
        best_n = 0
        for w in range(W):
            d = durations[i, w]
            if d == _INF:
                continue
            ready = 0.0
            for k in range(np_):
                arr[k] = _arrival(pred_idx[p0 + k], w, pred_size[p0 + k], worker, finish, chead, cnext, cw, cf, lat,
                                  inv)
                if arr[k] > ready:
                    ready = arr[k]
            s = earliest_start(times[w], usage[w], K[w], ready, d, c, wcores[w], True)
            w_f = s + d
            w_s = s
            w_n = 0
            nex = 0
            while nex < max_copies and np_ > 0:
                # the critical parent: the input that arrives last (the first such input on a tie)
                kc = 0
                for k in range(1, np_):
                    if arr[k] > arr[kc]:
                        kc = k
                p = pred_idx[p0 + kc]
                dp = durations[p, w]
                if dp == _INF or arr[kc] <= 0.0 or _ran_on(p, w, worker, chead, cnext, cw):
                    break
                already = False
                for b in range(nex):
                    if ex_p[b] == p:
                        already = True
                if already:
                    break
                pready = 0.0
                for k in range(pred_ptr[p], pred_ptr[p + 1]):
                    t = _arrival(pred_idx[k], w, pred_size[k], worker, finish, chead, cnext, cw, cf, lat, inv)
                    if t > pready:
                        pready = t
                ps = _start_avoiding(times[w], usage[w], K[w], pready, dp, tcores[p], wcores[w], ex_s, ex_f, nex)
                pf = ps + dp
                if pf >= arr[kc]:
                    break
                ex_s[nex] = ps
                ex_f[nex] = pf
                ex_p[nex] = p
                nex += 1
                arr[kc] = pf
                ready = 0.0
                for k in range(np_):
                    if arr[k] > ready:
                        ready = arr[k]
                s2 = _start_avoiding(times[w], usage[w], K[w], ready, d, c, wcores[w], ex_s, ex_f, nex)
                if s2 + d < w_f:
                    w_f = s2 + d
                    w_s = s2
                    w_n = nex
                elif s2 + d > w_f:
                    break  # (no change: another input arrives as late; try copying that one too)
            if best_w < 0 or w_f < best_f or (w_f == best_f and w_n < best_n):
                best_w = w
                best_s = w_s
                best_f = w_f
                best_n = w_n
                for b in range(w_n):
                    best_ex_s[b] = ex_s[b]
                    best_ex_f[b] = ex_f[b]
                    best_ex_p[b] = ex_p[b]
        for b in range(best_n):
            p = best_ex_p[b]
            if nc == ct.shape[0]:
                ct = np.concatenate((ct, np.empty(nc, np.int64)))
                cw = np.concatenate((cw, np.empty(nc, np.int64)))
                cs = np.concatenate((cs, np.empty(nc)))
                cf = np.concatenate((cf, np.empty(nc)))
                cnext = np.concatenate((cnext, np.empty(nc, np.int64)))
            ct[nc] = p
            cw[nc] = best_w
            cs[nc] = best_ex_s[b]
            cf[nc] = best_ex_f[b]
            cnext[nc] = chead[p]
            chead[p] = nc
            nc += 1
            t, u, kk = occupy(times[best_w], usage[best_w], K[best_w], best_ex_s[b], best_ex_f[b], tcores[p])
            times[best_w] = t
            usage[best_w] = u
            K[best_w] = kk
        _place(i, best_w, best_s, durations[i, best_w], c, worker, start, finish, times, usage, K, succ_ptr, succ_idx,
               remaining, priority, heap)
    return worker, start, finish, ct[:nc].copy(), cw[:nc].copy(), cs[:nc].copy(), cf[:nc].copy()
