"""The words a job scheduler (:mod:`taskflow.jobscheduling`) hears and says: the events in (a job
arrived or finished, a round ended, a worker lost or added) and the decisions out (start a job on
workers, resize it, preempt it). The simulator and the real runner make the events and carry out
the decisions; the scheduler keeps no clock of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["Arrived", "Finished", "Tick", "WorkerLost", "WorkerAdded", "Start", "Resize", "Preempt"]


@dataclasses.dataclass(frozen=True)
class Arrived:
    """Event: ``job`` arrived at ``time``."""

    time: float
    job: Any  # a taskflow.jobscheduling.Job (which imports this module)


@dataclasses.dataclass(frozen=True)
class Finished:
    """Event: the job ``job_id`` finished at ``time`` (its workers are free), having run
    ``attained`` worker-seconds."""

    time: float
    job_id: str
    attained: float = 0.0


@dataclasses.dataclass(frozen=True)
class Tick:
    """Event: a round (a lease) ended at ``time``: a preemptive scheduler decides again."""

    time: float


@dataclasses.dataclass(frozen=True)
class WorkerLost:
    """Event: ``worker`` was lost at ``time``; ``job_id``, the job that held it (stopped, waiting
    again), or None."""

    time: float
    worker: int
    job_id: str | None = None


@dataclasses.dataclass(frozen=True)
class WorkerAdded:
    """Event: ``worker`` joined (or came back) at ``time``, free."""

    time: float
    worker: int


@dataclasses.dataclass(frozen=True)
class Start:
    """Decision: run the waiting job ``job_id`` on ``workers``; with ``beside``, on the workers of
    that running job, the two taking turns (Crossover: one computes while the other communicates)."""

    job_id: str
    workers: tuple
    beside: str | None = None


@dataclasses.dataclass(frozen=True)
class Resize:
    """Decision: the running elastic job ``job_id`` goes on on ``workers`` (some of its own and
    free ones), within its sizes; it restores its checkpoint there."""

    job_id: str
    workers: tuple


@dataclasses.dataclass(frozen=True)
class Preempt:
    """Decision: stop the running job ``job_id`` at once (checkpointed; it waits again)."""

    job_id: str
