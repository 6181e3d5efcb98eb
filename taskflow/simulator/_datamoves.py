"""The simulator's moves of data, each written once (as :mod:`._taskmoves` for tasks): kernels
over the state laid out in :mod:`._loopstate`, which the compiled event loops (:mod:`._wsloop`,
:mod:`._planloop`) run compiled and the engine (:mod:`.data`) runs as plain Python over its lists.

A move that touches flows reads and writes them only through the small kernels of the first
section (a live flow of an output to a worker, its bytes, opening and closing one, recording a
transfer) and the network's calls (``net_extend``, ``net_wait``). These kernels are the loops':
max-min's flow arrays (:mod:`.network._flows`). The engine, whose flows are
:class:`~.network.base.Flow` objects moved by either network model, runs the same moves with its
own versions of those few (:meth:`taskflow.jit.Kernel.bound`), as a network model supplies its own
``start``, ``wait`` and ``extend``; so the rules themselves (whether an input is there, which flow
brings it and from where, what a finished flow leaves behind, what a finished task's consumers do
next, what fetching inputs would cost) are in one place.

Copies of outputs are linked lists in columns (``F[HAVE_*]``, one list per task from
``T[COPIES]``, in the order the copies came): the engine's lists and the loops' arrays alike. A
new copy is :func:`new_copy`'s (the loops number them from a counter within the room
:func:`._loopstate.make_room` made; the engine appends).
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from ._loopstate import (
    COPIES,
    DEAD,
    DONE,
    HAVE_B,
    HAVE_NEXT,
    HAVE_W,
    HOME,
    LIVE,
    MISSING,
    NHAVE,
    NO_FLOW,
    NPRED,
    NTR,
    PRED_IDX,
    PRED_PTR,
    PRED_SIZE,
    QUEUED,
    RUNNING,
    STATUS,
    SUCC_IDX,
    SUCC_SIZE,
    TOKEN,
    TRANSFERS,
    TRANSFERS_F,
    WORKER,
)
from .network._flows import net_extend, net_start_wait, net_wait
from .network._flowstate import (
    F_DST,
    F_NEXT,
    F_SRC,
    F_TASK,
    FLOWS,
    FLOWS_F,
    G_BASE,
    G_START,
    G_TOTAL,
    T_CONS,
    T_TOK,
    WAITS,
)

# what a consumer is once a producer of it finished (:func:`consumer_released`): running or done
# already; not placed, inputs still to compute; not placed, every input computed; queued, waiting
# for inputs; queued, able to start; an input of it has no copy left
PASSED, PENDING, READY, WAITS_INPUTS, STARTABLE, NO_COPY = range(6)


# ---------------------------------------------------------------- flows: the loops' own (the engine binds its)
@kernel(cache=True, _nrt=False, inline="always")
def live_flow(T, F, p, w):
    """The flow now carrying ``p``'s output to ``w`` (:data:`._loopstate.NO_FLOW`: none)."""
    FI = F[FLOWS]
    f = T[LIVE][p]
    while f >= 0 and FI[f, F_DST] != w:
        f = FI[f, F_NEXT]
    return f  # (-1 at the end: NO_FLOW)


@kernel(cache=True, _nrt=False, inline="always")
def flow_task(F, f):
    """The task whose output ``f`` carries."""
    return F[FLOWS][f, F_TASK]


@kernel(cache=True, _nrt=False, inline="always")
def flow_dst(F, f):
    """The worker ``f`` carries to."""
    return F[FLOWS][f, F_DST]


@kernel(cache=True, _nrt=False, inline="always")
def flow_base(F, f):
    """Bytes of the output at ``f``'s destination before it started."""
    return F[FLOWS_F][f, G_BASE]


@kernel(cache=True, _nrt=False, inline="always")
def flow_total(F, f):
    """Bytes ``f`` carries."""
    return F[FLOWS_F][f, G_TOTAL]


@kernel(cache=True, _nrt=False, inline="always")
def flow_bytes(F, f):
    """Bytes of the output at ``f``'s destination once it is done (what was there, and what it carries)."""
    return F[FLOWS_F][f, G_BASE] + F[FLOWS_F][f, G_TOTAL]


