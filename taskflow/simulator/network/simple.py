"""``simple``: every flow moves at its pair's bandwidth regardless of other flows.

``s`` bytes arrive ``latency + s / bandwidth(a, b)`` after the flow starts (the cost model exactly),
so arrival times are known when a flow starts and go on the simulator's clock. A consumer waiting
for the whole flow is released by the flow's completion event.
"""

from __future__ import annotations

from ..events import EventKind
from .base import Network

__all__ = ["SimpleNetwork"]

_ARRIVED, _COMPLETE = EventKind.BYTES_ARRIVED, EventKind.FLOW_COMPLETE


class SimpleNetwork(Network):
    """No contention; see the module docstring."""

    name = "simple"

    def __init__(self, cluster, schedule, on_arrival, on_complete):
        super().__init__(cluster, schedule, on_arrival, on_complete)
        self.inv = cluster.inv_bandwidth.tolist()

    def start(self, flow, now):
        flow.finish = flow.t_active + flow.total * self.inv[flow.src][flow.dst]
        self._schedule(flow.finish, _COMPLETE, (flow, None))

    def wait(self, flow, nbytes, consumer, token, now):
        if nbytes >= flow.total:
            flow.thresholds.append((nbytes, 0, consumer, token))
        else:  # bytes that arrived before this consumer asked are there now, not in the past
            t = flow.t_active + nbytes * self.inv[flow.src][flow.dst]
            self._schedule(t if t > now else now, _ARRIVED, (flow, (nbytes, consumer, token)))

    def extend(self, flow, total, now):
        # consumers that waited for the old total now arrive before the end
        waiting, flow.thresholds = flow.thresholds, []
        flow.total = total
        flow.finish = flow.t_active + total * self.inv[flow.src][flow.dst]
        self._schedule(flow.finish, _COMPLETE, (flow, None))
        for nbytes, _, consumer, token in waiting:
            self.wait(flow, nbytes, consumer, token, now)

    def abort(self, flow, now):
        flow.aborted = True

    def fire(self, kind, payload, now):
        flow, item = payload
        if kind == _ARRIVED:
            self.on_arrival(flow, item)
            return
        if flow.aborted or now < flow.finish:
            return  # aborted, or a stale completion of a flow that was extended since
        released, flow.thresholds = flow.thresholds, []
        self.on_complete(flow)
        for nbytes, _, consumer, token in released:
            self.on_arrival(flow, (nbytes, consumer, token))
