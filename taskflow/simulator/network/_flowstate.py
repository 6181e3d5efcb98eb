"""The layout of the ``maxmin`` model's flows over arrays (:mod:`._flows` moves them): state made
by :func:`flow_state`, grown only by :func:`room`, and the min-heap kernels over arrays that the
flows and the compiled loops share.

State lives in a few tuples of arrays (numba passes them by reference):

* ``C`` the integer counters and flags (the indices below; a loop numbers its own from
  :data:`COUNTERS`), ``X`` the float ones (:data:`T_LAST`, :data:`NEXT`);
* ``F`` per flow: ``F[FLOWS]`` its integers (columns ``F_*``), ``F[FLOWS_F]`` its floats (``G_*``), ``F[WAITS]``
  and ``F[WAITS_B]`` the consumers waiting on a byte count (``T_*`` and the bytes), each flow's in a
  list kept in (bytes, arrival) order. A loop adds its own arrays after these four; a network alone
  passes empty ones (:data:`LOOP_NONE`) so that every kernel has one compiled signature;
* ``N`` the active flows' slots, the active (class, source, destination) pairs' slots and the
  repair's bookkeeping (as :func:`._flowloop.refresh` takes them), the flows in their latency phase
  (a min-heap), what changed since the last solve;
* ``P`` the ports and the fixed arrays (:attr:`.maxmin.MaxMinNetwork.P`).

Only :func:`room` grows arrays, so no other kernel writes past an array's end: the caller makes
room before each start and wait.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel

__all__ = ["flow_state", "counted", "room", "grown1", "grown2", "heap_push", "heap_pop", "LOOP_NONE", "COUNTERS", "EPS"]

EPS = 1e-9

# counters C[...]
(
    NFLOWS,
    NTH,
    NACTIVE,
    NPAIRS,
    DIRTY,
    STALE,
    TRACKED,
    SKIP,
    BACKOFF,
    NCH,
    NMOV,
    WHN,
    NSEQ,
    PFREE,
    PCAPL,
    NSOLVES,
    NREPAIRED,
    NGIVENUP,
    NAFRESH,
) = range(19)
#: the first counter of ``C`` a loop may number as its own
COUNTERS = 19
# float state X[...]
T_LAST, NEXT = 0, 1
# columns: flows (int: its task and the next flow of that task's output are its user's), flows
# (float), consumers waiting (int)
F_TASK, F_SRC, F_DST, F_SLOT, F_TH, F_NEXT, F_CLS, F_GONE = range(8)
G_TOTAL, G_START, G_TACT, G_BASE = range(4)
T_CONS, T_TOK, T_NEXT = range(3)

# the flows' arrays F[...] (a loop's own follow them)
FLOWS, FLOWS_F, WAITS, WAITS_B = range(4)
# the network's N[...]: the active flows' slots (each one's flow, pair, rate, bytes carried, total,
# the bytes at which it next needs attention; the slots due and their flows), the pairs' slots (each
# (class, source, destination)'s slot; the free ones; a slot's source, destination, class, active
# flows, cap, rate; the active slots and each one's place among them), the repair's bookkeeping
# (bottlenecks, in the set, the ports' lists forward and back, counted), what changed since the last
# solve, the flows in their latency phase (a min-heap: time, sequence, flow)
(SLOT_FLOW, SLOT_PAIR, RATE, CARRIED, TOTAL, TARGET, DUE, DUE_FLOWS, PAIR_SLOT, PAIR_FREE, PAIR_SRC, PAIR_DST,
 PAIR_CLS, PAIR_FLOWS, PAIR_CAP, PAIR_RATE, PAIRS, PAIR_POS, BOTTLENECK, IN_SET, LINKS, BACK, COUNTED, CHANGED,
 MOVES, LAT_TIME, LAT_SEQ, LAT_FLOW) = range(28)  # fmt: skip
# the ports' P[...]: upload, download, rack, rack uplink and downlink capacities; the solver's and the
# repair's scratch per port; each pair's own bandwidth; flags (capped, backplane, classes)
(UP, DOWN, RACK, RACK_UP, RACK_DOWN, PORT_LOC, PORT_HEAD, PORT_MARK, PORT_STAMP, PORT_USED, PAIR_BW, PORT_NB,
 PORT_INUSE, FLAGS) = range(14)  # fmt: skip

_I64 = np.int64
#: what a network alone passes for a loop's arrays after the flows' four (see the module docstring)
LOOP_NONE = (
    np.zeros((0, 3), _I64),
    np.zeros((0, 3)),
    np.zeros(0, _I64),
    np.zeros(0, _I64),
    np.zeros(0),
    np.zeros(0, _I64),
    np.zeros(0, _I64),
    np.zeros(0, _I64),
)


def flow_state(W: int, classes: int = 1, cap: int = 1024):
    """Fresh state for flows among ``W`` workers in ``classes`` priority classes: ``(C, X, F, N)``
    with room for ``cap`` flows (``F`` its first four arrays; see the module docstring).

    Parameters
    ----------
    W : int
    classes : int
    cap : int
    """
    F = (np.full((cap, 8), -1, _I64), np.zeros((cap, 4)), np.full((cap, 3), -1, _I64), np.zeros(cap))
    sc = 64  # the active flows' slots; the pairs' are twice as many, 64 of them handed out at first
    pfree = np.zeros(2 * sc, _I64)
    pfree[:64] = np.arange(63, -1, -1)
    pb = np.full(2 * sc, -2, _I64)

    def ints(k, fill=0):
        return np.full(k, fill, _I64)

    N = (
        ints(sc, -1),  # 0 each slot's flow
        ints(sc),  # 1 its pair
        np.zeros(sc),  # 2 its rate
        np.zeros(sc),  # 3 bytes carried
        np.zeros(sc),  # 4 its total
        np.zeros(sc),  # 5 the bytes at which it next needs attention
        ints(sc),  # 6 the slots due (step's output)
        ints(sc),  # 7 their flows
        ints(max(1, classes) * W * W, -1),  # 8 each (class, source, destination) pair's slot
        pfree,  # 9 the pairs' free slots
        ints(2 * sc),  # 10-12 a pair's source, destination, class
        ints(2 * sc),
        ints(2 * sc),
        np.zeros(2 * sc),  # 13 its active flows
        np.zeros(2 * sc),  # 14 its cap
        np.zeros(2 * sc),  # 15 its rate
        ints(2 * sc),  # 16 the active pairs' slots
        ints(2 * sc),  # 17 each slot's place in 16
        pb,  # 18-22 the repair's bookkeeping (bottlenecks, in the set, the ports' lists, counted)
        np.zeros(2 * sc, np.bool_),
        ints(4 * sc, -1),
        ints(4 * sc, -1),
        np.zeros(2 * sc),
        ints(3 * sc + 64),  # 23 the pairs whose flows changed since the last solve
        ints(3 * (3 * sc + 64)),  # 24 pairs on and off since then (slot, source or ~source, destination)
        np.zeros(sc),  # 25-27 the flows in their latency phase: a min-heap of (time, sequence) -> flow
        ints(sc),
        ints(sc),
    )
    C = np.zeros(32, _I64)
    C[PFREE], C[PCAPL] = 64, 64
    X = np.zeros(2)
    X[NEXT] = np.inf
    return C, X, F, N


def counted(C) -> dict:
    """What the flows' counters say of the rate solves: how many, how many repaired only what a
    change moved, how many repairs were given up for a whole solve."""
    return {"solves": int(C[NSOLVES]), "repaired": int(C[NREPAIRED]), "given_up": int(C[NGIVENUP])}


@kernel(cache=True)
def grown1(a, size, fill):
    """``a`` (one axis) with ``size`` entries, the new ones ``fill``."""
    b = np.empty(size, a.dtype)
    b[:] = fill
    b[: a.shape[0]] = a
    return b


@kernel(cache=True)
def grown2(a, rows, fill):
    """``a`` (two axes) with ``rows`` rows, the new ones ``fill``."""
    b = np.empty((rows, a.shape[1]), a.dtype)
    b[:] = fill
    b[: a.shape[0]] = a
    return b


@kernel(cache=True)
def room(C, F, N, flows, waits):
    """``F`` and ``N`` (new tuples where an array grew) with room for ``flows`` more flows and
    ``waits`` more consumers waiting on one; a loop's own arrays in ``F`` are passed on as they are."""
    FI, GF, TI, TB, TRI, TRF, HW, HN, HB, RT, RK, RN = F
    if C[NFLOWS] + flows > FI.shape[0]:
        cap = max(2 * FI.shape[0], C[NFLOWS] + flows)
        FI = grown2(FI, cap, -1)
        GF = grown2(GF, cap, 0.0)
    if C[NTH] + waits > TI.shape[0]:
        cap = max(2 * TI.shape[0], C[NTH] + waits)
        TI = grown2(TI, cap, -1)
        TB = grown1(TB, cap, 0.0)
    (sflow, pair, rates, done, total, nxt, due, dueflows, pslot, pfree, psrc, pdst, pcls, pn, pcaps, prate, plist,
     ppos, pb, inS, links, back, counted, changed, moves, wht, whs, whv) = N  # fmt: skip
    need = C[NACTIVE] + C[WHN] + flows
    if need > sflow.shape[0]:  # (pairs: at most one per active flow, their slots under twice that)
        sc = max(2 * sflow.shape[0], need)
        sflow, pair, due, dueflows = grown1(sflow, sc, -1), grown1(pair, sc, 0), grown1(due, sc, 0), \
            grown1(dueflows, sc, 0)  # fmt: skip
        rates, done, total, nxt = grown1(rates, sc, 0.0), grown1(done, sc, 0.0), grown1(total, sc, 0.0), \
            grown1(nxt, sc, 0.0)  # fmt: skip
        wht, whs, whv = grown1(wht, sc, 0.0), grown1(whs, sc, 0), grown1(whv, sc, 0)
        pc = 2 * sc
        pfree, psrc, pdst, pcls, plist, ppos, pb = grown1(pfree, pc, 0), grown1(psrc, pc, -1), \
            grown1(pdst, pc, -1), grown1(pcls, pc, -1), grown1(plist, pc, -1), grown1(ppos, pc, 0), \
            grown1(pb, pc, -1)  # fmt: skip
        pn, pcaps, prate, counted = grown1(pn, pc, 0.0), grown1(pcaps, pc, 0.0), grown1(prate, pc, 0.0), \
            grown1(counted, pc, 0.0)  # fmt: skip
        inS = grown1(inS, pc, False)
        links, back = grown1(links, 2 * pc, -1), grown1(back, 2 * pc, -1)
        changed = grown1(changed, 3 * sc + 64, 0)
        moves = grown1(moves, 3 * (3 * sc + 64), 0)
    N = (sflow, pair, rates, done, total, nxt, due, dueflows, pslot, pfree, psrc, pdst, pcls, pn, pcaps, prate, plist,
         ppos, pb, inS, links, back, counted, changed, moves, wht, whs, whv)  # fmt: skip
    return (FI, GF, TI, TB, TRI, TRF, HW, HN, HB, RT, RK, RN), N


@kernel(cache=True, _nrt=False)
def heap_push(ht, hs, hv, n, t, s, v):
    """Push ``(t, s) -> v`` on the min-heap ``[:n]``; the new size."""
    k = n
    while k > 0:
        p = (k - 1) >> 1
        if ht[p] < t or (ht[p] == t and hs[p] < s):
            break
        ht[k] = ht[p]
        hs[k] = hs[p]
        hv[k] = hv[p]
        k = p
    ht[k] = t
    hs[k] = s
    hv[k] = v
    return n + 1


@kernel(cache=True, _nrt=False)
def heap_pop(ht, hs, hv, n):
    """Drop the top of the min-heap ``[:n]`` (read it first); the new size."""
    n -= 1
    if n == 0:
        return 0
    t, s, v = ht[n], hs[n], hv[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hs[c + 1] < hs[c])):
            c += 1
        if ht[c] < t or (ht[c] == t and hs[c] < s):
            ht[k] = ht[c]
            hs[k] = hs[c]
            hv[k] = hv[c]
            k = c
        else:
            break
    ht[k] = t
    hs[k] = s
    hv[k] = v
    return n
