"""What happened: per task run its worker, start and finish, and every transfer.

A task normally runs once. After a worker failure a task whose output was lost may run again:
its first completed run keeps the task id, later ones are named ``id#2``, ``id#3`` ... For
validation a trace expands the graph with those extra runs, each consumer run depending on the run
of the producer whose data it used (``served_by``), so :meth:`Trace.validate` checks every run
against the same rules as a plan, with the durations the world used.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .cluster import Cluster
from .graph import TaskGraph
from .schedule import Schedule

__all__ = ["Trace", "Run", "Transfer", "expand_graph", "run_id", "task_of_run"]


class Run(NamedTuple):
    task: object
    run: object  # the run id: the task id, or "id#k" for the k-th run
    worker: object
    start: float
    finish: float


class Transfer(NamedTuple):
    task: object  # whose output moved
    source: object
    destination: object
    bytes: float
    start: float
    finish: float


def run_id(task, k: int, taken=()):
    """The id of a task's ``k``-th run: the task id for the first, ``"{task}#{k}"`` after, with
    ``#`` added until it is none of the ids in ``taken`` (the graph's tasks: a run's id never
    names another task).

    Parameters
    ----------
    task : hashable
    k : int
    taken : container
    """
    if k == 1:
        return task
    rid = f"{task}#{k}"
    while rid in taken:
        rid += "#"
    return rid


def task_of_run(rid, tasks):
    """The task whose run :func:`run_id` named ``rid`` (its inverse): ``rid`` itself where it is a
    task of ``tasks``; else ``rid`` without the ``#`` added to keep it unique and its ``#k``.

    Parameters
    ----------
    rid : hashable
    tasks : container
        The graph's task ids.

    >>> task_of_run("a#2#", {"a", "a#2"}), task_of_run("a#2#2", {"a", "a#2"})
    ('a', 'a#2')
    """
    if rid in tasks:
        return rid
    head, sep, k = str(rid).rstrip("#").rpartition("#")
    if not (sep and k.isdigit()):
        return rid
    if head not in tasks and head.lstrip("-").isdigit() and int(head) in tasks:  # a task of an integer id
        return int(head)
    return head


class Trace:
    """The outcome of a simulated or measured execution."""

    def __init__(self, runs, transfers, scheduler="", network="", served_by=None, lost=None, meta=None):
        self.runs = list(runs)
        self._transfers = transfers if hasattr(transfers, "materialise") else list(transfers)
        self.scheduler = scheduler
        self.network = network
        #: {consumer run id: {producer task: producer run id}} where the producer ran more than once
        self.served_by = dict(served_by or {})
        #: runs cut short by a worker failure: (task, worker, start, time of loss)
        self.lost = list(lost or [])
        self.meta = dict(meta or {})

    def __repr__(self):
        return f"<Trace {self.scheduler!r} on {self.network!r}: {len(self.runs)} runs, makespan {self.makespan:g}>"

    @property
    def transfers(self) -> list:
        """Every completed transfer (:class:`Transfer`), in completion order."""
        if hasattr(self._transfers, "materialise"):
            self._transfers = self._transfers.materialise()
        return self._transfers

    @property
    def num_transfers(self) -> int:
        """How many transfers the run made."""
        t = self._transfers
        return len(t.raw) if hasattr(t, "materialise") else len(t)

    @property
    def bytes_moved(self) -> float:
        """The bytes all the transfers carried (without making their rows where none was read yet)."""
        t = self._transfers
        return t.bytes_moved() if hasattr(t, "materialise") else float(sum(x.bytes for x in t))

    @property
    def makespan(self) -> float:
        """The time the last run finished (0 for an empty trace)."""
        return max((r.finish for r in self.runs), default=0.0)

    @property
    def recomputed(self) -> set:
        """Tasks that completed more than once (after a failure lost their output)."""
        return {r.task for r in self.runs if r.run != r.task}

    @property
    def durations(self) -> dict:
        """Seconds each run really took (keyed by run id)."""
        return {r.run: r.finish - r.start for r in self.runs}

    def to_schedule(self) -> Schedule:
        """The runs as a :class:`Schedule` (one row per run; its durations in ``extra``)."""
        extra = {"transfers": [t._asdict() for t in self.transfers], "network": self.network}
        if self.served_by:
            extra["served_by"] = self.served_by
        if self.lost:
            extra["lost"] = [list(x) for x in self.lost]
        extra["durations"] = self.durations
        return Schedule(
            [r.run for r in self.runs],
            [r.worker for r in self.runs],
            [r.start for r in self.runs],
            [r.finish for r in self.runs],
            scheduler=self.scheduler,
            extra=extra,
        )

    def validation_graph(self, graph: TaskGraph) -> TaskGraph:
        """The graph the runs are checked against: ``graph`` with a task per rerun, fed by the runs
        that served it.

        Parameters
        ----------
        graph : TaskGraph
        """
        return expand_graph(graph, [(r.task, r.run) for r in self.runs], self.served_by)

    def problems(self, graph: TaskGraph, cluster: Cluster, limit: int = 20) -> list:
        """What is wrong with this trace for ``graph`` on ``cluster`` (empty when valid).

        Parameters
        ----------
        graph : TaskGraph
        cluster : Cluster
        limit : int
            Stop after this many findings.
        """
        sched, took = self._as_ran()
        return sched.problems(self.validation_graph(graph), cluster, durations=took, limit=limit)

    def _as_ran(self) -> tuple:
        """The runs as a bare :class:`Schedule` (no transfers kept beside them) and the seconds each took."""
        runs = self.runs
        start = np.fromiter((r.start for r in runs), np.float64, len(runs))
        finish = np.fromiter((r.finish for r in runs), np.float64, len(runs))
        sched = Schedule([r.run for r in runs], [r.worker for r in runs], start, finish, scheduler=self.scheduler)
        return sched, finish - start

    def validate(self, graph: TaskGraph, cluster: Cluster) -> "Trace":
        """Check the trace like a schedule, with the durations it used; returns self.

        Parameters
        ----------
        graph : TaskGraph
        cluster : Cluster

        Raises
        ------
        ScheduleError
            Every finding is listed.
        """
        sched, took = self._as_ran()
        sched.validate(self.validation_graph(graph), cluster, durations=took)
        return self

    def metrics(self, graph: TaskGraph, cluster: Cluster) -> dict:
        """The schedule metrics of what ran (each task's last run; the makespan is the trace's)."""
        if not any(r.run != r.task for r in self.runs):  # each task ran once
            return self._as_ran()[0].metrics(graph, cluster)
        last = {}
        for r in self.runs:
            last[r.task] = r
        rows = list(last.values())
        return Schedule(
            [r.task for r in rows], [r.worker for r in rows], [r.start for r in rows], [r.finish for r in rows]
        ).metrics(graph, cluster)

    def to_dict(self) -> dict:
        """A JSON-ready dict (the schedule document plus what was lost and recomputed)."""
        return self.to_schedule().to_dict()

    def chrome_trace(self, prefix: str = "") -> list:
        """Chrome trace events (open in Perfetto or chrome://tracing): a process per worker, a
        thread per core slot, and a 'network' process with a thread per destination worker;
        ``prefix`` leads every process name (to put two traces side by side in one file)."""
        events = []
        slots: dict = {}
        for r in sorted(self.runs, key=lambda r: (r.start, r.finish)):
            free = slots.setdefault(r.worker, [])
            for k, busy_until in enumerate(free):
                if busy_until <= r.start:
                    free[k] = r.finish
                    break
            else:
                k = len(free)
                free.append(r.finish)
            events.append(
                {
                    "name": str(r.run),
                    "cat": "task",
                    "ph": "X",
                    "ts": r.start * 1e6,
                    "dur": (r.finish - r.start) * 1e6,
                    "pid": f"{prefix}worker {r.worker}",
                    "tid": k,
                    "args": {"task": str(r.task)},
                }
            )
        for t in self.transfers:
            events.append(
                {
                    "name": f"{t.task} {t.source}->{t.destination}",
                    "cat": "transfer",
                    "ph": "X",
                    "ts": t.start * 1e6,
                    "dur": (t.finish - t.start) * 1e6,
                    "pid": f"{prefix}network",
                    "tid": f"to {t.destination}",
                    "args": {"bytes": t.bytes},
                }
            )
        return events


def expand_graph(graph: TaskGraph, runs, served_by: dict) -> TaskGraph:
    """``graph`` with one task per rerun (``"{task}#{k}"``), each fed by the runs that served it.

    Parameters
    ----------
    graph : TaskGraph
    runs : list of (task id, run id)
    served_by : dict
        Run id -> {input task id: the run of it that served this run}.

    Returns
    -------
    TaskGraph
    """
    if all(task == rid for task, rid in runs) and not served_by:
        return graph
    a = graph.arrays
    base_of = {rid: task for task, rid in runs}
    ids = list(base_of)
    idx = [a.index[base_of[r]] for r in ids]
    cost = a.cost[idx]
    out = a.output_size[idx]
    cores = a.cores[idx]
    costs = {r: a.costs[i] for r, i in zip(ids, idx) if i in a.costs}
    src, dst, size = [], [], []
    for rid, i in zip(ids, idx):
        served = served_by.get(rid, {})
        for k in range(int(a.pred_ptr[i]), int(a.pred_ptr[i + 1])):
            p = a.ids[int(a.pred_idx[k])]
            src.append(served.get(p, p))
            dst.append(rid)
            size.append(float(a.size[int(a.pred_eid[k])]))
    return TaskGraph.from_columns(graph.name, ids, cost, out, cores, src, dst, size, costs=costs)
