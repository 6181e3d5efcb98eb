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
from .network._flowstate import COUNTERS

WAITING, QUEUED, RUNNING, DONE = 0, 1, 2, 3
#: what :func:`simulate_ws` returns: finished; the network made no progress; an output has no copy;
#: the idle cascade went too deep; a state the scheduler never makes
OK, STUCK, NO_SOURCE, DEEP, UNREACHABLE, MORE = 0, 1, 2, 3, 4, 5

# the loop's counters C[...], after the flows' (network._flows)
NHAVE, NRQ, NRUNS, NTR, EVN, ESEQ, NSTEALS, NB, NPLACED = range(COUNTERS, COUNTERS + 9)
# columns: copies of outputs (int), ready queue (int)
H_W, H_NEXT = range(2)
R_TASK, R_TOK, R_NEXT = range(3)


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
    HI, HB = F[6], F[7]
    h = T[8][p]
    while h >= 0:
        if HI[h, H_W] == w:
            return HB[h]
        h = HI[h, H_NEXT]
    return -1.0
