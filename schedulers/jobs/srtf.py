"""``srtf``: shortest remaining time first, preemptive; durations known (the oracle).

On every arrival and finish the jobs are ranked by the seconds they have left (ties by arrival),
and the workers go to them in that order; a running job that a shorter one displaces is preempted,
and a job that does not fit is passed over for the next that does (backfilling). It needs every
job's duration, which no real scheduler has: the oracle against which the Tiresias paper (Gu et al.,
NSDI'19) measures LAS and Gittins. ``two_d=True`` ranks by remaining worker-seconds instead (the
paper's 2D variant, SRSF).
"""

from __future__ import annotations

from taskflow.errors import SchedulerError
from taskflow.jobscheduling import JobScheduler, register_job_scheduler

__all__ = ["SRTF"]


@register_job_scheduler
class SRTF(JobScheduler):
    """Shortest remaining time first, with preemption (knows durations)."""

    name = "srtf"
    summary = "shortest remaining time first, preemptive; knows every duration (the oracle)"
    preemptive = True
    knows_durations = True
    option_names = ("two_d",)

    def __init__(self, **options):
        super().__init__(**options)
        self.two_d = options.get("two_d", False)
        if not isinstance(self.two_d, bool):
            raise SchedulerError(f"two_d must be True or False, got {self.two_d!r}")

    def decide(self, event, view) -> list:
        """Rank by remaining seconds (or worker-seconds) and give workers in that order.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View
        """

        def key(j):
            left = j.remaining * (j.job.workers if self.two_d else 1)
            return (left, j.job.arrival, j.job.id)

        return self.greedy(sorted(view.jobs, key=key), view, preempt=True)
