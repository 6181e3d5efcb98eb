"""A schedule: per task its worker, start and finish; a validator that trusts no scheduler; metrics.

:meth:`Schedule.validate` checks, against the graph, the cluster and the shared cost model, that

* every task of the graph is placed exactly once, on a worker of the cluster, and nothing else is;
* each task runs for its duration on its worker (or for the durations the caller says the world
  used, for a simulated or measured trace);
* each task starts no earlier than every predecessor's finish plus the transfer time between their
  workers;
* at no instant do a worker's running tasks need more cores than it has.

A schedule may also run some tasks again elsewhere (task duplication): its ``copies`` are further
executions of graph tasks, each on a worker the task does not already run on, for its duration
there. A task (or copy) may then take each input from whichever execution of the producer has it
there first: the input is ready at the earliest, over the producer's executions, of finish plus
transfer time. Copies occupy cores like any task.

All checks are vectorised; two times may differ by 1e-9 s plus a billionth of the duration or
transfer time involved plus a few units in the last place of the time itself (absolute and local:
a long task elsewhere in the schedule does not widen it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import numpy as np

from .analysis import critical_path, lower_bound, sequential_time
from .cluster import Cluster
from .costs import CostModel
from .errors import GraphError, ScheduleError
from .graph import TaskGraph

__all__ = ["Schedule", "Assignment"]

_MAX_PROBLEMS = 20


@dataclass(frozen=True)
class Assignment:
    task: object
    worker: object
    start: float
    finish: float


class Schedule:
    """Per task: worker, start, finish (seconds from 0).

    Parameters
    ----------
    tasks, workers : sequences of ids, one entry per assignment
    start, finish : sequences of floats
    scheduler : str
        Name of the scheduler that made it.
    extra : dict, optional
        Further fields carried into the JSON document (e.g. ``transfers`` of a trace).
    copies : iterable of Assignment or (task, worker, start, finish), optional
        Further executions of tasks already placed (task duplication; see the module docstring).
    """

    def __init__(self, tasks, workers, start, finish, scheduler: str = "", extra: dict | None = None, copies=None):
        self.tasks = list(tasks)
        self.workers = list(workers)
        self.start = np.asarray(start, dtype=np.float64).reshape(-1)
        self.finish = np.asarray(finish, dtype=np.float64).reshape(-1)
        if not (len(self.tasks) == len(self.workers) == len(self.start) == len(self.finish)):
            raise ScheduleError(["schedule columns task, worker, start, finish differ in length"])
        self.scheduler = scheduler
        self.extra = dict(extra or {})
        self.copies = [c if isinstance(c, Assignment) else Assignment(*c) for c in (copies or ())]

    @classmethod
    def from_indices(
        cls,
        graph: TaskGraph,
        cluster: Cluster,
        worker_idx,
        start,
        finish,
        scheduler: str = "",
        extra: dict | None = None,
        copies=None,
    ) -> "Schedule":
        """Build from per-task-index arrays (what schedulers produce); ``copies`` as index arrays
        ``(task, worker, start, finish)``."""
        ids = cluster.ids
        tid = graph.arrays.ids
        rows = (
            []
            if copies is None
            else [Assignment(tid[t], ids[w], s, f) for t, w, s, f in zip(*(np.asarray(c).tolist() for c in copies))]
        )
        return cls(tid, [ids[w] for w in np.asarray(worker_idx).tolist()], start, finish, scheduler, extra, rows)

    @classmethod
    def from_assignments(cls, assignments: Iterable, scheduler: str = "", extra=None) -> "Schedule":
        """A schedule from :class:`Assignment` rows.

        Parameters
        ----------
        assignments : iterable of Assignment
        scheduler : str
        extra : dict, optional
        """
        rows = [a if isinstance(a, Assignment) else Assignment(*a) for a in assignments]
        return cls(
            [r.task for r in rows],
            [r.worker for r in rows],
            [r.start for r in rows],
            [r.finish for r in rows],
            scheduler,
            extra,
        )

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Assignment]:
        for t, w, s, f in zip(self.tasks, self.workers, self.start.tolist(), self.finish.tolist()):
            yield Assignment(t, w, s, f)

    def __repr__(self) -> str:
        more = f", {len(self.copies)} copies" if self.copies else ""
        return f"<Schedule {self.scheduler!r}: {len(self)} tasks{more}, makespan {self.makespan:g}>"

    @property
    def makespan(self) -> float:
        """The latest finish, copies included (0 for an empty schedule)."""
        mk = float(self.finish.max()) if len(self.finish) else 0.0
        return max([mk] + [c.finish for c in self.copies])

    def assignment(self, task) -> Assignment:
        """One task's row.

        Parameters
        ----------
        task : hashable

        Raises
        ------
        GraphError
            The task is not in the schedule.
        """
        i = self._row().get(task)
        if i is None:
            raise GraphError(f"task {task!r} is not in the schedule")
        return Assignment(self.tasks[i], self.workers[i], float(self.start[i]), float(self.finish[i]))

    def _row(self) -> dict:
        return {t: i for i, t in enumerate(self.tasks)}

    def worker_of(self) -> dict:
        """``{task: worker}``."""
        return dict(zip(self.tasks, self.workers))

    def by_worker(self) -> dict:
        """``{worker: [Assignment, ...]}`` sorted by start time, copies included."""
        out: dict = {}
        rows = list(self) + self.copies
        for r in sorted(rows, key=lambda r: (r.start, r.finish)):
            out.setdefault(r.worker, []).append(r)
        return out

    # ------------------------------------------------------------------ checking
    def problems(
        self,
        graph: TaskGraph,
        cluster: Cluster,
        durations: dict | None = None,
        cost_model: CostModel | None = None,
        limit: int = _MAX_PROBLEMS,
    ) -> list:
        """Every way this schedule breaks the rules (empty when it is valid), at most ``limit``.

        ``durations`` ({task: seconds}) replaces the cost model's durations for the tasks it
        names: what a simulated or measured run really took; or, an array, the seconds of each row.
        """
        out: list = []
        a = graph.arrays
        n = a.n
        # 1. every task placed exactly once, on a known worker
        index, cidx = a.index, cluster.index
        at = np.fromiter((index.get(t, -1) for t in self.tasks), np.int64, len(self.tasks))
        row = np.full(n, -1, dtype=np.int64)
        if len(at) and (at.min() < 0 or np.bincount(at[at >= 0], minlength=n).max() > 1):
            for k, t in enumerate(self.tasks):  # what is wrong, in the schedule's order
                i = int(at[k])
                if i < 0:
                    out.append(f"task {t!r} is scheduled but not in the graph")
                elif row[i] >= 0:
                    out.append(f"task {t!r} is scheduled more than once")
                else:
                    row[i] = k
        else:
            row[at] = np.arange(len(at))
        for i in np.flatnonzero(row < 0)[:limit].tolist():
            out.append(f"task {a.ids[i]!r} is not scheduled")
        widx = np.fromiter((cidx.get(w, -1) for w in self.workers), np.int64, len(self.workers))
        for k in np.flatnonzero(widx < 0).tolist():
            out.append(f"task {self.tasks[k]!r} is on unknown worker {self.workers[k]!r}")
        bad = ~(np.isfinite(self.start) & np.isfinite(self.finish)) | (self.start < 0)
        for k in np.flatnonzero(bad)[:limit].tolist():
            out.append(
                f"task {self.tasks[k]!r}: start {self.start[k]!r} / finish {self.finish[k]!r} "
                "must be finite and start >= 0"
            )
        cp = _copies(self.copies, a, cluster, widx[row] if not out and (row >= 0).all() else None, out)
        if out:
            return out[:limit]
        cost_model = cost_model or CostModel(graph, cluster)
        start = self.start[row]
        finish = self.finish[row]
        w = widx[row]
        # 2. durations
        if isinstance(durations, np.ndarray):  # per row, what each really took (a trace's)
            bad = np.flatnonzero(~((durations >= 0) & (durations < np.inf)))
            if len(bad):
                raise ScheduleError(
                    [f"durations[{self.tasks[int(bad[0])]!r}] must be a finite number >= 0, got {durations[bad[0]]!r}"]
                )
            expect = np.asarray(durations, np.float64)[row]
        else:
            expect = cost_model.durations[np.arange(n), w]
        if not isinstance(durations, np.ndarray) and durations:
            expect = expect.copy()
            for t, d in _checked_durations(durations, a).items():
                expect[a.index[t]] = d
        # a copy runs for the model's duration on its worker
        ct, cw, cs, cf = cp
        tasks = np.concatenate([np.arange(n), ct])
        wk, st, fi = np.concatenate([w, cw]), np.concatenate([start, cs]), np.concatenate([finish, cf])
        expect = np.concatenate([expect, cost_model.durations[ct, cw]])
        wrong = np.flatnonzero(~(np.abs((fi - st) - expect) <= _tol(fi, expect)))
        for k in wrong[:limit].tolist():
            i = int(tasks[k])
            wid = cluster.ids[wk[k]]
            what = "task" if k < n else "copy of task"
            if not np.isfinite(expect[k]):
                out.append(
                    f"{what} {a.ids[i]!r} needs {int(a.cores[i])} cores; worker {wid!r} has {int(cluster.cores[wk[k]])}"
                )
            else:
                out.append(
                    f"{what} {a.ids[i]!r} runs {fi[k] - st[k]:.9g} s on worker {wid!r}; "
                    f"its duration there is {expect[k]:.9g} s"
                )
        # 3. precedence plus transfer time (from the execution of each input that has it there first)
        if a.m:
            ws, wd = w[a.src], w[a.dst]
            moving = cost_model.transfer_idx(a.size, ws, wd)
            ready = finish[a.src] + moving
            if len(ct):
                ready, moving = _ready_with_copies(a, cost_model, ct, cw, cf, a.src, wd, ready, moving)
            early = np.flatnonzero(~(start[a.dst] >= ready - _tol(ready, moving)))
            for e in early[:limit].tolist():
                s, d = int(a.src[e]), int(a.dst[e])
                out.append(
                    f"task {a.ids[d]!r} starts at {start[d]:.9g} before its input from "
                    f"{a.ids[s]!r} is ready at {ready[e]:.9g}"
                )
            if len(ct):  # each copy's own inputs: one row per (copy, input edge)
                k_of = np.repeat(np.arange(len(ct)), a.pred_ptr[ct + 1] - a.pred_ptr[ct])
                eid = (
                    a.pred_eid[np.concatenate([np.arange(a.pred_ptr[t], a.pred_ptr[t + 1]) for t in ct])]
                    if len(k_of)
                    else np.zeros(0, np.int64)
                )
                src, dw = a.src[eid], cw[k_of]
                mv = cost_model.transfer_idx(a.size[eid], w[src], dw)
                rd, mv = _ready_with_copies(a, cost_model, ct, cw, cf, src, dw, finish[src] + mv, mv, eid)
                early = np.flatnonzero(~(cs[k_of] >= rd - _tol(rd, mv)))
                for r in early[:limit].tolist():
                    k = int(k_of[r])
                    out.append(
                        f"copy of task {a.ids[ct[k]]!r} on worker {cluster.ids[cw[k]]!r} starts at "
                        f"{cs[k]:.9g} before its input from {a.ids[src[r]]!r} is ready at {rd[r]:.9g}"
                    )
        # 4. cores per worker
        out.extend(_core_overloads(a, cluster, wk, st, fi, _tol(fi), limit, tasks))
        return out[:limit]

    def validate(
        self, graph: TaskGraph, cluster: Cluster, durations: dict | None = None, cost_model: CostModel | None = None
    ) -> "Schedule":
        """Raise :class:`~taskflow.errors.ScheduleError` listing the problems; return self if valid."""
        found = self.problems(graph, cluster, durations=durations, cost_model=cost_model)
        if found:
            raise ScheduleError(found)
        return self

    def is_valid(self, graph: TaskGraph, cluster: Cluster, **kw) -> bool:
        """Whether :meth:`validate` would pass.

        Parameters
        ----------
        graph : TaskGraph
        cluster : Cluster
        **kw
            As for :meth:`problems`.
        """
        return not self.problems(graph, cluster, limit=1, **kw)

    # ------------------------------------------------------------------ metrics
    def metrics(self, graph: TaskGraph, cluster: Cluster, cost_model: CostModel | None = None) -> dict:
        """makespan, lower_bound, bound_ratio, slr, speedup, efficiency.

        ``slr`` (schedule length ratio, Topcuoglu et al. 2002) divides the makespan by the critical
        path at each task's shortest duration; ``bound_ratio`` divides it by the lower bound (the
        larger of that critical path and the total work over the cluster's speed), so 1.0 means no
        schedule can be shorter; ``speedup`` divides the best single-worker sequential time by the
        makespan; ``efficiency`` is speedup over total cores.
        """
        cost_model = cost_model or CostModel(graph, cluster)
        mk = self.makespan
        cp, _ = critical_path(graph, cost_model=cost_model)
        seq = sequential_time(graph, cluster, cost_model)
        speedup = seq / mk if mk > 0 else float("nan")
        lb = lower_bound(graph, cluster, cost_model, critical=cp)
        return {
            "makespan": mk,
            "lower_bound": lb,
            "bound_ratio": mk / lb if lb > 0 else float("nan"),
            "slr": mk / cp if cp > 0 else float("nan"),
            "speedup": speedup,
            "efficiency": speedup / cluster.total_cores,
        }

    # ------------------------------------------------------------------ files
    def to_dict(self) -> dict:
        """The native JSON document (see docs/formats.md)."""
        doc = {
            "format": "taskflow-schedule/1",
            "scheduler": self.scheduler,
            "makespan": self.makespan,
            "assignments": [
                {"task": t, "worker": w, "start": s, "finish": f}
                for t, w, s, f in zip(self.tasks, self.workers, self.start.tolist(), self.finish.tolist())
            ],
        }
        if self.copies:
            doc["copies"] = [
                {"task": c.task, "worker": c.worker, "start": c.start, "finish": c.finish} for c in self.copies
            ]
        for k, v in self.extra.items():
            doc.setdefault(k, v)
        return doc

    def to_csv(self, header: bool = True) -> str:
        """The plan as CSV text: ``scheduler,task,worker,start,finish``, one row per task (and per
        copy) in start order, times with full precision.

        Parameters
        ----------
        header : bool
            Start with the column names (False: rows only, to append another plan's rows).
        """
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        if header:
            w.writerow(["scheduler", "task", "worker", "start", "finish"])
        rows = [(a.start, a.finish, str(a.task), str(a.worker)) for a in list(self) + list(self.copies)]
        for start, finish, task, worker in sorted(rows):
            w.writerow([self.scheduler, task, worker, repr(start), repr(finish)])
        return buf.getvalue()

    def table(self, cluster: Cluster | None = None) -> str:
        """A plain-text plan: one line per worker with its tasks in start order (a copy marked ``+``)."""
        lines = []
        per = self.by_worker()
        copy = {id(c) for c in self.copies}
        order = cluster.ids if cluster is not None else sorted(per, key=str)
        width = max((len(str(w)) for w in order), default=1)
        for wid in order:
            items = per.get(wid, [])
            cells = (
                "  ".join(f"{'+' if id(x) in copy else ''}{x.task}[{x.start:g}-{x.finish:g}]" for x in items)
                or "(idle)"
            )
            lines.append(f"  {str(wid):<{width}}  {cells}")
        return "\n".join(lines)


def _tol(t, scale=0.0):
    """What two computations of the same time may differ by: a billionth of the quantity involved
    (a duration, a transfer time) plus 1e-9 s, plus a few units in the last place of the time
    itself. Absolute and local: a task of 1e12 s elsewhere does not widen it."""
    return 1e-9 * (1.0 + np.abs(scale)) + 16.0 * np.spacing(np.abs(t))


def _checked_durations(durations, a) -> dict:
    """``{task: seconds}`` declared by a trace, checked: a mapping of known tasks to finite numbers
    >= 0 (a ScheduleError otherwise)."""
    if not isinstance(durations, dict):
        raise ScheduleError([f"durations must map task ids to seconds, got {type(durations).__name__}"])
    out = {}
    for t, d in durations.items():
        if t not in a.index:
            raise ScheduleError([f"durations name task {t!r}, which is not in the graph"])
        if (
            isinstance(d, (bool, str))
            or not isinstance(d, (int, float, np.floating, np.integer))
            or not 0 <= float(d) < np.inf
        ):
            raise ScheduleError([f"durations[{t!r}] must be a finite number >= 0, got {d!r}"[:200]])
        out[t] = float(d)
    return out


def _copies(copies, a, cluster: Cluster, w, out: list):
    """A schedule's copies as index arrays ``(task, worker, start, finish)``; their problems
    (unknown task or worker, bad times, a copy where the task already runs) go to ``out``. ``w``:
    each task's worker index (None when the tasks themselves have problems)."""
    ct, cw = np.zeros(len(copies), np.int64), np.zeros(len(copies), np.int64)
    cs = np.array([c.start for c in copies], dtype=np.float64)
    cf = np.array([c.finish for c in copies], dtype=np.float64)
    seen = set()
    for k, c in enumerate(copies):
        i, j = a.index.get(c.task), cluster.index.get(c.worker)
        if i is None:
            out.append(f"a copy of task {c.task!r} is scheduled but the task is not in the graph")
            continue
        if j is None:
            out.append(f"a copy of task {c.task!r} is on unknown worker {c.worker!r}")
            continue
        ct[k], cw[k] = i, j
        if (i, j) in seen or (w is not None and w[i] == j):
            out.append(f"task {c.task!r} runs more than once on worker {c.worker!r}")
        seen.add((i, j))
        if not (np.isfinite(cs[k]) and np.isfinite(cf[k]) and cs[k] >= 0):
            out.append(
                f"copy of task {c.task!r}: start {c.start!r} / finish {c.finish!r} must be finite and start >= 0"
            )
    return ct, cw, cs, cf


def _ready_with_copies(a, cost_model: CostModel, ct, cw, cf, src, dw, ready, moving, eid=None):
    """Per edge row (producer ``src``, consumer worker ``dw``): the earliest ready time over the
    producer's executions, given ``ready`` from the task itself; with the transfer time that goes
    with it (for the tolerance)."""
    ready, moving = ready.copy(), moving.copy()
    size = a.size if eid is None else a.size[eid]
    for k in range(len(ct)):
        rows = np.flatnonzero(src == ct[k])
        if not len(rows):
            continue
        mv = cost_model.transfer_idx(size[rows], cw[k], dw[rows])
        alt = cf[k] + mv
        better = alt < ready[rows]
        ready[rows[better]] = alt[better]
        moving[rows[better]] = mv[better]
    return ready, moving


def _core_overloads(a, cluster: Cluster, w, start, finish, tol, limit, tasks=None) -> list:
    """Sweep each worker's start/end events; report instants where cores in use exceed its cores.
    ``tasks``: the graph task of each row (default: row i is task i)."""
    busy = finish - start > tol
    if not busy.any():
        return []
    idx = np.flatnonzero(busy)
    tasks = np.arange(len(w)) if tasks is None else tasks
    cores = a.cores[tasks[idx]]
    wk = w[idx]
    # events: ends sort before starts at the same instant (within tolerance)
    t = np.concatenate([finish[idx] - tol[idx], start[idx]])
    kind = np.concatenate([np.zeros(idx.size, np.int8), np.ones(idx.size, np.int8)])
    delta = np.concatenate([-cores, cores])
    wk2 = np.concatenate([wk, wk])
    task = np.concatenate([idx, idx])
    order = np.lexsort((kind, t, wk2))
    used = np.cumsum(delta[order])  # each worker's block starts and ends at 0
    cap = cluster.cores[wk2[order]]
    over = np.flatnonzero(used > cap)
    out = []
    seen = set()
    for k in over.tolist():
        j = int(wk2[order][k])
        if j in seen:
            continue
        seen.add(j)
        i = int(task[order][k])
        out.append(
            f"worker {cluster.ids[j]!r} runs {int(used[k])} cores at once at t={start[i]:.9g} "
            f"(it has {int(cluster.cores[j])}), when task {a.ids[tasks[i]]!r} starts"
        )
        if len(out) >= limit:
            break
    return out
