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
backplane or priority classes, or below :data:`REPAIR` active pairs). The rate solver and the
per-event scans are compiled loops (numba); this network model keeps its own clock
(:meth:`MaxMinNetwork.next_time`, :meth:`MaxMinNetwork.advance`).
"""

from __future__ import annotations

import heapq

import numpy as np

from ._flowloop import AFRESH, TRY_REPAIR, WHOLE, refresh, solve, step
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

_NONE = np.zeros(0, np.int64)


def _by_id(flow):
    return flow.id


class MaxMinNetwork(Network):
    """Max-min fair sharing of each worker's upload and download capacity (array-based; the rate
    computation and the per-event scans are compiled); see the module docstring."""

    name = "maxmin"

    def __init__(self, cluster, schedule, on_arrival, on_complete, classes: int = 1):
        super().__init__(cluster, schedule, on_arrival, on_complete)
        inv = cluster.inv_bandwidth
        with np.errstate(divide="ignore"):
            bw = np.where(inv > 0, 1.0 / np.where(inv > 0, inv, 1.0), np.inf)
        np.fill_diagonal(bw, 0.0)
        W = self.W = len(cluster)
        self.pcap = np.ascontiguousarray(bw.reshape(-1))
        self.up = bw.max(axis=1) if W > 1 else np.ones(W)
        self.down = bw.max(axis=0) if W > 1 else np.ones(W)
        port = np.minimum(self.up[:, None], self.down[None, :])
        off = ~np.eye(W, dtype=bool)  # a worker sends nothing to itself
        self.capped = bool(np.any(bw[off] < port[off]))  # else no pair's own cap can bind
        self.backplane = float(cluster.backplane) if cluster.backplane is not None else np.inf
        racks = cluster.rack_count
        self.rack = np.ascontiguousarray(cluster.rack_index if racks else np.zeros(W, np.int64))
        self.rup = np.full(racks, float(cluster.uplink) if racks else 0.0)
        self.rdown = self.rup.copy()
        self.classes = C = max(1, int(classes))
        self.loc = np.full(2 * W, -1, np.int64)  # the solver's scratch: ports -> its own numbering
        # active (class, source, destination) pairs, each in a slot: its code, flows, cap and rate
        self.pslot = {}  # code -> slot
        self.psrc = np.zeros(64, np.int64)  # the pair's source, destination and class
        self.pdst = np.zeros(64, np.int64)
        self.pcls = np.zeros(64, np.int64)
        self.pn = np.zeros(64)
        self.pcaps = np.zeros(64)
        self.prate = np.zeros(64)
        self.pfree = list(range(63, -1, -1))
        self.plist = np.zeros(64, np.int64)  # the active pairs' slots, the first self.npairs
        self.ppos = {}  # slot -> its position in plist
        self.npairs = 0
        # for solving again only what a change moves (:func:`repair_rates`): each pair's bottleneck, each
        # port's pairs as a doubly linked list (links: next through the upload, next through the
        # download; back: the previous ones, -1 for the port's head), what changed since the last solve
        self.repair = (
            REPAIR
            if (
                C == 1
                and not racks
                and self.backplane == np.inf
                and np.isfinite(self.up).all()
                and np.isfinite(self.down).all()
            )
            else 0
        )
        self.pb = np.full(64, -2, np.int64)
        self.links = np.full(128, -1, np.int64)
        self.back = np.full(128, -1, np.int64)
        self.heads = np.full(2 * W, -1, np.int64)
        self.inS = np.zeros(64, np.bool_)
        self.mark = np.zeros(2 * W, np.int64)
        self.stamp = np.zeros(1, np.int64)
        self.used = np.zeros(2 * W)  # each port's bytes per second at the last solve
        self.counted = np.zeros(64)  # the flows of each pair that ``used`` counts
        self.nb = np.zeros(2 * W, np.int64)  # pairs whose bottleneck each port is
        self.inuse = np.zeros(1, np.int64)  # ports with a pair
        self.changed = []  # pairs whose flow count changed since the last solve
        self.moves = []  # pairs on (slot, source, destination) and off (slot, ~source, destination), in order
        self.tracked = False  # the bookkeeping was kept at the last solve: record the moves since
        self.skip = 0  # whole solves to make before trying a repair again
        self.backoff = 0  # how many after the last give-up
        cap0 = 64
        self.pair = np.zeros(cap0, np.int64)
        self.rates = np.zeros(cap0)
        self.done = np.zeros(cap0)
        self.total = np.zeros(cap0)
        self.nxt = np.zeros(cap0)  # bytes at which the flow next needs attention
        self.due = np.zeros(cap0, np.int64)
        self.flows = [None] * cap0
        self.t_last = 0.0
        self.dirty = False  # the set of active flows changed: recompute rates
        self.stale = False  # some flow's next target changed: recompute the next event
        self.nactive = 0
        self.waiting = []  # heap of (t_active, seq, flow): flows in their latency phase
        self._seq = 0
        self._next = np.inf

    def _grow(self):
        old = len(self.flows)
        for name in ("pair", "rates", "done", "total", "nxt", "due"):
            arr = getattr(self, name)
            new = np.zeros(old * 2, arr.dtype)
            new[:old] = arr
            setattr(self, name, new)
        self.flows.extend([None] * old)

    def _pair_on(self, code, cls, src, dst):
        """The pair ``code`` (class ``cls``, ``src`` to ``dst``) has its first active flow: give it a
        slot; returns the slot."""
        if not self.pfree:
            old = len(self.psrc)
            for name in (
                "psrc",
                "pdst",
                "pcls",
                "pn",
                "pcaps",
                "prate",
                "plist",
                "pb",
                "inS",
                "links",
                "back",
                "counted",
            ):  # (a slot's bookkeeping is set when the solve takes it)
                arr = getattr(self, name)
                setattr(
                    self, name, np.concatenate([arr, np.full(len(arr), -1 if arr.dtype == np.int64 else 0, arr.dtype)])
                )
            self.pfree.extend(range(2 * old - 1, old - 1, -1))
        q = self.pfree.pop()
        self.pslot[code] = q
        self.psrc[q], self.pdst[q], self.pcls[q] = src, dst, cls
        self.pn[q] = 0.0
        self.pcaps[q] = self.pcap[src * self.W + dst]
        self.plist[self.npairs] = q
        self.ppos[q] = self.npairs
        self.npairs += 1
        if self.tracked:  # its ports' lists take it at the next solve (:func:`pairs_moved`)
            self.moves.extend((q, src, dst))
        return q

    def _pair_off(self, q):
        """The pair in slot ``q`` has no active flow left: free its slot."""
        W = self.W
        src, dst = int(self.psrc[q]), int(self.pdst[q])
        del self.pslot[(int(self.pcls[q]) * W + src) * W + dst]
        if self.tracked:  # out of its ports' lists and counts at the next solve
            self.moves.extend((q, ~src, dst))
        k = self.ppos.pop(q)
        self.npairs -= 1
        last = int(self.plist[self.npairs])
        if last != q:
            self.plist[k] = last
            self.ppos[last] = k
        self.pfree.append(q)

    def _catch_up(self, now):
        dt = now - self.t_last
        if dt > 0 and self.nactive:
            step(self.nactive, self.done, self.total, self.nxt, self.rates, dt, 1e-9, self.due, now)
        self.t_last = now

    def _set_next(self, flow):
        slot = flow.slot
        if slot >= 0:
            th = flow.thresholds
            self.nxt[slot] = th[0][0] if th and th[0][0] < flow.total else flow.total

    def _activate(self, flow):
        slot = self.nactive  # the active flows hold the first slots
        if slot == len(self.flows):
            self._grow()
        flow.slot = slot
        self.flows[slot] = flow
        code = (flow.cls * self.W + flow.src) * self.W + flow.dst
        q = self.pslot.get(code)
        if q is None:
            q = self._pair_on(code, flow.cls, flow.src, flow.dst)
        self.pair[slot] = q
        self.pn[q] += 1
        self.changed.append(q)
        self.done[slot] = 0.0
        self.total[slot] = flow.total
        self.nactive += 1
        self._set_next(flow)
        self.dirty = True

    def _deactivate(self, flow):
        slot = flow.slot
        if slot >= 0:
            flow.done = self.done[slot]
            q = int(self.pair[slot])
            self.pn[q] -= 1
            self.changed.append(q)
            if self.pn[q] == 0:
                self._pair_off(q)
            last = self.nactive - 1  # the last active flow takes the freed slot
            if last != slot:
                moved = self.flows[last]
                self.flows[slot] = moved
                moved.slot = slot
                for arr in (self.pair, self.rates, self.done, self.total, self.nxt):
                    arr[slot] = arr[last]
            self.flows[last] = None
            self.nactive -= 1
            flow.slot = -1
            self.dirty = True

    def start(self, flow, now):
        self._catch_up(now)
        if flow.t_active > now:
            self._seq += 1
            heapq.heappush(self.waiting, (flow.t_active, self._seq, flow))
        else:
            self._activate(flow)

    def wait(self, flow, nbytes, consumer, token, now):
        self._seq += 1
        heapq.heappush(flow.thresholds, (nbytes, self._seq, consumer, token))
        if flow.slot >= 0:
            self._catch_up(now)
            self._set_next(flow)
            self.stale = True

    def extend(self, flow, total, now):
        self._catch_up(now)
        flow.total = total
        if flow.slot >= 0:
            self.total[flow.slot] = total
            self._set_next(flow)
            self.stale = True

    def abort(self, flow, now):
        self._catch_up(now)
        flow.aborted = True
        self._deactivate(flow)

    def next_time(self):
        if self.dirty or self.stale:
            P = self.npairs
            if not (self.nactive or P):
                self._next = np.inf
                self.tracked = False  # (pairs gone since the last solve: their moves are not applied)
            elif self.repair and P >= self.repair and (P <= DENSE * self.W or P >= 4096):
                # the bookkeeping kept (made afresh where it was not); a repair tried unless backing off
                mode = WHOLE if self.skip else TRY_REPAIR
                if not self.tracked:
                    mode, self.tracked = AFRESH, True
                self._next, how = refresh(
                    self.nactive,
                    self.pair,
                    self.done,
                    self.nxt,
                    self.rates,
                    self.plist,
                    P,
                    self.psrc,
                    self.pdst,
                    self.pcls,
                    self.pn,
                    self.pcaps,
                    self.up,
                    self.down,
                    self.prate,
                    self.t_last,
                    self.dirty,
                    self.classes,
                    self.capped,
                    self.backplane,
                    self.rack,
                    self.rup,
                    self.rdown,
                    self.loc,
                    self.pb,
                    np.array(self.changed, np.int64) if mode == TRY_REPAIR else _NONE,
                    np.array(self.moves, np.int64) if self.moves else _NONE,
                    self.heads,
                    self.links,
                    self.back,
                    self.inS,
                    self.mark,
                    self.stamp,
                    self.used,
                    self.counted,
                    self.nb,
                    self.inuse,
                    mode,
                )
                if how == 0:  # given up: whole solves for a while, twice as long after each give-up in a row
                    self.backoff = min(64, 2 * self.backoff or 1)
                    self.skip = self.backoff
                elif how == 1:
                    self.backoff = 0
                elif self.skip and self.dirty:
                    self.skip -= 1
            else:
                self.tracked = False
                self._next = solve(
                    self.nactive,
                    self.pair,
                    self.done,
                    self.nxt,
                    self.rates,
                    self.plist,
                    P,
                    self.psrc,
                    self.pdst,
                    self.pcls,
                    self.pn,
                    self.pcaps,
                    self.up,
                    self.down,
                    self.prate,
                    self.t_last,
                    self.dirty,
                    self.classes,
                    self.capped,
                    self.backplane,
                    self.rack,
                    self.rup,
                    self.rdown,
                    self.loc,
                    self.pb,
                )
            self.dirty = self.stale = False
            self.changed.clear()
            self.moves.clear()
        t = self._next
        waiting = self.waiting
        while waiting and waiting[0][2].aborted:
            heapq.heappop(waiting)
        if waiting and waiting[0][0] < t:
            t = waiting[0][0]
        return t

    def advance(self, now):
        """Move to ``now`` and report what is due, in order: a consumer's bytes have arrived
        (``on_arrival``), a flow is complete (``on_complete``). The network's own state is settled
        before the first report, so a report may start new flows."""
        due = self._pop_due(now)
        on_arrival, on_complete = self.on_arrival, self.on_complete
        for flow, item in due:
            if item is None:
                on_complete(flow)
            else:
                on_arrival(flow, item)
        return len(due)

    def _pop_due(self, now):
        """Advance to ``now``; return [(flow, (bytes, consumer, token) or None)] that are due: a
        consumer's bytes have arrived, or (None) the flow is complete."""
        dt = now - self.t_last
        self.t_last = now
        waiting = self.waiting
        out = []
        k = (
            step(self.nactive, self.done, self.total, self.nxt, self.rates, dt, 1e-9, self.due, now)
            if self.nactive
            else 0
        )
        eps = 1e-9
        flows = self.flows
        if k == 1:
            due = (flows[self.due[0]],)
        else:  # (slots move as flows end) flows due at once are reported in the order they started
            due = sorted([flows[slot] for slot in self.due[:k].tolist()], key=_by_id)
        for f in due:
            done = self.done[f.slot]
            th = f.thresholds
            while th and th[0][0] <= done + eps * max(1.0, th[0][0]):
                nbytes, _, consumer, token = heapq.heappop(th)
                out.append((f, (nbytes, consumer, token)))
            if done >= f.total - eps * max(1.0, f.total):
                while th:
                    nbytes, _, consumer, token = heapq.heappop(th)
                    out.append((f, (nbytes, consumer, token)))
                f.finish = now
                self._deactivate(f)
                out.append((f, None))
            else:
                self._set_next(f)
                self.stale = True
        while waiting and waiting[0][0] <= now:
            _, _, flow = heapq.heappop(waiting)
            if not flow.aborted:
                self._activate(flow)
        return out
