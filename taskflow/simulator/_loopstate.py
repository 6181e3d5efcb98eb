"""The state layout of the simulator (:mod:`.engine` and the compiled event loops of
:mod:`.fastpath`) beyond the flows' (which is :mod:`.network._flowstate`'): the tasks' states,
what a loop returns, its counters, and the loops' room.

State lives in a few tuples of arrays (numba passes them by reference): ``G`` the graph, ``T``
per task, ``K`` per worker, ``F`` the flows (their four arrays, then the transfers, the copies of
outputs and the ready queue, each a column), ``N`` and ``P`` the network's, ``C`` the integer
counters and flags (the flows' first, then the loop's, indices below), ``X`` the float ones. Only
the loops grow arrays (:func:`make_room`), before each batch of placements, so no kernel writes
past an array's end. The engine holds the same fields as Python lists (:func:`laid_out`) and runs
the moves of :mod:`._moves` on them as plain Python.

Kernels that neither allocate nor call one that does, and return only scalars, are compiled
without numba's reference counting (``_nrt=False``): they read and write arrays their caller
holds, and counting the references of the dozens of arrays each takes (an atomic add per array,
per call and per tuple unpacked) was a fifth of the loop's time. The smallest moves (a field read,
a test, a list's entry) are inlined where compiled (``inline="always"``): fewer functions for numba
to compile, which a fresh checkout pays for once.
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from .network._flowstate import COUNTERS, SLOT_FLOW, grown1, grown2, room
from .states import TaskState

WAITING, QUEUED, RUNNING, DONE = (
    int(s) for s in (TaskState.WAITING, TaskState.QUEUED, TaskState.RUNNING, TaskState.DONE)
)
#: what :func:`simulate_ws` returns: finished; the network made no progress; an output has no copy;
#: the idle cascade went too deep; a state the scheduler never makes
OK, STUCK, NO_SOURCE, DEEP, UNREACHABLE, MORE = 0, 1, 2, 3, 4, 5

# the graph G[...]: inputs (pointers, producers, bytes), outputs (pointers, consumers), cores per
# task, outputs' bytes
PRED_PTR, PRED_IDX, PRED_SIZE, SUCC_PTR, SUCC_IDX, CORES, SUCC_SIZE = range(7)
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
# the loop's arrays of F[...], after the flows': transfers (int, float); copies of outputs (each a
# list per task from T[COPIES]: the worker, the next copy, its bytes); the ready queue (each a list
# per worker from K[RHEAD]: the task, its assignment token, the next entry)
TRANSFERS, TRANSFERS_F, HAVE_W, HAVE_NEXT, HAVE_B, RQ_TASK, RQ_TOKEN, RQ_NEXT = range(4, 12)
# the loop's counters C[...], after the flows' (network._flows)
NHAVE, NRQ, NRUNS, NTR, EVN, ESEQ, NSTEALS, NB, NPLACED = range(COUNTERS, COUNTERS + 9)
#: no live flow (what :func:`._moves.live_flow` returns for none)
NO_FLOW = -1


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


@kernel(cache=True)
def make_room(C, F, N, out, n, flows, placements):
    """``F``, ``N`` and ``out`` with room for ``flows`` more flows (and consumers waiting on one)
    and ``placements`` more placements: what one batch of decisions can add."""
    F, N = room(C, F, N, flows, flows)
    FI, GF, TI, TB, TRI, TRF, HW, HN, HB, RT, RK, RN = F
    cap = FI.shape[0]
    if TRI.shape[0] < cap:  # a transfer per flow at most, a copy per task and flow
        TRI = grown2(TRI, cap, -1)
        TRF = grown2(TRF, cap, 0.0)
    if HW.shape[0] < n + cap:
        HW, HN, HB = grown1(HW, n + cap, -1), grown1(HN, n + cap, -1), grown1(HB, n + cap, 0.0)
    if C[NPLACED] + placements > RT.shape[0]:
        rc = max(2 * RT.shape[0], C[NPLACED] + placements)
        RT, RK, RN = grown1(RT, rc, -1), grown1(RK, rc, -1), grown1(RN, rc, -1)
    if out.shape[0] < TI.shape[0] + N[SLOT_FLOW].shape[0]:
        out = np.empty((TI.shape[0] + N[SLOT_FLOW].shape[0], 2), np.int64)
    return (FI, GF, TI, TB, TRI, TRF, HW, HN, HB, RT, RK, RN), N, out
