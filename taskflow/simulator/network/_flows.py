"""The ``maxmin`` model's flows over arrays: the one definition of how flows start, wait, grow, stop,
move and come due, which :class:`.maxmin.MaxMinNetwork` drives from the engine and the compiled
loops (:mod:`taskflow.simulator.fastpath`) drive from theirs; the rates are :mod:`._flowloop`'s
solves, the arrays laid out in :mod:`._flowstate`.

Kernels that neither allocate nor call one that does, and return only scalars, are compiled
without numba's reference counting (``_nrt=False``): they are called per event with dozens of
arrays, whose counting was a fifth of the compiled loop's time.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from ._flowloop import AFRESH, TRY_REPAIR, WHOLE, refresh, solve, step
from ._flowstate import (
    BACK,
    BACKOFF,
    BOTTLENECK,
    CARRIED,
    CHANGED,
    COUNTED,
    DIRTY,
    DUE,
    DUE_FLOWS,
    EPS,
    F_CLS,
    F_DST,
    F_GONE,
    F_SLOT,
    F_SRC,
    F_TH,
    FLOWS,
    FLOWS_F,
    G_START,
    G_TACT,
    G_TOTAL,
    IN_SET,
    LAT_FLOW,
    LAT_SEQ,
    LAT_TIME,
    LINKS,
    MOVES,
    NACTIVE,
    NAFRESH,
    NCH,
    NEXT,
    NFLOWS,
    NGIVENUP,
    NMOV,
    NPAIRS,
    NREPAIRED,
    NSEQ,
    NSOLVES,
    NTH,
    PAIR_BW,
    PAIR_CAP,
    PAIR_CLS,
    PAIR_DST,
    PAIR_FLOWS,
    PAIR_FREE,
    PAIR_POS,
    PAIR_RATE,
    PAIR_SLOT,
    PAIR_SRC,
    PAIRS,
    PCAPL,
    PFREE,
    RATE,
    SKIP,
    SLOT_FLOW,
    SLOT_PAIR,
    STALE,
    T_CONS,
    T_LAST,
    T_NEXT,
    T_TOK,
    TARGET,
    TOTAL,
    TRACKED,
    UP,
    WAITS,
    WAITS_B,
    WHN,
    heap_pop,
    heap_push,
)

__all__ = [
    "net_start",
    "net_wait",
    "net_start_wait",
    "solve_rates",
    "earliest",
    "net_extend",
    "net_abort",
    "next_time",
    "pop_due",
]


@kernel(cache=True, _nrt=False)
def catch_up(C, X, N, now):
    """Move the active flows to ``now`` (their rates unchanged since the last move)."""
    dt = now - X[T_LAST]
    if dt > 0 and C[NACTIVE]:
        step(C[NACTIVE], N[CARRIED], N[TOTAL], N[TARGET], N[RATE], dt, EPS, N[DUE], now)
    X[T_LAST] = now


@kernel(cache=True, _nrt=False)
def set_next(F, N, f):
    """The bytes at which active flow ``f`` next needs attention: its first waiting consumer's, or its end."""
    slot = F[FLOWS][f, F_SLOT]
    if slot >= 0:
        h = F[FLOWS][f, F_TH]
        tot = F[FLOWS_F][f, G_TOTAL]
        N[TARGET][slot] = F[WAITS_B][h] if (h >= 0 and F[WAITS_B][h] < tot) else tot


