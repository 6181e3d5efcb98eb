"""``maxmin``: each worker's upload and download capacity shared max-min fairly among its flows.

With racks (``Cluster(racks=..., uplink=...)``), each rack's uplink and downlink are two more
shared ports: the flows leaving (entering) a rack share its uplink (downlink) max-min fairly too.

Each worker has an upload and a download capacity (its fastest link: the largest bandwidth of a pair
it belongs to) shared max-min fairly among its concurrent flows, each flow also capped at its pair's
bandwidth; rates are recomputed whenever a flow starts or ends (progressive filling, as in Estee's
max-min model). A single flow gets its pair's bandwidth, so ``maxmin`` is never faster than
``simple``.

Transfer priorities: a flow takes the priority class of the consumer that started it (the task's
``meta["priority"]``, higher first; 0 when absent). With more than one class, classes share
strictly in order: each class gets max-min fair shares of the port capacity the higher classes
left (work-conserving: a class with no active flow takes nothing). ``simple`` has no contention,
so priorities change nothing there.

Rates are solved again only where a change can move them (:func:`_repair`: the pairs whose flows
changed, then whichever pairs lose their bottleneck, checked against the max-min optimality
condition; a whole solve when that set grows past a third of the active pairs, with racks, a
backplane or priority classes, or below :data:`REPAIR` active pairs). The rate solver and the
per-event scans are compiled loops (numba); this model keeps its own clock
(:meth:`MaxMinNetwork.next_time`, :meth:`MaxMinNetwork.advance`).
"""

from __future__ import annotations

import heapq

import numpy as np
from ...jit import kernel

from .base import Network

__all__ = ["MaxMinNetwork", "REPAIR"]

#: With at least this many active (source, destination) pairs, a change of the flow set solves
#: again only the rates it can move (:func:`_repair`); below it, and with 0, every solve is whole.
#: Read when a network is made.
REPAIR = 32


@kernel(cache=True)
def _lowest(share_up, share_down, best):
    """``(share, port, is_upload)`` of the port with the smallest share below ``best`` among the
    upload ports ``share_up`` and download ports ``share_down`` (port -1 when none is below)."""
    port = -1
    is_up = True
    for w in range(share_up.shape[0]):
        s = share_up[w]
        if s < best:
            best, port, is_up = s, w, True
        s = share_down[w]
        if s < best:
            best, port, is_up = s, w, False
    return best, port, is_up


@kernel(cache=True)
def _shares(cap, used, n, share):
    """``share[i]``: what port ``i``'s capacity left gives each of its ``n[i]`` rising flows (inf: none)."""
    for i in range(cap.shape[0]):
        share[i] = (cap[i] - used[i]) / n[i] if n[i] > 1e-9 else np.inf


@kernel(cache=True)
def _take(i, cap, used, n, share, flows, level):
    """``flows`` flows freeze at ``level`` on port ``i``: its capacity used and its share follow."""
    n[i] -= flows
    used[i] += level * flows
    share[i] = (cap[i] - used[i]) / n[i] if n[i] > 1e-9 else np.inf


@kernel(cache=True)
def _sift(heap, pos, key, code, i, n):
    """Move port ``i`` to its place in the indexed min-heap ``heap[:n]`` (``pos``: each port's
    place), ordered by ``(key, code)``: up while it is below its parent, else down. (The order is
    written out in each loop here and in :func:`_down`: as a called kernel it doubles a solve's time.)"""
    j = pos[i]
    while j > 0:
        p = (j - 1) // 2
        o = heap[p]
        if key[o] < key[i] or (key[o] == key[i] and code[o] < code[i]):
            break
        heap[j] = o
        pos[o] = j
        j = p
    heap[j] = i
    pos[i] = j
    _down(heap, pos, key, code, i, n)


@kernel(cache=True)
def _down(heap, pos, key, code, i, n):
    """Move port ``i`` down the indexed min-heap ``heap[:n]`` (see :func:`_sift`) to its place."""
    j = pos[i]
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        o = heap[c]
        if c + 1 < n:
            o2 = heap[c + 1]
            if key[o2] < key[o] or (key[o2] == key[o] and code[o2] < code[o]):
                c += 1
                o = o2
        if key[i] < key[o] or (key[i] == key[o] and code[i] < code[o]):
            break
        heap[j] = o
        pos[o] = j
        j = c
    heap[j] = i
    pos[i] = j


