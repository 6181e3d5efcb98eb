"""``las``: Tiresias' discretized two-dimensional least-attained-service (2D-LAS), preemptive.

A job's attained service is the worker-seconds it has held (workers x seconds: the two dimensions;
a restore after a preemption, and a wait for the job before it to drain, count as held).
``thresholds`` (worker-seconds, ascending) cut it into queues: queue 0 holds the jobs below the first
threshold, queue ``k`` those past the ``k``-th. Workers go to queue 0 first, then 1, ...; within a
queue, first come first served; a running job displaced by jobs of a lower queue is preempted, and
a job that does not fit is passed over (backfilling). Decisions are taken on arrivals, finishes and
every ``round`` seconds (the lease, when jobs cross a threshold), so a job is not preempted for
every second of service, as continuous LAS would. The starvation guard (``promote``): a job that
has waited ``promote`` times as long as it last ran goes back to queue 0.

Durations are not needed: the scheduler sees attained service alone. Gu et al., "Tiresias: A GPU
Cluster Manager for Distributed Deep Learning", NSDI'19, Section 4.
"""

from __future__ import annotations

from taskflow.errors import SchedulerError
from taskflow.jobscheduling import Arrived, Finished, JobScheduler, check_positive, register_job_scheduler

__all__ = ["LAS"]


@register_job_scheduler
class LAS(JobScheduler):
    """Discretized 2D-LAS with a starvation guard (Tiresias)."""

    name = "las"
    summary = "Tiresias' discretized 2D least attained service: queues by worker-seconds run, preemptive"
    preemptive = True
    option_names = ("thresholds", "round", "promote")

    def __init__(self, **options):
        super().__init__(**options)
        th = options.get("thresholds", (3600.0,))
        try:
            th = tuple(check_positive("a threshold", float(t)) for t in th)
        except (TypeError, ValueError):
            raise SchedulerError(f"thresholds must be worker-seconds, ascending, got {th!r}") from None
        if list(th) != sorted(set(th)):
            raise SchedulerError(f"thresholds must be worker-seconds, ascending, got {th!r}")
        self.thresholds = th
        self.round = check_positive("round", options.get("round", 60.0))
        promote = options.get("promote")
        self.promote = None if promote is None else check_positive("promote", promote)
        self._base: dict = {}  # job -> attained service when it was last put back in queue 0

    def queue(self, j) -> int:
        """The queue of a :class:`~taskflow.jobscheduling.JobState` (0: the least served)."""
        a = j.attained - self._base.get(j.job.id, 0.0)
        return sum(1 for t in self.thresholds if a >= t)

    def _promote(self, view) -> None:
        if self.promote is None:
            return
        for j in view.waiting:
            if j.last_run > 0 and j.waited >= self.promote * j.last_run and self.queue(j) > 0:
                self._base[j.job.id] = j.attained

    def key(self, j) -> tuple:
        """How ``j`` ranks (smaller first): its queue, then its arrival."""
        return (self.queue(j), j.job.arrival, j.job.id)

    def decide(self, event, view) -> list:
        """Queues by attained service, first come first served within each; preempt to fit.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View
        """
        if isinstance(event, Finished):
            self._base.pop(event.job_id, None)
        elif isinstance(event, Arrived):
            self._base.pop(event.job.id, None)
        self._promote(view)
        return self.greedy(sorted(view.jobs, key=self.key), view, preempt=True)