@kernel(cache=True, _nrt=False)
def pair_on(C, N, P, cls, src, dst):
    """The pair ``src -> dst`` of class ``cls`` has its first active flow: a slot for it (from the
    free list, which doubles when it runs out); returns the slot."""
    pslot, pfree, psrc, pdst, pcls = N[PAIR_SLOT], N[PAIR_FREE], N[PAIR_SRC], N[PAIR_DST], N[PAIR_CLS]
    pn, pcaps, prate, plist, ppos = N[PAIR_FLOWS], N[PAIR_CAP], N[PAIR_RATE], N[PAIRS], N[PAIR_POS]
    pb, inS, links, back, counted, moves = N[BOTTLENECK], N[IN_SET], N[LINKS], N[BACK], N[COUNTED], N[MOVES]
    W = P[UP].shape[0]
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
    pslot[(cls * W + src) * W + dst] = q
    psrc[q] = src
    pdst[q] = dst
    pcls[q] = cls
    pn[q] = 0.0
    pcaps[q] = P[PAIR_BW][src * W + dst]
    plist[C[NPAIRS]] = q
    ppos[q] = C[NPAIRS]
    C[NPAIRS] += 1
    if C[TRACKED]:  # its ports' lists take it at the next solve
        m = C[NMOV]
        moves[m] = q
        moves[m + 1] = src
        moves[m + 2] = dst
        C[NMOV] = m + 3
    return q


@kernel(cache=True, _nrt=False)
def pair_off(C, N, P, q):
    """The pair in slot ``q`` has no active flow left: free its slot."""
    pslot, pfree, psrc, pdst, pcls = N[PAIR_SLOT], N[PAIR_FREE], N[PAIR_SRC], N[PAIR_DST], N[PAIR_CLS]
    plist, ppos, moves = N[PAIRS], N[PAIR_POS], N[MOVES]
    W = P[UP].shape[0]
    src, dst = psrc[q], pdst[q]
    pslot[(pcls[q] * W + src) * W + dst] = -1
    if C[TRACKED]:  # out of its ports' lists and counts at the next solve
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
    """``f``'s latency has passed: it takes the next active slot (the active flows hold the first ones)."""
    FI = F[FLOWS]
    slot = C[NACTIVE]
    FI[f, F_SLOT] = slot
    N[SLOT_FLOW][slot] = f
    src, dst = FI[f, F_SRC], FI[f, F_DST]
    W = P[UP].shape[0]
    q = N[PAIR_SLOT][(FI[f, F_CLS] * W + src) * W + dst]
    if q < 0:
        q = pair_on(C, N, P, FI[f, F_CLS], src, dst)
    N[SLOT_PAIR][slot] = q
    N[PAIR_FLOWS][q] += 1.0
    N[CHANGED][C[NCH]] = q
    C[NCH] += 1
    N[CARRIED][slot] = 0.0
    N[TOTAL][slot] = F[FLOWS_F][f, G_TOTAL]
    C[NACTIVE] += 1
    set_next(F, N, f)
    C[DIRTY] = 1


@kernel(cache=True, _nrt=False)
def deactivate(C, F, N, P, f):
    """``f`` stops moving (done or aborted): the last active flow takes its slot."""
    FI = F[FLOWS]
    slot = FI[f, F_SLOT]
    if slot < 0:
        return
    sflow, pair, rates, done, total, nxt = N[SLOT_FLOW], N[SLOT_PAIR], N[RATE], N[CARRIED], N[TOTAL], N[TARGET]
    q = pair[slot]
    N[PAIR_FLOWS][q] -= 1.0
    N[CHANGED][C[NCH]] = q
    C[NCH] += 1
    if N[PAIR_FLOWS][q] == 0:
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
def net_start(C, X, F, N, P, src, dst, cls, total, latency, now):
    """A flow begins at ``now``: ``total`` bytes from ``src`` to ``dst`` in class ``cls``, its
    ``latency`` first; returns its number (its row of ``F``, in the order flows start)."""
    FI, GF = F[FLOWS], F[FLOWS_F]
    f = C[NFLOWS]
    C[NFLOWS] += 1
    FI[f, F_SRC] = src
    FI[f, F_DST] = dst
    FI[f, F_SLOT] = -1
    FI[f, F_TH] = -1
    FI[f, F_CLS] = cls
    FI[f, F_GONE] = 0
    GF[f, G_TOTAL] = total
    GF[f, G_START] = now
    GF[f, G_TACT] = now + latency
    catch_up(C, X, N, now)
    t = GF[f, G_TACT]
    if t > now:
        C[NSEQ] += 1
        C[WHN] = heap_push(N[LAT_TIME], N[LAT_SEQ], N[LAT_FLOW], C[WHN], t, C[NSEQ], f)
    else:
        activate(C, F, N, P, f)
    return f


