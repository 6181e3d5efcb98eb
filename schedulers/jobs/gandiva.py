"""``gandiva``: Gandiva's time-slicing and packing (Xiao et al., "Gandiva: Introspective Cluster
Scheduling for Deep Learning", OSDI'18, Sections 3.1-3.3).

Time-slicing: when jobs wait for workers, the cluster is oversubscribed and jobs take turns, a
``round`` (Gandiva's time slice) at a time: at the end of each round the jobs that have waited
longest start, displacing the running jobs that have held their workers longest (suspended at
an iteration boundary, checkpointed, resumed later: round robin); a job that started within the
last round keeps its workers for a whole slice. A job that does not fit is
passed over. Between rounds, arrivals and finishes start waiting jobs in arrival order where
they fit; no one is preempted then.

Packing: with an interference table (option ``interference``), a job goes where it and the jobs
already on those nodes slow each other least (``interference-aware`` placement); without one,
consolidated (the fewest nodes). Gandiva packs jobs onto one GPU as well; here a worker holds one
job at a time, and packing is per node (jobs sharing a node slow each other as the table says).
Gandiva's migration and grow-shrink are not modelled.

Durations are not needed.
"""

from __future__ import annotations

from taskflow.jobscheduling import Finished, JobScheduler, Start, Tick, check_positive, register_job_scheduler

__all__ = ["Gandiva"]


@register_job_scheduler
class Gandiva(JobScheduler):
    """Round-robin time-slicing when oversubscribed; interference-aware packing."""

    name = "gandiva"
    summary = "Gandiva's time-slicing (round robin while jobs wait) and interference-aware packing"
    preemptive = True
    option_names = ("round",)

    def __init__(self, **options):
        if "placement" not in options and options.get("interference") is not None:
            options = {**options, "placement": "interference-aware"}
        super().__init__(**options)
        self.round = check_positive("round", options.get("round", 60.0))
        self._since: dict = {}  # job -> when it last started

    def decide(self, event, view) -> list:
        """Start who fits; at the end of a round, the longest waiting take the place of the longest
        running.

        Parameters
        ----------
        event : Arrived, Finished or Tick
        view : View
        """
        if isinstance(event, Finished):
            self._since.pop(event.job_id, None)
        if isinstance(event, Tick) and view.waiting:
            waiting = sorted(view.waiting, key=lambda j: (-j.waited, j.job.arrival, j.job.id))
            running = sorted(view.running, key=lambda j: (-self._since.get(j.job.id, view.now), j.job.arrival,
                                                          j.job.id))
            fresh = [j for j in running if self._since.get(j.job.id, view.now) > view.now - self.round]
            out = self.greedy(fresh + waiting + running[len(fresh):], view, preempt=True)
        else:
            out = self.greedy(view.waiting, view, preempt=False)
        for d in out:
            if isinstance(d, Start):
                self._since[d.job_id] = view.now
        return out