@kernel(cache=True)
def _fill_pairs(qs, P, psrc, pdst, pn, pcap, up, down, prate, capped, bp, rack, rup, rdown, loc, pb):
    """Max-min fair rate per flow of each active (source, destination) pair, by progressive filling.

    ``qs[:P]`` lists the active pairs' slots; slot ``q`` holds a pair's source ``psrc[q]`` and
    destination ``pdst[q]`` (and class, in :func:`_fill_classes`), its number of active flows
    ``pn[q]`` (flows of one pair are alike), its own cap ``pcap[q]``, and receives their rate in
    ``prate[q]``. All unfrozen pairs share one rising *level*; at each step the port (an upload or
    a download capacity) whose remaining capacity per unfrozen flow is smallest saturates, and every pair
    through it freezes at the level (a pair whose own cap is strictly lower freezes at its cap
    first). Each pair freezes once. The ports' shares (remaining capacity / unfrozen flows) only
    rise as pairs freeze, so the ports sit in a heap by the share each had when last placed (a
    lower bound), and a port is placed again only when it comes to the top out of date.
    Only the ports with flows are indexed (``loc``: a scratch array of ``2 W`` entries, all -1,
    left so): O(P log P) per solve, whatever the number of workers. ``capped=False`` says no
    pair's cap is below its ports' capacities (so no cap can bind) and skips sorting the caps.
    ``bp`` is the backplane: one more port that every flow passes (``inf``: none); when it
    saturates, every unfrozen pair freezes. ``rack`` (rack index per worker) with ``rup`` /
    ``rdown`` (per rack) adds the racks' uplinks and downlinks: ports shared by the pairs that
    leave or enter a rack (none when ``rup`` is empty). ``pb[q]`` receives what froze the pair: its
    bottleneck port's code (``2 * worker``: an upload, ``+ 1``: a download), -1 its own cap, -3 the
    backplane, a rack's link or nothing (infinite bandwidth)."""
    W = up.shape[0]
    R = rup.shape[0]
    # the ports with flows, numbered in order of first use: loc[a] is source a's upload port,
    # loc[W + b] destination b's download port; code[i] = 2 * worker + is_download
    code = np.empty(2 * P, np.int64)
    ptr = np.zeros(2 * P + 1, np.int64)
    pu = np.empty(P, np.int64)
    pd = np.empty(P, np.int64)
    L = 0
    for k in range(P):
        a, b = psrc[qs[k]], pdst[qs[k]]
        if loc[a] < 0:
            loc[a] = L
            code[L] = 2 * a
            L += 1
        if loc[W + b] < 0:
            loc[W + b] = L
            code[L] = 2 * b + 1
            L += 1
        pu[k] = loc[a]
        pd[k] = loc[W + b]
        ptr[pu[k] + 1] += 1
        ptr[pd[k] + 1] += 1
    for i in range(L):
        ptr[i + 1] += ptr[i]
    plist = np.empty(2 * P, np.int64)  # each port's pairs, in pair order
    fill = ptr[:L].copy()
    cap = np.empty(L)
    used = np.zeros(L)
    nflows = np.zeros(L)
    share = np.empty(L)
    caps = np.empty(P)
    for i in range(L):
        w = code[i] // 2
        cap[i] = up[w] if code[i] % 2 == 0 else down[w]
    n_rup = np.zeros(R)
    n_rdown = np.zeros(R)
    n_all = 0.0
    for k in range(P):
        q = qs[k]
        plist[fill[pu[k]]] = k
        fill[pu[k]] += 1
        plist[fill[pd[k]]] = k
        fill[pd[k]] += 1
        nflows[pu[k]] += pn[q]
        nflows[pd[k]] += pn[q]
        n_all += pn[q]
        caps[k] = pcap[q]
        if R > 0:
            a, b = psrc[q], pdst[q]
            if rack[a] != rack[b]:
                n_rup[rack[a]] += pn[q]
                n_rdown[rack[b]] += pn[q]
    used_rup = np.zeros(R)
    used_rdown = np.zeros(R)
    share_rup = np.empty(R)
    share_rdown = np.empty(R)
    _shares(rup, used_rup, n_rup, share_rup)
    _shares(rdown, used_rdown, n_rdown, share_rdown)
    _shares(cap, used, nflows, share)
    # the ports in an indexed heap by (key, code), ties to the lower worker, its upload first. A
    # port's key is its share when last placed: shares only rise as pairs freeze, so a key is a
    # lower bound, and a port is placed again only when it comes to the top with its key behind
    # its share (a share that fell, by rounding, is placed at once)
    heap = np.empty(L, np.int64)
    hpos = np.empty(L, np.int64)
    key = share.copy()
    for i in range(L):
        heap[i] = i
        hpos[i] = i
    for i in range(L // 2 - 1, -1, -1):
        _down(heap, hpos, key, code, heap[i], L)
    used_bp = 0.0
    by_cap = np.argsort(caps) if capped else np.empty(0, np.int64)
    n_cap = P if capped else 0
    frozen = np.zeros(P, np.bool_)
    rlist = np.empty(P, np.int64)
    cp = 0
    left = P
    while left > 0:
        best, port = np.inf, -1
        while L > 0 and key[heap[0]] < share[heap[0]]:  # out of date (a NaN share never loops)
            key[heap[0]] = share[heap[0]]
            _down(heap, hpos, key, code, heap[0], L)
        if L > 0 and share[heap[0]] < np.inf:  # the port with the lowest share
            port = heap[0]
            best = share[port]
        best, rport, r_up = _lowest(share_rup, share_rdown, best)
        while cp < n_cap and frozen[by_cap[cp]]:
            cp += 1
        share_bp = (bp - used_bp) / n_all if n_all > 1e-9 else np.inf
        if share_bp < best and not (cp < n_cap and caps[by_cap[cp]] < share_bp):
            # the backplane saturates first: everything still rising freezes at its share
            for k in range(P):
                if not frozen[k]:
                    prate[qs[k]] = share_bp
                    pb[qs[k]] = -3
            break
        if cp < n_cap and caps[by_cap[cp]] < best:
            level = caps[by_cap[cp]]
            lo, hi, lst = cp, cp + 1, by_cap
            why = -1
        elif rport >= 0:  # a rack's uplink or downlink saturates: its pairs freeze (listed here)
            level = best
            n_in = 0
            for k in range(P):
                if not frozen[k]:
                    a, b = psrc[qs[k]], pdst[qs[k]]
                    if rack[a] != rack[b] and ((r_up and rack[a] == rport) or (not r_up and rack[b] == rport)):
                        rlist[n_in] = k
                        n_in += 1
            lo, hi, lst = 0, n_in, rlist
            why = -3
        elif port >= 0:
            level = best
            lo, hi, lst = ptr[port], ptr[port + 1], plist
            why = code[port]
        else:  # nothing constrains what is left: infinite bandwidth
            for k in range(P):
                if not frozen[k]:
                    prate[qs[k]] = np.inf
                    pb[qs[k]] = -3
            break
        if level == np.inf:
            for k in range(P):
                if not frozen[k]:
                    prate[qs[k]] = np.inf
                    pb[qs[k]] = -3
            break
        for j in range(lo, hi):
            k = lst[j]
            if frozen[k]:
                continue
            frozen[k] = True
            left -= 1
            q = qs[k]
            prate[q] = level
            pb[q] = why
            n_all -= pn[q]
            used_bp += level * pn[q]
            for i in (pu[k], pd[k]):
                _take(i, cap, used, nflows, share, pn[q], level)
                if share[i] < key[i]:
                    key[i] = share[i]
                    _sift(heap, hpos, key, code, i, L)
            if R > 0:
                a, b = psrc[q], pdst[q]
                if rack[a] != rack[b]:
                    _take(rack[a], rup, used_rup, n_rup, share_rup, pn[q], level)
                    _take(rack[b], rdown, used_rdown, n_rdown, share_rdown, pn[q], level)
    for i in range(L):  # the scratch array is left as it came
        w = code[i] // 2
        loc[w if code[i] % 2 == 0 else W + w] = -1


@kernel(cache=True)
def _fill_classes(qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, classes, capped, bp, rack, rup, rdown, loc, pb):
    """Strict priority between classes (class 0 first): each class shares, max-min fairly, the
    port (backplane, rack link) capacity the classes before it left. ``qs[:P]`` are the active
    pairs' slots (see :func:`_fill_pairs`)."""
    if classes == 1:
        _fill_pairs(qs, P, psrc, pdst, pn, pcap, up, down, prate, capped, bp, rack, rup, rdown, loc, pb)
        return
    R = rup.shape[0]
    up_r = up.copy()
    down_r = down.copy()
    rup_r = rup.copy()
    rdown_r = rdown.copy()
    order = np.argsort(pcls[qs[:P]], kind="mergesort")  # the pairs class by class
    mine = np.empty(P, np.int64)
    k = 0
    for c in range(classes):
        m = 0
        while k < P and pcls[qs[order[k]]] == c:
            mine[m] = qs[order[k]]
            m += 1
            k += 1
        if m == 0:
            continue
        _fill_pairs(mine, m, psrc, pdst, pn, pcap, up_r, down_r, prate, capped, bp, rack, rup_r, rdown_r, loc, pb)
        for j in range(m):
            q = mine[j]
            if prate[q] < np.inf:
                used = prate[q] * pn[q]
                bp = max(0.0, bp - used)
                a, b = psrc[q], pdst[q]
                up_r[a] = max(0.0, up_r[a] - used)
                down_r[b] = max(0.0, down_r[b] - used)
                if R > 0 and rack[a] != rack[b]:
                    rup_r[rack[a]] = max(0.0, rup_r[rack[a]] - used)
                    rdown_r[rack[b]] = max(0.0, rdown_r[rack[b]] - used)


@kernel(cache=True)
def _account(qs, P, psrc, pdst, pn, prate, pb, used, counted, nb):
    """After a whole solve: ``used[p]``, each port's bytes per second; ``counted[q]``, the flows of
    pair ``q`` that ``used`` counts; ``nb[p]``, how many pairs have port ``p`` as their bottleneck."""
    used[:] = 0.0
    nb[:] = 0
    for k in range(P):
        q = qs[k]
        counted[q] = pn[q]
        used[2 * psrc[q]] += pn[q] * prate[q]
        used[2 * pdst[q] + 1] += pn[q] * prate[q]
        if pb[q] >= 0:
            nb[pb[q]] += 1


@kernel(cache=True)
def _repair(changed, touched, P, psrc, pdst, pn, pcap, up, down, prate, pb, capped, rack, none, loc, heads, links,
            inS, mark, stamp, used, counted, nb, limit, budget):
    """Re-solve only the pairs whose max-min rates a change of the flow set can move; False when
    that set grows past ``limit`` pairs, or the pairs solved and looked at past ``budget`` (the
    caller then solves every pair).

    A feasible allocation is the max-min fair one exactly when every flow has a bottleneck: a
    saturated port where no flow is faster, or its own cap (Bertsekas and Gallager, *Data
    Networks*, 6.5.2), and ``pb`` keeps one for each active pair (``nb[p]``: how many pairs have
    port ``p``). A pair whose bottleneck port the change does not touch keeps it: no flow through
    that port came, went or changed rate. So the pairs whose flow count changed (``changed``) form
    the repair set, solved by progressive filling on what the other pairs leave of each port
    (``used[p]``: each port's bytes per second, counting ``counted[q]`` flows of pair ``q``); then
    every pair that may have lost its bottleneck is checked: those of the set, and the others whose
    bottleneck is a port of the set or a port a change touched (``touched``: the codes of ports
    that lost a pair). A pair that fails joins the set (for a pair of the set held below a faster
    fixed pair at its bottleneck, that fixed pair joins), and the set is solved again.

    ``heads[p]`` is the first pair through port code ``p`` (``2 * worker`` its upload, ``+ 1`` its
    download), ``links[2 * q]`` / ``links[2 * q + 1]`` the next pair after ``q`` through its upload /
    download (-1: none). ``inS`` and ``mark`` are scratch (``inS`` all False, left so), ``stamp[0]``
    a counter kept between calls. Work: the set's pairs and the lists of the ports checked, not
    every active pair."""
    W = up.shape[0]
    S = np.empty(max(P, 1), np.int64)
    m = 0
    for i in range(changed.shape[0]):
        q = changed[i]
        if pn[q] > 0 and not inS[q]:
            inS[q] = True
            S[m] = q
            m += 1
    V = np.empty(2 * max(P, 1) + touched.shape[0], np.int64)
    up_r = np.empty(W)
    down_r = np.empty(W)
    ok = False
    work = 0
    for _ in range(64):
        if m > limit:
            break
        for j in range(m):  # the set's flows leave the ports' counts, and their bottlenecks
            q = S[j]
            x = counted[q] * prate[q]
            used[2 * psrc[q]] -= x
            used[2 * pdst[q] + 1] -= x
            counted[q] = 0.0
            if pb[q] >= 0:
                nb[pb[q]] -= 1
            pb[q] = -2
        for j in range(m):  # what the fixed pairs leave of the set's ports (the solve reads no other)
            a, b = psrc[S[j]], pdst[S[j]]
            up_r[a] = max(0.0, up[a] - used[2 * a])
            down_r[b] = max(0.0, down[b] - used[2 * b + 1])
        _fill_pairs(S, m, psrc, pdst, pn, pcap, up_r, down_r, prate, capped, np.inf, rack, none, none, loc, pb)
        for j in range(m):
            q = S[j]
            x = pn[q] * prate[q]
            used[2 * psrc[q]] += x
            used[2 * pdst[q] + 1] += x
            counted[q] = pn[q]
            if pb[q] >= 0:
                nb[pb[q]] += 1
        # the ports to look at, each once, with its exact load and fastest pair: each pair's of the
        # set bottleneck, and the set's and touched ports that are some fixed pair's bottleneck
        stamp[0] += 1
        st = stamp[0]
        nv = 0
        bad = False
        for j in range(m + touched.shape[0]):
            for side in range(3):
                if j < m:
                    q = S[j]
                    p = 2 * psrc[q] if side == 0 else (2 * pdst[q] + 1 if side == 1 else pb[q])
                    if side == 2 and p < 0:
                        if p == -1:
                            continue
                        bad = True  # frozen by nothing the repair knows (cannot happen without racks)
                        break
                    if side < 2 and nb[p] == 0:
                        continue
                elif side == 0:
                    p = touched[j - m]
                    if nb[p] == 0:
                        continue
                else:
                    continue
                if mark[p] != st:
                    mark[p] = st
                    V[nv] = p
                    nv += 1
            if bad:
                break
        if bad:
            break
        m0 = m
        work += 2 * m
        for k in range(nv):
            p = V[k]
            # its load, its fastest pair, and the slowest pair of the set frozen here (a fixed pair
            # faster than that joins the set)
            load = 0.0
            top = 0.0
            low = np.inf
            g = heads[p]
            while g >= 0:
                load += pn[g] * prate[g]
                if prate[g] > top:
                    top = prate[g]
                if inS[g] and pb[g] == p and prate[g] < low:
                    low = prate[g]
                g = links[2 * g + p % 2]
                work += 2
            cap = up[p // 2] if p % 2 == 0 else down[p // 2]
            full = load >= cap * (1 - 1e-9)
            g = heads[p]
            while g >= 0:
                if not inS[g]:
                    if prate[g] > low * (1 + 1e-9) or (pb[g] == p and not (full and prate[g] >= top * (1 - 1e-9))):
                        inS[g] = True
                        S[m] = g
                        m += 1
                g = links[2 * g + p % 2]
            if low < np.inf and not full and m == m0:  # frozen there by the solve, yet not full: rounding
                bad = True
                break
        if bad or work > budget:  # as much work as a whole solve: one is cheaper
            break
        if m == m0:
            ok = True
            break
    for j in range(m):
        inS[S[j]] = False
    return ok


@kernel(cache=True)
def _pairs_moved(moves, heads, links, back, prate, pb, used, counted, nb, inuse):
    """Apply the pairs that came and went since the last solve, in order (``moves``: triples
    ``slot, source, destination`` for a pair on, ``slot, ~source, destination`` for one off) to the
    ports' lists (``back[2 * q + side]``: the link before pair ``q``'s in that list, -1 for the
    port's head) and counts (``inuse[0]``: the ports with a pair); returns the codes of the ports
    that lost a pair."""
    touched = np.empty(2 * (moves.shape[0] // 3), np.int64)
    nt = 0
    for k in range(0, moves.shape[0], 3):
        q, a, b = moves[k], moves[k + 1], moves[k + 2]
        if a >= 0:  # on: first in its upload's and its download's lists, counted nowhere yet
            counted[q] = 0.0
            pb[q] = -2
            for p, at in ((2 * a, 2 * q), (2 * b + 1, 2 * q + 1)):
                nx = heads[p]
                if nx < 0:
                    inuse[0] += 1
                links[at] = nx
                back[at] = -1
                if nx >= 0:
                    back[2 * nx + at % 2] = at
                heads[p] = q
        else:  # off: out of both lists and the counts; its ports are checked
            a = ~a
            x = counted[q] * prate[q]
            used[2 * a] -= x
            used[2 * b + 1] -= x
            counted[q] = 0.0
            if pb[q] >= 0:
                nb[pb[q]] -= 1
            pb[q] = -2
            for p, at in ((2 * a, 2 * q), (2 * b + 1, 2 * q + 1)):
                nx = links[at]
                pv = back[at]
                if pv >= 0:
                    links[pv] = nx
                else:
                    heads[p] = nx
                    if nx < 0:
                        inuse[0] -= 1
                if nx >= 0:
                    back[2 * nx + at % 2] = pv
                touched[nt] = p
                nt += 1
    return touched[:nt]


@kernel(cache=True)
def _refresh(nf, pair, done, nxt, rates, qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, t_last, recompute, classes,
             capped, bp, rack, rup, rdown, loc, pb, changed, moves, heads, links, back, inS, mark, stamp, used, counted,
             nb, inuse, repair, attempt):
    """Recompute the rates (if the flow set changed); return the time of the next flow event and
    how the rates were found: 1 repaired, 0 a repair given up, -1 no repair tried. With ``repair``
    at least 1 the repair's bookkeeping is kept (``moves``: see :func:`_pairs_moved`); with ``attempt`` too, and at least ``repair``
    active pairs, only the rates a change can move are solved again (:func:`_repair`), unless that
    set is larger than a third of them."""
    how = -1
    touched = _pairs_moved(moves, heads, links, back, prate, pb, used, counted, nb, inuse)
    if recompute:
        # a repair pays where the ports carry few pairs each (a change reaches few others), or
        # where a whole solve is large; between, on a few workers joined by many pairs, it does not
        if attempt and repair > 0 and P >= repair and (P <= 2 * inuse[0] or P >= 4096):
            how = 1 if _repair(changed, touched, P, psrc, pdst, pn, pcap, up, down, prate, pb, capped, rack, rup, loc,
                               heads, links, inS, mark, stamp, used, counted, nb, max(8, P // 3), 4 * max(64, P)) else 0
        if how != 1:
            _fill_classes(qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, classes, capped, bp, rack, rup, rdown,
                          loc, pb)
            if repair > 0:
                _account(qs, P, psrc, pdst, pn, prate, pb, used, counted, nb)
    best = np.inf
    for f in range(nf):
        r = prate[pair[f]]
        rates[f] = r
        if r == np.inf:
            t = t_last
        elif r > 0:
            gap = nxt[f] - done[f]
            t = t_last + (gap / r if gap > 0 else 0.0)
        else:
            continue
        if t < best:
            best = t
    return best, how


@kernel(cache=True)
def _step(nf, done, total, nxt, rates, dt, eps, due, now):
    """Move the ``nf`` active flows (slots ``0 .. nf - 1``) ``dt`` seconds forward; list in ``due`` the flows whose next target
    is reached (within ``eps`` relative, or so close that no representable time lies before it);
    return how many."""
    k = 0
    for f in range(nf):
        r = rates[f]
        if r == np.inf:  # infinite bandwidth: everything is there at once
            done[f] = total[f]
        elif dt > 0:
            x = done[f] + r * dt
            done[f] = x if x < total[f] else total[f]
        gap = nxt[f] - done[f]
        if gap <= eps * max(1.0, nxt[f]) or (r > 0 and now + gap / r <= now):
            if gap > 0:
                done[f] = nxt[f]
            due[k] = f
            k += 1
    return k


def _by_id(flow):
    return flow.id


class MaxMinNetwork(Network):
    """Max-min fair sharing of each worker's upload and download capacity (array-based; the rate
    computation and the per-event scans are compiled); see the module docstring."""

    name = "maxmin"

    def __init__(self, cluster, schedule, on_arrival, on_complete, classes: int = 1):
        super().__init__(cluster, schedule, on_arrival, on_complete)
        inv = cluster.inv_bandwidth
        with np.errstate(divide="ignore"):
            bw = np.where(inv > 0, 1.0 / np.where(inv > 0, inv, 1.0), np.inf)
        np.fill_diagonal(bw, 0.0)
        W = self.W = len(cluster)
        self.pcap = np.ascontiguousarray(bw.reshape(-1))
        self.up = bw.max(axis=1) if W > 1 else np.ones(W)
        self.down = bw.max(axis=0) if W > 1 else np.ones(W)
        port = np.minimum(self.up[:, None], self.down[None, :])
        off = ~np.eye(W, dtype=bool)  # a worker sends nothing to itself
        self.capped = bool(np.any(bw[off] < port[off]))  # else no pair's own cap can bind
        self.backplane = float(cluster.backplane) if cluster.backplane is not None else np.inf
        racks = cluster.rack_count
        self.rack = np.ascontiguousarray(cluster.rack_index if racks else np.zeros(W, np.int64))
        self.rup = np.full(racks, float(cluster.uplink) if racks else 0.0)
        self.rdown = self.rup.copy()
        self.classes = C = max(1, int(classes))
        self.loc = np.full(2 * W, -1, np.int64)  # the solver's scratch: ports -> its own numbering
        # active (class, source, destination) pairs, each in a slot: its code, flows, cap and rate
        self.pslot = {}  # code -> slot
        self.psrc = np.zeros(64, np.int64)  # the pair's source, destination and class
        self.pdst = np.zeros(64, np.int64)
        self.pcls = np.zeros(64, np.int64)
        self.pn = np.zeros(64)
        self.pcaps = np.zeros(64)
        self.prate = np.zeros(64)
        self.pfree = list(range(63, -1, -1))
        self.plist = np.zeros(64, np.int64)  # the active pairs' slots, the first self.npairs
        self.ppos = {}  # slot -> its position in plist
        self.npairs = 0
        # for solving again only what a change moves (:func:`_repair`): each pair's bottleneck, each
        # port's pairs as a doubly linked list (links: next through the upload, next through the
        # download; back: the previous ones, -1 for the port's head), what changed since the last solve
        self.repair = REPAIR if (C == 1 and not racks and self.backplane == np.inf and np.isfinite(self.up).all()
                                 and np.isfinite(self.down).all()) else 0
        self.pb = np.full(64, -2, np.int64)
        self.links = np.full(128, -1, np.int64)
        self.back = np.full(128, -1, np.int64)
        self.heads = np.full(2 * W, -1, np.int64)
        self.inS = np.zeros(64, np.bool_)
        self.mark = np.zeros(2 * W, np.int64)
        self.stamp = np.zeros(1, np.int64)
        self.used = np.zeros(2 * W)  # each port's bytes per second at the last solve
        self.counted = np.zeros(64)  # the flows of each pair that ``used`` counts
        self.nb = np.zeros(2 * W, np.int64)  # pairs whose bottleneck each port is
        self.inuse = np.zeros(1, np.int64)  # ports with a pair
        self.changed = []  # pairs whose flow count changed since the last solve
        self.moves = []  # pairs on (slot, source, destination) and off (slot, ~source, destination), in order
        self.skip = 0  # whole solves to make before trying a repair again
        self.backoff = 0  # how many after the last give-up
        cap0 = 64
        self.pair = np.zeros(cap0, np.int64)
        self.rates = np.zeros(cap0)
        self.done = np.zeros(cap0)
        self.total = np.zeros(cap0)
        self.nxt = np.zeros(cap0)  # bytes at which the flow next needs attention
        self.due = np.zeros(cap0, np.int64)
        self.flows = [None] * cap0
        self.t_last = 0.0
        self.dirty = False  # the set of active flows changed: recompute rates
        self.stale = False  # some flow's next target changed: recompute the next event
        self.nactive = 0
        self.waiting = []  # heap of (t_active, seq, flow): flows in their latency phase
        self._seq = 0
        self._next = np.inf

    def _grow(self):
        old = len(self.flows)
        for name in ("pair", "rates", "done", "total", "nxt", "due"):
            arr = getattr(self, name)
            new = np.zeros(old * 2, arr.dtype)
            new[:old] = arr
            setattr(self, name, new)
        self.flows.extend([None] * old)

    def _pair_on(self, code, cls, src, dst):
        """The pair ``code`` (class ``cls``, ``src`` to ``dst``) has its first active flow: give it a
        slot; returns the slot."""
        if not self.pfree:
            old = len(self.psrc)
            for name in ("psrc", "pdst", "pcls", "pn", "pcaps", "prate", "plist", "pb", "inS", "links", "back",
                         "counted"):  # (a slot's bookkeeping is set when the solve takes it)
                arr = getattr(self, name)
                setattr(self, name, np.concatenate([arr, np.full(len(arr), -1 if arr.dtype == np.int64 else 0,
                                                                 arr.dtype)]))
            self.pfree.extend(range(2 * old - 1, old - 1, -1))
        q = self.pfree.pop()
        self.pslot[code] = q
        self.psrc[q], self.pdst[q], self.pcls[q] = src, dst, cls
        self.pn[q] = 0.0
        self.pcaps[q] = self.pcap[src * self.W + dst]
        self.plist[self.npairs] = q
        self.ppos[q] = self.npairs
        self.npairs += 1
        if self.repair:  # its ports' lists take it at the next solve (:func:`_pairs_moved`)
            self.moves.extend((q, src, dst))
        return q

    def _pair_off(self, q):
        """The pair in slot ``q`` has no active flow left: free its slot."""
        W = self.W
        src, dst = int(self.psrc[q]), int(self.pdst[q])
        del self.pslot[(int(self.pcls[q]) * W + src) * W + dst]
        if self.repair:  # out of its ports' lists and counts at the next solve
            self.moves.extend((q, ~src, dst))
        k = self.ppos.pop(q)
        self.npairs -= 1
        last = int(self.plist[self.npairs])
        if last != q:
            self.plist[k] = last
            self.ppos[last] = k
        self.pfree.append(q)

    def _catch_up(self, now):
        dt = now - self.t_last
        if dt > 0 and self.nactive:
            _step(self.nactive, self.done, self.total, self.nxt, self.rates, dt, 1e-9, self.due, now)
        self.t_last = now

    def _set_next(self, flow):
        slot = flow.slot
        if slot >= 0:
            th = flow.thresholds
            self.nxt[slot] = th[0][0] if th and th[0][0] < flow.total else flow.total

    def _activate(self, flow):
        slot = self.nactive  # the active flows hold the first slots
        if slot == len(self.flows):
            self._grow()
        flow.slot = slot
        self.flows[slot] = flow
        code = (flow.cls * self.W + flow.src) * self.W + flow.dst
        q = self.pslot.get(code)
        if q is None:
            q = self._pair_on(code, flow.cls, flow.src, flow.dst)
        self.pair[slot] = q
        self.pn[q] += 1
        self.changed.append(q)
        self.done[slot] = 0.0
        self.total[slot] = flow.total
        self.nactive += 1
        self._set_next(flow)
        self.dirty = True

    def _deactivate(self, flow):
        slot = flow.slot
        if slot >= 0:
            flow.done = self.done[slot]
            q = int(self.pair[slot])
            self.pn[q] -= 1
            self.changed.append(q)
            if self.pn[q] == 0:
                self._pair_off(q)
            last = self.nactive - 1  # the last active flow takes the freed slot
            if last != slot:
                moved = self.flows[last]
                self.flows[slot] = moved
                moved.slot = slot
                for arr in (self.pair, self.rates, self.done, self.total, self.nxt):
                    arr[slot] = arr[last]
            self.flows[last] = None
            self.nactive -= 1
            flow.slot = -1
            self.dirty = True

    def start(self, flow, now):
        self._catch_up(now)
        if flow.t_active > now:
            self._seq += 1
            heapq.heappush(self.waiting, (flow.t_active, self._seq, flow))
        else:
            self._activate(flow)

    def wait(self, flow, nbytes, consumer, token, now):
        self._seq += 1
        heapq.heappush(flow.thresholds, (nbytes, self._seq, consumer, token))
        if flow.slot >= 0:
            self._catch_up(now)
            self._set_next(flow)
            self.stale = True

    def extend(self, flow, total, now):
        self._catch_up(now)
        flow.total = total
        if flow.slot >= 0:
            self.total[flow.slot] = total
            self._set_next(flow)
            self.stale = True

    def abort(self, flow, now):
        self._catch_up(now)
        flow.aborted = True
        self._deactivate(flow)

    def next_time(self):
        if self.dirty or self.stale:
            if self.nactive or self.moves:
                attempt = self.skip == 0 and self.npairs >= self.repair > 0
                self._next, how = _refresh(
                    self.nactive, self.pair, self.done, self.nxt, self.rates, self.plist, self.npairs, self.psrc,
                    self.pdst, self.pcls, self.pn, self.pcaps, self.up, self.down, self.prate, self.t_last, self.dirty,
                    self.classes, self.capped, self.backplane, self.rack, self.rup, self.rdown, self.loc, self.pb,
                    np.array(self.changed if attempt else (), np.int64), np.array(self.moves, np.int64), self.heads,
                    self.links, self.back, self.inS, self.mark, self.stamp, self.used, self.counted, self.nb,
                    self.inuse, self.repair, attempt)
                if how == 0:  # given up: whole solves for a while, twice as long after each give-up in a row
                    self.backoff = min(64, 2 * self.backoff or 1)
                    self.skip = self.backoff
                elif how == 1:
                    self.backoff = 0
                elif self.skip and self.dirty:
                    self.skip -= 1
            else:
                self._next = np.inf
            self.dirty = self.stale = False
            self.changed.clear()
            self.moves.clear()
        t = self._next
        waiting = self.waiting
        while waiting and waiting[0][2].aborted:
            heapq.heappop(waiting)
        if waiting and waiting[0][0] < t:
            t = waiting[0][0]
        return t

    def advance(self, now):
        """Move to ``now`` and report what is due, in order: a consumer's bytes have arrived
        (``on_arrival``), a flow is complete (``on_complete``). The network's own state is settled
        before the first report, so a report may start new flows."""
        due = self._pop_due(now)
        on_arrival, on_complete = self.on_arrival, self.on_complete
        for flow, item in due:
            if item is None:
                on_complete(flow)
            else:
                on_arrival(flow, item)
        return len(due)

    def _pop_due(self, now):
        """Advance to ``now``; return [(flow, (bytes, consumer, token) or None)] that are due: a
        consumer's bytes have arrived, or (None) the flow is complete."""
        dt = now - self.t_last
        self.t_last = now
        waiting = self.waiting
        out = []
        k = _step(self.nactive, self.done, self.total, self.nxt, self.rates, dt, 1e-9, self.due, now) if self.nactive else 0
        eps = 1e-9
        flows = self.flows
        due = [flows[slot] for slot in self.due[:k].tolist()]
        if k > 1:  # (slots move as flows end) flows due at once are reported in the order they started
            due.sort(key=_by_id)
        for f in due:
            done = self.done[f.slot]
            th = f.thresholds
            while th and th[0][0] <= done + eps * max(1.0, th[0][0]):
                nbytes, _, consumer, token = heapq.heappop(th)
                out.append((f, (nbytes, consumer, token)))
            if done >= f.total - eps * max(1.0, f.total):
                while th:
                    nbytes, _, consumer, token = heapq.heappop(th)
                    out.append((f, (nbytes, consumer, token)))
                f.finish = now
                self._deactivate(f)
                out.append((f, None))
            else:
                self._set_next(f)
                self.stale = True
        while waiting and waiting[0][0] <= now:
            _, _, flow = heapq.heappop(waiting)
            if not flow.aborted:
                self._activate(flow)
        return out
