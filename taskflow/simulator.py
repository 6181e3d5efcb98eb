"""Discrete-event simulation of a task graph on a cluster, in seconds of simulated time.

Schedulers see *estimates*; the simulated world has its own truth:

* ``information``: what the scheduler is told of costs: ``exact`` (the graph's costs), ``mean``
  (every task at the mean cost), ``blind`` (every task costs 1), ``user`` (a task's
  ``meta["expected_cost"]`` where given, as Estee graphs carry).
* ``noise``: each task's true duration is multiplied by ``exp(N(0, noise))`` (seeded by ``seed``).
* ``stragglers``: ``{worker: (factor, t)}``: tasks starting on that worker at or after ``t`` take
  ``factor`` times longer.
* ``fail``: ``{worker: t}``: the worker is lost at ``t`` with its running and queued tasks, its
  in-flight transfers and the outputs held only there. Finished outputs still needed are
  recomputed. A static plan is re-planned on the survivors with the same scheduler for the
  unfinished part; a dynamic scheduler is told (``on_worker_lost``). Results of sink tasks count as
  delivered to the client when they finish, so they are never recomputed.

Static plans run as plans: each worker starts its tasks in plan order (planned start time), each
as soon as its inputs have arrived and enough cores are free. Transfers start as soon as both the
producer has finished and the consumer's worker is known. An output sent to a worker once is not
sent there again. With exact information, the ``simple`` network, no noise and no faults, the
simulated makespan equals the plan's.

``scheduler_interval`` is the minimum time between two invocations of the scheduler (events wait
and are delivered together), ``decision_latency`` the time from an invocation until its
decisions take effect (a static plan included).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .cluster import Cluster
from .costs import CostModel
from .errors import TaskflowError
from .graph import TaskGraph
from .network import Flow, make_network
from .schedule import Schedule
from .trace import Run, Trace, Transfer, run_id

__all__ = ["simulate", "Simulator", "SimView", "estimated_graph", "INFORMATION"]

INFORMATION = ("exact", "mean", "blind", "user")
WAITING, QUEUED, RUNNING, DONE = 0, 1, 2, 3
# event kinds, in the order they are handled at the same instant
_FAIL, _FINISH, _ARRIVE, _FLOW_DONE, _APPLY, _WAKE = 0, 1, 2, 3, 4, 5
_INF = math.inf


def estimated_graph(graph: TaskGraph, information: str) -> TaskGraph:
    """The graph as the scheduler is told it (see the module docstring)."""
    if information == "exact":
        return graph
    a = graph.arrays
    if information == "mean":
        mean = float(a.cost.mean()) if a.n else 0.0
        return graph.with_costs(cost={t: mean for t in a.ids}, costs={a.ids[i]: None for i in a.costs})
    if information == "blind":
        return graph.with_costs(cost={t: 1.0 for t in a.ids}, costs={a.ids[i]: None for i in a.costs})
    if information == "user":
        expected = {a.ids[i]: md["expected_cost"] for i, md in graph._meta.items() if "expected_cost" in md}
        return graph.with_costs(cost=expected)
    raise TaskflowError(f"unknown information mode {information!r}; known: {', '.join(INFORMATION)}")


class _LazyTransfers:
    """Transfers kept as index tuples and turned into :class:`Transfer` rows when first read."""

    def __init__(self, raw, ids, wids):
        self.raw, self.ids, self.wids = raw, ids, wids

    def materialise(self) -> list:
        ids, wids = self.ids, self.wids
        return [Transfer(ids[p], wids[a], wids[b], z, t0, t1) for p, a, b, z, t0, t1 in self.raw]


class SimView:
    """What a dynamic scheduler may ask about the simulated world (indices, estimated costs)."""

    def __init__(self, sim: "Simulator"):
        self._s = sim
        self.model = sim.model
        self.arrays = sim.a
        self.cluster = sim.cluster

    @property
    def now(self) -> float:
        return self._s.now

    def alive_workers(self) -> list:
        return [w for w, ok in enumerate(self._s.alive) if ok]

    def is_alive(self, w: int) -> bool:
        return self._s.alive[w]

    def assigned(self, task: int) -> int:
        return self._s.assigned[task]

    def is_ready(self, task: int) -> bool:
        """Every input of ``task`` has been computed (it may still have to be moved)."""
        return self._s.npred[task] == 0

    def started(self, task: int) -> bool:
        return self._s.status[task] >= RUNNING

    def queued(self, w: int) -> list:
        """Tasks assigned to ``w`` that have not started, in assignment order."""
        return list(self._s.qset[w])

    def running(self, w: int) -> list:
        return list(self._s.running[w])

    def free_cores(self, w: int) -> int:
        return self._s.free[w]

    def occupancy(self, w: int) -> float:
        """Estimated seconds of work on ``w``: queued tasks plus what is left of running ones."""
        s = self._s
        d = s.est_d
        now = s.now
        occ = 0.0
        for i in s.running[w]:
            occ += max(0.0, float(d[i, w]) - (now - s.start_time[i]))
        return occ + s.queued_est[w]

    def nqueued(self, w: int) -> int:
        return len(self._s.qset[w])

    def locations(self, task: int) -> list:
        h = self._s.have[task]
        return [w for w in h] if h else []

    def missing_bytes(self, task: int, w: int) -> float:
        """Bytes of ``task``'s computed inputs not yet on ``w``."""
        s = self._s
        total = 0.0
        for k in range(s.pred_ptr[task], s.pred_ptr[task + 1]):
            p = s.pred_idx[k]
            if s.status[p] == DONE and s.have[p].get(w, -1.0) < s.pred_size[k]:
                total += s.pred_size[k]
        return total

    def transfer_estimate(self, task: int, w: int) -> float:
        """Estimated seconds to bring ``task``'s missing inputs to ``w``, one after another."""
        s = self._s
        t = 0.0
        for k in range(s.pred_ptr[task], s.pred_ptr[task + 1]):
            p = s.pred_idx[k]
            if s.status[p] == DONE and s.have[p].get(w, -1.0) < s.pred_size[k]:
                src = s.source_of(p, s.pred_size[k])
                if src >= 0:
                    t += s.lat[src][w] + s.pred_size[k] * s.inv[src][w]
        return t


