"""The max-min fair rates of the ``maxmin`` network model: the compiled solver and its repair.

:func:`fill_classes` (whole solves by progressive filling over the active worker pairs, with
strict priority between transfer classes) and :func:`repair_rates` (solving again only the pairs a
change of the flow set can move, checked by the max-min optimality condition), with the
bookkeeping the repair keeps between solves (:func:`pairs_moved`, :func:`account`). The network
network model that calls them, and the meaning of its arrays, is :mod:`.maxmin`.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel

__all__ = ["fill_pairs", "fill_classes", "repair_rates", "account", "pairs_moved", "relink"]


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
def fill_pairs(qs, P, psrc, pdst, pn, pcap, up, down, prate, capped, bp, rack, rup, rdown, loc, pb):
    """Max-min fair rate per flow of each active (source, destination) pair, by progressive filling.

    ``qs[:P]`` lists the active pairs' slots; slot ``q`` holds a pair's source ``psrc[q]`` and
    destination ``pdst[q]`` (and class, in :func:`fill_classes`), its number of active flows
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
    # the scratch arrays are views of two blocks (one allocation each, not twenty)
    ib = np.empty(15 * P + 1, np.int64)
    fb = np.empty(11 * P + 6 * R)
    code = ib[: 2 * P]
    ptr = ib[2 * P : 4 * P + 1]
    ptr[:] = 0
    pu = ib[4 * P + 1 : 5 * P + 1]
    pd = ib[5 * P + 1 : 6 * P + 1]
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
    plist = ib[6 * P + 1 : 8 * P + 1]  # each port's pairs, in pair order
    fill = ib[8 * P + 1 : 8 * P + 1 + L]
    fill[:] = ptr[:L]
    cap = fb[:L]
    used = fb[2 * P : 2 * P + L]
    used[:] = 0.0
    nflows = fb[4 * P : 4 * P + L]
    nflows[:] = 0.0
    share = fb[6 * P : 6 * P + L]
    caps = fb[8 * P : 9 * P]
    for i in range(L):
        w = code[i] // 2
        cap[i] = up[w] if code[i] % 2 == 0 else down[w]
    n_rup = fb[11 * P : 11 * P + R]
    n_rdown = fb[11 * P + R : 11 * P + 2 * R]
    n_rup[:] = 0.0
    n_rdown[:] = 0.0
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
    used_rup = fb[11 * P + 2 * R : 11 * P + 3 * R]
    used_rdown = fb[11 * P + 3 * R : 11 * P + 4 * R]
    used_rup[:] = 0.0
    used_rdown[:] = 0.0
    share_rup = fb[11 * P + 4 * R : 11 * P + 5 * R]
    share_rdown = fb[11 * P + 5 * R : 11 * P + 6 * R]
    _shares(rup, used_rup, n_rup, share_rup)
    _shares(rdown, used_rdown, n_rdown, share_rdown)
    _shares(cap, used, nflows, share)
    # the ports in an indexed heap by (key, code), ties to the lower worker, its upload first. A
    # port's key is its share when last placed: shares only rise as pairs freeze, so a key is a
    # lower bound, and a port is placed again only when it comes to the top with its key behind
    # its share (a share that fell, by rounding, is placed at once)
    heap = ib[10 * P + 1 : 10 * P + 1 + L]
    hpos = ib[12 * P + 1 : 12 * P + 1 + L]
    key = fb[9 * P : 9 * P + L]
    key[:] = share
    for i in range(L):
        heap[i] = i
        hpos[i] = i
    for i in range(L // 2 - 1, -1, -1):
        _down(heap, hpos, key, code, heap[i], L)
    used_bp = 0.0
    by_cap = np.argsort(caps) if capped else np.empty(0, np.int64)
    n_cap = P if capped else 0
    frozen = np.zeros(P, np.bool_)
    rlist = ib[14 * P + 1 : 15 * P + 1]
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
def fill_classes(qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, classes, capped, bp, rack, rup, rdown, loc, pb):
    """Strict priority between classes (class 0 first): each class shares, max-min fairly, the
    port (backplane, rack link) capacity the classes before it left. ``qs[:P]`` are the active
    pairs' slots (see :func:`fill_pairs`)."""
    if classes == 1:
        fill_pairs(qs, P, psrc, pdst, pn, pcap, up, down, prate, capped, bp, rack, rup, rdown, loc, pb)
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
        fill_pairs(mine, m, psrc, pdst, pn, pcap, up_r, down_r, prate, capped, bp, rack, rup_r, rdown_r, loc, pb)
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
def account(qs, P, psrc, pdst, pn, prate, pb, used, counted, nb):
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
def repair_rates(
    changed,
    touched,
    P,
    psrc,
    pdst,
    pn,
    pcap,
    up,
    down,
    prate,
    pb,
    capped,
    rack,
    none,
    loc,
    heads,
    links,
    inS,
    mark,
    stamp,
    used,
    counted,
    nb,
    limit,
    budget,
):
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
        fill_pairs(S, m, psrc, pdst, pn, pcap, up_r, down_r, prate, capped, np.inf, rack, none, none, loc, pb)
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
def pairs_moved(moves, heads, links, back, prate, pb, used, counted, nb, inuse):
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
            _link(q, a, b, heads, links, back, inuse)
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
def relink(qs, P, psrc, pdst, heads, links, back, inuse):
    """The ports' lists of pairs and ``inuse[0]`` (see :func:`pairs_moved`) made afresh from the
    ``P`` active pairs ``qs[:P]``: for taking up the repair's bookkeeping again after solves that
    did not keep it."""
    heads[:] = -1
    inuse[0] = 0
    for k in range(P):
        q = qs[k]
        _link(q, psrc[q], pdst[q], heads, links, back, inuse)


@kernel(cache=True)
def _link(q, a, b, heads, links, back, inuse):
    """Pair ``q`` (``a`` to ``b``) first in its upload's and its download's lists."""
    for p, at in ((2 * a, 2 * q), (2 * b + 1, 2 * q + 1)):
        nx = heads[p]
        if nx < 0:
            inuse[0] += 1
        links[at] = nx
        back[at] = -1
        if nx >= 0:
            back[2 * nx + at % 2] = at
        heads[p] = q
