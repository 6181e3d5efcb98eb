"""Configurations, their lower bounds, and the search that simulates only what the bounds leave open.

A configuration is node counts of one type, or of two types the catalog lets mix. Its cluster has
a worker per CPU node (``cores`` tasks at once) or per GPU; workers on one node share its network
interface (a rack whose uplink is the interface: the ``maxmin`` network shares it among the node's
flows), nodes reach each other at the slower interface of the two plus the catalog's latency.
A task of kind ``k`` (its ``meta["category"]``, else its id's prefix) takes ``cost / speed_k`` on
a node type whose speed for ``k`` is ``speed_k``.

Before simulating, each configuration gets two lower bounds no schedule can beat: its makespan is
at least the critical path at the fastest speed each task has there (no communication) and at
least the work (every task at its fastest speed, times the cores it needs) over the cores; its cost
is at least that makespan times its price. The search then visits configurations cheapest bound
first and skips one (without simulating it) when

* it cannot meet the deadline (bound above it), or cannot fit the budget;
* a deadline query already has an answer at most as dear as this one's cost bound;
* a budget query already has an answer at least as fast as this one's makespan bound;
* a simulated configuration is at least as fast and as cheap as this one's bounds, within
  ``tolerance`` (epsilon-dominance, Laumanns et al., Evolutionary Computation 10(3), 2002): then
  this one cannot be on the front, or is within ``tolerance`` of a point that is. With a
  deadline the epsilon is on cost only (the simulated one must be no slower, so it meets the
  deadline whenever this one could), with a budget on makespan only: the answer is within
  ``tolerance`` of the exact one.
"""

from __future__ import annotations

import bisect
import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..analysis import longest_path, task_kind
from ..cluster import Cluster, Worker
from ..errors import TaskflowError, UsageError
from ..graph import TaskGraph
from .catalog import MAX_CONFIGURATIONS, Catalog, NodeType

__all__ = ["Configuration", "Candidate", "configurations", "Evaluator", "search", "MAX_CONFIGURATIONS"]


@dataclass(frozen=True)
class Configuration:
    """Node counts per type: ``((NodeType, count), ...)``, one or two types."""

    parts: tuple

    @property
    def label(self) -> str:
        """``4 x c6i.4xlarge + 2 x g5.xlarge``."""
        return " + ".join(f"{n} x {t.name}" for t, n in self.parts)

    @property
    def nodes(self) -> int:
        """Nodes in all."""
        return sum(n for _, n in self.parts)

    @property
    def workers(self) -> int:
        """Workers in all (a GPU node gives one per GPU)."""
        return sum(t.workers * n for t, n in self.parts)

    @property
    def price(self) -> float:
        """Per hour, all nodes together."""
        return sum(t.price * n for t, n in self.parts)

    def cost(self, seconds: float, catalog: Catalog) -> float:
        """What ``seconds`` of this configuration cost (each node billed at least the catalog's minimum)."""
        return self.price * max(seconds, catalog.billing_minimum) / 3600.0

    def worker_ids(self) -> list:
        """Per part, ``{node: [worker ids]}``: ``type/k`` for a CPU node, ``type/k.gD`` per GPU."""
        return [
            {
                node: [f"{node}.g{d}" for d in range(t.gpus)] if t.gpus else [node]
                for node in (f"{t.name}/{k}" for k in range(n))
            }
            for t, n in self.parts
        ]

    def cluster(self, catalog: Catalog, speeds: list | None = None) -> Cluster:
        """The cluster: workers named ``type/node`` (``type/node.gK`` per GPU), speeds per part
        (default 1.0).

        Parameters
        ----------
        catalog : Catalog
        speeds : list of float, optional
            One per part.
        """
        speeds = speeds or [1.0] * len(self.parts)
        workers, node_of, nic = [], {}, {}
        for (t, _), v, nodes in zip(self.parts, speeds, self.worker_ids()):
            for node, ids in nodes.items():
                for w in ids:
                    workers.append(Worker(w, speed=v, cores=t.slots))
                    node_of[w], nic[w] = node, t.bandwidth
        multi = any(t.gpus > 1 for t, _ in self.parts)
        nics = {t.bandwidth for t, _ in self.parts}
        kw = dict(latency=catalog.latency, task_overhead=catalog.overhead, backplane=catalog.backplane)
        if multi:  # each node a rack: its GPUs share its interface
            kw.update(
                racks=node_of, uplink=min(nics), bandwidth=min(t.intra_bandwidth for t, _ in self.parts if t.gpus > 1)
            )
        else:
            kw.update(bandwidth=min(nics))
        if len(nics) > 1:  # nodes of two types: the slower interface of each pair
            kw["bandwidths"] = {
                a: {
                    b: min(nic[a], nic[b]) for b in nic if node_of[b] != node_of[a] and min(nic[a], nic[b]) != min(nics)
                }
                for a in nic
            }
        return Cluster(workers, **kw)


