"""``sjf``: the smallest job first, by the workers it asks for; never preempted.

Waiting jobs start in increasing order of the workers they ask for (ties by arrival), each that
fits in what is free (backfilling); a running job is never stopped. With durations unknown, the
size in workers is what a scheduler sees of a job at its arrival ("smallest job first" of the
Tiresias paper's baselines, Gu et al., NSDI'19). Decides on arrivals and finishes.
"""

from __future__ import annotations

from taskflow.jobscheduling import JobScheduler, register_job_scheduler

__all__ = ["SJF"]


@register_job_scheduler
class SJF(JobScheduler):
    """Fewest workers first, no preemption."""

    name = "sjf"
    summary = "fewest workers first; no preemption"

    def decide(self, event, view) -> list:
        """Start waiting jobs, fewest workers first, each that fits.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View
        """
        order = sorted(view.jobs, key=lambda j: (j.job.workers, j.job.arrival, j.job.id))
        return self.greedy(order, view, preempt=False)
