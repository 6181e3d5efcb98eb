"""What the adaptive scheduler measured of the runs of one kind of work (:class:`Outcomes`, a
typed record), compared: which choice's runs were shortest (:meth:`Outcomes.shortest`), whether any
was measured, how far runs of one choice differ among themselves (:func:`spread_of`), and whether
the workers' speeds drifted from those a decision used (:func:`drifted`)."""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..predict import CHOICES, DASK

__all__ = ["Outcomes", "shortest_measured", "spread_of", "drifted", "MEASURED_MARGIN"]

#: how much shorter (a fraction) another choice's measured runs must be for it to replace Dask's own
MEASURED_MARGIN = 0.05


@dataclasses.dataclass
class Outcomes:
    """What the adaptive scheduler measured of the runs of one kind of work.

    Parameters
    ----------
    measured : dict
        Choice (each of :data:`~taskflow.scheduling.CHOICES`) -> the makespans of the latest runs
        that took it from their start and kept it (seconds).
    predicted : dict
        Choice -> the guard's predicted makespan, from the first run of the work it guarded.
    curves : dict
        Choice -> the progress curves of those runs (:func:`.runs.progress_curve`).
    lost : set
        The choices given up in a race: not measured again as a close second.
    """

    measured: dict = dataclasses.field(default_factory=dict)
    predicted: dict = dataclasses.field(default_factory=dict)
    curves: dict = dataclasses.field(default_factory=dict)
    lost: set = dataclasses.field(default_factory=set)

    def __post_init__(self):
        for c in CHOICES:
            self.measured.setdefault(c, [])

    def any_measured(self, choices=CHOICES) -> bool:
        """Whether a run was measured under one of ``choices``."""
        return any(self.measured.get(c) for c in choices)

    def shortest(self, choices=CHOICES) -> tuple | None:
        """``(choice, median seconds)`` of the shortest measured of ``choices`` (:func:`shortest_measured`)."""
        return shortest_measured(self.measured, choices)

    def keep(self, choice: str, secs: float, curve: list | None, latest: int) -> None:
        """Keep a run that took ``choice`` (``secs`` long; its progress ``curve``, if any), with the
        ``latest`` runs of that choice."""
        kept = self.measured.setdefault(choice, [])
        kept.append(secs)
        del kept[:-latest]
        if curve is not None:
            curves = self.curves.setdefault(choice, [])
            curves.append(curve)
            del curves[:-latest]


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