@kernel(cache=True, _nrt=False)
def open_flow(C, X, T, F, N, P, lat, i, p, src, w, size, base, token, now):
    """A flow of ``size`` bytes of ``p``'s output from ``src`` to ``w`` (``base`` bytes there
    already) starts, consumer ``i`` (under ``token``) waiting for all of them."""
    f = net_start_wait(C, X, F, N, P, src, w, 0, size, lat[src, w], now, size, i, token)
    F[FLOWS][f, F_TASK] = p
    F[FLOWS][f, F_NEXT] = T[LIVE][p]
    T[LIVE][p] = f
    F[FLOWS_F][f, G_BASE] = base


@kernel(cache=True, _nrt=False)
def unlink_flow(T, F, p, f):
    """``f`` no longer carries ``p``'s output (it is done)."""
    FI = F[FLOWS]
    prev = -1
    cur = T[LIVE][p]
    while cur >= 0 and cur != f:
        prev = cur
        cur = FI[cur, F_NEXT]
    if cur == f:
        if prev < 0:
            T[LIVE][p] = FI[f, F_NEXT]
        else:
            FI[prev, F_NEXT] = FI[f, F_NEXT]


@kernel(cache=True, _nrt=False)
def record_transfer(C, F, f, now):
    """``f``'s bytes moved: a transfer of the trace."""
    FI, GF = F[FLOWS], F[FLOWS_F]
    k = C[NTR]
    C[NTR] += 1
    F[TRANSFERS][k, 0] = FI[f, F_TASK]
    F[TRANSFERS][k, 1] = FI[f, F_SRC]
    F[TRANSFERS][k, 2] = FI[f, F_DST]
    F[TRANSFERS_F][k, 0] = GF[f, G_TOTAL]
    F[TRANSFERS_F][k, 1] = GF[f, G_START]
    F[TRANSFERS_F][k, 2] = now


@kernel(cache=True, _nrt=False, inline="always")
def new_copy(C, F, w, b):
    """A new entry of the copies' lists: ``b`` bytes on ``w``, last of its list."""
    h = C[NHAVE]
    C[NHAVE] += 1
    F[HAVE_W][h] = w
    F[HAVE_NEXT][h] = -1
    F[HAVE_B][h] = b
    return h


# ---------------------------------------------------------------- copies of outputs
@kernel(cache=True, _nrt=False, inline="always")
def have(T, F, p, w):
    """Bytes of ``p``'s output on ``w`` (-1: none)."""
    h = T[COPIES][p]
    while h >= 0:
        if F[HAVE_W][h] == w:
            return F[HAVE_B][h]
        h = F[HAVE_NEXT][h]
    return -1.0


@kernel(cache=True, _nrt=False)
def keep_copy(C, T, F, p, w, b):
    """``b`` bytes of ``p``'s output are on ``w``: its copy there grows to that, or a new copy
    (after those before it) holds them."""
    h = T[COPIES][p]
    last = -1
    while h >= 0:
        if F[HAVE_W][h] == w:
            F[HAVE_B][h] = max(F[HAVE_B][h], b)
            return
        last = h
        h = F[HAVE_NEXT][h]
    h = new_copy(C, F, w, max(0.0, b))
    if last < 0:
        T[COPIES][p] = h
    else:
        F[HAVE_NEXT][last] = h


@kernel(cache=True, _nrt=False)
def only_copy(C, T, F, i, w):
    """``i``'s output, just computed on ``w``, is there whole: its only copy."""
    T[COPIES][i] = new_copy(C, F, w, np.inf)


@kernel(cache=True, _nrt=False)
def drop_copy(T, F, p, w):
    """``p``'s copy on ``w`` (a lost worker) is gone."""
    prev = -1
    h = T[COPIES][p]
    while h >= 0 and F[HAVE_W][h] != w:
        prev = h
        h = F[HAVE_NEXT][h]
    if h >= 0:
        if prev < 0:
            T[COPIES][p] = F[HAVE_NEXT][h]
        else:
            F[HAVE_NEXT][prev] = F[HAVE_NEXT][h]


