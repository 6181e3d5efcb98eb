"""The shared state layout of the compiled event loop (:mod:`.fastpath`) and its network half:
the ``maxmin`` model's flows over arrays, step for step as :class:`.network.maxmin.MaxMinNetwork`
moves them (the rate solves are its own kernels).

State lives in a few tuples of arrays (numba passes them by reference): ``G`` the graph, ``T``
per task, ``K`` per worker, ``F`` the flows (and what grows with them), ``N`` the network's slots
and pairs, ``P`` the fixed port arrays, ``C`` the integer counters and flags (indices below), ``X``
the float ones. Only :func:`._wsloop.simulate_ws` grows arrays, before each batch of placements,
so no kernel here writes past an array's end.

Kernels that neither allocate nor call one that does, and return only scalars, are compiled
without numba's reference counting (``_nrt=False``): they read and write arrays their caller
holds, and counting the references of the dozens of arrays each takes (an atomic add per array,
per call and per tuple unpacked) was a fifth of the loop's time. The rate solves and
:func:`.fastpath`'s growing of arrays keep it.
"""

from __future__ import annotations

import numpy as np

from ..jit import kernel
from .network._flowloop import AFRESH, TRY_REPAIR, WHOLE, refresh, solve, step
from .network.maxmin import DENSE

WAITING, QUEUED, RUNNING, DONE = 0, 1, 2, 3
#: what :func:`simulate_ws` returns: finished; the network made no progress; an output has no copy;
#: the idle cascade went too deep; a state the scheduler never makes
OK, STUCK, NO_SOURCE, DEEP, UNREACHABLE, MORE = 0, 1, 2, 3, 4, 5
EPS = 1e-9

# counters C[...]
(
    NFLOWS,
    NTH,
    NHAVE,
    NRQ,
    NRUNS,
    NTR,
    EVN,
    ESEQ,
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
    NSTEALS,
    NB,
    NPLACED,
    NREPAIRED,
    NGIVENUP,
) = range(27)
# float state X[...]
T_LAST, NEXT = 0, 1
# columns: flows (int), flows (float), thresholds (int), have (int), ready queue (int)
F_TASK, F_SRC, F_DST, F_SLOT, F_TH, F_NEXT = range(6)
G_TOTAL, G_START, G_TACT, G_BASE = range(4)
T_CONS, T_TOK, T_NEXT = range(3)
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


# ---------------------------------------------------------------- the network (maxmin.MaxMinNetwork)
@kernel(cache=True, _nrt=False)
def catch_up(C, X, N, now):
    dt = now - X[T_LAST]
    if dt > 0 and C[NACTIVE]:
        step(C[NACTIVE], N[3], N[4], N[5], N[2], dt, EPS, N[6], now)
    X[T_LAST] = now


@kernel(cache=True, _nrt=False)
def set_next(F, N, f):
    slot = F[0][f, F_SLOT]
    if slot >= 0:
        h = F[0][f, F_TH]
        tot = F[1][f, G_TOTAL]
        N[5][slot] = F[3][h] if (h >= 0 and F[3][h] < tot) else tot


@kernel(cache=True, _nrt=False)
def pair_on(C, N, P, src, dst):
    """The pair ``src -> dst`` has its first active flow: a slot for it (as maxmin's free list
    hands them out, growing by doubling)."""
    pslot, pfree, psrc, pdst, pcls, pn, pcaps, prate, plist, ppos, pb, inS, links, back, counted = N[8:23]
    moves = N[24]
    W = P[0].shape[0]
    if C[PFREE] == 0:
        old = C[PCAPL]
        for s in range(2 * old - 1, old - 1, -1):
            pfree[C[PFREE]] = s
            C[PFREE] += 1
        for s in range(old, 2 * old):
            psrc[s] = -1
            pdst[s] = -1
            pcls[s] = -1
            pn[s] = 0.0
            pcaps[s] = 0.0
            prate[s] = 0.0
            plist[s] = -1
            pb[s] = -1
            inS[s] = False
            counted[s] = 0.0
        for s in range(2 * old, 4 * old):
            links[s] = -1
            back[s] = -1
        C[PCAPL] = 2 * old
    C[PFREE] -= 1
    q = pfree[C[PFREE]]
    pslot[src * W + dst] = q
    psrc[q] = src
    pdst[q] = dst
    pcls[q] = 0
    pn[q] = 0.0
    pcaps[q] = P[10][src * W + dst]
    plist[C[NPAIRS]] = q
    ppos[q] = C[NPAIRS]
    C[NPAIRS] += 1
    if C[TRACKED]:
        m = C[NMOV]
        moves[m] = q
        moves[m + 1] = src
        moves[m + 2] = dst
        C[NMOV] = m + 3
    return q