def configurations(catalog: Catalog, max_nodes: int | None = None, types=None) -> list:
    """Every configuration the catalog allows: each type at each of its counts, and each allowed
    pair at each pair of counts, at most ``max_nodes`` nodes.

    Parameters
    ----------
    catalog : Catalog
    max_nodes : int, optional
    types : iterable of str, optional
        Only these types.

    Returns
    -------
    list of Configuration

    Raises
    ------
    TaskflowError
        More than :data:`MAX_CONFIGURATIONS` configurations.
    """
    keep = set(types) if types is not None else None
    ok = [t for t in catalog.types if keep is None or t.name in keep]
    cap = max_nodes or math.inf
    by_name = {t.name: t for t in ok}
    total = sum(bisect.bisect_right(t.counts, cap) for t in ok)
    for a, b in catalog.mix:  # counted until the limit is passed: a huge catalog is refused at once
        if total > MAX_CONFIGURATIONS:
            break
        if a in by_name and b in by_name:
            tb = by_name[b]
            total += sum(bisect.bisect_right(tb.counts, cap - na) for na in by_name[a].counts)
    if total > MAX_CONFIGURATIONS:
        raise UsageError(
            f"catalog {catalog.name!r} gives more than {MAX_CONFIGURATIONS:,} configurations: "
            f"narrow the search with max_nodes (--max-nodes) or types (--types)"
        )
    out = [Configuration(((t, n),)) for t in ok for n in t.counts if n <= cap]
    for a, b in catalog.mix:
        if a in by_name and b in by_name:
            ta, tb = by_name[a], by_name[b]
            out += [Configuration(((ta, na), (tb, nb))) for na in ta.counts for nb in tb.counts if na + nb <= cap]
    return out


@dataclass
class Candidate:
    """A configuration and what the search found of it.

    ``status``: ``front`` (on the Pareto front of makespan and cost), ``simulated`` (simulated,
    dominated), ``pruned`` (skipped on its bounds), ``infeasible`` (a task cannot run there).
    """

    config: Configuration
    lb_time: float = 0.0
    lb_cost: float = 0.0
    time: float | None = None
    cost: float | None = None
    scheduler: str | None = None
    by_scheduler: dict = field(default_factory=dict)
    status: str = "pending"
    reason: str = ""
    bound: str = ""  # what the run was held back by: compute, network, critical path, idle
    utilisation: float | None = None
    network_share: float | None = None
    samples: list | None = None
    p_miss: float | None = None

    @property
    def label(self) -> str:
        """The configuration's label."""
        return self.config.label

    def to_dict(self) -> dict:
        """A JSON-ready row."""
        c = self.config
        return {
            "configuration": c.label,
            "nodes": c.nodes,
            "workers": c.workers,
            "price_per_hour": c.price,
            "status": self.status,
            "makespan": self.time,
            "cost": self.cost,
            "scheduler": self.scheduler,
            "makespan_by_scheduler": self.by_scheduler,
            "lower_bound_makespan": self.lb_time,
            "lower_bound_cost": self.lb_cost,
            "bound": self.bound,
            "utilisation": self.utilisation,
            "network_share": self.network_share,
            "reason": self.reason,
            "samples": self.samples,
            "p_miss_deadline": self.p_miss,
        }