@kernel(cache=True, _nrt=False)
def source_of(T, F, K, p, nbytes):
    """The live worker to fetch ``nbytes`` of ``p``'s output from: where it was computed, else
    the first live worker holding that many bytes of it (the producer's own worker first); -1 when
    there is none. A worker is lost where ``K[DEAD]`` says so (empty: none is)."""
    dead = K[DEAD]
    some_dead = len(dead) > 0
    home = T[HOME][p]
    if home >= 0 and not (some_dead and dead[home] != 0):
        return home
    best = -1
    h = T[COPIES][p]
    while h >= 0:
        w, b = F[HAVE_W][h], F[HAVE_B][h]
        if b >= nbytes and not (some_dead and dead[w] != 0):
            if b == np.inf:
                return w
            if best < 0:
                best = w
        h = F[HAVE_NEXT][h]
    return best


# ---------------------------------------------------------------- data (engine: .data.DataMoves)
@kernel(cache=True, _nrt=False)
def need_input(C, X, T, F, N, P, K, lat, i, p, s, w, now):
    """Consumer ``i`` on ``w`` needs ``s`` bytes of ``p``'s output: nothing when they are there;
    else it waits on the flow carrying the output there (grown to ``s`` where it carries fewer)
    or on a new one from the output's source (:func:`source_of`). False when no copy of it is left."""
    hw = have(T, F, p, w)
    if hw >= 0.0 and hw >= s:  # present (a zero-byte edge still needs its latency once)
        return True
    T[MISSING][i] += 1
    token = T[TOKEN][i]
    f = live_flow(T, F, p, w)
    if f != NO_FLOW:
        base = flow_base(F, f)
        if flow_total(F, f) < s - base:
            net_extend(C, X, F, N, f, s - base, now)
        net_wait(C, X, F, N, f, s - base, i, token, now)
        return True
    base = 0.0 if hw < 0.0 else hw
    src = source_of(T, F, K, p, s)
    if src < 0:
        return False
    open_flow(C, X, T, F, N, P, lat, i, p, src, w, s - base, base, token, now)
    return True


@kernel(cache=True, _nrt=False)
def fetch_inputs(C, X, G, T, F, N, P, K, lat, i, w, now):
    """Start moving to ``w`` every computed input ``i`` lacks there; False when one has no copy left."""
    for e in range(G[PRED_PTR][i], G[PRED_PTR][i + 1]):
        p = G[PRED_IDX][e]
        if T[STATUS][p] == DONE:
            if not need_input(C, X, T, F, N, P, K, lat, i, p, G[PRED_SIZE][e], w, now):
                return False
    return True


@kernel(cache=True, _nrt=False)
def flow_done(C, T, F, f, now):
    """``f`` carried all its bytes: no longer live, its bytes a copy at its destination, a transfer."""
    p = flow_task(F, f)
    unlink_flow(T, F, p, f)
    keep_copy(C, T, F, p, flow_dst(F, f), flow_bytes(F, f))
    record_transfer(C, F, f, now)


@kernel(cache=True, _nrt=False, inline="always")
def consumer_arrived(T, i, token, w):
    """Consumer ``i``'s bytes, waited for under assignment ``token``, are on ``w``: whether that
    was the last input it missed and every input is computed (False too for an older assignment's wait)."""
    if token != T[TOKEN][i] or T[STATUS][i] != QUEUED or T[WORKER][i] != w:
        return False
    T[MISSING][i] -= 1
    return T[MISSING][i] == 0 and T[NPRED][i] == 0


@kernel(cache=True, _nrt=False)
def arrived(T, F, f, h):
    """A consumer's bytes of flow ``f`` are on its worker (``h`` its wait, as
    :func:`.network._flows.net_wait` numbered it): the consumer, where it may start now
    (:func:`consumer_arrived`); else -1."""
    i = F[WAITS][h, T_CONS]
    return i if consumer_arrived(T, i, F[WAITS][h, T_TOK], F[FLOWS][f, F_DST]) else -1