@kernel(cache=True, _nrt=False)
def pair_off(C, N, P, q):
    pslot, pfree, psrc, pdst = N[8], N[9], N[10], N[11]
    plist, ppos, moves = N[16], N[17], N[24]
    W = P[0].shape[0]
    src, dst = psrc[q], pdst[q]
    pslot[src * W + dst] = -1
    if C[TRACKED]:
        m = C[NMOV]
        moves[m] = q
        moves[m + 1] = -src - 1
        moves[m + 2] = dst
        C[NMOV] = m + 3
    k = ppos[q]
    C[NPAIRS] -= 1
    last = plist[C[NPAIRS]]
    if last != q:
        plist[k] = last
        ppos[last] = k
    pfree[C[PFREE]] = q
    C[PFREE] += 1


@kernel(cache=True, _nrt=False)
def activate(C, F, N, P, f):
    FI = F[0]
    slot = C[NACTIVE]
    FI[f, F_SLOT] = slot
    N[0][slot] = f
    src, dst = FI[f, F_SRC], FI[f, F_DST]
    q = N[8][src * P[0].shape[0] + dst]
    if q < 0:
        q = pair_on(C, N, P, src, dst)
    N[1][slot] = q
    N[13][q] += 1.0
    N[23][C[NCH]] = q
    C[NCH] += 1
    N[3][slot] = 0.0
    N[4][slot] = F[1][f, G_TOTAL]
    C[NACTIVE] += 1
    set_next(F, N, f)
    C[DIRTY] = 1


@kernel(cache=True, _nrt=False)
def deactivate(C, F, N, P, f):
    FI = F[0]
    slot = FI[f, F_SLOT]
    if slot < 0:
        return
    sflow, pair, rates, done, total, nxt = N[0], N[1], N[2], N[3], N[4], N[5]
    q = pair[slot]
    N[13][q] -= 1.0
    N[23][C[NCH]] = q
    C[NCH] += 1
    if N[13][q] == 0:
        pair_off(C, N, P, q)
    last = C[NACTIVE] - 1
    if last != slot:
        m = sflow[last]
        sflow[slot] = m
        FI[m, F_SLOT] = slot
        pair[slot] = pair[last]
        rates[slot] = rates[last]
        done[slot] = done[last]
        total[slot] = total[last]
        nxt[slot] = nxt[last]
    sflow[last] = -1
    C[NACTIVE] -= 1
    FI[f, F_SLOT] = -1
    C[DIRTY] = 1


@kernel(cache=True, _nrt=False)
def net_start(C, X, F, N, P, f, now):
    catch_up(C, X, N, now)
    t = F[1][f, G_TACT]
    if t > now:
        C[NSEQ] += 1
        C[WHN] = heap_push(N[25], N[26], N[27], C[WHN], t, C[NSEQ], f)
    else:
        activate(C, F, N, P, f)


@kernel(cache=True, _nrt=False)
def net_wait(C, X, F, N, f, nbytes, consumer, token, now):
    """A threshold on ``f``'s list, kept in (bytes, sequence) order: a heap's pops, in a list."""
    FI, TI, TB = F[0], F[2], F[3]
    C[NSEQ] += 1
    h = C[NTH]
    C[NTH] += 1
    TI[h, T_CONS] = consumer
    TI[h, T_TOK] = token
    TB[h] = nbytes
    prev = -1
    cur = FI[f, F_TH]
    while cur >= 0 and TB[cur] <= nbytes:
        prev = cur
        cur = TI[cur, T_NEXT]
    TI[h, T_NEXT] = cur
    if prev < 0:
        FI[f, F_TH] = h
    else:
        TI[prev, T_NEXT] = h
    if FI[f, F_SLOT] >= 0:
        catch_up(C, X, N, now)
        set_next(F, N, f)
        C[STALE] = 1


@kernel(cache=True, _nrt=False)
def net_extend(C, X, F, N, f, total, now):
    catch_up(C, X, N, now)
    F[1][f, G_TOTAL] = total
    slot = F[0][f, F_SLOT]
    if slot >= 0:
        N[4][slot] = total
        set_next(F, N, f)
        C[STALE] = 1


