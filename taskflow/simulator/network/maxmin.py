"""``maxmin``: each worker's upload and download capacity shared max-min fairly among its flows.

With racks (``Cluster(racks=..., uplink=...)``), each rack's uplink and downlink are two more
shared ports: the flows leaving (entering) a rack share its uplink (downlink) max-min fairly too.

Each worker has an upload and a download capacity (its fastest link: the largest bandwidth of a pair
it belongs to) shared max-min fairly among its concurrent flows, each flow also capped at its pair's
bandwidth; rates are recomputed whenever a flow starts or ends (progressive filling, as in Estee's
max-min model). A single flow gets its pair's bandwidth, so ``maxmin`` is never faster than
``simple``.

Transfer priorities: a flow takes the priority class of the consumer that started it (the task's
``meta["priority"]``, higher first; 0 when absent). With more than one class, classes share
strictly in order: each class gets max-min fair shares of the port capacity the higher classes
left (work-conserving: a class with no active flow takes nothing). ``simple`` has no contention,
so priorities change nothing there.

Rates are solved again only where a change can move them (:func:`repair_rates`: the pairs whose flows
changed, then whichever pairs lose their bottleneck, checked against the max-min optimality
condition; a whole solve when that set grows past a third of the active pairs, with racks, a
backplane or priority classes, or below :data:`REPAIR` active pairs). The flows' rules (how
they start, wait, grow, stop, move and come due) are :mod:`._flows`' kernels over arrays, the
same ones the compiled simulation loops call, and the rates :mod:`._flowloop`'s; this network
model keeps its own clock (:meth:`MaxMinNetwork.next_time`, :meth:`MaxMinNetwork.advance`).
"""

from __future__ import annotations

import numpy as np

from ...jit import SMALL
from ._flows import earliest, net_abort, net_extend, net_start, net_start_wait, net_wait, pop_due, solve_rates
from ._flowstate import (
    DIRTY,
    F_SLOT,
    FLOWS,
    LAT_FLOW,
    LAT_SEQ,
    LAT_TIME,
    LOOP_NONE,
    NACTIVE,
    NFLOWS,
    NPAIRS,
    NTH,
    RATE,
    SLOT_FLOW,
    STALE,
    T_CONS,
    T_TOK,
    TRACKED,
    WAITS,
    WAITS_B,
    WHN,
    counted,
    flow_state,
    room,
)
from .base import Network

__all__ = ["MaxMinNetwork", "REPAIR", "DENSE"]

#: With at least this many active (source, destination) pairs, a change of the flow set solves
#: again only the rates it can move (:func:`repair_rates`); below it, and with 0, every solve is whole.
#: Read when a network is made.
REPAIR = 32

#: Above this many active pairs per worker (and below 4,096 pairs) no repair is tried: every port
#: carries many pairs, so a change reaches most of them; the repair's bookkeeping is not kept
#: either, and is made afresh when the pairs thin out again.
DENSE = 4


