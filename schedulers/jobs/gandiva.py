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
**Grow-shrink** (Section 3.4): an elastic job (``min_workers``/``max_workers``) grows onto
workers nobody waits for, and shrinks back to the workers it asks for when jobs wait (a resize
restores its checkpoint). Gandiva's migration is not modelled.

Durations are not needed.
"""

from __future__ import annotations

import dataclasses

from taskflow.jobscheduling import (
    Finished,
    JobScheduler,
    Preempt,
    Resize,
    Start,
    Tick,
    check_positive,
    register_job_scheduler,
)

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
        """Shrink grown jobs for those that wait; start who fits; at the end of a round, the longest
        waiting take the place of the longest running; grow elastic jobs onto idle workers.

        Parameters
        ----------
        event : Arrived, Finished, Tick, WorkerLost or WorkerAdded
        view : View
        """
        if isinstance(event, Finished):
            self._since.pop(event.job_id, None)
        shrink = self._shrink(view) if view.waiting else []
        if shrink:  # what the shrinks leave is free for the starts below (the ledger resizes first)
            smaller = {d.job_id: d.workers for d in shrink}
            left = {w for j in view.running if j.job.id in smaller for w in j.workers} - {
                w for ws in smaller.values() for w in ws
            }
            view = dataclasses.replace(
                view,
                free=tuple(sorted(set(view.free) | left)),
                jobs=tuple(j._replace(workers=smaller[j.job.id]) if j.job.id in smaller else j for j in view.jobs),
            )
        if isinstance(event, Tick) and view.waiting:
            waiting = sorted(view.waiting, key=lambda j: (-j.waited, j.job.arrival, j.job.id))
            running = sorted(
                view.running, key=lambda j: (-self._since.get(j.job.id, view.now), j.job.arrival, j.job.id)
            )
            fresh = [j for j in running if self._since.get(j.job.id, view.now) > view.now - self.round]
            out = self.greedy(fresh + waiting + running[len(fresh) :], view, preempt=True)
        else:
            out = self.greedy(view.waiting, view, preempt=False)
        for d in out:
            if isinstance(d, Start):
                self._since[d.job_id] = view.now
        return shrink + out + self._grow(view, out)

    @staticmethod
    def _shrink(view) -> list:
        """Elastic jobs grown past the workers they ask for, back to those (jobs wait)."""
        return [
            Resize(j.job.id, tuple(sorted(j.workers))[: j.job.workers])
            for j in view.running
            if len(j.workers) > j.job.workers and j.beside is None
        ]

    @staticmethod
    def _grow(view, out) -> list:
        """Elastic jobs onto the workers nobody waits for, in arrival order, up to their most."""
        started = {d.job_id for d in out if isinstance(d, Start)}
        if any(j.job.id not in started for j in view.waiting):
            return []
        stopped = {d.job_id for d in out if isinstance(d, Preempt)}
        idle = sorted(set(view.free) - {w for d in out if isinstance(d, Start) for w in d.workers})
        grow = []
        for j in view.running:
            more = j.job.sizes[1] - len(j.workers)
            if idle and more > 0 and j.job.id not in stopped and j.beside is None:
                grow.append(Resize(j.job.id, tuple(sorted(j.workers)) + tuple(idle[:more])))
                idle = idle[more:]
        return grow
