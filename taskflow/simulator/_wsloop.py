"""The compiled event loop for work stealing (:mod:`.fastpath`): the engine's event loop over the
arrays laid out in :mod:`._loopstate`, making its moves by the engine's own kernels
(:mod:`._taskmoves`, :mod:`._datamoves`; the flows :mod:`.network._flows`'), and the choices of
:mod:`schedulers.work_stealing` by the kernels that scheduler calls (:mod:`taskflow.stealing`), its
estimates of fetching inputs :func:`._datamoves.fetch_times` as the simulator's view gives them.
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from ..stealing import earliest, rank, take, victim
from ._loopstate import (
    ANYWHERE,
    DEAD,
    DEEP,
    E_SEQ,
    E_TASK,
    E_TIME,
    EVN,
    FEASIBLE,
    FETCH,
    FREE,
    HERE,
    LOAD,
    MORE,
    NO_SOURCE,
    NQUEUED,
    NRUNNING,
    OK,
    QHEAD,
    QNEXT,
    QWORK,
    STATUS,
    STUCK,
    SUCC_IDX,
    SUCC_PTR,
    UNREACHABLE,
    WCORES,
    WORKER,
    duration,
    make_room,
)
from ._datamoves import (
    NO_COPY,
    READY,
    STARTABLE,
    WAITS_INPUTS,
    arrived,
    consumer_released,
    fetch_time,
    fetch_times,
    flow_done,
    inputs_to_fetch,
)
from ._taskmoves import apply_decisions, runnable, start_ready, task_done
from .network._flows import next_time, pop_due
from .network._flowstate import heap_pop
from .network.maxmin import DENSE

__all__ = ["simulate_ws"]


# ---------------------------------------------------------------- the scheduler (schedulers.work_stealing)
@kernel(cache=True, _nrt=False)
def _choose_ready(G, T, F, K, pdur, lat, inv, everywhere, tasks, k, bi, bw, srcs, sizes, holders, ptr):
    """``WorkStealing.on_ready``: each task to the worker where it would start earliest
    (:func:`taskflow.stealing.earliest`; no worker is lost in this loop)."""
    occ, load, cores, feasible = K[QWORK], K[LOAD], K[WCORES], K[FEASIBLE]
    W = occ.shape[0]
    for j in range(k):
        i = tasks[j]
        m = inputs_to_fetch(G, T, F, K, i, srcs, sizes, holders, ptr)
        fetch_times(srcs, sizes, holders, ptr, m, lat, inv, K[FETCH], K[HERE])
        if everywhere:
            arg = earliest(load, K[DEAD], K[ANYWHERE], K[FETCH])
        else:
            for w in range(W):
                feasible[w] = np.isfinite(duration(pdur, i, w))
            arg = earliest(load, K[DEAD], feasible, K[FETCH])
        occ[arg] += duration(pdur, i, arg)
        load[arg] = occ[arg] / cores[arg]
        bi[j] = i
        bw[j] = arg
    return k


@kernel(cache=True, _nrt=False)
def _choose_steal(G, T, F, K, pdur, lat, inv, thief, maxcand, bi, bw, score, mv, ci, dt, dv):
    """``WorkStealing.on_idle``: tasks the idle ``thief`` takes from the most loaded worker
    (:func:`taskflow.stealing.victim`, :func:`taskflow.stealing.rank`, :func:`taskflow.stealing.take`)."""
    occ, load, cores, nqueued, q_head, q_next = K[QWORK], K[LOAD], K[WCORES], K[NQUEUED], K[QHEAD], T[QNEXT]
    vic = victim(load, K[DEAD], nqueued, thief)
    if vic < 0:
        return 0
    m = 0
    c = 0
    i = q_head[vic]
    while i >= 0 and c < maxcand:
        c += 1
        d = duration(pdur, i, thief)
        if np.isfinite(d):
            mo = fetch_time(G, T, F, K, lat, inv, i, thief)
            m = rank(score, mv, ci, m, mo / max(d, 1e-12), mo, i)
        i = q_next[i]
    for x in range(m):
        dt[x] = duration(pdur, ci[x], thief)
        dv[x] = duration(pdur, ci[x], vic)
    k = take(occ, cores, vic, thief, ci, mv, dt, dv, m, bi, bw)
    load[vic] = occ[vic] / cores[vic]
    load[thief] = occ[thief] / cores[thief]
    return k


# ---------------------------------------------------------------- the loop itself
@kernel(cache=True)
def simulate_ws(
    G,
    T,
    K,
    F,
    N,
    P,
    E,
    R,
    C,
    X,
    tdur,
    pdur,
    lat,
    lat_e,
    inv_e,
    everywhere,
    fetch_ready,
    maxcand,
    repair,
    ready,
    outneed,
    maxindeg,
    L,
    budget,
):
    """Run the simulation (``Simulator._loop`` with ``WorkStealing`` and ``maxmin``) for at most
    ``budget`` events (a task ending, or flows due), from where ``L`` says: ``L[0]`` 0 before its
    start (the ready tasks are placed first), then 1; ``L[1]`` the time; ``L[2]`` events in a
    row in which no flow was due. Between two calls no decision is half made, so running it in
    pieces makes the same moves as running it at once (and the caller can be interrupted).

    Returns ``(code, F, N)``: :data:`OK` (done), :data:`MORE` (the budget ran out: call again)
    or what went wrong, and the flow and network arrays (grown, so new ones): the transfers are
    ``F[TRANSFERS][:C[NTR]]`` (task, source, destination) and ``F[TRANSFERS_F][:C[NTR]]`` (bytes, start, end); the
    runs ``R`` (task, worker; start, finish) in the order they ended."""
    n = T[STATUS].shape[0]
    W = K[FREE].shape[0]
    RI, RF = R
    bi = np.empty(max(n, maxcand) + 1, np.int64)
    bw = np.empty(max(n, maxcand) + 1, np.int64)
    newly = np.empty(n + 1, np.int64)
    touched = np.empty(W, np.int64)
    stack = np.empty(4 * W + 64, np.int64)  # workers to check for idleness, the next on top
    score, mv, ci = np.empty(maxcand + 1), np.empty(maxcand + 1), np.empty(maxcand + 1, np.int64)
    dt, dv = np.empty(maxcand + 1), np.empty(maxcand + 1)
    out = np.empty((1, 2), np.int64)
    width = maxindeg + 1  # scratch for pricing a task's inputs (inputs_to_fetch)
    srcs, sizes, holders, iptr = np.empty(width, np.int64), np.empty(width), np.empty(width * W, np.int64), \
        np.empty(width + 1, np.int64)  # fmt: skip
    F, N, out = make_room(C, F, N, out, n, 0, ready.shape[0])
    ns = 0
    if L[0] == 0.0:
        L[0] = 1.0
        k = _choose_ready(
            G, T, F, K, pdur, lat_e, inv_e, everywhere, ready, ready.shape[0], bi, bw, srcs, sizes, holders, iptr
        )
        nt = apply_decisions(C, X, G, T, K, F, N, P, E, lat, tdur, bi, bw, k, touched, 0.0, fetch_ready)
        if nt < 0:
            return NO_SOURCE, F, N
        for j in range(nt - 1, -1, -1):
            stack[ns] = touched[j]
            ns += 1
    after = -1  # the worker whose task just ended: it starts what it can, then may steal
    now = L[1]
    idle = int(L[2])
    steps = 0
    while True:
        if ns:  # an idle worker steals (and the workers that touches are checked in turn)
            ns -= 1
            w = stack[ns]
            if K[NRUNNING][w] == 0 and K[NQUEUED][w] == 0:
                F, N, out = make_room(C, F, N, out, n, maxcand * maxindeg, maxcand)
                k = _choose_steal(G, T, F, K, pdur, lat_e, inv_e, w, maxcand, bi, bw, score, mv, ci, dt, dv)
                nt = apply_decisions(C, X, G, T, K, F, N, P, E, lat, tdur, bi, bw, k, touched, now, fetch_ready)
                if nt < 0:
                    return NO_SOURCE, F, N
                if ns + nt > stack.shape[0]:
                    return DEEP, F, N
                for j in range(nt - 1, -1, -1):
                    stack[ns] = touched[j]
                    ns += 1
            continue
        if after >= 0:
            start_ready(C, G, T, K, F, E, tdur, after, now)
            stack[0] = after
            ns = 1
            after = -1
            continue
        if steps >= budget:  # no decision half made: the rest in the next call
            L[1] = now
            L[2] = idle
            return MORE, F, N
        steps += 1
        t_net = next_time(C, X, F, N, P, repair, DENSE)
        if C[EVN] and E[E_TIME][0] <= t_net:
            now = E[E_TIME][0]
            i = E[E_TASK][0]
            C[EVN] = heap_pop(E[E_TIME], E[E_SEQ], E[E_TASK], C[EVN])
            F, N, out = make_room(C, F, N, out, n, outneed[i], G[SUCC_PTR][i + 1] - G[SUCC_PTR][i])
            w = task_done(C, G, T, K, F, RI, RF, i, now)
            k = 0
            for e in range(G[SUCC_PTR][i], G[SUCC_PTR][i + 1]):
                got = consumer_released(C, X, G, T, F, N, P, K, lat, i, e, fetch_ready, now)
                if got == READY:
                    newly[k] = G[SUCC_IDX][e]
                    k += 1
                elif got == NO_COPY:
                    return NO_SOURCE, F, N
                elif got == STARTABLE or got == WAITS_INPUTS:  # a dynamic scheduler places ready tasks only
                    return UNREACHABLE, F, N
            K[QWORK][w] = max(0.0, K[QWORK][w] - duration(pdur, i, w))
            K[LOAD][w] = K[QWORK][w] / K[WCORES][w]
            if k:
                k = _choose_ready(
                    G, T, F, K, pdur, lat_e, inv_e, everywhere, newly, k, bi, bw, srcs, sizes, holders, iptr
                )
                nt = apply_decisions(C, X, G, T, K, F, N, P, E, lat, tdur, bi, bw, k, touched, now, fetch_ready)
                if nt < 0:
                    return NO_SOURCE, F, N
                for j in range(nt - 1, -1, -1):
                    stack[ns] = touched[j]
                    ns += 1
            after = w
        elif t_net < np.inf:
            now = t_net
            m = pop_due(C, X, F, N, P, now, out)
            for x in range(m):
                f, h = out[x, 0], out[x, 1]
                if h < 0:
                    flow_done(C, T, F, f, now)
                    continue
                i = arrived(T, F, f, h)
                if i >= 0:
                    w = T[WORKER][i]
                    runnable(C, T, K, F, i, w)
                    start_ready(C, G, T, K, F, E, tdur, w, now)
            if m:
                idle = 0
            else:
                idle += 1
                if idle > 10_000:
                    return STUCK, F, N
        else:
            break
    return OK, F, N
