"""``gittins``: Tiresias' discretized Gittins index, preemptive; the distribution of job sizes known.

As :mod:`schedulers.jobs.las` (queues by attained worker-seconds, preemption on arrivals, finishes
and every ``round``), but within a queue the job with the highest Gittins index runs first. For a
job that has attained ``a`` worker-seconds, with ``S`` a job's service drawn from the distribution
and ``D`` the service left to the next threshold (the queue's quantum),

    G(a) = P(S - a <= D | S > a) / E[min(S - a, D) | S > a]:

the chance of finishing within the quantum per worker-second spent on it. The distribution is
``distribution`` (worker-seconds of past jobs), and grows with every job that finishes; with none
yet every index is equal and the order is LAS's. Durations of the jobs themselves are not read.
Gu et al., NSDI'19, Section 4.2 (after Gittins, "Multi-armed bandit allocation indices").
"""

from __future__ import annotations

import bisect

import numpy as np

from taskflow.errors import SchedulerError
from taskflow.jobscheduling import Finished, register_job_scheduler

from .las import LAS

__all__ = ["Gittins"]


@register_job_scheduler
class Gittins(LAS):
    """Discretized Gittins index within LAS' queues (Tiresias)."""

    name = "gittins"
    summary = "Tiresias' discretized Gittins index: queues by worker-seconds run, the likeliest to finish first"
    option_names = LAS.option_names + ("distribution",)

    def __init__(self, **options):
        super().__init__(**options)
        dist = options.get("distribution", ())
        try:
            self._sizes = sorted(float(x) for x in dist)
        except (TypeError, ValueError):
            raise SchedulerError("distribution must be worker-seconds of past jobs (numbers)") from None
        if any(not x > 0 for x in self._sizes):
            raise SchedulerError("distribution must be worker-seconds of past jobs, each > 0")
        self._cum = None  # prefix sums of the sizes, rebuilt after a size is learnt

    def index(self, a: float, quantum: float) -> float:
        """The Gittins index of a job that has attained ``a`` worker-seconds with ``quantum`` to
        its next threshold (0 where no known job was ever larger than ``a``).

        Parameters
        ----------
        a, quantum : float
        """
        sizes = self._sizes
        i = bisect.bisect_right(sizes, a)
        if i == len(sizes):
            return 0.0
        if self._cum is None:
            self._cum = np.concatenate(([0.0], np.cumsum(sizes)))
        j = bisect.bisect_right(sizes, a + quantum, lo=i)
        done = j - i  # the sizes in (a, a + quantum]: finished within the quantum
        spent = float(self._cum[j] - self._cum[i]) - a * done + (quantum * (len(sizes) - j) if j < len(sizes) else 0.0)
        return done / spent if spent > 0 else 0.0

    def key(self, j) -> tuple:
        """Its queue, then the highest index, then its arrival."""
        q = self.queue(j)
        a = j.attained - self._base.get(j.job.id, 0.0)
        nxt = self.thresholds[q] if q < len(self.thresholds) else float("inf")
        return (q, -self.index(j.attained, nxt - a), j.job.arrival, j.job.id)

    def decide(self, event, view) -> list:
        """LAS' queues, the highest Gittins index first within each; learns each finished job's size.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View
        """
        if isinstance(event, Finished) and event.attained > 0:
            bisect.insort(self._sizes, float(event.attained))
            self._cum = None
        return super().decide(event, view)