@kernel(cache=True, _nrt=False)
def consumer_released(C, X, G, T, F, N, P, K, lat, i, e, fetch_ready, now):
    """``i`` finished, and ``j = G[SUCC_IDX][e]`` consumes ``G[SUCC_SIZE][e]`` bytes of its output:
    one input fewer to compute; a consumer queued on a worker fetches it (or, with ``fetch_ready``,
    all its inputs once the last is computed). What ``j`` is now: :data:`PASSED`, :data:`PENDING`,
    :data:`READY`, :data:`WAITS_INPUTS`, :data:`STARTABLE` or :data:`NO_COPY`."""
    j = G[SUCC_IDX][e]
    st = T[STATUS][j]
    if st >= RUNNING:
        return PASSED
    T[NPRED][j] -= 1
    if st != QUEUED:
        return READY if T[NPRED][j] == 0 else PENDING
    w = T[WORKER][j]
    if not fetch_ready:
        if not need_input(C, X, T, F, N, P, K, lat, j, i, G[SUCC_SIZE][e], w, now):
            return NO_COPY
    elif T[NPRED][j] == 0:
        if not fetch_inputs(C, X, G, T, F, N, P, K, lat, j, w, now):
            return NO_COPY
    return STARTABLE if T[NPRED][j] == 0 and T[MISSING][j] == 0 else WAITS_INPUTS


# ---------------------------------------------------------------- what moving inputs would cost (a scheduler's estimate)
@kernel(cache=True, _nrt=False)
def inputs_to_fetch(G, T, F, K, i, srcs, sizes, holders, ptr):
    """``i``'s computed inputs as :func:`fetch_times` prices them: the ``j``-th from its source
    ``srcs[j]`` (:func:`source_of`), ``sizes[j]`` bytes, a copy of it already on each worker of
    ``holders[ptr[j]:ptr[j + 1]]``; returns how many."""
    k = 0
    n = 0
    ptr[0] = 0
    for e in range(G[PRED_PTR][i], G[PRED_PTR][i + 1]):
        p = G[PRED_IDX][e]
        if T[STATUS][p] != DONE:
            continue
        size = G[PRED_SIZE][e]
        src = source_of(T, F, K, p, size)
        if src < 0:
            continue
        srcs[k] = src
        sizes[k] = size
        h = T[COPIES][p]
        while h >= 0:
            holders[n] = F[HAVE_W][h]
            n += 1
            h = F[HAVE_NEXT][h]
        k += 1
        ptr[k] = n
    return k


@kernel(cache=True, _nrt=False)
def fetch_times(srcs, sizes, holders, ptr, k, lat, inv, out, here):
    """``out[w]``: estimated seconds to bring the ``k`` inputs :func:`inputs_to_fetch` listed to
    each worker ``w``, one after another (added in input order): nothing for an input with a copy
    on ``w``, else latency + bytes / bandwidth from its source. ``here`` is scratch (all False,
    left so)."""
    W = out.shape[0]
    for w in range(W):
        out[w] = 0.0
    for j in range(k):
        for x in range(ptr[j], ptr[j + 1]):
            here[holders[x]] = True
        src = srcs[j]
        size = sizes[j]
        for w in range(W):
            if not here[w]:
                out[w] += lat[src, w] + size * inv[src, w]
        for x in range(ptr[j], ptr[j + 1]):
            here[holders[x]] = False


@kernel(cache=True, _nrt=False)
def fetch_time(G, T, F, K, lat, inv, i, w):
    """Estimated seconds to bring ``i``'s computed inputs to ``w`` (what :func:`fetch_times` gives for one worker)."""
    acc = 0.0
    for e in range(G[PRED_PTR][i], G[PRED_PTR][i + 1]):
        p = G[PRED_IDX][e]
        if T[STATUS][p] != DONE or have(T, F, p, w) >= 0.0:
            continue
        size = G[PRED_SIZE][e]
        src = source_of(T, F, K, p, size)
        if src >= 0:
            acc += lat[src, w] + size * inv[src, w]
    return acc
