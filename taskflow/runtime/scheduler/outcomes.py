"""What the adaptive scheduler measured of the runs of one kind of work, compared: which choice's
runs were shortest (:func:`shortest_measured`), whether any was measured, how far runs of one
choice differ among themselves, and whether the workers' speeds drifted from those a decision
used."""

from __future__ import annotations

import math
import statistics

from ..predict import CHOICES, DASK

__all__ = ["shortest_measured", "any_measured", "spread_of", "drifted", "MEASURED_MARGIN"]

#: how much shorter (a fraction) another choice's measured runs must be for it to replace Dask's own
MEASURED_MARGIN = 0.05


def any_measured(runs: dict, choices=CHOICES) -> bool:
    """Whether a run of the same work was measured under one of ``choices``.

    Parameters
    ----------
    runs : dict
        Choice -> the makespans measured under it.
    choices : iterable of str
    """
    return any(runs.get(c) for c in choices)


def spread_of(secs) -> float:
    """How far runs of one choice differ among themselves: twice their median absolute deviation
    over their median (two runs: their difference over their mean), at most 1; one run far off
    the others does not widen it.

    Parameters
    ----------
    secs : list of float
    """
    mid = statistics.median(secs)
    return min(1.0, 2.0 * statistics.median(abs(x - mid) for x in secs) / mid) if mid > 0 else 0.0


def shortest_measured(runs: dict, choices=CHOICES) -> tuple | None:
    """``(choice, median seconds)``: of ``choices``, the one whose measured runs (``runs``: choice
    -> makespans) have the shortest median, Dask's own unless another is at least
    :data:`MEASURED_MARGIN` shorter; None where none was measured.

    Parameters
    ----------
    runs : dict
    choices : iterable of str
    """
    medians = {c: statistics.median(runs[c]) for c in choices if runs.get(c)}
    if not medians:
        return None
    best = min(medians, key=medians.get)
    if DASK in medians and medians[best] > (1.0 - MEASURED_MARGIN) * medians[DASK]:
        best = DASK
    return best, medians[best]


def drifted(used: dict, learned: dict, drift: float) -> bool:
    """Whether the workers' speeds learned now differ from those a decision used by more than
    ``drift`` on some worker, relative to each other: the learned speeds are relative (about 1)
    and the declared ones need not be, so both are compared after scaling the learned ones by
    the geometric mean of used / learned over the workers in both.

    Parameters
    ----------
    used, learned : dict
        Worker name -> speed.
    drift : float
    """
    both = [w for w, s in used.items() if s > 0 and learned.get(w, 0) > 0]
    if len(both) < 2:
        return False
    k = math.exp(statistics.fmean(math.log(used[w] / learned[w]) for w in both))
    return any(abs(learned[w] * k / used[w] - 1.0) > drift for w in both)
