"""The state layout of the compiled event loops (:mod:`.fastpath`) beyond the flows' (which is
:mod:`.network._flowstate`'): the tasks' states, what a loop returns, its counters, and two small
kernels both loops read through.

State lives in a few tuples of arrays (numba passes them by reference): ``G`` the graph, ``T``
per task, ``K`` per worker, ``F`` the flows (their four arrays, then the transfers, the copies of
outputs and the ready queue), ``N`` and ``P`` the network's, ``C`` the integer counters and flags
(the flows' first, then the loop's, indices below), ``X`` the float ones. Only the loops grow
arrays (:func:`._wsloop.make_room`), before each batch of placements, so no kernel writes past an
array's end.

Kernels that neither allocate nor call one that does, and return only scalars, are compiled
without numba's reference counting (``_nrt=False``): they read and write arrays their caller
holds, and counting the references of the dozens of arrays each takes (an atomic add per array,
per call and per tuple unpacked) was a fifth of the loop's time.
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from .network._flows import net_extend, net_start_wait, net_wait
from .network._flowstate import (
    COUNTERS,
    F_DST,
    F_NEXT,
    F_SRC,
    F_TASK,
    FLOWS,
    FLOWS_F,
    G_BASE,
    G_START,
    G_TOTAL,
    SLOT_FLOW,
    T_CONS,
    T_TOK,
    WAITS,
    grown1,
    grown2,
    heap_push,
    room,
)
from .states import TaskState

WAITING, QUEUED, RUNNING, DONE = (
    int(s) for s in (TaskState.WAITING, TaskState.QUEUED, TaskState.RUNNING, TaskState.DONE)
)
#: what :func:`simulate_ws` returns: finished; the network made no progress; an output has no copy;
#: the idle cascade went too deep; a state the scheduler never makes
OK, STUCK, NO_SOURCE, DEEP, UNREACHABLE, MORE = 0, 1, 2, 3, 4, 5

# the graph G[...]: inputs (pointers, producers, bytes), outputs (pointers, consumers), cores per task
PRED_PTR, PRED_IDX, PRED_SIZE, SUCC_PTR, SUCC_IDX, CORES = range(6)
# per task T[...]: its state, inputs not computed, worker (-1: none), assignment token, inputs computed
# but not on its worker, where its output was computed, its start; the heads of its output's live
# flows and copies; its neighbours in its worker's queue
STATUS, NPRED, WORKER, TOKEN, MISSING, HOME, STARTED, LIVE, COPIES, QPREV, QNEXT = range(11)
# per worker K[...]: free cores, tasks running, tasks queued, the queue's head and tail, the runnable
# queue's head and tail, queued seconds of work, that over its cores, its cores, a stamp; scratch
# for the scheduler's estimates (inputs here, seconds to fetch them); the lost workers (none), where
# the task weighed can run, ... anywhere (none)
(FREE, NRUNNING, NQUEUED, QHEAD, QTAIL, RHEAD, RTAIL, QWORK, LOAD, WCORES, WSTAMP, HERE, FETCH, DEAD, FEASIBLE,
 ANYWHERE) = range(16)  # fmt: skip
# the event heap E[...]: times, sequence numbers, the tasks whose run ends
E_TIME, E_SEQ, E_TASK = range(3)
# the loop's arrays of F[...], after the flows': transfers (int, float), copies (int, bytes), the ready queue
TRANSFERS, TRANSFERS_F, HAVE, HAVE_B, READY = range(4, 9)
# the loop's counters C[...], after the flows' (network._flows)
NHAVE, NRQ, NRUNS, NTR, EVN, ESEQ, NSTEALS, NB, NPLACED = range(COUNTERS, COUNTERS + 9)
# columns: copies of outputs (int), ready queue (int)
H_W, H_NEXT = range(2)
R_TASK, R_TOK, R_NEXT = range(3)


def laid_out(**fields) -> tuple:
    """A state tuple of this layout from its fields by name (``STATUS=...``), None where one is not
    given: for a caller that runs only kernels which do not read those (the engine, whose state is
    Python lists, runs a few as plain Python).

    Parameters
    ----------
    **fields
        Each field's array or list, by the name of its index above.
    """
    at = {globals()[name]: value for name, value in fields.items()}
    return tuple(at.get(k) for k in range(max(at) + 1))


@kernel(cache=True, _nrt=False)
def duration(d, i, w):
    """Task ``i``'s seconds on worker ``w`` from a duration pack (dense matrix, or cost / speed)."""
    dense, D, cost, speed, overhead, need, wcores, multi = d
    if dense:
        return D[i, w]
    if multi and need[i] > wcores[w]:
        return np.inf
    return cost[i] / speed[w] + overhead


