"""The states of a task in a simulation; the moves between them are in :mod:`.engine`."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["TaskState", "WAITING", "QUEUED", "RUNNING", "DONE"]


class TaskState(IntEnum):
    """Where a task stands. Ordered: ``status >= RUNNING`` means started."""

    #: not assigned to a worker (never yet, or its worker was lost, or a re-plan took it back)
    WAITING = 0
    #: assigned to a worker; waits for its inputs to be computed and to arrive there, then for cores
    QUEUED = 1
    #: running on its worker
    RUNNING = 2
    #: finished; its output is somewhere (or was delivered to the client)
    DONE = 3


WAITING, QUEUED, RUNNING, DONE = TaskState.WAITING, TaskState.QUEUED, TaskState.RUNNING, TaskState.DONE