class Evaluator:
    """Bounds and simulations of configurations for one workload and catalog (caches per graph)."""

    def __init__(self, workload, catalog: Catalog, schedulers, network: str = "maxmin", seed: int = 0):
        self.workload, self.catalog = workload, catalog
        self.schedulers, self.network, self.seed = list(schedulers), network, seed
        self._kinds = {}  # id(graph) -> (graph, per-task kind index, kinds)
        self._speeds = {}  # (id(graph), type) -> per-task speed
        self._folded = {}  # (id(graph), type) -> graph with that type's per-kind speeds folded in

    # -- per-task speeds ----------------------------------------------------------------------
    def _kind_index(self, g: TaskGraph):
        hit = self._kinds.get(id(g))
        if hit is None:
            kinds = [task_kind(g, t) for t in g.ids]
            uniq = sorted(set(kinds))
            pos = {k: i for i, k in enumerate(uniq)}
            hit = self._kinds[id(g)] = (g, np.array([pos[k] for k in kinds], np.int64), uniq)
        return hit[1], hit[2]

    def speeds(self, g: TaskGraph, t: NodeType) -> np.ndarray:
        """Per task of ``g``, its speed on a node of type ``t``."""
        key = (id(g), t.name)
        if key not in self._speeds:
            idx, kinds = self._kind_index(g)
            per = np.array([t.speed_of(k, self.catalog.groups) for k in kinds])
            self._speeds[key] = per[idx] if len(idx) else np.zeros(0)
        return self._speeds[key]

    def costed(self, g: TaskGraph, config: Configuration):
        """``(graph, cluster)`` where every task of kind ``k`` takes ``cost / speed_k`` on each node."""
        (t1, _), rest = config.parts[0], config.parts[1:]
        s1 = self.speeds(g, t1)
        uniform = len(s1) == 0 or bool((s1 == s1[0]).all())
        key = (id(g), t1.name)
        if uniform:
            base, v = g, [float(s1[0]) if len(s1) else 1.0]
            fold = np.ones(len(s1))
        else:
            if key not in self._folded:
                cost = g.arrays.cost / s1
                self._folded[key] = g.with_costs(cost=dict(zip(g.ids, cost.tolist())))
            base, v, fold = self._folded[key], [1.0], s1
        exact = {}
        ids = config.worker_ids()
        for part, (t2, _) in enumerate(rest, start=1):
            ratio = self.speeds(g, t2) / fold
            common = Counter(ratio.tolist()).most_common(1)[0][0] if len(ratio) else 1.0
            v.append(float(common))
            odd = np.flatnonzero(ratio != common)
            if len(odd):
                mine = [w for node in ids[part].values() for w in node]
                cost2 = g.arrays.cost / self.speeds(g, t2)
                for i in odd.tolist():
                    exact.setdefault(g.ids[i], {}).update({w: float(cost2[i]) for w in mine})
        cluster = config.cluster(self.catalog, v)
        if exact:
            base = base.with_costs(costs=exact)
        return base, cluster

    # -- bounds -------------------------------------------------------------------------------
    def infeasible(self, g: TaskGraph, config: Configuration) -> str:
        """Why no task placement exists ('' when one does): cores or memory a task needs."""
        a = g.arrays
        if not a.n:
            return ""
        slots = max(t.slots for t, _ in config.parts)
        big = int(a.cores.max())
        if big > slots:
            i = int(np.argmax(a.cores))
            return f"task {a.ids[i]!r} needs {big} cores; a worker here has at most {slots}"
        need = _working_set(a)
        mem = max(t.memory for t, _ in config.parts)
        i = int(np.argmax(need))
        if need[i] > mem:
            return (
                f"task {a.ids[i]!r} holds {need[i] / 2**30:.2f} GiB (inputs and output); a worker here has "
                f"{mem / 2**30:.2f} GiB"
            )
        return ""

    def bounds(self, g: TaskGraph, config: Configuration) -> tuple:
        """``(critical path, work / capacity)`` of ``g`` on ``config``: each a lower bound of any makespan."""
        a = g.arrays
        if not a.n:
            return 0.0, 0.0
        per = np.array([self.speeds(g, t) for t, _ in config.parts])  # types x tasks
        oh = self.catalog.overhead
        best = a.cost / per.max(axis=0) + oh
        cp = float(longest_path(a, best)[0])
        slots = sum(t.slots * t.workers * n for t, n in config.parts)
        work = float((best * a.cores).sum()) / slots
        return cp, work

    # -- simulation ---------------------------------------------------------------------------
    def simulate(
        self,
        config: Configuration,
        scheduler: str,
        noise: float = 0.0,
        seed: int | None = None,
        network: str | None = None,
        free: bool = False,
    ) -> float:
        """The makespan of ``scheduler`` on ``config`` (steps extrapolated, see the workload)."""
        from ..simulator import simulate

        times = []
        for g, _ in self.workload.graphs(config):
            gg, cluster = self.costed(g, config)
            if free:
                cluster = cluster.replace(bandwidth=math.inf, bandwidths=None, latency=0.0, racks=None, uplink=None)
            tr = simulate(
                gg,
                cluster,
                scheduler,
                network=network or self.network,
                noise=noise,
                seed=self.seed if seed is None else seed,
            )
            times.append(tr.makespan)
        return self.workload.total(times)