@kernel(cache=True, _nrt=False)
def net_wait(C, X, F, N, f, nbytes, consumer, token, now):
    """``consumer`` (with its assignment ``token``) needs the first ``nbytes`` of ``f``: a place on
    ``f``'s list, kept in (bytes, arrival) order; returns its number."""
    FI, TI, TB = F[FLOWS], F[WAITS], F[WAITS_B]
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
    return h


@kernel(cache=True, _nrt=False)
def net_start_wait(C, X, F, N, P, src, dst, cls, total, latency, now, nbytes, consumer, token):
    """A flow begins (:func:`net_start`) and its first consumer waits on it (:func:`net_wait`), in
    one call; returns the flow's number."""
    f = net_start(C, X, F, N, P, src, dst, cls, total, latency, now)
    net_wait(C, X, F, N, f, nbytes, consumer, token, now)
    return f


@kernel(cache=True, _nrt=False)
def net_extend(C, X, F, N, f, total, now):
    """``f`` must carry ``total`` bytes instead (a later consumer needs more)."""
    catch_up(C, X, N, now)
    F[FLOWS_F][f, G_TOTAL] = total
    slot = F[FLOWS][f, F_SLOT]
    if slot >= 0:
        N[TOTAL][slot] = total
        set_next(F, N, f)
        C[STALE] = 1


@kernel(cache=True, _nrt=False)
def net_abort(C, X, F, N, P, f, now):
    """``f`` stops (its source or destination was lost); nothing of it comes due again. Returns
    the bytes it had carried."""
    catch_up(C, X, N, now)
    F[FLOWS][f, F_GONE] = 1
    slot = F[FLOWS][f, F_SLOT]
    carried = N[CARRIED][slot] if slot >= 0 else 0.0
    deactivate(C, F, N, P, f)
    return carried


@kernel(cache=True)
def solve_rates(C, X, N, P, repair, dense):
    """The rates solved again if the flows changed since the last solve (whole, or only what the
    change can move: ``repair`` as :data:`.maxmin.REPAIR`, ``dense`` as :data:`.maxmin.DENSE`), and
    with them the time of the next flow event (``X[NEXT]``); nothing where nothing changed."""
    if not (C[DIRTY] or C[STALE]):
        return
    (sflow, pair, rates, done, total, nxt, due, dueflows, pslot, pfree, psrc, pdst, pcls, pn, pcaps, prate,
     plist, ppos, pb, inS, links, back, counted, changed, moves, wht, whs, whv) = N  # fmt: skip
    up, down, rack, rup, rdown, loc, heads, mark, stamp, used, pcap, nb, inuse, flags = P
    capped, bp, classes = flags[0] != 0.0, flags[1], int(flags[2])
    W = up.shape[0]
    npairs = C[NPAIRS]
    recompute = C[DIRTY] != 0
    if recompute:
        C[NSOLVES] += 1
    if not (C[NACTIVE] or npairs):
        X[NEXT] = np.inf
        C[TRACKED] = 0  # (pairs gone since the last solve: their moves are not applied)
    elif repair and npairs >= repair and (npairs <= dense * W or npairs >= 4096):
        # the bookkeeping kept (made afresh where it was not); a repair tried unless backing off
        mode = WHOLE if C[SKIP] else TRY_REPAIR
        if not C[TRACKED]:
            mode = AFRESH
            C[TRACKED] = 1
            C[NAFRESH] += 1
        ch = changed[: C[NCH]] if mode == TRY_REPAIR else changed[:0]
        t, how = refresh(C[NACTIVE], pair, done, nxt, rates, plist, npairs, psrc, pdst, pcls, pn, pcaps, up, down,
                         prate, X[T_LAST], recompute, classes, capped, bp, rack, rup, rdown, loc, pb, ch,
                         moves[: C[NMOV]], heads, links, back, inS, mark, stamp, used, counted, nb, inuse,
                         mode)  # fmt: skip
        X[NEXT] = t
        if how == 0:  # given up: whole solves for a while, twice as long after each give-up in a row
            C[NGIVENUP] += 1
            C[BACKOFF] = min(64, 2 * C[BACKOFF] if C[BACKOFF] else 1)
            C[SKIP] = C[BACKOFF]
        elif how == 1:
            C[NREPAIRED] += 1
            C[BACKOFF] = 0
        elif C[SKIP] and recompute:
            C[SKIP] -= 1
    else:
        C[TRACKED] = 0
        X[NEXT] = solve(C[NACTIVE], pair, done, nxt, rates, plist, npairs, psrc, pdst, pcls, pn, pcaps, up,
                        down, prate, X[T_LAST], recompute, classes, capped, bp, rack, rup, rdown, loc,
                        pb)  # fmt: skip
    C[DIRTY] = 0
    C[STALE] = 0
    C[NCH] = 0
    C[NMOV] = 0