class MaxMinNetwork(Network):
    """Max-min fair sharing of each worker's upload and download capacity (its flows and rates
    over arrays, moved by compiled kernels where they are large); see the module docstring.

    Parameters
    ----------
    cluster : Cluster
    schedule, on_arrival, on_complete : callable
        As :class:`.base.Network` takes them.
    classes : int
        Transfer-priority classes.
    """

    name = "maxmin"

    def __init__(self, cluster, schedule, on_arrival, on_complete, classes: int = 1):
        super().__init__(cluster, schedule, on_arrival, on_complete)
        inv = cluster.inv_bandwidth
        with np.errstate(divide="ignore"):
            bw = np.where(inv > 0, 1.0 / np.where(inv > 0, inv, 1.0), np.inf)
        np.fill_diagonal(bw, 0.0)
        W = self.W = len(cluster)
        up = bw.max(axis=1) if W > 1 else np.ones(W)
        down = bw.max(axis=0) if W > 1 else np.ones(W)
        port = np.minimum(up[:, None], down[None, :])
        off = ~np.eye(W, dtype=bool)  # a worker sends nothing to itself
        capped = bool(np.any(bw[off] < port[off]))  # else no pair's own cap can bind
        backplane = float(cluster.backplane) if cluster.backplane is not None else np.inf
        racks = cluster.rack_count
        rup = np.full(racks, float(cluster.uplink) if racks else 0.0)
        self.classes = C = max(1, int(classes))
        i64 = np.int64
        #: the ports and fixed arrays the kernels read (the compiled loops take the same)
        self.P = (
            up,
            down,
            np.ascontiguousarray(cluster.rack_index if racks else np.zeros(W, i64)),
            rup,
            rup.copy(),
            np.full(2 * W, -1, i64),  # the solver's scratch: ports -> its own numbering
            np.full(2 * W, -1, i64),  # the repair's: each port's first pair, ...
            np.zeros(2 * W, i64),
            np.zeros(1, i64),
            np.zeros(2 * W),  # ... each port's bytes per second at the last solve
            np.ascontiguousarray(bw.reshape(-1)),  # each pair's own cap
            np.zeros(2 * W, i64),  # ... pairs whose bottleneck each port is
            np.zeros(1, i64),  # ... ports with a pair
            np.array([float(capped), backplane, float(C)]),
        )
        #: solve again only what a change moves (:func:`repair_rates`) from this many active pairs (0: never)
        self.repair = (
            REPAIR
            if C == 1 and not racks and backplane == np.inf and np.isfinite(up).all() and np.isfinite(down).all()
            else 0
        )
        self.C, self.X, flows, self.N = flow_state(W, C, cap=64)
        self.F = flows + LOOP_NONE
        self.out = np.zeros((0, 2), i64)
        self.flows = []  # each flow started, by its number (Flow.slot)
        self._pending = None  # a flow started, waiting for its first consumer to be started with it
        self._room()

    def _room(self, flows: int = 0, waits: int = 0):
        """Room for ``flows`` more flows and ``waits`` more consumers waiting (arrays doubled)."""
        self.F, self.N = room(self.C, self.F, self.N, max(flows, 1), max(waits, 1))
        rows = self.F[WAITS].shape[0] + self.N[SLOT_FLOW].shape[0]
        if self.out.shape[0] < rows:
            self.out = np.zeros((rows, 2), np.int64)
        self._cap = (self.F[FLOWS].shape[0], self.F[WAITS].shape[0], self.N[SLOT_FLOW].shape[0])
        # the kernels take tuples, whose arrays jit does not size: large ones run compiled as a kernel would
        self._large = max(2 * self.W, 4 * self.N[SLOT_FLOW].shape[0]) >= SMALL

    def _call(self, k, *args):
        return k.call(args, self._large)

    # ------------------------------------------------------------------ Network
    def start(self, flow, now):
        self._flush()
        self._pending = (flow, now)  # started with its first wait, in one call (the engine waits on it next)

    def _flush(self):
        """Start the flow whose start waits for its first consumer (none came)."""
        if self._pending is not None:
            flow, now = self._pending
            self._pending = None
            self._begin(flow, now, None)

    def _begin(self, flow, now, waiting):
        """``flow`` starts at ``now``, and ``waiting`` (``(bytes, consumer, token)``, or None) waits on it."""
        C = self.C
        if C[NFLOWS] >= self._cap[0] or C[NACTIVE] + C[WHN] >= self._cap[2] or C[NTH] >= self._cap[1]:
            self._room(1, 1)
        how = (flow.src, flow.dst, flow.cls, flow.total, flow.t_active - flow.start, now)
        if waiting is None:
            flow.slot = self._call(net_start, C, self.X, self.F, self.N, self.P, *how)
        else:
            flow.slot = self._call(net_start_wait, C, self.X, self.F, self.N, self.P, *how, *waiting)
        self.flows.append(flow)

    def wait(self, flow, nbytes, consumer, token, now):
        pending = self._pending
        if pending is not None and pending[0] is flow and pending[1] == now:
            self._pending = None
            self._begin(flow, now, (nbytes, consumer, token))
            return
        self._flush()
        if self.C[NTH] >= self._cap[1]:
            self._room(0, 1)
        self._call(net_wait, self.C, self.X, self.F, self.N, flow.slot, nbytes, consumer, token, now)

    def extend(self, flow, total, now):
        self._flush()
        flow.total = total
        self._call(net_extend, self.C, self.X, self.F, self.N, flow.slot, total, now)

    def abort(self, flow, now):
        self._flush()
        flow.aborted = True
        flow.done = self._call(net_abort, self.C, self.X, self.F, self.N, self.P, flow.slot, now)
        self.flows[flow.slot] = None

    def next_time(self):
        self._flush()
        C, N = self.C, self.N
        if C[DIRTY] or C[STALE]:  # (solve_rates does nothing otherwise: the call is spared)
            self._call(solve_rates, C, self.X, N, self.P, self.repair, DENSE)
        return self._call(earliest, C, self.X, self.F[FLOWS], N[LAT_TIME], N[LAT_SEQ], N[LAT_FLOW])

    def advance(self, now):
        """Move to ``now`` and report what is due, in order: a consumer's bytes have arrived
        (``on_arrival``), a flow is complete (``on_complete``). The network's own state is settled
        before the first report, so a report may start new flows."""
        self._flush()
        m = self._call(pop_due, self.C, self.X, self.F, self.N, self.P, now, self.out)
        if not m:
            return 0
        TI, TB, flows = self.F[WAITS], self.F[WAITS_B], self.flows
        on_arrival, on_complete = self.on_arrival, self.on_complete
        for f, h in self.out[:m].tolist():
            flow = flows[f]
            if h < 0:
                flow.finish = now
                flow.done = flow.total
                flows[f] = None  # (nothing of it comes due again)
                on_complete(flow)
            else:
                on_arrival(flow, (float(TB[h]), int(TI[h, T_CONS]), int(TI[h, T_TOK])))
        return m

    # ------------------------------------------------------------------ inspection
    def stats(self) -> dict:
        self._flush()
        return counted(self.C)

    def rate(self, flow) -> float:
        """``flow``'s bytes per second at the last solve (0 when it is not moving)."""
        self._flush()
        slot = int(self.F[FLOWS][flow.slot, F_SLOT]) if flow.slot >= 0 else -1
        return float(self.N[RATE][slot]) if slot >= 0 else 0.0

    @property
    def npairs(self) -> int:
        """Active (class, source, destination) pairs."""
        self._flush()
        return int(self.C[NPAIRS])

    @property
    def tracked(self) -> bool:
        """Whether the repair's bookkeeping was kept at the last solve."""
        return bool(self.C[TRACKED])
