"""The interface between the simulator and a network model, and the flow it moves.

A *flow* carries one producer's output from one worker to another. It first spends the pair's
latency (no bandwidth used), then its bytes move. Consumers wait for a byte count (their edge's
size): a consumer needing fewer bytes than the flow carries is released when its share has arrived.

The simulator calls :meth:`Network.start`, :meth:`~Network.wait`, :meth:`~Network.extend` and
:meth:`~Network.abort`. The network reports back through two callbacks given to it:
``on_arrival(flow, (bytes, consumer, token))`` when a consumer's bytes are there, and
``on_complete(flow)`` when the flow has carried everything (consumers waiting for the whole flow are
then reported through ``on_arrival``, after ``on_complete``). A network learns the time in one of two
ways: it puts its events on the simulator's clock (``schedule(time, kind, payload)`` with a
:class:`~taskflow.simulator.events.EventKind` ``BYTES_ARRIVED`` or ``FLOW_COMPLETE``; the simulator
hands each back through :meth:`~Network.fire`), or it keeps its own clock, tells the simulator when
it next needs attention (:meth:`~Network.next_time`) and is moved there (:meth:`~Network.advance`).
"""

from __future__ import annotations

import math

__all__ = ["Flow", "Network"]


class Flow:
    """One output on its way from ``src`` to ``dst`` (worker indices); ``total`` bytes."""

    __slots__ = (
        "id",
        "task",
        "src",
        "dst",
        "total",
        "start",
        "t_active",
        "thresholds",
        "done",
        "finish",
        "aborted",
        "slot",
        "base",
        "complete",
        "cls",
    )

    def __init__(self, fid, task, src, dst, total, start, latency):
        self.id = fid
        self.task = task
        self.src = src
        self.dst = dst
        self.total = total
        self.start = start
        self.t_active = start + latency
        self.thresholds = []  # heap of (bytes, seq, consumer, token)
        self.done = 0.0
        self.finish = None
        self.aborted = False
        self.slot = -1  # the network's own number for it (maxmin: its row of the flows' arrays)
        self.base = 0.0  # bytes of the output already at the destination before this flow
        self.complete = False
        self.cls = 0  # priority class (0 first), from the consumer that started the flow


class Network:
    """Base class of the network models; see the module docstring."""

    name = "base"

    def __init__(self, cluster, schedule, on_arrival, on_complete):
        self._schedule = schedule
        self.on_arrival = on_arrival
        self.on_complete = on_complete

    def start(self, flow: Flow, now: float) -> None:  # pragma: no cover - abstract
        """``flow`` begins (its latency phase first)."""
        raise NotImplementedError

    def wait(self, flow: Flow, nbytes: float, consumer: int, token: int, now: float) -> None:  # pragma: no cover
        """``consumer`` (with its assignment ``token``) needs the first ``nbytes`` of ``flow``."""
        raise NotImplementedError

    def extend(self, flow: Flow, total: float, now: float) -> None:  # pragma: no cover - abstract
        """``flow`` must carry ``total`` bytes instead (a later consumer needs more)."""
        raise NotImplementedError

    def abort(self, flow: Flow, now: float) -> None:  # pragma: no cover - abstract
        """``flow`` stops (its source or destination was lost); nobody is told of it again."""
        raise NotImplementedError

    def fire(self, kind, payload, now: float) -> None:
        """An event this network put on the simulator's clock is due."""
        raise RuntimeError(f"network {self.name!r} scheduled no events, got {kind!r}")

    def next_time(self) -> float:
        """When this network next needs :meth:`advance` (inf: never, its events are on the clock)."""
        return math.inf

    def advance(self, now: float) -> int:
        """Move to ``now`` and report what became due; return how many reports were made."""
        return 0

    def stats(self) -> dict:
        """What this network counted of its work (the ``maxmin`` model: its rate solves)."""
        return {}
