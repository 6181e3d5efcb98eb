"""Learning costs from what runs measured: :func:`learn_costs` for one graph, :class:`CostProfile`
to keep what runs measured in a file and plan the next run with it."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..cluster import Cluster, Worker
from ..errors import FormatError
from ..analysis import task_kind
from ..graph import TaskGraph
from .measured import dispatch_gap, duration_models, learned_speeds, network_of, speeds_on, units_on

__all__ = ["learn_costs", "CostProfile", "PROFILE_FORMAT", "task_kind"]


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
        p = task_kind(graph, r.task)
        by.setdefault(p, {}).setdefault(str(r.worker), []).append((r.finish - r.start) / scale)
    cost, costs = {}, {}
    for t in graph.ids:
        p = task_kind(graph, t)
        if p not in by:
            continue
        per = {w: float(np.mean(v)) for w, v in by[p].items()}
        norm = [d * speed.get(w, 1.0) for w, d in per.items()]
        cost[t] = float(np.mean(norm))
        wid = {str(w.id): w.id for w in cluster.workers} if cluster is not None else {w: w for w in per}
        costs[t] = {wid[w]: d for w, d in per.items() if w in wid}
    return graph.with_costs(cost=cost, costs=costs)


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
        several workers (their durations per unit of declared cost).
    bandwidth : dict
        Source worker name -> {destination name: bytes per real second}: what the pair moves when
        nothing else competes, the 90th percentile over its transfers of at least 64 KiB of
        bytes / (duration - latency) (contention only ever slows a transfer down).
    task_overhead : float or None
        Median gap between two tasks on one worker when the second was ready before the first ended.
    runs : int
        How many runs were merged in.
    latency : float or None
        Real seconds a transfer takes besides its bytes: the median duration of transfers under
        64 KiB (None when there were none).
    backplane : float or None
        Bytes per real second of all transfers together (the workers' shared host or switch): the
        90th percentile, over the time any transfer was under way, of the summed rates of the
        transfers under way (None without transfers of at least 64 KiB). A capacity, so a high
        percentile: the summed rate is below it whenever few transfers run (the median of a
        communication-heavy run on 4 workers was 294 MB/s where its pairs moved 600-1,400 MB/s,
        and the learned plan was predicted at 6.8 s where it took 2.8-3.3 s; the 90th percentile
        gives 2.9 s).
    models : dict
        Task-name prefix -> ``{"fixed": seconds, "unit": {worker name: seconds per unit of declared
        cost}, "r2": share of variance explained beyond each worker's mean}``: a prefix whose
        declared costs explain its measured durations (:data:`MODEL_R2`) is planned as
        ``fixed + declared cost x unit`` on each worker, for every task of the prefix, instead of
        each task's own measurement (see :func:`duration_models`).
    dask_placement : dict
        Task id (as text) -> [worker name, start in unscaled seconds from the run's first task]:
        where and in which order Dask's own scheduling (no plan) ran each task in the latest such
        run. A later run of the same graph under Dask's own scheduling is predicted by replaying it.
    """

    tasks: dict = field(default_factory=dict)
    prefixes: dict = field(default_factory=dict)
    speeds: dict = field(default_factory=dict)
    bandwidth: dict = field(default_factory=dict)
    task_overhead: float | None = None
    runs: int = 0
    latency: float | None = None
    backplane: float | None = None
    dask_placement: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)

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
        prefix_of = {r.task: task_kind(graph, r.task) for r in runs}
        per_task: dict = {}
        per_prefix: dict = {}
        for r in runs:
            d = (r.finish - r.start) / scale
            per_task.setdefault(str(r.task), {}).setdefault(str(r.worker), []).append(d)
            per_prefix.setdefault(prefix_of[r.task], {}).setdefault(str(r.worker), []).append(d)
        tasks = {t: {w: sum(v) / len(v) for w, v in ws.items()} for t, ws in per_task.items()}
        prefixes = {p: {w: sum(v) / len(v) for w, v in ws.items()} for p, ws in per_prefix.items()}
        latency, bandwidth, backplane = network_of(report.trace.transfers)
        placement = {}
        if getattr(report, "plan", None) is None and runs:  # Dask's own scheduling: keep its choices
            t0 = min(r.start for r in runs)
            placement = {str(r.task): [str(r.worker), (r.start - t0) / scale] for r in runs}
        return cls(
            tasks,
            prefixes,
            learned_speeds(graph, runs, prefix_of),
            bandwidth,
            dispatch_gap(graph, runs, report.trace.transfers),
            1,
            latency,
            backplane,
            placement,
            duration_models(graph, runs, scale, prefix_of),
        )

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
        models = {k: dict(v) for k, v in self.models.items()}
        for k, new in newer.models.items():
            old = models.get(k)
            models[k] = (
                new
                if old is None
                else {
                    "fixed": mean(old["fixed"], new["fixed"]),
                    "r2": new["r2"],
                    "unit": mix({"u": old["unit"]}, {"u": new["unit"]})["u"],
                }
            )
        return CostProfile(
            mix(self.tasks, newer.tasks),
            mix(self.prefixes, newer.prefixes),
            speeds,
            mix(self.bandwidth, newer.bandwidth),
            mean(self.task_overhead, newer.task_overhead),
            n + m,
            mean(self.latency, newer.latency),
            mean(self.backplane, newer.backplane),
            newer.dask_placement or self.dask_placement,
            models,
        )

    # ------------------------------------------------------------------ planning with it
    def apply(self, graph: TaskGraph, cluster: Cluster, time_scale: float = 1.0, size_scale: float = 1.0) -> tuple:
        """``(graph, cluster)`` as this profile measured them: a task whose prefix has a duration
        model (:attr:`models`) gets ``fixed + declared cost x unit`` on every worker (a worker the
        profile never saw: the unit scaled by speeds); else a task measured before gets exact
        costs on the workers it ran on and, elsewhere, its speed-1 cost over the worker's speed; a
        task whose prefix was measured gets the prefix's means; the cluster gets the learned
        speeds, per-pair bandwidths (pairs never measured: the median of the measured ones),
        backplane and dispatch overhead. Tasks nobody measured keep what the graph declares;
        workers nobody measured keep their declared speed relative to the measured workers.

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
        speeds = speeds_on({str(w.id): w.speed for w in cluster.workers}, self.speeds)
        cost, costs = {}, {}
        units = {k: units_on(m["unit"], speeds) for k, m in self.models.items()}
        a = graph.arrays
        for t in graph.ids:
            kind = task_kind(graph, t)
            if units.get(kind):  # durations the declared costs explain: the prefix's model
                c, fixed = float(a.cost[a.index[t]]), self.models[kind]["fixed"]
                row = {w: fixed + c * u for w, u in units[kind].items()}
                cost[t] = float(np.mean([d * speeds.get(w, 1.0) for w, d in row.items()]))
                costs[t] = {names[w]: d for w, d in row.items()}
                continue
            row = self.tasks.get(str(t)) or self.prefixes.get(kind)
            if not row:
                continue
            row = {w: d for w, d in row.items() if w in names}
            if not row:
                continue
            cost[t] = float(np.mean([d * speeds.get(w, 1.0) for w, d in row.items()]))
            costs[t] = {names[w]: d for w, d in row.items()}
        g = graph.with_costs(cost=cost, costs=costs) if cost else graph
        workers = [Worker(w.id, speeds[str(w.id)], w.cores, address=w.address) for w in cluster.workers]
        to_model = time_scale / size_scale  # real bytes per real second -> cost-model bytes per cost-model second
        pairs = {
            names[a]: {names[b]: v * to_model for b, v in row.items() if b in names and b != a}
            for a, row in self.bandwidth.items()
            if a in names
        }
        pairs = {a: r for a, r in pairs.items() if r}
        rates = [v for r in pairs.values() for v in r.values()]
        c = cluster.replace(
            workers=workers,
            bandwidths=pairs or cluster.bandwidths,
            bandwidth=float(np.median(rates)) if rates else cluster.bandwidth,
            task_overhead=cluster.task_overhead if self.task_overhead is None else self.task_overhead / time_scale,
            latency=cluster.latency if self.latency is None else self.latency / time_scale,
            backplane=cluster.backplane if self.backplane is None else self.backplane * to_model,
        )
        return g, c

    def dask_plan(self, graph: TaskGraph, cluster: Cluster):
        """The placement Dask's own scheduling chose in the profiled run, as a plan for ``graph``
        on ``cluster`` (a :class:`Schedule` whose starts give the order on each worker), or None
        when the profile does not cover every task and worker.

        Parameters
        ----------
        graph : TaskGraph
        cluster : Cluster
        """
        from ..schedule import Schedule

        names = {str(w.id): w.id for w in cluster.workers}
        rows = [(self.dask_placement.get(str(t)), t) for t in graph.ids]
        if not rows or any(r is None or r[0] not in names for r, _ in rows):
            return None
        rows.sort(key=lambda x: x[0][1])
        return Schedule(
            [t for _, t in rows],
            [names[r[0]] for r, _ in rows],
            [r[1] for r, _ in rows],
            [r[1] for r, _ in rows],
            scheduler="dask",
        )

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict:
        """The JSON document (``"format": "taskflow-cost-profile"``)."""
        return {
            "format": PROFILE_FORMAT,
            "version": 1,
            "runs": self.runs,
            "task_overhead": self.task_overhead,
            "latency": self.latency,
            "backplane": self.backplane,
            "dask_placement": self.dask_placement,
            "speeds": self.speeds,
            "bandwidth": self.bandwidth,
            "prefixes": self.prefixes,
            "tasks": self.tasks,
            "models": self.models,
        }

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
        from ..formats import read_json

        p = os.fspath(path)
        doc = read_json(p)
        if not isinstance(doc, dict) or doc.get("format") != PROFILE_FORMAT:
            raise FormatError(f'{p}: not a cost profile (expected "format": "{PROFILE_FORMAT}")')
        runs = doc.get("runs", 1)
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < 0:
            raise FormatError(f"{p}: field 'runs' must be a whole number >= 0, got {runs!r}"[:200])
        out = cls(runs=runs)

        def num(v, what: str, positive: bool = False) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise FormatError(f"{p}: {what} must be a number, got {v!r}"[:200])
            try:
                x = float(v)
            except OverflowError:
                raise FormatError(f"{p}: {what} is too large for a number") from None
            if not (0 < x < math.inf if positive else 0 <= x < math.inf):
                raise FormatError(f"{p}: {what} must be finite and {'> 0' if positive else '>= 0'}, got {v!r}")
            return x

        for name in ("tasks", "prefixes", "bandwidth"):
            table = doc.get(name, {})
            if not isinstance(table, dict) or not all(isinstance(r, dict) for r in table.values()):
                raise FormatError(f"{p}: field {name!r} must map names to {{worker: number}}")
            setattr(
                out,
                name,
                {
                    str(k): {
                        str(w): num(v, f"field {name!r} [{k!r}][{w!r}]", name == "bandwidth") for w, v in r.items()
                    }
                    for k, r in table.items()
                },
            )
        speeds = doc.get("speeds") or {}
        if not isinstance(speeds, dict):
            raise FormatError(f"{p}: field 'speeds' must map worker names to numbers")
        out.speeds = {str(w): num(v, f"field 'speeds' [{w!r}]", True) for w, v in speeds.items()}
        for name in ("task_overhead", "latency", "backplane"):
            v = doc.get(name)
            setattr(out, name, None if v is None else num(v, f"field {name!r}", name == "backplane"))
        placement = doc.get("dask_placement") or {}
        if not isinstance(placement, dict) or not all(
            isinstance(v, list)
            and len(v) == 2
            and isinstance(v[0], (str, int))
            and not isinstance(v[1], bool)
            and isinstance(v[1], (int, float))
            for v in placement.values()
        ):
            raise FormatError(f"{p}: field 'dask_placement' must map task ids to [worker, start seconds]")
        out.dask_placement = {
            str(k): [str(v[0]), num(v[1], f"dask_placement[{k!r}] start")] for k, v in placement.items()
        }
        models = doc.get("models") or {}
        if not isinstance(models, dict) or not all(
            isinstance(m, dict) and isinstance(m.get("unit"), dict) and m["unit"] for m in models.values()
        ):
            raise FormatError(
                f'{p}: field \'models\' must map prefixes to {{"fixed": s, "unit": {{worker: s}}, "r2": x}}'
            )
        out.models = {
            str(k): {
                "fixed": num(m.get("fixed"), f"models[{k!r}] 'fixed'"),
                "r2": num(m.get("r2", 1.0), f"models[{k!r}] 'r2'"),
                "unit": {str(w): num(u, f"models[{k!r}] 'unit' [{w!r}]", True) for w, u in m["unit"].items()},
            }
            for k, m in models.items()
        }
        return out