def _working_set(a) -> np.ndarray:
    """Per task: bytes of its inputs plus its output."""
    inputs = np.bincount(a.dst, weights=a.size, minlength=a.n) if a.m else np.zeros(a.n)
    return inputs + a.output_size


def search(
    ev: Evaluator,
    configs: list,
    deadline: float | None = None,
    budget: float | None = None,
    tolerance: float = 0.0,
    progress=None,
    prune_answer: bool = True,
) -> tuple:
    """Bound every configuration, simulate those the bounds leave open; mark the front.

    Parameters
    ----------
    ev : Evaluator
    configs : list of Configuration
    deadline, budget : float, optional
        Seconds; catalog currency.
    tolerance : float
        Epsilon of the dominance that skips a configuration on its bounds.
    progress : callable, optional
        Called with (done, total) after each configuration.
    prune_answer : bool
        Skip what cannot beat the answer found so far (False when the answer is chosen later,
        from noisy samples: the cheapest nominal answer may not meet the deadline often enough).

    Returns
    -------
    (list of Candidate, dict)
        Every configuration, and counts and seconds spent.
    """
    cat = ev.catalog
    t0 = time.perf_counter()
    cands = []
    for c in configs:
        k = Candidate(c)
        why, cps, works = ev.workload.infeasible(c), [], []
        for g, _ in [] if why else ev.workload.graphs(c):
            why = why or ev.infeasible(g, c)
            if why:
                break
            cp, work = ev.bounds(g, c)
            cps.append(cp)
            works.append(work)
        if why:
            k.status, k.reason = "infeasible", why
        else:
            k.lb_time = ev.workload.bound(cps, works)
            k.lb_cost = c.cost(k.lb_time, cat)
        cands.append(k)
    t_bounds = time.perf_counter() - t0
    open_ = [k for k in cands if k.status == "pending"]
    order = sorted(
        open_,
        key=(lambda k: (k.lb_time, k.lb_cost))
        if budget is not None and deadline is None
        else (lambda k: (k.lb_cost, k.lb_time)),
    )
    done, best = [], None  # best: the answer so far to the deadline / budget query
    # epsilon on the objective the query ranks by, none on the one it constrains: a configuration
    # skipped for one no slower (deadline) or no dearer (budget) than its bounds, and at most
    # ``tolerance`` worse on the other, could at best beat the answer by ``tolerance``
    eps_t = 1.0 if deadline is not None else 1.0 + tolerance
    eps_c = 1.0 if deadline is None and budget is not None else 1.0 + tolerance
    for n, k in enumerate(order):
        if deadline is not None and k.lb_time > deadline:
            k.status, k.reason = "pruned", f"cannot meet the deadline: at least {k.lb_time:.4g} s"
        elif budget is not None and k.lb_cost > budget:
            k.status, k.reason = "pruned", f"cannot fit the budget: at least {k.lb_cost:.4g} {cat.currency}"
        elif prune_answer and deadline is not None and best is not None and k.lb_cost >= best.cost:
            k.status, k.reason = (
                "pruned",
                f"costs at least {k.lb_cost:.4g}, not less than {best.label} "
                f"({best.cost:.4g}) which meets the deadline",
            )
        elif prune_answer and deadline is None and budget is not None and best is not None and k.lb_time >= best.time:
            k.status, k.reason = (
                "pruned",
                f"takes at least {k.lb_time:.4g} s, not less than {best.label} ({best.time:.4g} s) within the budget",
            )
        else:
            dom = next((s for s in done if s.time <= k.lb_time * eps_t and s.cost <= k.lb_cost * eps_c), None)
            if dom is not None:
                k.status, k.reason = (
                    "pruned",
                    f"{dom.label} is as fast and as cheap as this one's lower bounds "
                    f"({k.lb_time:.4g} s, {k.lb_cost:.4g} {cat.currency})",
                )
            else:
                _evaluate(ev, k)
                if k.status == "infeasible":  # every scheduler failed on it (named in its reason)
                    continue
                done.append(k)
                if deadline is not None and k.time <= deadline and (best is None or k.cost < best.cost):
                    best = k
                if (
                    deadline is None
                    and budget is not None
                    and k.cost <= budget
                    and (best is None or k.time < best.time)
                ):
                    best = k
        if progress is not None:
            progress(n + 1, len(order))
    _mark_front(done)
    stats = {
        "configurations": len(cands),
        "simulated": len(done),
        "pruned": sum(k.status == "pruned" for k in cands),
        "infeasible": sum(k.status == "infeasible" for k in cands),
        "simulations": sum(len(k.by_scheduler) for k in done),
        "seconds_bounds": t_bounds,
        "seconds": time.perf_counter() - t0,
    }
    return cands, stats


