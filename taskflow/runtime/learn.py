"""Learning costs from what runs measured: :func:`learn_costs` for one graph, :class:`CostProfile`
to keep what runs measured in a file and plan the next run with it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Cluster, Worker
from ..errors import FormatError
from ..graph import TaskGraph

__all__ = ["learn_costs", "CostProfile", "PROFILE_FORMAT"]


def learn_costs(graph: TaskGraph, report, cluster: Cluster | None = None) -> TaskGraph:
    """A copy of ``graph`` whose costs are what ``report`` (a RunReport or Trace) measured, per task
    name prefix (``meta['category']``, else the id up to its first ``-``/``_``/digit) and per worker:
    a task gets exact costs on the workers where its prefix ran (their mean duration, in unscaled
    seconds), and ``cost`` = the prefix's mean duration x speed elsewhere.

    Parameters
    ----------
    graph : TaskGraph
    report : RunReport or Trace
    cluster : Cluster, optional
        Worker speeds (default: the report's cluster).

    Returns
    -------
    TaskGraph
    """
    trace = report.trace if hasattr(report, "trace") else report
    scale = getattr(report, "time_scale", 1.0) or 1.0
    cluster = cluster or getattr(report, "cluster", None)
    speed = {str(w.id): w.speed for w in cluster.workers} if cluster is not None else {}
    by = {}
    for r in trace.runs:
        p = _task_prefix(graph, r.task)
        by.setdefault(p, {}).setdefault(str(r.worker), []).append((r.finish - r.start) / scale)
    cost, costs = {}, {}
    for t in graph.ids:
        p = _task_prefix(graph, t)
        if p not in by:
            continue
        per = {w: float(np.mean(v)) for w, v in by[p].items()}
        norm = [d * speed.get(w, 1.0) for w, d in per.items()]
        cost[t] = float(np.mean(norm))
        wid = {str(w.id): w.id for w in cluster.workers} if cluster is not None else {w: w for w in per}
        costs[t] = {wid[w]: d for w, d in per.items() if w in wid}
    return graph.with_costs(cost=cost, costs=costs)


def _task_prefix(graph: TaskGraph, t) -> str:
    md = graph.task(t).meta or {}
    if md.get("category"):
        return str(md["category"])
    s = str(t)
    for k, ch in enumerate(s):
        if ch in "-_#" or ch.isdigit():
            return s[:k] or s
    return s


PROFILE_FORMAT = "taskflow-cost-profile"


@dataclass
class CostProfile:
    """What runs on Dask measured, to plan the next run with (``taskflow run --profile FILE``).

    Durations are in unscaled seconds (a run's ``time_scale`` divided out); bandwidths in bytes per
    real second; ``task_overhead`` in real seconds (Dask's dispatch time per task).

    Attributes
    ----------
    tasks : dict
        Task id (as text) -> {worker name: mean seconds}.
    prefixes : dict
        Task-name prefix -> {worker name: mean seconds}, for tasks not measured themselves.
    speeds : dict
        Worker name -> speed relative to the others, learned from tasks of one prefix that ran on
        several workers.
    bandwidth : dict
        Source worker name -> {destination name: bytes per real second}: the median over that pair's
        transfers clearly longer than the latency of bytes / (duration - latency).
    task_overhead : float or None
        Median gap between two tasks on one worker when the second was ready before the first ended.
    runs : int
        How many runs were merged in.
    latency : float or None
        Real seconds a transfer takes besides its bytes: the median duration of transfers under
        64 KiB (None when there were none).
    """

    tasks: dict = field(default_factory=dict)
    prefixes: dict = field(default_factory=dict)
    speeds: dict = field(default_factory=dict)
    bandwidth: dict = field(default_factory=dict)
    task_overhead: float | None = None
    runs: int = 0
    latency: float | None = None

    # ------------------------------------------------------------------ learning
    @classmethod
    def learn(cls, graph: TaskGraph, report) -> "CostProfile":
        """The profile one run measured.

        Parameters
        ----------
        graph : TaskGraph
            The graph that ran.
        report : RunReport
        """
        scale = report.time_scale or 1.0
        runs = report.trace.runs
        per_task: dict = {}
        per_prefix: dict = {}
        for r in runs:
            d = (r.finish - r.start) / scale
            per_task.setdefault(str(r.task), {}).setdefault(str(r.worker), []).append(d)
            per_prefix.setdefault(_task_prefix(graph, r.task), {}).setdefault(str(r.worker), []).append(d)
        tasks = {t: {w: float(np.mean(v)) for w, v in ws.items()} for t, ws in per_task.items()}
        prefixes = {p: {w: float(np.mean(v)) for w, v in ws.items()} for p, ws in per_prefix.items()}
        latency, bandwidth = _network(report.trace.transfers)
        return cls(tasks, prefixes, _learned_speeds(per_prefix), bandwidth,
                   _dispatch_gap(graph, runs, report.trace.transfers), 1, latency)

    def merge(self, newer: "CostProfile") -> "CostProfile":
        """This profile updated with ``newer`` measurements (running means, weighted by runs).

        Parameters
        ----------
        newer : CostProfile
        """
        n, m = max(self.runs, 0), max(newer.runs, 1)

        def mix(old: dict, new: dict) -> dict:
            out = {k: dict(v) for k, v in old.items()}
            for k, row in new.items():
                mine = out.setdefault(k, {})
                for w, x in row.items():
                    mine[w] = (mine[w] * n + x * m) / (n + m) if w in mine else x
            return out

        def mean(a, b):
            return b if a is None else a if b is None else (a * n + b * m) / (n + m)

        speeds = dict(self.speeds)
        speeds.update(newer.speeds)
        return CostProfile(mix(self.tasks, newer.tasks), mix(self.prefixes, newer.prefixes), speeds,
                           mix(self.bandwidth, newer.bandwidth), mean(self.task_overhead, newer.task_overhead),
                           n + m, mean(self.latency, newer.latency))

    # ------------------------------------------------------------------ planning with it
    def apply(self, graph: TaskGraph, cluster: Cluster, time_scale: float = 1.0, size_scale: float = 1.0) -> tuple:
        """``(graph, cluster)`` as this profile measured them: a task measured before gets exact
        costs on the workers it ran on and, elsewhere, its speed-1 cost over the worker's speed; a
        task whose prefix was measured gets the prefix's means; the cluster gets the learned
        speeds, per-pair bandwidths and dispatch overhead. Tasks and workers nobody measured keep
        what the graph and cluster declare.

        Parameters
        ----------
        graph : TaskGraph
        cluster : Cluster
        time_scale, size_scale : float
            The coming run's scales (an emulated run's seconds and bytes are scaled): measured real
            bandwidths and overheads are converted to the model's units with them.

        Returns
        -------
        (TaskGraph, Cluster)
        """
        names = {str(w.id): w.id for w in cluster.workers}
        speeds = {w: self.speeds.get(w, 1.0) for w in names} if self.speeds else {str(w.id): w.speed for w in
                                                                                   cluster.workers}
        cost, costs = {}, {}
        for t in graph.ids:
            row = self.tasks.get(str(t)) or self.prefixes.get(_task_prefix(graph, t))
            if not row:
                continue
            row = {w: d for w, d in row.items() if w in names}
            if not row:
                continue
            cost[t] = float(np.mean([d * speeds.get(w, 1.0) for w, d in row.items()]))
            costs[t] = {names[w]: d for w, d in row.items()}
        g = graph.with_costs(cost=cost, costs=costs) if cost else graph
        workers = [Worker(w.id, speeds.get(str(w.id), w.speed) if self.speeds else w.speed, w.cores,
                          address=w.address) for w in cluster.workers]
        to_model = time_scale / size_scale  # real bytes per real second -> model bytes per model second
        pairs = {names[a]: {names[b]: v * to_model for b, v in row.items() if b in names and b != a}
                 for a, row in self.bandwidth.items() if a in names}
        overhead = cluster.task_overhead if self.task_overhead is None else self.task_overhead / time_scale
        latency = cluster.latency if self.latency is None else self.latency / time_scale
        c = Cluster(workers, cluster.bandwidth, {a: r for a, r in pairs.items() if r} or cluster.bandwidths,
                    latency, cluster.name, task_overhead=overhead)
        return g, c

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict:
        """The JSON document (``"format": "taskflow-cost-profile"``)."""
        return {"format": PROFILE_FORMAT, "version": 1, "runs": self.runs, "task_overhead": self.task_overhead,
                "latency": self.latency,
                "speeds": self.speeds, "bandwidth": self.bandwidth, "prefixes": self.prefixes, "tasks": self.tasks}

    def save(self, path) -> None:
        """Write the profile as JSON, atomically.

        Parameters
        ----------
        path : str or os.PathLike
        """
        from ..formats._util import atomic_write, dump_json

        atomic_write(os.fspath(path), dump_json(self.to_dict()))

    @classmethod
    def load(cls, path) -> "CostProfile":
        """Read a profile file.

        Parameters
        ----------
        path : str or os.PathLike

        Raises
        ------
        FormatError
            Not a cost profile, or a malformed one (the field is named).
        """
        from ..formats._util import parse_json

        p = os.fspath(path)
        try:
            with open(p, encoding="utf-8") as f:
                doc = parse_json(f.read(), p)
        except OSError as e:
            raise FormatError(f"{p}: cannot read ({e.strerror})") from None
        if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT:
            raise FormatError(f"{p}: not a cost profile (expected \"format\": \"{PROFILE_FORMAT}\")")
        out = cls(runs=int(doc.get("runs", 1)))
        for name in ("tasks", "prefixes", "bandwidth"):
            table = doc.get(name, {})
            if not isinstance(table, dict) or not all(isinstance(r, dict) for r in table.values()):
                raise FormatError(f"{p}: field {name!r} must map names to {{worker: number}}")
            try:
                setattr(out, name, {str(k): {str(w): float(v) for w, v in r.items()} for k, r in table.items()})
            except (TypeError, ValueError):
                raise FormatError(f"{p}: field {name!r} holds a value that is not a number") from None
        try:
            out.speeds = {str(w): float(v) for w, v in (doc.get("speeds") or {}).items()}
            out.task_overhead = None if doc.get("task_overhead") is None else float(doc["task_overhead"])
            out.latency = None if doc.get("latency") is None else float(doc["latency"])
        except (TypeError, ValueError, AttributeError):
            raise FormatError(f"{p}: fields 'speeds', 'task_overhead' and 'latency' must hold numbers") from None
        return out


def _learned_speeds(per_prefix: dict) -> dict:
    """Relative worker speeds from prefixes that ran on several workers: the geometric mean over
    those prefixes of (the prefix's mean duration over its workers / its mean on this worker)."""
    logs: dict = {}
    for row in per_prefix.values():
        means = {w: float(np.mean(v)) for w, v in row.items() if np.mean(v) > 0}
        if len(means) < 2:
            continue
        ref = float(np.exp(np.mean(np.log(list(means.values())))))
        for w, m in means.items():
            logs.setdefault(w, []).append(np.log(ref / m))
    return {w: float(np.exp(np.mean(v))) for w, v in logs.items()}


def _network(transfers) -> tuple:
    """``(latency, {source: {destination: bytes per second}})`` from measured transfers: the latency
    is the median duration of the small ones (< 64 KiB; None without any); a pair's bandwidth the
    median of bytes / (duration - latency) over its larger ones."""
    xs = [t for t in transfers if t.finish > t.start]
    small = [t.finish - t.start for t in xs if t.bytes < 64 * 1024]
    latency = float(np.median(small)) if small else None
    bw: dict = {}
    for t in xs:
        secs = t.finish - t.start - (latency or 0.0)
        if t.bytes >= 64 * 1024 and secs > 0:
            bw.setdefault(str(t.source), {}).setdefault(str(t.destination), []).append(t.bytes / secs)
    return latency, {a: {b: float(np.median(v)) for b, v in row.items()} for a, row in bw.items()}


def _dispatch_gap(graph: TaskGraph, runs, transfers) -> float | None:
    """Dask's time per task besides its work: the median gap between two consecutive tasks on one
    worker when the second was ready (its inputs computed and moved there) before the first ended."""
    finish = {r.task: r.finish for r in runs}
    where = {r.task: r.worker for r in runs}
    arrived = {(t.task, t.destination): t.finish for t in transfers}
    by_worker: dict = {}
    for r in runs:
        by_worker.setdefault(r.worker, []).append(r)
    gaps = []
    for w, rs in by_worker.items():
        rs.sort(key=lambda r: r.start)
        for a, b in zip(rs, rs[1:]):
            ready = max((finish.get(p, 0.0) if where.get(p) == w else arrived.get((p, w), float("inf"))
                         for p in graph.predecessors(b.task)), default=0.0)
            if ready <= a.finish and b.start >= a.finish:
                gaps.append(b.start - a.finish)
    return float(np.median(gaps)) if gaps else None
