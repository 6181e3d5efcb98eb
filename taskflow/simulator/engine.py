"""The discrete-event simulator: one run of a task graph on a cluster, in seconds of simulated time.

Task states (:class:`~.states.TaskState`) and every allowed move; each move is one method
``_transition_<from>_<to>`` and nothing else writes a task's state:

=========  =========  ========================================================================
from       to         when
=========  =========  ========================================================================
WAITING    QUEUED     a plan or a dynamic scheduler assigns the task to a live worker
QUEUED     QUEUED     a dynamic scheduler moves (steals) a task that has not started
QUEUED     RUNNING    its inputs have arrived on its worker and enough cores are free
RUNNING    DONE       its run ends; its output is on its worker
RUNNING    WAITING    its worker is lost while it runs
QUEUED     WAITING    its worker is lost, or a re-plan takes it back
DONE       WAITING    every copy of its output is lost and a task yet to run needs it
=========  =========  ========================================================================

Events (:class:`~.events.EventKind`) wait on one heap ordered by (time, kind, sequence) and go
through one dispatch; a network model either puts its events on that heap or keeps its own clock
(see :mod:`.network.base`). A static plan runs as a plan: each worker starts its tasks in plan
order (planned start time), each as soon as its inputs have arrived and enough cores are free. A
dynamic scheduler is called on events (:class:`~taskflow.scheduling.DynamicScheduler`) and answers with
assignments; ``scheduler_interval`` is the minimum time between two invocations (events wait and
are delivered together), ``decision_latency`` the time from an invocation until its decisions take
effect (a static plan's too).

Transfers start as soon as both the producer has finished and the consumer's worker is known
(``fetch="eager"``), or, with ``fetch="ready"``, once every input of the consumer is computed, as
under Dask's own scheduling (a task goes to its worker when it is ready; the worker then fetches
what it lacks). An
output sent to a worker once is not sent there again. When a worker is lost (:mod:`.faults`), its
running and queued tasks, its in-flight transfers and the outputs held only there are lost;
finished outputs still needed are recomputed. A static plan is re-planned on the survivors with
the same scheduler for the unfinished part; a dynamic scheduler is told (``on_worker_lost``). Results
of sink tasks count as delivered to the client when they finish, so they are never recomputed.

The engine holds the state, the transitions and the event loop; how data moves is :mod:`.data`,
how plans and a scheduler's decisions come in is :mod:`.decisions`, what a lost worker does is
:mod:`.recovery` (all parts of :class:`Simulator`). Each move of a task or of data is a kernel of
:mod:`._taskmoves` or :mod:`._datamoves`, the compiled loops' own, run here as plain Python. With
``validate=True`` every transition first checks its preconditions (``AssertionError`` when one
breaks). Broken internal invariants raise ``RuntimeError``; :class:`~taskflow.errors.TaskflowError`
is kept for what a user can get wrong.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ..cluster import Cluster
from ..costs import CostModel
from ..errors import SchedulerError, UsageError
from ..graph import TaskGraph
from ..scheduling import DynamicScheduler, available, get_scheduler, require_runnable, scheduler_class
from ..trace import Run, Trace, Transfer, run_id
from . import fastpath
from ._gc import FewerCollections
from ._loopstate import NPLACED, laid_out
from ._taskmoves import (
    apply_decisions,
    begin_run,
    dequeue,
    end_run,
    enqueue,
    place,
    runnable,
    start_in_order,
    start_ready,
    startable,
    still_ready,
)
from ._datamoves import consumer_released, fetch_inputs, flow_done, only_copy
from .data import DataMoves
from .decisions import Decisions
from .events import EventKind
from .faults import Perturbations
from .information import estimated_graph
from .network import make_network
from .priorities import transfer_classes
from .recovery import Recovery
from .states import DONE, QUEUED, RUNNING, WAITING, TaskState
from .view import SimView

__all__ = ["Simulator"]

# the moves the compiled loops make too, as plain Python over the engine's lists
_ENQUEUE, _DEQUEUE, _BEGIN_RUN, _END_RUN = enqueue.plain, dequeue.plain, begin_run.plain, end_run.plain
_STILL_READY, _STARTABLE = still_ready.plain, startable.plain

_FAIL, _FINISH, _TICK = EventKind.FAIL, EventKind.FINISH, EventKind.TICK
_INF = math.inf


class _LazyTransfers:
    """Transfers kept as index tuples and turned into :class:`Transfer` rows when first read."""

    def __init__(self, raw, ids, wids):
        self.raw, self.ids, self.wids = raw, ids, wids

    def materialise(self) -> list:
        ids, wids = self.ids, self.wids
        return [Transfer(ids[p], wids[a], wids[b], z, t0, t1) for p, a, b, z, t0, t1 in self.raw]

    def bytes_moved(self) -> float:
        return float(sum(row[3] for row in self.raw))


class Simulator(Decisions, Recovery, DataMoves):
    """One simulation run; see :func:`taskflow.simulate` for the parameters."""

    def __init__(
        self,
        graph: TaskGraph,
        cluster: Cluster,
        scheduler="heft",
        network: str = "maxmin",
        plan=None,
        noise: float = 0.0,
        stragglers=None,
        fail=None,
        information: str = "exact",
        seed: int = 0,
        scheduler_interval: float = 0.0,
        decision_latency: float = 0.0,
        scheduler_options=None,
        validate: bool = False,
        plan_order: str = "strict",
        fetch: str = "eager",
    ):
        self.graph = graph
        self.cluster = cluster
        self.validate = validate
        self.true = CostModel(graph, cluster)
        self.est_graph = estimated_graph(graph, information)
        self.cost_model = self.true if self.est_graph is graph else CostModel(self.est_graph, cluster)
        self.information = information
        if plan is not None and scheduler is None:
            scheduler = (
                plan.scheduler
                if plan.scheduler in available() and not scheduler_class(plan.scheduler).duplicates
                else "heft"
            )  # (re-plans after a loss)
        if plan is not None and getattr(plan, "copies", None):
            raise SchedulerError(
                f"the plan runs {len(plan.copies)} task copies (task duplication), and the "
                f"simulator runs each task once"
            )
        self.scheduler = get_scheduler(scheduler, seed=seed, **(scheduler_options or {}))
        require_runnable(self.scheduler, "simulator")
        self.dynamic = self.scheduler.kind == "dynamic"
        if plan_order not in ("strict", "ready"):
            raise UsageError(f"plan_order must be 'strict' or 'ready', got {plan_order!r}")
        # runnable tasks wait in a heap per worker: a dynamic scheduler's priority, or (plan_order
        # "ready", as Dask runs a plan) the planned position; else a worker follows its plan strictly
        self.heaped = self.dynamic or plan_order == "ready"
        if fetch not in ("eager", "ready"):
            raise UsageError(f"fetch must be 'eager' or 'ready', got {fetch!r}")
        # "ready": a planned task's inputs move only once all of them are computed (Dask sends a
        # task to its worker then, and the worker fetches what it lacks)
        self.fetch_ready = fetch == "ready"
        self.plan = plan
        a = self.a = graph.arrays
        n, W = a.n, len(cluster)
        self.n, self.W = n, W
        self.faults = Perturbations(cluster, n, noise, stragglers, fail, seed)
        self.true_d = self.true.durations  # numpy: n x W lists would cost more than they save
        self.est_d = self.cost_model.durations
        self.wids = cluster.ids
        self.interval = float(scheduler_interval)
        self.latency_decision = float(decision_latency)
        # graph as lists (fast scalar access in the event loop)
        self.pred_ptr = a.pred_ptr.tolist()
        self.pred_idx = a.pred_idx.tolist()
        self.pred_size = a.size[a.pred_eid].tolist()
        self.succ_ptr = a.succ_ptr.tolist()
        self.succ_idx = a.succ_idx.tolist()
        self.succ_size = a.size[a.succ_eid].tolist()
        self.tcores = a.cores.tolist()
        self.lat = cluster.latency_matrix.tolist()
        # task state
        self.status = [WAITING] * n
        self.npred = np.diff(a.pred_ptr).tolist()  # inputs not computed (yet, or any more)
        self.assigned = [-1] * n
        self.token = [0] * n  # assignment generation: arrivals for an older one are ignored
        self.run_token = [0] * n  # run generation: the finish of a run lost with its worker is ignored
        self.missing = [0] * n  # inputs computed but not yet on the assigned worker
        self.done_runs = [0] * n
        self.ndone = 0  # tasks DONE now
        self.start_time = [0.0] * n
        self.copies = [-1] * n  # the first of its output's copies (a list in F's columns, .data)
        self.home = [-1] * n  # where the task's output was computed
        self.flows = {}  # (task, worker) -> live Flow
        # worker state
        self.alive = [True] * W
        self.dead = [False] * W  # (alive's negation, as the shared moves read it: K[DEAD])
        self.free = cluster.cores.tolist()
        self.running = [set() for _ in range(W)]
        self.nrunning = [0] * W
        self.seq = [[] for _ in range(W)]  # static: plan order
        self.plan_rank = [0] * n  # static: position in the plan (earlier runs first when "ready")
        self.ptr = [0] * W
        self.rq = [[] for _ in range(W)]  # dynamic: runnable heap
        # ... or, where the scheduler's priorities are all equal, first come first served: a list per worker
        self.fifo = self.dynamic and type(self.scheduler).priority is DynamicScheduler.priority
        self.rhead, self.rtail = [-1] * W, [-1] * W
        # tasks assigned and not started, in assignment order: each worker's queue a linked list
        self.qhead, self.qtail = [-1] * W, [-1] * W
        self.qprev, self.qnext = [-1] * n, [-1] * n
        self.queued_est = [0.0] * W  # their estimated seconds of work
        self.nqueued = np.zeros(W, np.int64)  # how many (an array: SimView.queued_counts)
        # the same lists (and array) laid out as the compiled loops' state (_loopstate), so that a
        # move both make is one kernel, run here as plain Python on the lists (Kernel.plain)
        self.G = laid_out(
            PRED_PTR=self.pred_ptr,
            PRED_IDX=self.pred_idx,
            PRED_SIZE=self.pred_size,
            SUCC_PTR=self.succ_ptr,
            SUCC_IDX=self.succ_idx,
            CORES=self.tcores,
            SUCC_SIZE=self.succ_size,
        )
        self.T = laid_out(
            STATUS=self.status,
            NPRED=self.npred,
            WORKER=self.assigned,
            TOKEN=self.token,
            MISSING=self.missing,
            HOME=self.home,
            STARTED=self.start_time,
            COPIES=self.copies,
            QPREV=self.qprev,
            QNEXT=self.qnext,
        )
        self.K = laid_out(
            FREE=self.free,
            NRUNNING=self.nrunning,
            NQUEUED=self.nqueued,
            QHEAD=self.qhead,
            QTAIL=self.qtail,
            RHEAD=self.rhead,
            RTAIL=self.rtail,
            WSTAMP=[0] * W,
            DEAD=self.dead,
        )
        self.C = [0] * (NPLACED + 1)  # the counters the moves keep (placements; decisions carried out)
        self.touched = [0] * W  # (the workers a batch of decisions touched)
        self.F = laid_out(HAVE_W=[], HAVE_NEXT=[], HAVE_B=[], RQ_TASK=[], RQ_TOKEN=[], RQ_NEXT=[])
        # bookkeeping
        self.now = 0.0
        self.heap = []
        self._seq = 0
        self._fid = 0
        self.runs = []
        self.transfers = []
        self.lost = []
        self.served_by = {}
        self.reruns = False  # some task has completed twice: consumers record which run served them
        self.plan_gen = 0
        self.aborted_flows = 0
        self.pending_calls = []
        self.wake_at = None
        self.last_call = -_INF
        self.tclass, classes = transfer_classes(graph)
        self.net = make_network(network, cluster, self._push, self._arrive, self._flow_done, classes=classes)
        self._bind_moves()
        self.network_name = network
        #: what the run counted: the network's rate solves (``maxmin``: solves, repaired, given up),
        #: and in the compiled loop its steals and placements
        self.stats = {}
        self.view = SimView(self)
        net = self.net
        # one dispatch, indexed by EventKind
        self._handlers = (
            self._fail,
            self._on_finish,
            lambda p: net.fire(EventKind.BYTES_ARRIVED, p, self.now),
            lambda p: net.fire(EventKind.FLOW_COMPLETE, p, self.now),
            self._apply,
            lambda _: self._wake(),
            self._tick,
        )
        self._transitions = {
            (WAITING, QUEUED): self._transition_waiting_queued,
            (QUEUED, QUEUED): self._transition_queued_queued,
            (QUEUED, RUNNING): self._transition_queued_running,
            (RUNNING, DONE): self._transition_running_done,
            (RUNNING, WAITING): self._transition_running_waiting,
            (QUEUED, WAITING): self._transition_queued_waiting,
            (DONE, WAITING): self._transition_done_waiting,
        }

    def _bind_moves(self):
        """The moves of :mod:`._taskmoves` and :mod:`._datamoves` this engine runs, as plain Python
        over its lists, with its own versions of the kernels that reach its flows and network
        (:meth:`.data.DataMoves._own_kernels`) and of those it keeps more around (a transition
        with its checks, a queued task's estimated work, a heap of priorities)."""
        own = self._own_kernels()
        self._fetch = fetch_inputs.bound(**own)
        self._released = consumer_released.bound(**own)
        self._done = flow_done.bound(**own)
        self._only_copy = only_copy.bound(**own)
        self._ready = runnable.bound(**own)
        self._start_ready = start_ready.bound(**own, start_task=self._start_task)
        self._in_order = start_in_order.bound(start_task=self._start_task)
        # a task ready where it is placed: the list (first come, first served), the heap, or (a plan
        # carried out strictly) neither
        ready = self._ready if self.fifo else self._runnable_k
        self._place_k = place.bound(**own, enqueue=self._enqueue, runnable=ready)
        self._apply_k = apply_decisions.bound(assign=self._assign, start_ready=self._try_start_k)

    def _start_task(self, C, G, T, K, E, tdur, i, w, now):
        self._transition_queued_running(i, w)  # (queued on w: the caller checked)

    def _runnable_k(self, C, T, K, F, i, w):
        if self.heaped:
            self._runnable(i, w)

    def _assign(self, C, X, G, T, K, F, N, P, lat, i, old, w, now, fetch_ready):
        self._transition(i, QUEUED, w)
        return True

    def _try_start_k(self, C, G, T, K, F, E, tdur, w, now):
        self._try_start(w)

    # ------------------------------------------------------------------ the event loop
    def _push(self, t, kind, payload):
        self._seq += 1
        heapq.heappush(self.heap, (t, kind, self._seq, payload))

    def run(self, compiled: bool | None = None) -> Trace:
        """Carry out the whole run and return its trace.

        Parameters
        ----------
        compiled : bool, optional
            Carry the run out in the compiled loop (:mod:`.fastpath`, the same steps in compiled
            code): None (the default) where it covers the run and is large enough to repay it
            (:func:`.fastpath.worth`); True wherever it covers the run; False never.

        Raises
        ------
        TaskflowError
            ``compiled=True`` for a run the compiled loop does not cover.
        """
        if compiled is not False:
            why = fastpath.unsupported(self)
            if why is None and (compiled or fastpath.worth(self)):
                with FewerCollections():
                    return fastpath.run(self)
            if compiled:
                raise UsageError(f"the compiled loop does not cover this run: {why}")
        with FewerCollections():
            for w, t in self.faults.fail.items():
                self._push(t, _FAIL, w)
            if self.dynamic:
                self.scheduler.start(self.view)  # not a decision: never delayed (it may set ``tick``)
                tick = self.scheduler.tick
                if tick is not None and tick > 0:
                    phase = self.scheduler.tick_phase
                    self._push(tick if phase is None else max(0.0, float(phase)), _TICK, None)
                self._call(self.scheduler.on_ready, [i for i in range(self.n) if self.npred[i] == 0], self.view)
            else:
                self._initial_plan()
            self._loop()
        self.stats = self.net.stats()
        self.check_finished()
        meta = {"aborted_transfers": self.aborted_flows, "information": self.information}
        return Trace(
            self.runs,
            _LazyTransfers(self.transfers, self.a.ids, self.wids),
            scheduler=self.scheduler.name,
            network=self.network_name,
            served_by=self.served_by,
            lost=self.lost,
            meta=meta,
        )

    def _loop(self):
        heap, pop, handlers = self.heap, heapq.heappop, self._handlers
        net = self.net
        next_time = net.next_time
        idle = 0
        while True:
            t_net = next_time()
            if heap and heap[0][0] <= t_net:
                t, kind, _, payload = pop(heap)
                self.now = t
                handlers[kind](payload)
            elif t_net < _INF:
                self.now = t_net
                if net.advance(t_net):
                    idle = 0
                else:
                    idle += 1
                    if idle > 10_000:  # a network event that never comes due: a bug, not a hang
                        raise RuntimeError(f"network model made no progress at t={t_net!r} (internal error)")
            else:
                break

    def _tick(self, _):
        """A dynamic scheduler's periodic call; the next one only while something else is still to
        happen (ticks alone never keep a finished or stuck run going)."""
        if self.ndone >= self.n:
            return
        self._call(self.scheduler.on_tick, self.view)
        if self.heap or self.net.next_time() < _INF or any(self.running):
            self._push(self.now + self.scheduler.tick, _TICK, None)

    def check_finished(self, status=None, worker=None):
        """Raise ``RuntimeError`` naming the first task not done, if any (an internal error).

        Parameters
        ----------
        status, worker : sequence of int, optional
            Each task's state and worker (-1: none), the engine's own by default (the compiled
            loop gives its arrays).
        """
        status = self.status if status is None else status
        worker = self.assigned if worker is None else worker
        left = [i for i in range(self.n) if status[i] != DONE]
        if left:
            i, w = left[0], int(worker[left[0]])
            why = "never assigned to a worker" if w < 0 else f"stuck on worker {self.wids[w]!r}"
            raise RuntimeError(
                f"simulation ended with {len(left)} unfinished task(s); task {self.a.ids[i]!r} was {why}"
            )

    # ------------------------------------------------------------------ transitions
    def _transition(self, i, new: TaskState, *args):
        move = self._transitions.get((self.status[i], new))
        if move is None:
            raise RuntimeError(
                f"task {self.a.ids[i]!r}: no transition {TaskState(self.status[i]).name} -> {new.name} (internal error)"
            )
        move(i, *args)

    def _transition_waiting_queued(self, i, w):
        if self.validate:
            assert self.assigned[i] < 0 and self.alive[w], (i, w)
        self._place(i, w)

    def _transition_queued_queued(self, i, w):
        if self.validate:
            assert self.assigned[i] >= 0 and self.alive[w], (i, w)
        self._dequeue(i, self.assigned[i])
        self._place(i, w)

    def _place(self, i, w):
        if not self._place_k(
            self.C, None, self.G, self.T, self.K, self.F, self.net, None, None, i, w, self.now, self.fetch_ready
        ):
            self._no_copy(i)

    def _enqueue(self, T, K, i, w):
        _ENQUEUE(T, K, i, w)
        if self.dynamic:
            self.queued_est[w] += float(self.est_d[i, w])

    def _transition_queued_running(self, i, w):
        if self.validate:
            assert self.assigned[i] == w and self.npred[i] == 0 and self.missing[i] == 0, (i, w)
            assert self.free[w] >= self.tcores[i] and self.alive[w], (i, w)
        now = self.now
        d = self.faults.duration(float(self.true_d[i, w]), i, w, now)
        self._dequeue(i, w)
        _BEGIN_RUN(self.G, self.T, self.K, i, w, now)
        self.running[w].add(i)
        self.run_token[i] += 1
        k = self.done_runs[i] + 1
        for e in range(self.pred_ptr[i], self.pred_ptr[i + 1]) if self.reruns else ():
            p = self.pred_idx[e]
            if self.done_runs[p] > 1:
                self.served_by.setdefault(run_id(self.a.ids[i], k, self.a.index), {})[self.a.ids[p]] = run_id(
                    self.a.ids[p], self.done_runs[p], self.a.index
                )
        self._push(now + d, _FINISH, (i, self.run_token[i]))

    def _transition_running_done(self, i):
        w = self.assigned[i]
        if self.validate:
            assert i in self.running[w] and self.alive[w], (i, w)
        _END_RUN(self.G, self.T, self.K, i)
        self.ndone += 1
        self.done_runs[i] += 1
        if self.done_runs[i] > 1:
            self.reruns = True
        self.running[w].discard(i)
        ids = self.a.ids
        self.runs.append(
            Run(ids[i], run_id(ids[i], self.done_runs[i], self.a.index), self.wids[w], self.start_time[i], self.now)
        )
        self._only_copy(None, self.T, self.F, i, w)

    def _transition_running_waiting(self, i):
        w = self.assigned[i]
        if self.validate:
            assert not self.alive[w] and i in self.running[w], (i, w)
        self.lost.append((self.a.ids[i], self.wids[w], self.start_time[i], self.now))
        self.running[w].discard(i)
        self.nrunning[w] -= 1
        self.run_token[i] += 1
        self.status[i] = WAITING
        self.assigned[i] = -1

    def _transition_queued_waiting(self, i):
        self._dequeue(i, self.assigned[i])
        self.status[i] = WAITING
        self.assigned[i] = -1
        self.token[i] += 1

    def _transition_done_waiting(self, i):
        if self.validate:  # the worker that computed it is gone (else it would be the source)
            assert self.home[i] < 0 or not self.alive[self.home[i]], i
        self.ndone -= 1
        self.status[i] = WAITING
        self.assigned[i] = -1

    def _dequeue(self, i, w):
        _DEQUEUE(self.T, self.K, i, w)
        if self.dynamic:
            self.queued_est[w] -= float(self.est_d[i, w])

    def queued_on(self, w: int) -> list:
        """Tasks queued on worker ``w`` (assigned, not started), in assignment order."""
        out, i, nxt = [], self.qhead[w], self.qnext
        while i >= 0:
            out.append(i)
            i = nxt[i]
        return out

    # ------------------------------------------------------------------ running tasks
    def _runnable(self, i, w):
        if self.fifo:
            self._ready(None, self.T, self.K, self.F, i, w)
            return
        self._seq += 1
        key = -self.scheduler.priority(i) if self.dynamic else self.plan_rank[i]
        heapq.heappush(self.rq[w], (key, self._seq, i, self.token[i]))

    def _forget_ready(self, w):
        """``w``'s ready tasks are forgotten (it is lost)."""
        self.rq[w] = []
        self.rhead[w] = self.rtail[w] = -1

    def _try_start(self, w):
        if not self.alive[w]:
            return
        if self.fifo:
            self._start_ready(None, self.G, self.T, self.K, self.F, None, None, w, self.now)
            return
        if self.heaped:
            rq = self.rq[w]
            T, G, K = self.T, self.G, self.K
            while rq:
                _, _, i, tok = rq[0]
                if not _STILL_READY(T, i, tok, w):
                    heapq.heappop(rq)
                    continue
                if not _STARTABLE(G, T, K, i, w):
                    break
                heapq.heappop(rq)
                self._transition(i, RUNNING, w)
            return
        seq = self.seq[w]
        self.ptr[w] = self._in_order(None, self.G, self.T, self.K, None, None, seq, self.ptr[w], len(seq), w, self.now)

    def _on_finish(self, payload):
        i, rtok = payload
        if rtok != self.run_token[i] or self.status[i] != RUNNING:
            return  # a run that was lost with its worker
        w = self.assigned[i]
        self._transition_running_done(i)  # (running: checked above)
        newly_ready = self._release_consumers(i)
        if self.dynamic:
            self._call(self.scheduler.on_finished, i, w, self.view)
            if newly_ready:
                self._call(self.scheduler.on_ready, newly_ready, self.view)
        self._try_start(w)
        if self.dynamic and not self.running[w] and not self.nqueued[w]:
            self._call(self.scheduler.on_idle, w, self.view)