@kernel(cache=True, _nrt=False)
def earliest(C, X, FI, lat_time, lat_seq, lat_flow):
    """When the flows next need attention: the next flow event (as last solved) or the end of the
    next latency phase, flows aborted in theirs dropped (``FI`` the flows' integers, the rest the
    latency phases' heap)."""
    while C[WHN] and FI[lat_flow[0], F_GONE]:
        C[WHN] = heap_pop(lat_time, lat_seq, lat_flow, C[WHN])
    t = X[NEXT]
    if C[WHN] and lat_time[0] < t:
        t = lat_time[0]
    return t


@kernel(cache=True)
def next_time(C, X, F, N, P, repair, dense):
    """When the flows next need attention: the rates solved again first if the flows changed
    (:func:`solve_rates`), then :func:`earliest`."""
    solve_rates(C, X, N, P, repair, dense)
    return earliest(C, X, F[FLOWS], N[LAT_TIME], N[LAT_SEQ], N[LAT_FLOW])


@kernel(cache=True)
def pop_due(C, X, F, N, P, now, out):
    """Move the flows to ``now``; list in ``out`` what is due, in order: ``(flow, waiting)`` (a
    consumer's bytes are there: ``waiting`` its number from :func:`net_wait`) and ``(flow, -1)``
    (the flow is complete, after its consumers), flows due at once in the order they started; how
    many. The flows' own state is settled before this returns, so acting on a report may start
    new flows. ``out`` needs a row per consumer waiting and per active flow."""
    FI, GF, TI, TB = F[FLOWS], F[FLOWS_F], F[WAITS], F[WAITS_B]
    sflow, done, due, dueflows = N[SLOT_FLOW], N[CARRIED], N[DUE], N[DUE_FLOWS]
    dt = now - X[T_LAST]
    X[T_LAST] = now
    k = step(C[NACTIVE], done, N[TOTAL], N[TARGET], N[RATE], dt, EPS, due, now) if C[NACTIVE] else 0
    for j in range(k):
        dueflows[j] = sflow[due[j]]
    order = np.sort(dueflows[:k])  # (slots move as flows end)
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
    while C[WHN] and N[LAT_TIME][0] <= now:
        f = N[LAT_FLOW][0]
        C[WHN] = heap_pop(N[LAT_TIME], N[LAT_SEQ], N[LAT_FLOW], C[WHN])
        if not FI[f, F_GONE]:
            activate(C, F, N, P, f)
    return m
