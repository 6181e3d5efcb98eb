"""The compiled loops the max-min network (:mod:`.maxmin`) runs at each event: :func:`solve` and
:func:`refresh` find the flows' rates again (the sharing itself is :mod:`._fairshare`'s) and the
time of the next flow event; :func:`step` moves the flows forward and lists those due. The
flows' kernels (:mod:`._flows`) call them, from the network model and the compiled loops alike.
"""

from __future__ import annotations

import numpy as np

from ...jit import kernel
from ._fairshare import account, fill_classes, pairs_moved, relink, repair_rates

__all__ = ["solve", "refresh", "step", "WHOLE", "TRY_REPAIR", "AFRESH"]

#: how :func:`refresh` solves: all rates, keeping the bookkeeping; trying a repair; all rates, the
#: bookkeeping made afresh (it was not kept since the last solve)
WHOLE, TRY_REPAIR, AFRESH = 0, 1, 2


@kernel(cache=True)
def solve(
    nf,
    pair,
    done,
    nxt,
    rates,
    qs,
    P,
    psrc,
    pdst,
    pcls,
    pn,
    pcap,
    up,
    down,
    prate,
    t_last,
    recompute,
    classes,
    capped,
    bp,
    rack,
    rup,
    rdown,
    loc,
    pb,
):
    """Solve every rate again (if the flow set changed), keeping none of the repair's bookkeeping;
    return the time of the next flow event.

    Parameters
    ----------
    nf, pair, done, nxt, rates
        The active flows: how many, and per slot its pair, bytes carried, next target, rate.
    qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, t_last, recompute, classes, capped, bp, rack, rup, rdown, loc, pb
        The active pairs and the ports, as :func:`fill_classes` takes them; ``t_last`` the time the
        flows were last moved to; ``recompute`` whether the flow set changed.
    """
    if recompute:
        fill_classes(qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, classes, capped, bp, rack, rup, rdown, loc, pb)
    return _next_event(nf, pair, done, nxt, rates, prate, t_last)


@kernel(cache=True)
def refresh(
    nf,
    pair,
    done,
    nxt,
    rates,
    qs,
    P,
    psrc,
    pdst,
    pcls,
    pn,
    pcap,
    up,
    down,
    prate,
    t_last,
    recompute,
    classes,
    capped,
    bp,
    rack,
    rup,
    rdown,
    loc,
    pb,
    changed,
    moves,
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
):
    """Recompute the rates (if the flow set changed) keeping the repair's bookkeeping (``moves``:
    see :func:`pairs_moved`); return the time of the next flow event and how the rates were found:
    1 repaired, 0 a repair given up, -1 no repair tried. ``mode`` :data:`TRY_REPAIR`: only the rates
    a change can move are solved again (:func:`repair_rates`), where the ports carry few pairs each
    or the pairs are many, unless that set is larger than a third of them; :data:`WHOLE`: a whole
    solve; :data:`AFRESH`: a whole solve, the bookkeeping made afresh (it was not kept since the
    last solve).

    Parameters
    ----------
    nf, pair, done, nxt, rates, qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, t_last, recompute, classes
        As :func:`solve` takes them.
    capped, bp, rack, rup, rdown, loc, pb
        As :func:`solve` takes them.
    changed, moves, heads, links, back, inS, mark, stamp, used, counted, nb, inuse
        The repair's bookkeeping (:func:`repair_rates`, :func:`pairs_moved`).
    mode : int
        :data:`WHOLE`, :data:`TRY_REPAIR` or :data:`AFRESH`.
    """
    how = -1
    if mode == AFRESH:
        relink(qs, P, psrc, pdst, heads, links, back, inuse)
        touched = moves[:0]
    else:
        touched = pairs_moved(moves, heads, links, back, prate, pb, used, counted, nb, inuse)
    if recompute or mode == AFRESH:
        # a repair pays where the ports carry few pairs each (a change reaches few others), or
        # where a whole solve is large; between, on a few workers joined by many pairs, it does not
        if recompute and mode == TRY_REPAIR and (P <= 2 * inuse[0] or P >= 4096):
            how = (
                1
                if repair_rates(
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
                    rup,
                    loc,
                    heads,
                    links,
                    inS,
                    mark,
                    stamp,
                    used,
                    counted,
                    nb,
                    max(8, P // 3),
                    4 * max(64, P),
                )
                else 0
            )
        if how != 1:
            if recompute:
                fill_classes(
                    qs, P, psrc, pdst, pcls, pn, pcap, up, down, prate, classes, capped, bp, rack, rup, rdown, loc, pb
                )
            account(qs, P, psrc, pdst, pn, prate, pb, used, counted, nb)
    return _next_event(nf, pair, done, nxt, rates, prate, t_last), how


@kernel(cache=True)
def _next_event(nf, pair, done, nxt, rates, prate, t_last):
    """The ``nf`` active flows take their pairs' rates; the time the first of them reaches its next
    target."""
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
    return best


@kernel(cache=True)
def step(nf, done, total, nxt, rates, dt, eps, due, now):
    """Move the ``nf`` active flows (slots ``0 .. nf - 1``) ``dt`` seconds forward; list in ``due``
    the flows whose next target is reached (within ``eps`` relative, or so close that no
    representable time lies before it); return how many.

    Parameters
    ----------
    nf, done, total, nxt, rates
        The active flows: how many, and per slot its bytes carried, bytes in all, next target, rate.
    dt, eps, now : float
        Seconds to move; the relative tolerance; the time moved to.
    due : numpy.ndarray
        Receives the slots of the flows due.
    """
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
