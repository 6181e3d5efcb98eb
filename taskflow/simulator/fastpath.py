"""The compiled event loop: large runs of Dask-like work stealing on the ``maxmin`` network, carried
out step for step as :class:`~.engine.Simulator` carries them out, in compiled code.

The engine's event loop is Python: about 100 us a task on a random layered graph, where every
transfer starts and ends a flow and every ready task weighs all the workers. This loop keeps the
same state in arrays (:mod:`._loopstate`, :mod:`._wsloop`) and makes the same moves in the same
order: the same events, ties broken alike, the flows moved and their rates solved by the
``maxmin`` model's own kernels (:mod:`.network._flows`), and the same choices of the
``work-stealing`` scheduler. Its trace is the engine's to
rounding (checked by the tests on random graphs and clusters).

It covers what large runs use, and hands everything else to the engine: the ``work-stealing``
scheduler itself (``compiled_model`` set on its class) with its estimates knowing the workers'
speeds, the ``maxmin`` network with one transfer class, no noise, stragglers or failures, no
scheduler interval or decision latency, no ``validate``, and durations without per-task exact
costs on a lazily computed matrix. :meth:`Simulator.run` uses it by itself from
:data:`MIN_TASKS` tasks on (``compiled=None``).
"""

from __future__ import annotations

import contextlib
import signal
import threading

import numpy as np

from ..costs import Durations
from ..trace import Run, Trace, Transfer
from ._loopstate import (
    DEEP,
    MORE,
    NO_SOURCE,
    NPLACED,
    NRUNS,
    NSTEALS,
    NTR,
    OK,
    STATUS,
    STUCK,
    TRANSFERS,
    TRANSFERS_F,
    WORKER,
)
from ._planloop import simulate_plan
from ._wsloop import simulate_ws
from .network._flowstate import counted, flow_state

__all__ = ["MIN_TASKS", "COLD_TASKS", "MAX_WORKERS", "CHUNK", "unsupported", "ready", "worth", "run"]

#: From this many tasks on, :meth:`Simulator.run` uses the compiled loop where it can (below, the
#: engine is as fast: loading the compiled code takes about a second).
MIN_TASKS = 20_000

#: ... and where its machine code is not cached yet (a fresh install, a source changed), from this
#: many: compiling the loop the first time takes 30-45 s, about what the engine takes for 250,000
#: tasks (4 s for 20,000).
COLD_TASKS = 200_000

#: Up to this many workers (the loop indexes worker pairs in a dense table of ``W * W`` entries).
MAX_WORKERS = 4096

#: Events the compiled loop runs per call (a fraction of a second at a million tasks): between two
#: calls Python handles an interrupt (Ctrl-C), which it cannot while compiled code runs.
CHUNK = 50_000


@contextlib.contextmanager
def _deferred_interrupt():
    """While the compiled loop runs, Ctrl-C (SIGINT) is noted, not raised: Python runs a signal
    handler at its next bytecode, which may be inside a callback the compiled code makes (numba
    unpickling a constant), where an exception comes out as a chain of ``SystemError``. Yields a
    list that holds the signal once one came; leaving the block, the handler that was there before
    is put back and, if a signal came, called (``KeyboardInterrupt`` by default, or the CLI's
    one-line exit). Outside the main thread, or with SIGINT ignored, nothing changes."""
    asked: list = []
    before = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(before):
        yield asked
        return
    signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
    try:
        yield asked
    finally:
        signal.signal(signal.SIGINT, before)
    if asked:
        before(signal.SIGINT, None)


def _pack(d):
    """A duration matrix as the loop reads it: ``(dense, D, cost, speed, overhead, need, cores, multi)``."""
    none_f, none_i = np.zeros(1), np.zeros(1, np.int64)
    if isinstance(d, Durations):
        return (
            False,
            np.zeros((1, 1)),
            np.ascontiguousarray(d.cost, np.float64),
            np.ascontiguousarray(d.speed, np.float64),
            float(d.overhead),
            np.ascontiguousarray(d.need, np.int64),
            np.ascontiguousarray(d.cores, np.int64),
            bool(d.multi),
        )
    return (True, np.ascontiguousarray(d, np.float64), none_f, none_f, 0.0, none_i, none_i, False)


