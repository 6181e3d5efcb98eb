"""``dask-model``: Dask distributed's own scheduling decisions, rule by rule, for the simulator.

Rules of ``distributed`` 2026.8 (``scheduler.py``: ``decide_worker_rootish_queuing_enabled``,
``decide_worker_non_rootish``, ``decide_worker``, ``worker_objective``, ``is_rootish``,
``check_idle_saturated``; ``stealing.py``: ``balance``), with its defaults. The runtime uses it to
predict a run under Dask's own scheduling (``work-stealing``), given what the scheduler holds just
before the graph is submitted: its duration estimates per task prefix, its worker table and how many
tasks it has seen. :mod:`schedulers.work_stealing` is the simpler, generic model of the same idea.

* **What Dask knows of a task**: one duration estimate per *prefix* (a task's kind, the lead of its
  Dask key), the same on every worker, a moving average (each finished run counts half) of the
  durations it measured; a prefix never seen is estimated at ``unknown_duration`` (Dask: 0.5 s). A
  worker's *occupancy* is the sum of the estimates of the tasks it is processing (sent and not
  finished, running ones included) plus the bytes they have to fetch over ``bandwidth``.
* **Root-ish tasks are queued**: a task whose group (its prefix) has more than twice as many tasks
  as the cluster has threads, and depends on fewer than 5 groups holding fewer than 5 tasks in all
  (option ``rootish``),
  waits in one scheduler-side queue (in ``dask.order`` priority) until a worker has fewer than
  ``ceil(saturation x threads)`` tasks processing; it then goes to the least busy such worker
  (processing tasks per thread).
* **A task without inputs** that is not root-ish goes to the least occupied of the idle workers (or
  of all, when none is idle); when that one has nothing, Dask searches round-robin for a worker with
  nothing, starting at position ``n_tasks % W`` of its worker table (ordered by address), where
  ``n_tasks`` counts every task the scheduler has sent to a worker (option ``n_tasks``: before
  this graph).
* **Any other task** goes to one of the workers holding one of its inputs: the earliest estimated
  start (occupancy per thread plus the bytes it lacks there over ``bandwidth``), ties to the one
  holding fewer bytes.
* **Stealing** (``balance``, every ``steal_interval``, Dask: 1 s, first after ``steal_phase``):
  idle workers (fewer tasks than threads, or occupancy under half the cluster's average) ask for
  tasks of saturated ones (else from the busiest, with more tasks than threads and
  over ``min_victim`` seconds), cheapest to move first (by the level of input transfer time plus
  ``steal_latency`` over the estimate), each to the thief where it would start earliest, when the
  thief's occupancy plus the move and the task stays under the victim's minus half of them; a
  task already running stays where it is (its request fails), and a thief asks once per round
  unless it is still idle counting what it asked for.
* **Workers** run their tasks in ``dask.order`` priority (option ``priorities``).
* **A peer-to-peer shuffle's outputs** (a task whose meta has ``"p2p": (position, outputs)``:
  :func:`taskflow.runtime.scheduler.dask_hooks.estimated_graph` marks them) go where Dask's shuffle
  extension pins them: output ``position`` of ``outputs`` to the worker at ``W * position //
  outputs`` of the table (range sharding; Dask also rotates the list from one shuffle to the
  next, which this model of Dask does not).

Where it differs from Dask: with queuing off (``saturation`` inf) a root-ish task goes to the
least busy worker (Dask then gives a few siblings in a row to one worker); ties that Dask breaks by the iteration order of a set of workers go to
the earlier worker of ``tie_order`` (the order in which such a set lists them; default: the
table's); a steal takes effect at once (Dask asks
the victim first) unless the task has started (then the victim keeps it, as in Dask); Dask's sets
of tasks, which it walks in the order of their keys' hashes (random per scheduler process), are
walked in a random order drawn from the seed; the durations Dask measures arrive
with each finish, not after the worker's report travels.

Options (all optional; durations in the simulation's seconds): ``durations`` ({prefix: seconds}),
``unknown_duration``, ``n_tasks``, ``order`` (worker ids in the scheduler's table order), ``tie_order``,
``bandwidth`` (bytes/s; default the cluster's mean), ``saturation`` (1.1), ``steal_interval`` (1.0;
0 or None: no stealing), ``steal_phase``, ``steal_latency`` (0.1), ``min_victim`` (0.2), ``rootish``
(Dask's two thresholds: groups and tasks depended on, ``(5, 5)``), ``priorities``
({task id: position in ``dask.order``}, lower first; default: the graph's task order;
:func:`taskflow.runtime.predict.dask_priorities` computes Dask's own from the real keys),
``pinned`` ({task id: worker id}: a task whose output already sits on that worker, mid-run; it runs
there, and what it takes is not a duration Dask learns), ``within`` (worker ids every task not
pinned is restricted to: Dask held to a subset of the workers; once every one of them is lost the
hold is lifted, as the taskflow plugin lifts it, and the tasks go to Dask's own on every worker).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from taskflow.analysis import task_kind
from taskflow.scheduling import DynamicScheduler, register

__all__ = ["DaskModel"]

#: Dask's stealing levels: ``round(log2(transfer / compute) + 6)``, 1 to 14 (0: no inputs)
_LEVELS = 15


@register
class DaskModel(DynamicScheduler):
    """Dask distributed's scheduling decisions, rule by rule; see the module docstring."""

    name = "dask-model"
    option_names = None  # Dask's state, filled in by the runtime
    summary = "Dask's own decisions: queued roots, inputs' holders, round-robin, 1 s stealing (dynamic)"

    def start(self, view):
        o = self.options
        m = view.cost_model
        g = m.graph
        a = view.arrays
        n, W = a.n, len(view.cluster)
        self.n, self.W = n, W
        ids = list(view.cluster.ids)
        order = [ids.index(w) for w in o["order"]] if o.get("order") else list(range(W))
        self.table = order + [w for w in range(W) if w not in order]
        ties = [ids.index(w) for w in o["tie_order"]] if o.get("tie_order") else list(self.table)
        self.ties = ties + [w for w in self.table if w not in ties]
        self.nthreads = view.cluster.cores.astype(float).tolist()
        self.total_threads = sum(self.nthreads)
        bw = o.get("bandwidth")
        if bw is None:
            inv = np.asarray(m.inv_bandwidth, float)
            off = ~np.eye(W, dtype=bool)
            mean_inv = float(inv[off].mean()) if W > 1 else 0.0
            bw = 1.0 / mean_inv if mean_inv > 0 else math.inf
        self.bw = float(bw)
        self.saturation = float(o.get("saturation", 1.1))
        self.slots = [
            math.inf if math.isinf(self.saturation) else max(math.ceil(self.saturation * c), 1) for c in self.nthreads
        ]
        si = o.get("steal_interval", 1.0)
        self.tick = float(si) if si else None
        self.tick_phase = o.get("steal_phase")
        self.steal_latency = float(o.get("steal_latency", 0.1))
        self.min_victim = float(o.get("min_victim", 0.2))
        # prefixes (Dask's task groups too: a key's group is its prefix here)
        kinds = [task_kind(g, t) for t in g.ids]
        names = sorted(set(kinds))
        pid = {k: j for j, k in enumerate(names)}
        self.prefix = [pid[k] for k in kinds]
        known = o.get("durations") or {}
        unknown = float(o.get("unknown_duration", 0.5))
        self.measured = [k in known and known[k] is not None and known[k] >= 0 for k in names]
        self.est = [float(known[k]) if ok else unknown for k, ok in zip(names, self.measured)]
        # where a task can run (its cores fit, its duration is finite): Dask's restrictions
        ok = np.isfinite(m.durations) & (a.cores[:, None] <= view.cluster.cores[None, :])
        self.valid = [set(np.flatnonzero(row).tolist()) for row in ok]
        self.restricted = [len(v) < W for v in self.valid]
        # a peer-to-peer shuffle's outputs: Dask's shuffle extension pins output ``pos`` of ``n``
        # to the worker at position ``W * pos // n`` of its workers (range sharding)
        for i, md in g.metas().items():
            if md.get("p2p"):
                pos, count = md["p2p"]
                w = self.table[len(self.table) * int(pos) // max(1, int(count))]
                if w in self.valid[i]:
                    self.valid[i], self.restricted[i] = {w}, True
        self.pred_ptr, self.pred_idx = a.pred_ptr.tolist(), a.pred_idx.tolist()
        self.pred_size = a.size[a.pred_eid].tolist()
        succ_size = a.size[a.succ_eid]
        self.out_size = (
            np.maximum.reduceat(np.append(succ_size, 0.0), a.succ_ptr[:-1]).tolist() if len(succ_size) else [0.0] * n
        )
        for i in range(n):
            if a.succ_ptr[i] == a.succ_ptr[i + 1]:
                self.out_size[i] = 0.0
        self.dep_bytes = [sum(self.pred_size[self.pred_ptr[i] : self.pred_ptr[i + 1]]) for i in range(n)]
        # root-ish groups: more tasks than twice the threads, few groups (and tasks) depended on
        size = [0] * len(names)
        for p in self.prefix:
            size[p] += 1
        deps = [set() for _ in names]
        for i in range(n):
            for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
                deps[self.prefix[i]].add(self.prefix[self.pred_idx[k]])
        groups, tasks = o.get("rootish", (5, 5))
        self.rootish_group = [
            size[p] > 2 * self.total_threads and len(deps[p]) < groups and sum(size[q] for q in deps[p]) < tasks
            for p in range(len(names))
        ]
        # mid-run: data already computed sits where it is (``pinned``: those tasks cost nothing and
        # tell Dask nothing of their prefix), and a hold restricts every other task (``within``)
        index = {t: j for j, t in enumerate(g.ids)}
        self.given = {index[t] for t in (o.get("pinned") or {}) if t in index}
        within = {ids.index(w) for w in o["within"] if w in ids} if o.get("within") is not None else None
        self.within, self.unheld = within, {}  # the hold, and each held task's rights before it
        for i in range(n):
            if i in self.given:
                self.valid[i], self.restricted[i] = {ids.index(o["pinned"][g.ids[i]])}, True
            elif within is not None and self.valid[i] & within:
                self.unheld[i] = self.valid[i], self.restricted[i]
                self.valid[i], self.restricted[i] = self.valid[i] & within, True
        pos = o.get("priorities")  # dask.order's positions (the runtime computes Dask's own)
        self.prio = [pos[t] for t in g.ids] if pos else list(range(n))
        self.n_tasks = int(o.get("n_tasks", 0))  # Dask counts every task it sends to a worker
        # the scheduler's state
        self.processing = [dict() for _ in range(W)]  # worker -> {task: None}, in assignment order
        self.count = [[0] * len(names) for _ in range(W)]
        self.net = [0.0] * W  # bytes the processing tasks have to fetch
        self.fetch = [0.0] * n  # a processing task's share of that
        self.held = [0.0] * W  # bytes of outputs held
        self.level = [-1] * n  # stealing level of a processing task (-1: not stealable)
        self.queue = []  # root-ish ready tasks waiting for a free slot: (priority, task)
        self.inq = set()  # the tasks in it
        self.where = [-1] * n  # the worker a task is processing on (-1: none)
        self.alive = [True] * W
        self.release_later = False
        # the order of Dask's sets of tasks (by their keys' hashes, random per scheduler process)
        self.rank = np.random.default_rng(self.seed).permutation(n).tolist()

    # ------------------------------------------------------------------ Dask's bookkeeping
    def priority(self, task):
        return -self.prio[task]

    def occupancy(self, w) -> float:
        """Dask's occupancy of worker ``w``: its processing tasks' estimates plus their fetches."""
        est, c = self.est, self.count[w]
        return sum(k * est[p] for p, k in enumerate(c) if k) + self.net[w] / self.bw

    def _total_occupancy(self) -> float:
        return sum(self.occupancy(w) for w in range(self.W) if self.alive[w])

    def _unoccupied(self, w, occ, total) -> bool:
        c = self.nthreads[w]
        return len(self.processing[w]) < c or occ < c * (total / self.total_threads) / 2

    def _idle(self) -> list:
        total = self._total_occupancy()
        return [w for w in self.table if self.alive[w] and self._unoccupied(w, self.occupancy(w), total)]

    def _comm_bytes(self, i, w, view) -> float:
        """Bytes of ``i``'s inputs not held on ``w``."""
        out = 0.0
        for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
            if w not in view.locations(self.pred_idx[k]):
                out += self.pred_size[k]
        return out

    def _add(self, i, w, view, stolen=False) -> None:
        self.n_tasks += not stolen
        self.where[i] = w
        self.processing[w][i] = None
        self.count[w][self.prefix[i]] += 1
        nb = self._comm_bytes(i, w, view)
        self.fetch[i] = nb
        self.net[w] += nb
        self.held[w] += nb
        self.level[i] = self._level(i)

    def _remove(self, i, w) -> None:
        if self.processing[w].pop(i, 0) is None:
            self.where[i] = -1
            self.count[w][self.prefix[i]] -= 1
            self.net[w] = max(0.0, self.net[w] - self.fetch[i])
            self.fetch[i] = 0.0

    def _level(self, i) -> int:
        if self.pred_ptr[i] == self.pred_ptr[i + 1]:
            return 0
        compute = self.est[self.prefix[i]]
        if compute <= 0:
            return -1
        transfer = self.dep_bytes[i] / self.bw + self.steal_latency
        if transfer <= 0:
            return 1  # nothing to move and no latency: the cheapest level with inputs
        level = round(math.log2(transfer / compute) + 6)
        return max(level, 1) if level < _LEVELS else -1

    # ------------------------------------------------------------------ decide_worker
    def _rootish(self, i) -> bool:
        return self.rootish_group[self.prefix[i]] and not self.restricted[i]

    def _least_busy_with_slot(self):
        best, key = None, math.inf
        for w in self.ties:
            if self.alive[w] and len(self.processing[w]) < self.slots[w]:
                k = len(self.processing[w]) / self.nthreads[w]
                if k < key:
                    best, key = w, k
        return best

    def _decide(self, i, view):
        """Dask's worker for ready task ``i``, or None to queue it."""
        if self._rootish(i):
            return self._least_busy_with_slot()
        valid = self.valid[i]
        if self.pred_ptr[i] == self.pred_ptr[i + 1] and not self.restricted[i]:
            pool = self._idle() or [w for w in self.table if self.alive[w]]
            occ = [self.occupancy(w) for w in pool]
            k = int(np.argmin(occ))
            if occ[k] == 0:
                start = self.n_tasks % len(pool)
                for j in range(len(pool)):
                    if occ[(j + start) % len(pool)] == 0:
                        k = (j + start) % len(pool)
                        break
            return pool[k]
        cand = set()
        for k in range(self.pred_ptr[i], self.pred_ptr[i + 1]):
            cand.update(w for w in view.locations(self.pred_idx[k]) if self.alive[w])
        cand = [w for w in self.ties if w in cand and w in valid] or [
            w for w in self.ties if self.alive[w] and w in valid
        ]
        if not cand:
            return None  # no live worker can run it: it waits (Dask: no-worker)
        if len(cand) == 1:
            return cand[0]
        return min(
            cand,
            key=lambda w: (self.occupancy(w) / self.nthreads[w] + self._comm_bytes(i, w, view) / self.bw, self.held[w]),
        )

    def _assign(self, tasks, view) -> list:
        out = []
        for i in sorted(tasks, key=self.prio.__getitem__):
            if i in self.inq or self.where[i] >= 0 or view.started(i):
                continue  # queued already, or placed (a scheduler may be offered a task again)
            w = self._decide(i, view)
            if w is None:
                if self._rootish(i):
                    heapq.heappush(self.queue, (self.prio[i], i))
                    self.inq.add(i)
                # else no live worker can run it: it stays unassigned, as in Dask's no-worker
                continue
            self._add(i, w, view)
            out.append((i, w))
        return out

    def _release(self, view) -> list:
        """Queued root-ish tasks into the slots that opened."""
        out = []
        while self.queue:
            w = self._least_busy_with_slot()
            if w is None:
                break
            _, i = heapq.heappop(self.queue)
            self.inq.discard(i)
            if self.where[i] >= 0 or view.started(i):
                continue
            self._add(i, w, view)
            out.append((i, w))
        return out

    # ------------------------------------------------------------------ events
    def on_ready(self, tasks, view):
        out = self._assign(tasks, view)
        if self.release_later:
            self.release_later = False
            out += self._release(view)
        return out

    def on_finished(self, task, worker, view):
        took = view.now - view.start_time(task)
        p = self.prefix[task]
        if task not in self.given:
            self.est[p] = 0.5 * took + 0.5 * self.est[p] if self.measured[p] else took
            self.measured[p] = True
        self._remove(task, self.where[task] if self.where[task] >= 0 else worker)
        self.held[worker] += self.out_size[task]
        # newly ready dependents are decided first (on_ready follows); then the queue fills free slots
        if any(view.is_ready(j) and view.assigned(j) < 0 and not view.started(j) for j in self._succ(task, view)):
            self.release_later = True
            return []
        return self._release(view)

    def _succ(self, task, view):
        a = view.arrays
        return a.succ_idx[a.succ_ptr[task] : a.succ_ptr[task + 1]].tolist()

    def on_worker_lost(self, worker, tasks, view):
        if self.alive[worker]:
            self.total_threads = max(1.0, self.total_threads - self.nthreads[worker])  # Dask's total_nthreads
        self.alive[worker] = False
        for i in list(self.processing[worker]):
            self._remove(i, worker)
        if self.within and not any(self.alive[w] for w in self.within):  # the hold lost its last worker:
            for i, (valid, restricted) in self.unheld.items():  # its tasks go back to Dask's own on every worker
                self.valid[i], self.restricted[i] = valid, restricted
            self.within, self.unheld = None, {}
            tasks = [i for i in range(len(self.valid)) if self.where[i] < 0 and i not in self.inq]
        return self._assign([i for i in tasks if view.is_ready(i)], view)

    def on_tick(self, view):
        """Dask's ``balance``: idle workers steal from saturated (or the busiest) ones."""
        total = self._total_occupancy()
        live = [w for w in self.table if self.alive[w]]
        occ = {w: self.occupancy(w) for w in live}  # with the steals asked for in this round
        nproc = {w: len(self.processing[w]) for w in live}
        thieves = [w for w in self.ties if self.alive[w] and self._unoccupied(w, occ[w], total)]
        if not thieves or len(thieves) == len(live):
            return []
        avg = total / self.total_threads
        victims = []
        for w in live:
            p, c = nproc[w], self.nthreads[w]
            if p > c:
                pending = occ[w] * (p - c) / (p * c)
                if 0.4 < pending > 1.9 * avg:
                    victims.append(w)
        if not victims:
            victims = [
                w
                for w in sorted(live, key=lambda x: -occ[x])[:10]
                if occ[w] > self.min_victim and nproc[w] > self.nthreads[w] and w not in thieves
            ]
            if not victims:
                return []
        victims.sort(key=lambda x: -occ[x])
        out = []
        rank = self.rank
        for level in range(_LEVELS):
            if not thieves:
                break
            for v in victims:
                if not thieves:
                    break
                # a set of tasks in Dask: its order comes from the keys' hashes (``rank``)
                for i in sorted((t for t in self.processing[v] if self.level[t] == level), key=rank.__getitem__):
                    if not thieves:
                        break
                    comp = self.est[self.prefix[i]]
                    can = [w for w in thieves if w in self.valid[i]]
                    if not can:
                        continue
                    thief = min(
                        can,
                        key=lambda w: (
                            occ[w] / self.nthreads[w] + self._comm_bytes(i, w, view) / self.bw,
                            self.held[w],
                        ),
                    )
                    c_thief = self._comm_bytes(i, thief, view) / self.bw
                    c_victim = self._comm_bytes(i, v, view) / self.bw
                    if occ[thief] + c_thief + comp <= occ[v] - (c_victim + comp) / 2:
                        occ[thief] += comp + c_thief
                        occ[v] -= comp + c_victim
                        nproc[thief] += 1
                        self.level[i] = -1  # asked once: out of the stealable sets
                        if not view.started(i):  # else the victim answers that it is computing it
                            self._remove(i, v)
                            self._add(i, thief, view, stolen=True)
                            out.append((i, thief))
                        if not self._unoccupied(thief, occ[thief], nproc[thief]):
                            thieves.remove(thief)
        return out
