"""The simulator's moves of tasks, each written once (as :mod:`._datamoves` for data): queueing
and leaving a queue, starting and ending a run, a worker's plan in order, the ready queue, placing
a task and carrying out a scheduler's decisions. Kernels over the state laid out in
:mod:`._loopstate`, which the compiled loops run compiled and the engine runs as plain Python over
its lists; where the engine keeps more (its validation, its transitions, its schedulers' hooks) it
gives its own version of the kernel a move calls (:meth:`taskflow.jit.Kernel.bound`).
"""

from __future__ import annotations


from ..jit import kernel
from ._loopstate import (
    CORES,
    DEAD,
    DONE,
    ESEQ,
    EVN,
    E_SEQ,
    E_TASK,
    E_TIME,
    FREE,
    HOME,
    MISSING,
    NB,
    NPLACED,
    NPRED,
    NQUEUED,
    NRQ,
    NRUNNING,
    NRUNS,
    NSTEALS,
    QHEAD,
    QNEXT,
    QPREV,
    QTAIL,
    QUEUED,
    RHEAD,
    RQ_NEXT,
    RQ_TASK,
    RQ_TOKEN,
    RTAIL,
    RUNNING,
    STARTED,
    STATUS,
    TOKEN,
    WAITING,
    WORKER,
    WSTAMP,
    duration,
)
from .network._flowstate import heap_push
from ._datamoves import fetch_inputs, only_copy


# ---------------------------------------------------------------- tasks
@kernel(cache=True, _nrt=False, inline="always")
def enqueue(T, K, i, w):
    """``i`` is queued on ``w``, last (an assignment: a new token, no input missing yet)."""
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


@kernel(cache=True, _nrt=False, inline="always")
def dequeue(T, K, i, w):
    """``i`` leaves ``w``'s queue."""
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


@kernel(cache=True, _nrt=False, inline="always")
def begin_run(G, T, K, i, w, now):
    """``i``, out of ``w``'s queue (:func:`dequeue`), starts there: its cores taken."""
    T[STATUS][i] = RUNNING
    K[FREE][w] -= G[CORES][i]
    K[NRUNNING][w] += 1
    T[STARTED][i] = now


@kernel(cache=True, _nrt=False)
def start_task(C, G, T, K, E, tdur, i, w, now):
    """``i`` starts on ``w`` (:func:`dequeue`, :func:`begin_run`), its end on the event heap."""
    d = duration(tdur, i, w)
    dequeue(T, K, i, w)
    begin_run(G, T, K, i, w, now)
    C[ESEQ] += 1
    C[EVN] = heap_push(E[E_TIME], E[E_SEQ], E[E_TASK], C[EVN], now + d, C[ESEQ], i)


@kernel(cache=True, _nrt=False, inline="always")
def end_run(G, T, K, i):
    """``i`` finished: its cores freed, its output's home where it ran; returns that worker."""
    w = T[WORKER][i]
    T[STATUS][i] = DONE
    K[FREE][w] += G[CORES][i]
    K[NRUNNING][w] -= 1
    T[HOME][i] = w
    return w


@kernel(cache=True, _nrt=False)
def task_done(C, G, T, K, F, RI, RF, i, now):
    """``i`` finished (:func:`end_run`), its run recorded and its output held where it ran
    (:func:`only_copy`); returns that worker."""
    w = end_run(G, T, K, i)
    r = C[NRUNS]
    C[NRUNS] += 1
    RI[r, 0] = i
    RI[r, 1] = w
    RF[r, 0] = T[STARTED][i]
    RF[r, 1] = now
    only_copy(C, T, F, i, w)
    return w


# ---------------------------------------------------------------- starting: a plan in order, or the ready queue
@kernel(cache=True, _nrt=False)
def next_in_plan(T, seq, k, end, w):
    """Worker ``w`` carrying its plan out in order: the position of its next planned task from
    ``seq[k]`` on (``seq[k:end]`` its planned tasks, ``k`` the first not started), passing over
    tasks no longer queued on it; ``end`` when none is left."""
    while k < end:
        i = seq[k]
        if T[WORKER][i] == w and T[STATUS][i] == QUEUED:
            return k
        k += 1
    return end


@kernel(cache=True, _nrt=False, inline="always")
def startable(G, T, K, i, w):
    """Whether ``i``, queued on ``w``, starts now: its inputs computed and on ``w``, its cores free."""
    return T[NPRED][i] == 0 and T[MISSING][i] == 0 and K[FREE][w] >= G[CORES][i]


@kernel(cache=True, _nrt=False, inline="always")
def still_ready(T, i, token, w):
    """Whether a ready-queue entry of ``i``, made under assignment ``token``, still stands: ``i``
    is queued on ``w`` under that assignment (else the entry is passed over)."""
    return token == T[TOKEN][i] and T[WORKER][i] == w and T[STATUS][i] == QUEUED