def unsupported(sim) -> str | None:
    """Why the compiled loop cannot carry out ``sim`` (None: it can).

    Parameters
    ----------
    sim : Simulator
    """
    scheduler = type(sim.scheduler)
    if not sim.dynamic:
        if sim.heaped:
            return "a plan run in the order tasks become ready (plan_order='ready')"
    elif scheduler.__dict__.get("compiled_model") != "work-stealing":
        return f"scheduler {sim.scheduler.name!r} (of the dynamic schedulers only work stealing is compiled)"
    elif not sim.scheduler.options.get("knows_speeds", True) or sim.scheduler.tick is not None:
        return "work stealing with estimates blind to speeds"
    if sim.network_name != "maxmin" or sim.tclass is not None:
        return (
            f"network {sim.network_name!r} with transfer classes"
            if sim.tclass is not None
            else f"network {sim.network_name!r}"
        )
    f = sim.faults
    if f.noise is not None or f.stragglers or f.fail:
        return "noise, stragglers or failures"
    if sim.interval > 0 or sim.latency_decision > 0:
        return "a scheduler interval or decision latency"
    if sim.validate:
        return "validate=True"
    if sim.W > MAX_WORKERS:
        return f"{sim.W} workers (at most {MAX_WORKERS})"
    for d in (sim.true_d, sim.cost_model.durations):
        if isinstance(d, Durations) and d.exact:
            return "per-task exact costs on a lazily computed duration matrix"
    return None


def _plan_order(sim) -> tuple:
    """``sim``'s plan (its own, or its scheduler's) as the loop reads it: the task indices in plan
    order (planned start, then finish, then the graph's order, as ``Simulator._apply_plan`` sorts
    them) and each task's worker index."""
    plan = sim.first_plan()
    index, cidx = sim.a.index, sim.cluster.index
    tasks = np.fromiter((index[t] for t in plan.tasks), np.int64, len(plan.tasks))
    rows = np.lexsort((tasks, np.asarray(plan.finish, np.float64), np.asarray(plan.start, np.float64)))
    where = np.empty(sim.n, np.int64)
    where[tasks] = np.fromiter((cidx[w] for w in plan.workers), np.int64, len(plan.workers))
    return tasks[rows], where


class _Transfers:
    """The loop's transfers, turned into :class:`Transfer` rows when first read."""

    def __init__(self, ints, floats, ids, wids):
        self.raw, self.floats, self.ids, self.wids = ints, floats, ids, wids

    def materialise(self) -> list:
        ids, wids = self.ids, self.wids
        return [
            Transfer(ids[p], wids[a], wids[b], z, t0, t1)
            for (p, a, b), (z, t0, t1) in zip(self.raw.tolist(), self.floats.tolist())
        ]

    def bytes_moved(self) -> float:
        return float(self.floats[:, 0].sum()) if len(self.floats) else 0.0


def ready(sim) -> bool:
    """Whether the compiled loop that would carry ``sim`` out loads without compiling
    (:func:`taskflow.jit.cached`).

    Parameters
    ----------
    sim : Simulator
    """
    from ..jit import cached

    return cached([simulate_ws if sim.dynamic else simulate_plan])


def worth(sim) -> bool:
    """Whether ``sim`` is large enough for the compiled loop to repay loading it: at least
    :data:`MIN_TASKS` tasks, or :data:`COLD_TASKS` where its machine code is not cached yet.

    Parameters
    ----------
    sim : Simulator
    """
    from ..jit import compile_mode

    if compile_mode() == "never":
        return False
    return sim.n >= COLD_TASKS or (sim.n >= MIN_TASKS and ready(sim))