class Simulator:
    """One simulation run; see :func:`simulate`."""

    def __init__(self, graph: TaskGraph, cluster: Cluster, scheduler="heft", network: str = "maxmin", plan=None,
                 noise: float = 0.0, stragglers=None, fail=None, information: str = "exact", seed: int = 0,
                 scheduler_interval: float = 0.0, decision_latency: float = 0.0, scheduler_options=None):
        import schedulers as _schedulers  # the model does not import schedulers; the simulator may

        self.graph = graph
        self.cluster = cluster
        self.true = CostModel(graph, cluster)
        self.est_graph = estimated_graph(graph, information)
        self.model = self.true if self.est_graph is graph else CostModel(self.est_graph, cluster)
        self.information = information
        if plan is not None and scheduler is None:
            scheduler = plan.scheduler if plan.scheduler in _schedulers.available() else "heft"
        self.scheduler = _schedulers.get_scheduler(scheduler, seed=seed, **(scheduler_options or {}))
        self.dynamic = self.scheduler.kind == "dynamic"
        self.plan = plan
        a = self.a = graph.arrays
        n, W = a.n, len(cluster)
        self.n, self.W = n, W
        rng = np.random.default_rng(seed)
        if noise < 0 or not math.isfinite(noise):
            raise TaskflowError(f"noise must be finite and >= 0, got {noise!r}")
        self.noise = np.exp(rng.normal(0.0, noise, n)).tolist() if noise > 0 else None
        self.true_d = self.true.durations  # numpy: n x W lists would cost more than they save
        self.est_d = self.model.durations
        self.wids = cluster.ids
        self.stragglers = {}
        for wid, spec in (stragglers or {}).items():
            factor, t = spec
            if wid not in cluster.index:
                raise TaskflowError(f"straggler: unknown worker {wid!r}")
            if not (factor > 0 and math.isfinite(factor)) or not t >= 0:
                raise TaskflowError(f"straggler {wid!r}: need factor > 0 and time >= 0, got {spec!r}")
            self.stragglers[cluster.index[wid]] = (float(factor), float(t))
        self.fail = {}
        for wid, t in (fail or {}).items():
            if wid not in cluster.index:
                raise TaskflowError(f"fail: unknown worker {wid!r}")
            if not t >= 0:
                raise TaskflowError(f"fail {wid!r}: time must be >= 0, got {t!r}")
            self.fail[cluster.index[wid]] = float(t)
        if len(self.fail) >= W:
            raise TaskflowError("fail: every worker would be lost; at least one must survive")
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
        self.inv = cluster.inv_bandwidth.tolist()
        # task state
        self.status = [WAITING] * n
        self.npred = np.diff(a.pred_ptr).tolist()
        self.assigned = [-1] * n
        self.token = [0] * n
        self.run_token = [0] * n
        self.missing = [0] * n
        self.done_runs = [0] * n
        self.start_time = [0.0] * n
        self.have = [None] * n  # task -> {worker: bytes of its output there}
        self.home = [-1] * n  # where the task's output was computed
        self.flows = {}  # (task, worker) -> live Flow
        # worker state
        self.alive = [True] * W
        self.free = cluster.cores.tolist()
        self.running = [set() for _ in range(W)]
        self.seq = [[] for _ in range(W)]  # static: plan order
        self.ptr = [0] * W
        self.rq = [[] for _ in range(W)]  # dynamic: runnable heap
        self.qset = [{} for _ in range(W)]  # tasks assigned and not started, in assignment order
        self.queued_est = [0.0] * W  # their estimated seconds of work
        # bookkeeping
        self.now = 0.0
        self.heap = []
        self._seq = 0
        self._fid = 0
        self.runs = []
        self.transfers = []
        self.lost = []
        self.served_by = {}
        self.reruns = False
        self.plan_gen = 0  # some task has completed twice: consumers record which run served them
        self.aborted_flows = 0
        self.pending_calls = []
        self.wake_at = None
        self.last_call = -_INF
        self.unassigned_ready = set()
        prio = [0.0] * n
        for i, md in graph.metas().items():
            v = md.get("priority")
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise TaskflowError(f"task {a.ids[i]!r}: meta priority must be a finite number, got {v!r}")
                prio[i] = float(v)
        levels = sorted(set(prio), reverse=True)
        rank = {v: c for c, v in enumerate(levels)}
        self.tclass = [rank[v] for v in prio] if len(levels) > 1 else None
        self.net = make_network(network, cluster, self._push_net, classes=len(levels))
        self.simple = network == "simple"
        self.network_name = network
        self.view = SimView(self)

    # ------------------------------------------------------------------ events
    def _push(self, t, kind, payload):
        self._seq += 1
        heapq.heappush(self.heap, (t, kind, self._seq, payload))

    def _push_net(self, t, kind, payload):
        self._seq += 1
        heapq.heappush(self.heap, (t, _ARRIVE if kind == 1 else _FLOW_DONE, self._seq, payload))

    # ------------------------------------------------------------------ run
    def run(self) -> Trace:
        for w, t in self.fail.items():
            self._push(t, _FAIL, w)
        if self.dynamic:
            self._call(self.scheduler.start, self.view)
            ready = [i for i in range(self.n) if self.npred[i] == 0]
            self.unassigned_ready.update(ready)
            self._call(self.scheduler.on_ready, ready, self.view)
        else:
            self._initial_plan()
        net = self.net
        heap = self.heap
        if self.simple:
            self._loop_simple()
        idle_pops = 0
        while not self.simple:
            t_net = net.next_time()
            if heap and heap[0][0] <= t_net:
                t, kind, _, payload = heapq.heappop(heap)
                self.now = t
                if kind == _FINISH:
                    self._finish(*payload)
                elif kind == _ARRIVE:
                    self._arrive(*payload)
                elif kind == _FLOW_DONE:
                    self._flow_done(payload[0])
                elif kind == _FAIL:
                    self._fail(payload)
                elif kind == _APPLY:
                    self._apply(payload)
                elif kind == _WAKE:
                    self._wake()
            elif t_net < _INF:
                self.now = t_net
                due = net.pop_due(t_net)
                idle_pops = idle_pops + 1 if not due else 0
                if idle_pops > 10_000:  # a network event that never comes due: a bug, not a hang
                    raise TaskflowError(f"network model made no progress at t={t_net!r} (internal error)")
                for flow, item in due:
                    if item is None:
                        self._flow_done(flow)
                    else:
                        self._arrive(flow, item)
            else:
                break
        self._check_finished()
        meta = {"aborted_transfers": self.aborted_flows, "information": self.information}
        return Trace(self.runs, _LazyTransfers(self.transfers, self.a.ids, self.wids), scheduler=self.scheduler.name, network=self.network_name,
                     served_by=self.served_by, lost=self.lost, meta=meta)

    def _loop_simple(self):
        heap = self.heap
        pop = heapq.heappop
        finish, arrive, flow_done = self._finish, self._arrive, self._flow_done
        while heap:
            t, kind, _, payload = pop(heap)
            self.now = t
            if kind == _FINISH:
                finish(*payload)
            elif kind == _FLOW_DONE:
                flow_done(payload[0])
            elif kind == _ARRIVE:
                arrive(*payload)
            elif kind == _FAIL:
                self._fail(payload)
            elif kind == _APPLY:
                self._apply(payload)
            else:
                self._wake()

    def _check_finished(self):
        left = [i for i in range(self.n) if self.status[i] != DONE]
        if left:
            i = left[0]
            why = "never assigned to a worker" if self.assigned[i] < 0 else \
                f"stuck on worker {self.wids[self.assigned[i]]!r}"
            raise TaskflowError(f"simulation ended with {len(left)} unfinished task(s); task {self.a.ids[i]!r} was {why}")

    # ------------------------------------------------------------------ static plans
    def _initial_plan(self):
        if self.plan is not None:
            plan = self.plan
            missing = set(self.a.ids) - set(plan.tasks)
            if missing or len(plan.tasks) != self.n:
                raise TaskflowError(f"plan does not place every task exactly once (e.g. {sorted(missing, key=str)[:1]})")
        else:
            plan = self.scheduler.schedule(self.est_graph, self.cluster, model=self.model)
        self.plan_gen += 1
        self._later(self._apply_plan, (self.plan_gen, plan))

    def _apply_plan(self, item):
        gen, plan = item
        if gen != self.plan_gen:
            return  # overtaken by a re-plan (a worker was lost before this plan took effect)
        index, cidx = self.a.index, self.cluster.index
        rows = sorted(range(len(plan)), key=lambda k: (plan.start[k], plan.finish[k], index[plan.tasks[k]]))
        for w in range(self.W):
            self.seq[w] = []
            self.ptr[w] = 0
        touched = set()
        for k in rows:
            i = index[plan.tasks[k]]
            if self.status[i] in (RUNNING, DONE):
                continue
            w = cidx[plan.workers[k]]
            if not self.alive[w]:
                raise TaskflowError(f"plan puts task {plan.tasks[k]!r} on lost worker {plan.workers[k]!r}")
            self.seq[w].append(i)
            self._assign(i, w)
            touched.add(w)
        for w in touched:
            self._try_start(w)

    # ------------------------------------------------------------------ assignment and data
    def _assign(self, i, w):
        old = self.assigned[i]
        if self.status[i] == QUEUED and old >= 0:
            self._dequeue(i, old)
        self.unassigned_ready.discard(i)
        self.assigned[i] = w
        self.status[i] = QUEUED
        self.token[i] += 1
        self.missing[i] = 0
        self.qset[w][i] = None
        if self.dynamic:
            self.queued_est[w] += float(self.est_d[i, w])
        status = self.status
        for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
            p = self.pred_idx[k]
            if status[p] == DONE:
                self._need(i, p, self.pred_size[k], w)
        if self.dynamic and self.npred[i] == 0 and self.missing[i] == 0:
            self._runnable(i, w)

    def _dequeue(self, i, w):
        if self.qset[w].pop(i, 0) is None and self.dynamic:
            self.queued_est[w] -= float(self.est_d[i, w])

    def source_of(self, p, nbytes):
        home = self.home[p]
        if home >= 0 and self.alive[home]:
            return home
        h = self.have[p]
        if not h:
            return -1
        best = -1
        for w, b in h.items():
            if b >= nbytes and self.alive[w]:
                if b == _INF:
                    return w  # the producer's own worker
                if best < 0:
                    best = w
        return best

    def _need(self, i, p, s, w):
        """Consumer ``i`` on ``w`` needs ``s`` bytes of ``p``'s output."""
        hw = self.have[p].get(w)
        if hw is not None and hw >= s:  # present (a zero-byte edge still needs its latency once)
            return
        self.missing[i] += 1
        f = self.flows.get(p * self.W + w)
        if f is not None and not f.complete:
            if f.total < s - f.base:
                self.net.extend(f, s - f.base, self.now)
            self.net.wait(f, s - f.base, i, self.token[i], self.now)
            return
        base = 0.0 if hw is None else hw
        src = self.source_of(p, s)
        if src < 0:
            raise TaskflowError(f"no copy of task {self.a.ids[p]!r}'s output is left (internal error)")
        self._fid += 1
        f = Flow(self._fid, p, src, w, s - base, self.now, self.lat[src][w])
        f.base = base
        if self.tclass is not None:
            f.cls = self.tclass[i]
        self.flows[p * self.W + w] = f
        self.net.start(f, self.now)
        self.net.wait(f, s - base, i, self.token[i], self.now)

    def _arrive(self, flow, item):
        nbytes, i, tok = item
        if flow.aborted or tok != self.token[i] or self.status[i] != QUEUED or self.assigned[i] != flow.dst:
            return
        self.missing[i] -= 1
        if self.missing[i] == 0 and self.npred[i] == 0:
            w = flow.dst
            if self.dynamic:
                self._runnable(i, w)
            self._try_start(w)

    def _flow_done(self, flow):
        if flow.aborted:
            return
        released = ()
        if self.simple:
            if self.now < flow.finish:
                return  # a stale completion of a flow that was extended since
            released = self.net.complete(flow)
        flow.finish = self.now
        flow.complete = True
        key = flow.task * self.W + flow.dst
        if self.flows.get(key) is flow:
            del self.flows[key]
        h = self.have[flow.task]
        h[flow.dst] = max(h.get(flow.dst, 0.0), flow.base + flow.total)
        self.transfers.append((flow.task, flow.src, flow.dst, flow.total, flow.start, self.now))
        for nbytes, _, consumer, token in released:
            self._arrive(flow, (nbytes, consumer, token))

    # ------------------------------------------------------------------ running tasks
    def _runnable(self, i, w):
        self._seq += 1
        heapq.heappush(self.rq[w], (-self.scheduler.priority(i), self._seq, i, self.token[i]))

    def _try_start(self, w):
        if not self.alive[w]:
            return
        if self.dynamic:
            rq = self.rq[w]
            while rq:
                _, _, i, tok = rq[0]
                if tok != self.token[i] or self.assigned[i] != w or self.status[i] != QUEUED:
                    heapq.heappop(rq)
                    continue
                if self.free[w] < self.tcores[i]:
                    break
                heapq.heappop(rq)
                self._start(i, w)
            return
        seq = self.seq[w]
        k = self.ptr[w]
        status, assigned = self.status, self.assigned
        while k < len(seq):
            i = seq[k]
            if assigned[i] != w or status[i] != QUEUED:
                k += 1
                continue
            if self.npred[i] or self.missing[i] or self.free[w] < self.tcores[i]:
                break
            self._start(i, w)
            k += 1
        self.ptr[w] = k

    def _start(self, i, w):
        now = self.now
        d = float(self.true_d[i, w])
        if self.noise is not None:
            d *= self.noise[i]
        st = self.stragglers.get(w)
        if st is not None and now >= st[1]:
            d *= st[0]
        self.status[i] = RUNNING
        self._dequeue(i, w)
        self.free[w] -= self.tcores[i]
        self.running[w].add(i)
        self.start_time[i] = now
        self.run_token[i] += 1
        k = self.done_runs[i] + 1
        for e in (range(self.pred_ptr[i], self.pred_ptr[i + 1]) if self.reruns else ()):
            p = self.pred_idx[e]
            if self.done_runs[p] > 1:
                self.served_by.setdefault(run_id(self.a.ids[i], k), {})[self.a.ids[p]] = run_id(self.a.ids[p], self.done_runs[p])
        self._push(now + d, _FINISH, (i, self.run_token[i]))

    def _finish(self, i, rtok):
        if rtok != self.run_token[i] or self.status[i] != RUNNING:
            return  # a run that was lost with its worker
        w = self.assigned[i]
        self.status[i] = DONE
        self.done_runs[i] += 1
        if self.done_runs[i] > 1:
            self.reruns = True
        self.free[w] += self.tcores[i]
        self.running[w].discard(i)
        ids = self.a.ids
        self.runs.append(Run(ids[i], run_id(ids[i], self.done_runs[i]), self.wids[w], self.start_time[i], self.now))
        self.have[i] = {w: _INF}
        self.home[i] = w
        newly_ready = []
        npred, assigned, status = self.npred, self.assigned, self.status
        for e in range(self.succ_ptr[i], self.succ_ptr[i + 1]):
            j = self.succ_idx[e]
            if status[j] >= RUNNING:
                continue
            npred[j] -= 1
            aj = assigned[j]
            if aj >= 0 and status[j] == QUEUED:
                self._need(j, i, self.succ_size[e], aj)
                if npred[j] == 0 and self.missing[j] == 0:
                    if self.dynamic:
                        self._runnable(j, aj)
                    self._try_start(aj)
            elif npred[j] == 0:
                newly_ready.append(j)
        if self.dynamic:
            self.unassigned_ready.update(newly_ready)
            self._call(self.scheduler.on_finished, i, w, self.view)
            if newly_ready:
                self._call(self.scheduler.on_ready, newly_ready, self.view)
        self._try_start(w)
        if self.dynamic and not self.running[w] and not self.qset[w]:
            self._call(self.scheduler.on_idle, w, self.view)

    # ------------------------------------------------------------------ scheduler calls and delays
    def _immediate(self) -> bool:
        return self.interval <= 0 and self.latency_decision <= 0

    def _call(self, hook, *args):
        if self._immediate():
            self._apply(hook(*args))
            return
        self.pending_calls.append((hook, args))
        if self.wake_at is None:
            self.wake_at = max(self.now, self.last_call + self.interval)
            self._push(self.wake_at, _WAKE, None)

    def _later(self, fn, arg):
        """Run ``fn(arg)`` (a decision) after the decision latency."""
        if self.latency_decision <= 0:
            fn(arg)
        else:
            self._push(self.now + self.latency_decision, _APPLY, (fn, arg))

    def _wake(self):
        self.wake_at = None
        self.last_call = self.now
        calls, self.pending_calls = self.pending_calls, []
        decisions = []
        for hook, args in calls:
            decisions.extend(hook(*args) or [])
        self._later(self._apply, decisions)

    def _apply(self, payload):
        if isinstance(payload, tuple) and len(payload) == 2 and callable(payload[0]):
            payload[0](payload[1])
            return
        touched = set()
        for i, w in payload or []:
            st = self.status[i]
            if st >= RUNNING or not self.alive[w] or (st == QUEUED and self.assigned[i] == w):
                continue
            if st == WAITING and self.npred[i] != 0:
                continue  # not ready: a dynamic policy places ready tasks only
            old = self.assigned[i] if st == QUEUED else -1
            self._assign(i, w)
            touched.add(w)
            if old >= 0:
                touched.add(old)
        for w in touched:
            self._try_start(w)
        for w in touched:
            if self.dynamic and self.alive[w] and not self.running[w] and not self.qset[w]:
                self._call(self.scheduler.on_idle, w, self.view)

    # ------------------------------------------------------------------ failures
    def _fail(self, w):
        now = self.now
        self.alive[w] = False
        ids = self.a.ids
        affected = []
        for i in list(self.running[w]):
            self.lost.append((ids[i], self.wids[w], self.start_time[i], now))
            self.run_token[i] += 1
            self.status[i] = WAITING
            self.assigned[i] = -1
            affected.append(i)
        self.running[w].clear()
        self.free[w] = 0
        for i in list(self.qset[w]):
            self.status[i] = WAITING
            self.assigned[i] = -1
            self.token[i] += 1
            affected.append(i)
        self.qset[w] = {}
        self.queued_est[w] = 0.0
        self.rq[w] = []
        self.seq[w] = []
        for key, f in list(self.flows.items()):
            if f.src == w or f.dst == w:
                self.net.abort(f, now)
                self.aborted_flows += 1
                del self.flows[key]
        for p in range(self.n):
            h = self.have[p]
            if h and w in h:
                del h[w]
        # outputs lost for good and still needed are recomputed (transitively)
        status = self.status
        stack = [i for i in range(self.n) if status[i] in (WAITING, QUEUED)]
        seen = set(stack)
        while stack:
            j = stack.pop()
            for k in range(self.pred_ptr[j], self.pred_ptr[j + 1]):
                p = self.pred_idx[k]
                if status[p] == DONE and self.source_of(p, self.pred_size[k]) < 0:
                    status[p] = WAITING
                    self.assigned[p] = -1
                    affected.append(p)
                    if p not in seen:
                        seen.add(p)
                        stack.append(p)
        # inputs not computed any more, counted afresh for every task yet to start
        for j in range(self.n):
            if status[j] in (WAITING, QUEUED):
                self.npred[j] = sum(1 for k in range(self.pred_ptr[j], self.pred_ptr[j + 1])
                                    if status[self.pred_idx[k]] != DONE)
        # tasks still queued on survivors may have waited on aborted transfers: ask again
        for i in (range(self.n) if self.dynamic else ()):
            if status[i] == QUEUED:
                a = self.assigned[i]
                self.token[i] += 1
                self.missing[i] = 0
                for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
                    p = self.pred_idx[k]
                    if status[p] == DONE:
                        self._need(i, p, self.pred_size[k], a)
                if self.dynamic and self.npred[i] == 0 and self.missing[i] == 0:
                    self._runnable(i, a)
        if self.dynamic:
            ready = [i for i in range(self.n) if status[i] == WAITING and self.npred[i] == 0]
            self.unassigned_ready.update(ready)
            self._call(self.scheduler.on_worker_lost, w, sorted(set(affected)), self.view)
            self._call(self.scheduler.on_ready, ready, self.view)
            for x in self.view.alive_workers():
                self._try_start(x)
        else:
            self._replan()

    def _replan(self):
        unfinished = [self.a.ids[i] for i in range(self.n) if self.status[i] in (WAITING, QUEUED)]
        for i in range(self.n):
            if self.status[i] == QUEUED:
                self._dequeue(i, self.assigned[i])
                self.status[i] = WAITING
                self.assigned[i] = -1
                self.token[i] += 1
        if not unfinished:
            return
        alive_ids = [self.wids[w] for w in range(self.W) if self.alive[w]]
        survivors = self.cluster.subset(alive_ids)
        # exact costs on lost workers no longer apply
        sub = self.est_graph.subgraph(unfinished).restrict_costs(alive_ids)
        plan = self.scheduler.schedule(sub, survivors)
        self.plan_gen += 1
        self._later(self._apply_plan, (self.plan_gen, plan))