@kernel(cache=True, _nrt=False)
def start_in_order(C, G, T, K, E, tdur, seq, k, end, w, now):
    """Worker ``w`` carrying its plan out in order (``seq[k:end]`` its planned tasks, ``k`` the
    first not started): its next tasks start (:func:`start_task`) while each is ready and its cores
    are free. Returns the new ``k``."""
    while True:
        k = next_in_plan(T, seq, k, end, w)
        if k >= end or not startable(G, T, K, seq[k], w):
            return k
        start_task(C, G, T, K, E, tdur, seq[k], w, now)
        k += 1


@kernel(cache=True, _nrt=False, inline="always")
def new_ready(C, F):
    """A new entry of the ready queues' lists."""
    e = C[NRQ]
    C[NRQ] += 1
    return e


@kernel(cache=True, _nrt=False)
def runnable(C, T, K, F, i, w):
    """``i``, its inputs on ``w``, joins ``w``'s ready queue, last (first come, first served:
    where the scheduler's priorities are all equal)."""
    e = new_ready(C, F)
    F[RQ_TASK][e] = i
    F[RQ_TOKEN][e] = T[TOKEN][i]
    F[RQ_NEXT][e] = -1
    if K[RTAIL][w] >= 0:
        F[RQ_NEXT][K[RTAIL][w]] = e
    else:
        K[RHEAD][w] = e
    K[RTAIL][w] = e


@kernel(cache=True, _nrt=False)
def start_ready(C, G, T, K, F, E, tdur, w, now):
    """Start ``w``'s ready tasks in order while its cores allow (:func:`start_task`), passing
    over entries of an older assignment."""
    while K[RHEAD][w] >= 0:
        e = K[RHEAD][w]
        i = F[RQ_TASK][e]
        stale = not still_ready(T, i, F[RQ_TOKEN][e], w)
        if not stale and not startable(G, T, K, i, w):  # (a ready task's inputs are there: its cores)
            break
        K[RHEAD][w] = F[RQ_NEXT][e]
        if K[RHEAD][w] < 0:
            K[RTAIL][w] = -1
        if not stale:
            start_task(C, G, T, K, E, tdur, i, w, now)


# ---------------------------------------------------------------- placing
@kernel(cache=True, _nrt=False)
def place(C, X, G, T, K, F, N, P, lat, i, w, now, fetch_ready):
    """``i`` is queued on ``w`` (:func:`enqueue`); its computed inputs start moving there (with
    ``fetch_ready``, only once every input is computed), and it is ready to start where all of
    them are there already. False when an input has no copy left."""
    enqueue(T, K, i, w)
    C[NPLACED] += 1
    if not fetch_ready or T[NPRED][i] == 0:
        if not fetch_inputs(C, X, G, T, F, N, P, K, lat, i, w, now):
            return False
    if T[NPRED][i] == 0 and T[MISSING][i] == 0:
        runnable(C, T, K, F, i, w)
    return True


@kernel(cache=True, _nrt=False)
def assign(C, X, G, T, K, F, N, P, lat, i, old, w, now, fetch_ready):
    """``i`` goes to ``w``: out of ``old``'s queue first where it was queued there (a steal), then
    placed (:func:`place`); False when an input has no copy left."""
    if old >= 0:
        dequeue(T, K, i, old)
        C[NSTEALS] += 1
    return place(C, X, G, T, K, F, N, P, lat, i, w, now, fetch_ready)


@kernel(cache=True, _nrt=False)
def apply_decisions(C, X, G, T, K, F, N, P, E, lat, tdur, bi, bw, k, touched, now, fetch_ready):
    """Carry out a dynamic scheduler's ``k`` decisions (task ``bi[j]`` to worker ``bw[j]``): each
    task queued on its worker (:func:`assign`), passing over a task running or done, one already
    queued there, one not ready (a dynamic scheduler places ready tasks only) and a lost worker;
    then each worker touched (``touched[:n]``, in the order first touched, the worker left and
    the worker taken to) starts what it can (:func:`start_ready`). Returns ``n`` (-1: an input
    was lost)."""
    stamp, dead = K[WSTAMP], K[DEAD]
    some_dead = len(dead) > 0
    C[NB] += 1
    g = C[NB]
    nt = 0
    for j in range(k):
        i, w = bi[j], bw[j]
        st = T[STATUS][i]
        if st >= RUNNING or (some_dead and dead[w] != 0) or (st == QUEUED and T[WORKER][i] == w):
            continue
        if st == WAITING and T[NPRED][i] != 0:  # not ready: a dynamic scheduler places ready tasks only
            continue
        old = T[WORKER][i] if st == QUEUED else -1
        if not assign(C, X, G, T, K, F, N, P, lat, i, old, w, now, fetch_ready):
            return -1
        if stamp[w] != g:
            stamp[w] = g
            touched[nt] = w
            nt += 1
        if old >= 0 and stamp[old] != g:
            stamp[old] = g
            touched[nt] = old
            nt += 1
    for j in range(nt):
        start_ready(C, G, T, K, F, E, tdur, touched[j], now)
    return nt