@kernel(cache=True, _nrt=False)
def have(T, F, p, w):
    """Bytes of ``p``'s output on ``w`` (-1: none)."""
    HI, HB = F[HAVE], F[HAVE_B]
    h = T[COPIES][p]
    while h >= 0:
        if HI[h, H_W] == w:
            return HB[h]
        h = HI[h, H_NEXT]
    return -1.0


# ---------------------------------------------------------------- tasks and data (engine.Simulator), both loops'
@kernel(cache=True, _nrt=False)
def need_input(C, X, T, F, N, P, lat, i, p, s, w, now):
    """Consumer ``i`` on ``w`` needs ``s`` bytes of ``p``'s output (``Simulator._need``); False
    when no copy of it is left."""
    FI, GF = F[FLOWS], F[FLOWS_F]
    hw = have(T, F, p, w)
    if hw >= 0.0 and hw >= s:  # present (a zero-byte edge still needs its latency once)
        return True
    T[MISSING][i] += 1
    token = T[TOKEN][i]
    f = T[LIVE][p]  # the live flows of p's output
    while f >= 0 and FI[f, F_DST] != w:
        f = FI[f, F_NEXT]
    if f >= 0:
        base = GF[f, G_BASE]
        if GF[f, G_TOTAL] < s - base:
            net_extend(C, X, F, N, f, s - base, now)
        net_wait(C, X, F, N, f, s - base, i, token, now)
        return True
    base = 0.0 if hw < 0.0 else hw
    src = T[HOME][p]  # where it was computed (no worker is lost here)
    if src < 0:
        return False
    f = net_start_wait(C, X, F, N, P, src, w, 0, s - base, lat[src, w], now, s - base, i, token)
    FI[f, F_TASK] = p
    FI[f, F_NEXT] = T[LIVE][p]
    T[LIVE][p] = f
    GF[f, G_BASE] = base
    return True


@kernel(cache=True, _nrt=False)
def consumer_arrived(T, i, token, w):
    """Consumer ``i``'s bytes, waited for under assignment ``token``, are on ``w``
    (``Simulator._arrive``): whether that was the last input it missed and every input is computed
    (False too for an older assignment's wait)."""
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
def flow_done(C, T, F, f, now):
    """``f`` carried all its bytes (``Simulator._flow_done``)."""
    FI, GF, TRI, TRF, HI, HB = F[FLOWS], F[FLOWS_F], F[TRANSFERS], F[TRANSFERS_F], F[HAVE], F[HAVE_B]
    p, w = FI[f, F_TASK], FI[f, F_DST]
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
    b = GF[f, G_BASE] + GF[f, G_TOTAL]
    h = T[COPIES][p]
    while h >= 0 and HI[h, H_W] != w:
        h = HI[h, H_NEXT]
    if h >= 0:
        HB[h] = max(HB[h], b)
    else:
        h = C[NHAVE]
        C[NHAVE] += 1
        HI[h, H_W] = w
        HI[h, H_NEXT] = T[COPIES][p]
        T[COPIES][p] = h
        HB[h] = max(0.0, b)
    k = C[NTR]
    C[NTR] += 1
    TRI[k, 0] = p
    TRI[k, 1] = FI[f, F_SRC]
    TRI[k, 2] = w
    TRF[k, 0] = GF[f, G_TOTAL]
    TRF[k, 1] = GF[f, G_START]
    TRF[k, 2] = now


@kernel(cache=True, _nrt=False)
def end_run(G, T, K, i):
    """``i`` finished (``Simulator._transition_running_done``): its cores freed, its output's home
    where it ran; returns that worker."""
    w = T[WORKER][i]
    T[STATUS][i] = DONE
    K[FREE][w] += G[CORES][i]
    K[NRUNNING][w] -= 1
    T[HOME][i] = w
    return w


@kernel(cache=True, _nrt=False)
def task_done(C, G, T, K, F, RI, RF, i, now):
    """``i`` finished (:func:`end_run`), its run recorded and its output held where it ran; returns
    that worker."""
    w = end_run(G, T, K, i)
    r = C[NRUNS]
    C[NRUNS] += 1
    RI[r, 0] = i
    RI[r, 1] = w
    RF[r, 0] = T[STARTED][i]
    RF[r, 1] = now
    h = C[NHAVE]
    C[NHAVE] += 1
    F[HAVE][h, H_W] = w
    F[HAVE][h, H_NEXT] = -1
    F[HAVE_B][h] = np.inf
    T[COPIES][i] = h
    return w


