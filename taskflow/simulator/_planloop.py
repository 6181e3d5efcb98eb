"""The compiled event loop's half for a static plan (:mod:`.fastpath`): each worker starts its
planned tasks strictly in plan order (planned start time), each as soon as its inputs are on the
worker and enough cores are free, as :class:`~.engine.Simulator` carries a plan out; inputs move
to a consumer's worker the moment they are computed (``fetch="eager"``) or once all of them are
(``"ready"``). The flows are :mod:`.network._flows`', the moves :mod:`._taskmoves`' and :mod:`._datamoves`'.
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from ._loopstate import (
    E_SEQ,
    E_TASK,
    E_TIME,
    EVN,
    FREE,
    MORE,
    NO_SOURCE,
    NPLACED,
    OK,
    STATUS,
    STUCK,
    SUCC_IDX,
    SUCC_PTR,
    UNREACHABLE,
    WORKER,
    make_room,
)
from ._datamoves import NO_COPY, PENDING, READY, STARTABLE, arrived, consumer_released, flow_done
from ._taskmoves import enqueue, start_in_order, task_done
from .network._flows import next_time, pop_due
from .network._flowstate import heap_pop
from .network.maxmin import DENSE

__all__ = ["simulate_plan"]


@kernel(cache=True)
def simulate_plan(
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
    lat,
    fetch_ready,
    repair,
    order,
    where,
    seq_ptr,
    seq,
    ptr,
    outneed,
    L,
    budget,
):
    """Carry out a static plan (``Simulator._loop`` with a plan and ``maxmin``) for at most
    ``budget`` events, from where ``L`` says (as :func:`._wsloop.simulate_ws`). ``order`` lists
    the tasks in plan order and ``where`` each task's worker; ``seq[seq_ptr[w]:seq_ptr[w + 1]]``
    is worker ``w``'s tasks in plan order and ``ptr[w]`` the first of them not yet started.

    Returns ``(code, F, N)`` as :func:`._wsloop.simulate_ws` does."""
    n = T[STATUS].shape[0]
    W = K[FREE].shape[0]
    RI, RF = R
    out = np.empty((1, 2), np.int64)
    F, N, out = make_room(C, F, N, out, n, 0, 0)
    if L[0] == 0.0:  # the plan takes effect: every task queued, then each worker starts what it can
        L[0] = 1.0
        for k in range(order.shape[0]):
            enqueue(T, K, order[k], where[order[k]])
            C[NPLACED] += 1
        for w in range(W):
            if seq_ptr[w + 1] > seq_ptr[w]:
                ptr[w] = start_in_order(C, G, T, K, E, tdur, seq, ptr[w], seq_ptr[w + 1], w, 0.0)
    now = L[1]
    idle = int(L[2])
    steps = 0
    while True:
        if steps >= budget:
            L[1] = now
            L[2] = idle
            return MORE, F, N
        steps += 1
        t_net = next_time(C, X, F, N, P, repair, DENSE)
        if C[EVN] and E[E_TIME][0] <= t_net:
            now = E[E_TIME][0]
            i = E[E_TASK][0]
            C[EVN] = heap_pop(E[E_TIME], E[E_SEQ], E[E_TASK], C[EVN])
            F, N, out = make_room(C, F, N, out, n, outneed[i], 0)
            w = task_done(C, G, T, K, F, RI, RF, i, now)
            for e in range(G[SUCC_PTR][i], G[SUCC_PTR][i + 1]):
                got = consumer_released(C, X, G, T, F, N, P, K, lat, i, e, fetch_ready, now)
                if got == STARTABLE:
                    aj = T[WORKER][G[SUCC_IDX][e]]
                    ptr[aj] = start_in_order(C, G, T, K, E, tdur, seq, ptr[aj], seq_ptr[aj + 1], aj, now)
                elif got == NO_COPY:
                    return NO_SOURCE, F, N
                elif got == READY or got == PENDING:  # a plan queues every task at its start
                    return UNREACHABLE, F, N
            ptr[w] = start_in_order(C, G, T, K, E, tdur, seq, ptr[w], seq_ptr[w + 1], w, now)
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
                    ptr[w] = start_in_order(C, G, T, K, E, tdur, seq, ptr[w], seq_ptr[w + 1], w, now)
            if m:
                idle = 0
            else:
                idle += 1
                if idle > 10_000:
                    return STUCK, F, N
        else:
            break
    return OK, F, N
