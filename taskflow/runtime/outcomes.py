"""What the adaptive scheduler measured of the runs of one kind of work (:class:`Outcomes`, a
typed record), compared: which choice's runs were shortest (:meth:`Outcomes.shortest`), whether any
was measured, how far runs of one choice differ among themselves (:func:`spread_of`), and whether
the workers' speeds drifted from those a decision used (:func:`drifted`)."""

from __future__ import annotations

import dataclasses
import math
import statistics

from .predict import CHOICES, DASK

__all__ = [
    "Outcomes",
    "shortest_measured",
    "spread_of",
    "drifted",
    "MEASURED_MARGIN",
    "EARLY",
    "PROGRESS_POINTS",
    "progress_curve",
    "behind",
    "race_own_plan",
]

#: how much shorter (a fraction) another choice's measured runs must be for it to replace Dask's own
MEASURED_MARGIN = 0.05
#: the fraction of a try's tasks that must have finished before its progress is raced against the
#: choice measured shortest (the first tasks of a run are a poor guide to its length)
EARLY = 0.2
#: points of a run's progress curve: when each twentieth of its tasks had finished
PROGRESS_POINTS = 20


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


def progress_curve(r, points: int = PROGRESS_POINTS) -> list:
    """When (seconds since ``r`` began) each ``1 / points`` of its keys had finished: the ``i``-th
    of ``points`` values is when ``ceil((i + 1) * n / points)`` of its ``n`` keys had (keys found
    finished when its tasks arrived count as at its start).

    Parameters
    ----------
    r : GraphRun or RunRecord
    points : int
    """
    times = sorted(t - r.started for t in r.finished_at)
    return _curve(times, max(0, len(r.done) - len(times)), len(r.graph), points)


def _curve(times: list, early: int, n: int, points: int) -> list:
    """When each ``1 / points`` of ``n`` keys had finished, ``early`` of them at 0 and the others
    at ``times`` (sorted)."""
    out = []
    for i in range(points):
        k = math.ceil((i + 1) * max(1, n) / points) - early  # the k-th timed finish reaches that share
        t = times[min(k, len(times)) - 1] if k > 0 and times else 0.0
        out.append(max(0.0, t))
    return out


def race_own_plan(r, plan, since: float, best: float) -> None:
    """``r`` tries ``plan`` (of its unfinished keys, made ``since`` seconds after it began) against
    a choice measured at ``best`` seconds: it races the plan's own timeline (:attr:`AdaptiveState.reference`:
    when each share of its keys finishes in the plan), at the pace that ends the plan at ``best``
    (:attr:`AdaptiveState.pace`). A plan finishes keys in an order of its own (HEFT's upward rank, no slow
    worker's tail at the end), so Dask's own progress curve is no yardstick for it: a plan of a
    merge on a quarter-core worker finished each share up to 2.3x later than Dask's own runs, and
    ended 20% sooner. Against its own timeline, how far behind it runs projects its makespan: it
    is given up once that projection is ``WATCH`` longer than ``best``.

    Parameters
    ----------
    r : GraphRun or RunRecord
    plan : Schedule
    since : float
    best : float
    """
    times = sorted(since + float(f) for f in plan.finish)
    r.adapt.race(
        best / max(1e-9, since + float(plan.makespan)),
        _curve(times, max(0, len(r.graph) - len(times)), len(r.graph), PROGRESS_POINTS),
    )


def behind(r, elapsed: float) -> float:
    """How much longer ``r``, trying a choice, took to finish the share of its keys it has
    finished than the choice it races took for the same share (its :attr:`AdaptiveState.reference`
    progress curve: the median of that choice's measured runs, or a plan's own timeline,
    :func:`race_own_plan`): ``elapsed`` over the reference's
    time at that share, interpolated, and over the pace the try is expected to keep against it
    (:attr:`AdaptiveState.pace`: a hold on workers of a third of the cluster's speed starts three times
    slower than the whole cluster, whatever it saves at the end); 0 before :data:`EARLY` of its
    keys finished, or with no reference.

    Parameters
    ----------
    r : GraphRun or RunRecord
    elapsed : float
        Seconds since it began.
    """
    ref = r.adapt.reference
    share = len(r.done) / max(1, len(r.graph))
    if not ref or share < EARLY:
        return 0.0
    x = min(share, 1.0) * len(ref)  # ref[i] is at share (i + 1) / len(ref); share 0 at time 0
    i = min(int(x), len(ref))
    lo = ref[i - 1] if i > 0 else 0.0
    hi = ref[i] if i < len(ref) else ref[-1]
    at = lo + (hi - lo) * (x - i)
    return elapsed / (at * r.adapt.pace) if at > 0 else 0.0