@kernel(cache=True, _nrt=False)
def dequeue(T, K, i, w):
    """``i`` leaves ``w``'s queue (``Simulator._dequeue``)."""
    q_prev, q_next = T[QPREV], T[QNEXT]
    a, b = q_prev[i], q_next[i]
    if a >= 0:
        q_next[a] = b
    else:
        K[QHEAD][w] = b
    if b >= 0:
        q_prev[b] = a
    else:
        K[QTAIL][w] = a
    K[NQUEUED][w] -= 1


@kernel(cache=True, _nrt=False)
def enqueue(T, K, i, w):
    """``i`` is queued on ``w``, last (``Simulator._place``'s assignment: a new token, no input missing yet)."""
    T[WORKER][i] = w
    T[STATUS][i] = QUEUED
    T[TOKEN][i] += 1
    T[MISSING][i] = 0
    q_prev, q_next = T[QPREV], T[QNEXT]
    t = K[QTAIL][w]
    q_prev[i] = t
    q_next[i] = -1
    if t >= 0:
        q_next[t] = i
    else:
        K[QHEAD][w] = i
    K[QTAIL][w] = i
    K[NQUEUED][w] += 1


@kernel(cache=True, _nrt=False)
def fetch_inputs(C, X, G, T, F, N, P, lat, i, w, now):
    """Start moving to ``w`` every computed input ``i`` lacks there (``Simulator._fetch_inputs``);
    False when one has no copy left."""
    for e in range(G[PRED_PTR][i], G[PRED_PTR][i + 1]):
        p = G[PRED_IDX][e]
        if T[STATUS][p] == DONE:
            if not need_input(C, X, T, F, N, P, lat, i, p, G[PRED_SIZE][e], w, now):
                return False
    return True


@kernel(cache=True, _nrt=False)
def begin_run(G, T, K, i, w, now):
    """``i``, out of ``w``'s queue (:func:`dequeue`), starts there
    (``Simulator._transition_queued_running``): its cores taken."""
    T[STATUS][i] = RUNNING
    K[FREE][w] -= G[CORES][i]
    K[NRUNNING][w] += 1
    T[STARTED][i] = now


@kernel(cache=True, _nrt=False)
def next_in_plan(T, seq, k, end, w):
    """Worker ``w`` carrying its plan out in order (``Simulator._try_start`` for a plan): the
    position of its next planned task from ``seq[k]`` on (``seq[k:end]`` its planned tasks, ``k``
    the first not started), passing over tasks no longer queued on it; ``end`` when none is left."""
    while k < end:
        i = seq[k]
        if T[WORKER][i] == w and T[STATUS][i] == QUEUED:
            return k
        k += 1
    return end


@kernel(cache=True, _nrt=False)
def startable(G, T, K, i, w):
    """Whether ``i``, queued on ``w``, starts now: its inputs computed and on ``w``, its cores free."""
    return T[NPRED][i] == 0 and T[MISSING][i] == 0 and K[FREE][w] >= G[CORES][i]


@kernel(cache=True, _nrt=False)
def start_task(C, G, T, K, E, tdur, i, w, now):
    """``i`` starts on ``w`` (:func:`dequeue`, :func:`begin_run`), its end on the event heap."""
    d = duration(tdur, i, w)
    dequeue(T, K, i, w)
    begin_run(G, T, K, i, w, now)
    C[ESEQ] += 1
    C[EVN] = heap_push(E[E_TIME], E[E_SEQ], E[E_TASK], C[EVN], now + d, C[ESEQ], i)


@kernel(cache=True)
def make_room(C, F, N, out, n, flows, placements):
    """``F``, ``N`` and ``out`` with room for ``flows`` more flows (and consumers waiting on one)
    and ``placements`` more placements: what one batch of decisions can add."""
    F, N = room(C, F, N, flows, flows)
    FI, GF, TI, TB, TRI, TRF, HI, HB, RQ = F
    cap = FI.shape[0]
    if TRI.shape[0] < cap:  # a transfer per flow at most, a copy per task and flow
        TRI = grown2(TRI, cap, -1)
        TRF = grown2(TRF, cap, 0.0)
    if HI.shape[0] < n + cap:
        HI = grown2(HI, n + cap, -1)
        HB = grown1(HB, n + cap, 0.0)
    if C[NPLACED] + placements > RQ.shape[0]:
        RQ = grown2(RQ, max(2 * RQ.shape[0], C[NPLACED] + placements), -1)
    if out.shape[0] < TI.shape[0] + N[SLOT_FLOW].shape[0]:
        out = np.empty((TI.shape[0] + N[SLOT_FLOW].shape[0], 2), np.int64)
    return (FI, GF, TI, TB, TRI, TRF, HI, HB, RQ), N, out