def simulate(graph: TaskGraph, cluster: Cluster, scheduler="heft", network: str = "maxmin", *, plan=None,
             noise: float = 0.0, stragglers=None, fail=None, information: str = "exact", seed: int = 0,
             scheduler_interval: float = 0.0, decision_latency: float = 0.0, scheduler_options=None) -> Trace:
    """Simulate ``graph`` on ``cluster`` under ``scheduler`` (a name or an instance).

    Parameters
    ----------
    network : ``"simple"`` or ``"maxmin"`` (see :mod:`taskflow.network`)
    plan : Schedule, optional
        Execute this plan instead of asking a static scheduler (``scheduler`` then only re-plans
        after a failure).
    noise, stragglers, fail, information, seed, scheduler_interval, decision_latency
        See the module docstring.

    Returns
    -------
    Trace
        Per run worker, start, finish; every transfer; validates with :meth:`Trace.validate`.

    Examples
    --------
    >>> from taskflow import TaskGraph, Cluster
    >>> g = TaskGraph(); a = g.add_task("a", cost=2, output_size=10); b = g.add_task("b", cost=1)
    >>> g.add_edge("a", "b")
    >>> simulate(g, Cluster.homogeneous(2, bandwidth=10.0), "heft", network="simple").makespan
    3.0
    """
    return Simulator(graph, cluster, scheduler, network, plan=plan, noise=noise, stragglers=stragglers, fail=fail,
                     information=information, seed=seed, scheduler_interval=scheduler_interval,
                     decision_latency=decision_latency, scheduler_options=scheduler_options).run()
