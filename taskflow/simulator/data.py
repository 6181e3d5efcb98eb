"""How data moves in a simulation: the engine's side of :mod:`._datamoves`.

The rules (an input needed and from where it comes, a flow done and the copy it leaves, a
finished task's consumers released) are :mod:`._datamoves`' kernels, the compiled loops' own,
run here as plain Python over the engine's lists. The engine's copies of outputs are the loops' lists
(``F[HAVE_*]``, appended to); its flows are :class:`~.network.base.Flow` objects, moved by
whichever network model the run uses (``simple`` or ``maxmin``) and reached through the few
kernels of flows the moves call, which this module gives in the engine's version
(:meth:`taskflow.jit.Kernel.bound`).

A part of :class:`~.engine.Simulator` (a mixin over its state).
"""

from __future__ import annotations

from ._loopstate import HAVE_B, HAVE_NEXT, HAVE_W, NO_FLOW, RQ_NEXT, RQ_TASK, RQ_TOKEN
from ._datamoves import (
    NO_COPY,
    READY,
    STARTABLE,
    consumer_arrived,
    drop_copy,
    have,
    source_of,
)
from .network import Flow

__all__ = ["DataMoves"]

_ARRIVED, _HAVE, _SOURCE_OF, _DROP_COPY = consumer_arrived.plain, have.plain, source_of.plain, drop_copy.plain


# the engine's versions of the kernels of flows and entries that the moves call (its flows are Flow objects)
def _flow_task(F, f):
    return f.task


def _flow_dst(F, f):
    return f.dst


def _flow_base(F, f):
    return f.base


def _flow_total(F, f):
    return f.total


def _flow_bytes(F, f):
    return f.base + f.total


def _net_extend(C, X, F, N, f, total, now):
    N.extend(f, total, now)


def _net_wait(C, X, F, N, f, nbytes, i, token, now):
    N.wait(f, nbytes, i, token, now)


def _new_copy(C, F, w, b):
    F[HAVE_W].append(w)
    F[HAVE_NEXT].append(-1)
    F[HAVE_B].append(b)
    return len(F[HAVE_W]) - 1


def _new_ready(C, F):
    F[RQ_TASK].append(-1)
    F[RQ_TOKEN].append(-1)
    F[RQ_NEXT].append(-1)
    return len(F[RQ_TASK]) - 1


class DataMoves:
    """Copies of outputs and flows in a :class:`~.engine.Simulator`."""

    def _own_kernels(self) -> dict:
        """The engine's versions of the kernels of flows and entries that the moves call, by name
        (:meth:`taskflow.jit.Kernel.bound`)."""
        return dict(
            live_flow=self._live_flow,
            open_flow=self._open_flow,
            unlink_flow=self._unlink_flow,
            record_transfer=self._record_transfer,
            flow_task=_flow_task,
            flow_dst=_flow_dst,
            flow_base=_flow_base,
            flow_total=_flow_total,
            flow_bytes=_flow_bytes,
            net_extend=_net_extend,
            net_wait=_net_wait,
            new_copy=_new_copy,
            new_ready=_new_ready,
        )

    # ------------------------------------------------------------------ the kernels of flows, the engine's
    def _live_flow(self, T, F, p, w):
        f = self.flows.get(p * self.W + w)
        return f if f is not None and not f.complete else NO_FLOW

    def _open_flow(self, C, X, T, F, N, P, lat, i, p, src, w, size, base, token, now):
        self._fid += 1
        f = Flow(self._fid, p, src, w, size, now, self.lat[src][w])
        f.base = base
        if self.tclass is not None:
            f.cls = self.tclass[i]
        self.flows[p * self.W + w] = f
        N.start(f, now)
        N.wait(f, size, i, token, now)

    def _unlink_flow(self, T, F, p, f):
        key = p * self.W + f.dst
        if self.flows.get(key) is f:
            del self.flows[key]

    def _record_transfer(self, C, F, f, now):
        self.transfers.append((f.task, f.src, f.dst, f.total, f.start, now))

    # ------------------------------------------------------------------ copies
    def holds(self, p: int, w: int) -> float:
        """Bytes of ``p``'s output on worker ``w`` (-1: none)."""
        return _HAVE(self.T, self.F, p, w)

    def holders(self, p: int) -> list:
        """The workers holding (some of) ``p``'s output, in the order its copies came."""
        out, h, HW, HN = [], self.copies[p], self.F[HAVE_W], self.F[HAVE_NEXT]
        while h >= 0:
            out.append(HW[h])
            h = HN[h]
        return out

    def source_of(self, p, nbytes) -> int:
        """The live worker to fetch ``nbytes`` of ``p``'s output from: where it was computed, else
        the first live worker holding that many bytes of it; -1 when there is none."""
        return _SOURCE_OF(self.T, self.F, self.K, p, nbytes)

    def _lose_copies(self, w):
        """Every copy on worker ``w`` (lost) is gone."""
        T, F = self.T, self.F
        for p in range(self.n):
            _DROP_COPY(T, F, p, w)

    # ------------------------------------------------------------------ moves
    def _fetch_inputs(self, i, w):
        """Start moving to ``w`` every computed input ``i`` lacks there."""
        if not self._fetch(None, None, self.G, self.T, self.F, self.net, None, self.K, None, i, w, self.now):
            self._no_copy(i)

    def _no_copy(self, i):
        raise RuntimeError(f"no copy of an input of task {self.a.ids[i]!r} is left (internal error)")

    def _release_consumers(self, i):
        """``i`` finished: each consumer has one input fewer to compute, fetches it where it is
        queued, and starts where it can; returns the consumers now ready to place."""
        newly_ready = []
        G, T, F, K, net, fetch_ready, now = self.G, self.T, self.F, self.K, self.net, self.fetch_ready, self.now
        succ_idx, released = self.succ_idx, self._released
        for e in range(self.succ_ptr[i], self.succ_ptr[i + 1]):
            got = released(None, None, G, T, F, net, None, K, None, i, e, fetch_ready, now)
            if got == READY:
                newly_ready.append(succ_idx[e])
            elif got == STARTABLE:
                j = succ_idx[e]
                aj = self.assigned[j]
                if self.heaped:
                    self._runnable(j, aj)
                self._try_start(aj)
            elif got == NO_COPY:
                self._no_copy(succ_idx[e])
        return newly_ready

    def _arrive(self, flow, item):
        """Network callback: a consumer's bytes of ``flow`` are on its worker."""
        nbytes, i, tok = item
        if not flow.aborted and _ARRIVED(self.T, i, tok, flow.dst):
            w = flow.dst
            if self.heaped:
                self._runnable(i, w)
            self._try_start(w)

    def _flow_done(self, flow):
        """Network callback: ``flow`` carried all its bytes."""
        if flow.aborted:
            return
        flow.finish = self.now
        flow.complete = True
        self._done(None, self.T, self.F, flow, self.now)
