"""``fifo``: first come, first served, never preempted.

Jobs start in the order they arrived; the first that waits and does not fit in the free workers
holds every later one back (no backfilling: strict arrival order), as the FIFO baseline of Tiresias
(Gu et al., NSDI'19) and Gandiva (Xiao et al., OSDI'18) runs. Decides on arrivals and finishes.
"""

from __future__ import annotations

from taskflow.jobscheduling import JobScheduler, Start, register_job_scheduler

__all__ = ["FIFO"]


@register_job_scheduler
class FIFO(JobScheduler):
    """First come, first served; the head of the queue blocks the rest."""

    name = "fifo"
    summary = "first come, first served; no preemption, no backfilling"

    def decide(self, event, view) -> list:
        """Start waiting jobs in arrival order while the first of them fits.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View
        """
        out, free, placed = [], list(view.free), view.running
        for j in view.waiting:
            if j.job.workers > len(free):
                break
            ws = self.where(j.job, free, view, placed)
            out.append(Start(j.job.id, ws))
            placed = placed + [j._replace(running=True, workers=ws)]
            free = [w for w in free if w not in set(ws)]
        if self.crossover is not None:  # the rest on running jobs' workers, taking turns
            out += self.pair_up([j for j in view.waiting if j.job.id not in {d.job_id for d in out}], view.running)
        return out