def run(sim) -> Trace:
    """Carry out ``sim`` (a :class:`Simulator` not yet run, which :func:`unsupported` accepts) in
    the compiled loop; its trace.

    Parameters
    ----------
    sim : Simulator

    Raises
    ------
    RuntimeError
        A task left unfinished (as the engine says it), or an internal error.
    """
    from ..jit import compiled

    a, n, W, net = sim.a, sim.n, sim.W, sim.net
    plan = None if sim.dynamic else _plan_order(sim)  # planned before the loop's arrays are made
    if sim.dynamic:
        sim.scheduler.start(sim.view)
    i64 = np.int64
    pred_ptr, succ_ptr = a.pred_ptr.astype(i64), a.succ_ptr.astype(i64)
    G = (  # the graph: PRED_PTR, PRED_IDX, PRED_SIZE, SUCC_PTR, SUCC_IDX, CORES, SUCC_SIZE
        pred_ptr,
        a.pred_idx.astype(i64),
        a.size[a.pred_eid].astype(np.float64),
        succ_ptr,
        a.succ_idx.astype(i64),
        a.cores.astype(i64),
        a.size[a.succ_eid].astype(np.float64),
    )
    indeg = np.diff(pred_ptr)
    T = (  # per task, as _loopstate names them
        np.zeros(n, i64),  # STATUS
        indeg.copy(),  # NPRED
        np.full(n, -1, i64),  # WORKER
        np.zeros(n, i64),  # TOKEN
        np.zeros(n, i64),  # MISSING
        np.full(n, -1, i64),  # HOME
        np.zeros(n),  # STARTED
        np.full(n, -1, i64),  # LIVE
        np.full(n, -1, i64),  # COPIES
        np.full(n, -1, i64),  # QPREV
        np.full(n, -1, i64),  # QNEXT
    )
    K = (  # per worker, as _loopstate names them
        sim.cluster.cores.astype(i64),  # FREE
        np.zeros(W, i64),  # NRUNNING
        np.zeros(W, i64),  # NQUEUED
        np.full(W, -1, i64),  # QHEAD
        np.full(W, -1, i64),  # QTAIL
        np.full(W, -1, i64),  # RHEAD
        np.full(W, -1, i64),  # RTAIL
        np.zeros(W),  # QWORK
        np.zeros(W),  # LOAD
        np.asarray(sim.cluster.cores if plan is not None else sim.scheduler.cores, np.float64),  # WCORES
        np.zeros(W, i64),  # WSTAMP
        np.zeros(W, np.bool_),  # HERE
        np.zeros(W),  # FETCH
        np.zeros(0),  # DEAD: work stealing's lost workers, none (no worker is lost in the loop)
        np.zeros(W, np.bool_),  # FEASIBLE: where the task being placed can run
        np.zeros(0, np.bool_),  # ANYWHERE: ... anywhere
    )
    cap = 1024
    C, X, flows, N = flow_state(W, 1, cap)
    F = flows + (
        np.full((cap, 3), -1, i64),  # transfers: task, source, destination; bytes, start, end
        np.zeros((cap, 3)),
        np.full(n + cap, -1, i64),  # copies of outputs: worker, next, bytes
        np.full(n + cap, -1, i64),
        np.zeros(n + cap),
        np.full(cap, -1, i64),  # the ready queue: task, token, next
        np.full(cap, -1, i64),
        np.full(cap, -1, i64),
    )
    P = net.P
    E = (np.zeros(n + 1), np.zeros(n + 1, i64), np.zeros(n + 1, i64))
    R = (np.zeros((n, 2), i64), np.zeros((n, 2)))
    m = sim.cost_model
    f64 = np.float64
    succ_src = np.repeat(np.arange(n), np.diff(succ_ptr))
    outneed = np.bincount(succ_src, weights=indeg[G[4]], minlength=n).astype(i64)
    ready = np.flatnonzero(indeg == 0).astype(i64)
    L = np.zeros(3)
    lat = np.ascontiguousarray(sim.cluster.latency_matrix, f64)
    if plan is None:
        loop = simulate_ws
        args = (
            _pack(sim.true_d),
            _pack(m.durations),
            lat,
            np.ascontiguousarray(m.latency_matrix, f64),
            np.ascontiguousarray(m.inv_bandwidth, f64),
            bool(m.everywhere),
            False,
            int(sim.scheduler.max_candidates),
            int(net.repair),
            ready,
            outneed,
            int(indeg.max(initial=0)),
            L,
            CHUNK,
        )
    else:
        loop = simulate_plan
        order, where = plan
        seq = order[np.argsort(where[order], kind="stable")]  # each worker's tasks, in plan order
        seq_ptr = np.zeros(W + 1, i64)
        np.cumsum(np.bincount(where, minlength=W), out=seq_ptr[1:])
        args = (
            _pack(sim.true_d),
            lat,
            bool(sim.fetch_ready),
            int(net.repair),
            order,
            where,
            seq_ptr,
            seq,
            seq_ptr[:-1].copy(),
            outneed,
            L,
            CHUNK,
        )
    code = MORE
    with compiled(), _deferred_interrupt() as asked:
        while code == MORE:  # in pieces: an interrupt is acted on between two
            code, F, N = loop(G, T, K, F, N, P, E, R, C, X, *args)
            if asked:
                break
    if code != OK:
        why = {
            STUCK: "the network model made no progress",
            NO_SOURCE: "no copy of an output is left",
            DEEP: "idle workers stole in a cascade too deep",
        }.get(int(code), "a state the scheduler never makes")
        raise RuntimeError(f"compiled simulation stopped: {why} (internal error)")
    sim.stats = {
        **counted(C),
        "steals": int(C[NSTEALS]),
        "placements": int(C[NPLACED]),
    }
    if int(C[NRUNS]) < n:
        sim.check_finished(T[STATUS].tolist(), T[WORKER].tolist())
    ids, wids = a.ids, sim.wids
    RI, RF = R
    runs = [Run(ids[i], ids[i], wids[w], s, f) for (i, w), (s, f) in zip(RI.tolist(), RF.tolist())]
    nt = int(C[NTR])
    meta = {"aborted_transfers": 0, "information": sim.information, "engine": "compiled"}
    return Trace(
        runs,
        _Transfers(F[TRANSFERS][:nt], F[TRANSFERS_F][:nt], ids, wids),
        scheduler=sim.scheduler.name,
        network=sim.network_name,
        meta=meta,
    )