@kernel(cache=True)
def next_time(C, X, N, P, repair):
    """When the network next needs attention (as ``MaxMinNetwork.next_time``)."""
    if C[DIRTY] or C[STALE]:
        (
            sflow,
            pair,
            rates,
            done,
            total,
            nxt,
            due,
            dueflows,
            pslot,
            pfree,
            psrc,
            pdst,
            pcls,
            pn,
            pcaps,
            prate,
            plist,
            ppos,
            pb,
            inS,
            links,
            back,
            counted,
            changed,
            moves,
            wht,
            whs,
            whv,
        ) = N
        up, down, rack, rup, rdown, loc, heads, mark, stamp, used, pcap, nb, inuse, flags = P
        capped, bp, classes = flags[0] != 0.0, flags[1], int(flags[2])
        W = up.shape[0]
        npairs = C[NPAIRS]
        recompute = C[DIRTY] != 0
        if recompute:
            C[NSOLVES] += 1
        if not (C[NACTIVE] or npairs):
            X[NEXT] = np.inf
            C[TRACKED] = 0
        elif repair and npairs >= repair and (npairs <= DENSE * W or npairs >= 4096):
            mode = WHOLE if C[SKIP] else TRY_REPAIR
            if not C[TRACKED]:
                mode = AFRESH
                C[TRACKED] = 1
            ch = changed[: C[NCH]] if mode == TRY_REPAIR else changed[:0]
            t, how = refresh(
                C[NACTIVE],
                pair,
                done,
                nxt,
                rates,
                plist,
                npairs,
                psrc,
                pdst,
                pcls,
                pn,
                pcaps,
                up,
                down,
                prate,
                X[T_LAST],
                recompute,
                classes,
                capped,
                bp,
                rack,
                rup,
                rdown,
                loc,
                pb,
                ch,
                moves[: C[NMOV]],
                heads,
                links,
                back,
                inS,
                mark,
                stamp,
                used,
                counted,
                nb,
                inuse,
                mode,
            )
            X[NEXT] = t
            if how == 1:
                C[NREPAIRED] += 1
            elif how == 0:
                C[NGIVENUP] += 1
            if how == 0:
                C[BACKOFF] = min(64, 2 * C[BACKOFF] if C[BACKOFF] else 1)
                C[SKIP] = C[BACKOFF]
            elif how == 1:
                C[BACKOFF] = 0
            elif C[SKIP] and recompute:
                C[SKIP] -= 1
        else:
            C[TRACKED] = 0
            X[NEXT] = solve(
                C[NACTIVE],
                pair,
                done,
                nxt,
                rates,
                plist,
                npairs,
                psrc,
                pdst,
                pcls,
                pn,
                pcaps,
                up,
                down,
                prate,
                X[T_LAST],
                recompute,
                classes,
                capped,
                bp,
                rack,
                rup,
                rdown,
                loc,
                pb,
            )
        C[DIRTY] = 0
        C[STALE] = 0
        C[NCH] = 0
        C[NMOV] = 0
    t = X[NEXT]
    if C[WHN] and N[25][0] < t:
        t = N[25][0]
    return t


@kernel(cache=True)
def pop_due(C, X, F, N, P, now, out):
    """Move the network to ``now``; list in ``out`` what is due, in order: ``(flow, threshold)``
    (a consumer's bytes are there) and ``(flow, -1)`` (the flow is complete); how many."""
    FI, GF, TI, TB = F[0], F[1], F[2], F[3]
    sflow, done, due, dueflows = N[0], N[3], N[6], N[7]
    dt = now - X[T_LAST]
    X[T_LAST] = now
    k = step(C[NACTIVE], done, N[4], N[5], N[2], dt, EPS, due, now) if C[NACTIVE] else 0
    for j in range(k):
        dueflows[j] = sflow[due[j]]
    order = np.sort(dueflows[:k])
    m = 0
    for j in range(k):
        f = order[j]
        d = done[FI[f, F_SLOT]]
        h = FI[f, F_TH]
        while h >= 0 and TB[h] <= d + EPS * max(1.0, TB[h]):
            out[m, 0] = f
            out[m, 1] = h
            m += 1
            h = TI[h, T_NEXT]
        tot = GF[f, G_TOTAL]
        if d >= tot - EPS * max(1.0, tot):
            while h >= 0:
                out[m, 0] = f
                out[m, 1] = h
                m += 1
                h = TI[h, T_NEXT]
            FI[f, F_TH] = -1
            deactivate(C, F, N, P, f)
            out[m, 0] = f
            out[m, 1] = -1
            m += 1
        else:
            FI[f, F_TH] = h
            set_next(F, N, f)
            C[STALE] = 1
    while C[WHN] and N[25][0] <= now:
        f = N[27][0]
        C[WHN] = heap_pop(N[25], N[26], N[27], C[WHN])
        activate(C, F, N, P, f)
    return m
