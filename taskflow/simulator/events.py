"""The kinds of event on the simulator's clock, in the order they are handled at one instant."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["EventKind"]


class EventKind(IntEnum):
    """What an event on the simulator's heap means. At the same instant, lower values go first: a
    worker's loss before anything it would have finished, finishes before arrivals, arrivals before
    the decisions that may use them."""

    #: a worker is lost (payload: worker index)
    FAIL = 0
    #: a task's run ends (payload: ``(task, run token)``)
    FINISH = 1
    #: some bytes of a flow reached a consumer (payload: ``(flow, (bytes, consumer, token))``; network)
    BYTES_ARRIVED = 2
    #: a flow carried all its bytes (payload: ``(flow, None)``; network)
    FLOW_COMPLETE = 3
    #: delayed decisions take effect (payload: decisions, or ``(function, argument)``)
    APPLY = 4
    #: the scheduler is invoked with the events that waited for it (payload: None)
    WAKE = 5
    #: a dynamic scheduler's periodic call, every ``scheduler.tick`` seconds (payload: None)
    TICK = 6