def _evaluate(ev: Evaluator, k: Candidate) -> None:
    """Simulate every scheduler on ``k``'s configuration (stop at one that reaches the bound)."""
    for p in ev.schedulers:
        try:
            t = ev.simulate(k.config, p)
        except TaskflowError as e:
            k.by_scheduler[p] = None
            k.reason = k.reason or f"{p}: {e}"
            continue
        k.by_scheduler[p] = t
        if k.time is None or t < k.time:
            k.time, k.scheduler = t, p
        if t <= k.lb_time * (1 + 1e-9):
            break  # optimal: no scheduler does better
    if k.time is None:
        k.status = "infeasible"
        return
    k.cost = k.config.cost(k.time, ev.catalog)
    k.status = "simulated"


def _mark_front(done: list) -> None:
    """Status ``front`` for the simulated candidates no other is at least as fast and as cheap as
    (and strictly better in one); the others name the one that beats them."""
    pts = sorted(done, key=lambda k: (k.cost, k.time))
    best_time = math.inf
    front = []
    for k in pts:
        if k.time < best_time:
            k.status = "front"
            front.append(k)
            best_time = k.time
    for k in pts:
        if k.status != "front":
            beat = next(f for f in front if f.time <= k.time and f.cost <= k.cost)
            k.reason = f"{beat.label} is as fast or faster ({beat.time:.4g} s) and no dearer ({beat.cost:.4g})"
