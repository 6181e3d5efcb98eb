"""The report of a run on Dask: the measured trace, the prediction and how the two compare."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from ...cluster import Cluster
from ...errors import RunFailed
from ...graph import TaskGraph
from ...schedule import Schedule
from ..learn import task_kind as category
from ..measured import last_compute
from ...trace import Run, Trace, Transfer
from ..messages import workers_info
from ..predict import PLAN, SUBSET

__all__ = ["RunReport", "report_from_stream", "result_entry", "RESULT_CHARS", "decision_note"]


@dataclass
class RunReport:
    """What a run on Dask produced and how it compares with the plan.

    ``predicted_makespan`` is the simulator's prediction of the plan on the cost model it was made with
    (the max-min network, so concurrent transfers share each worker's capacity; each worker running
    the earliest-planned of its tasks that can run, as Dask does; for
    ``work-stealing``, a simulation of that scheduler), computed when first read;
    ``planned_makespan`` is the plan's own, contention-free figure.

    A scheduler without a plan (Dask's own scheduling, work stealing) has no ``planned_makespan`` and
    no ``placement_fidelity`` (both None, not 0); a run with no prediction has
    ``predicted_makespan`` and ``prediction_error`` None and says why in ``no_prediction``.
    """

    scheduler: str
    results: dict
    trace: Trace
    prediction: object  # seconds, a function that computes them (called once, when first needed), or None
    measured_makespan: float
    placement_fidelity: float | None
    plan: Schedule | None
    cluster: Cluster
    tasks: list = field(default_factory=list)
    replans: int = 0
    dispatch_overhead: float = 0.0
    time_scale: float = 1.0
    size_scale: float = 1.0
    #: what the run has to say about itself (e.g. that the graph's costs look like guesses)
    notes: list = field(default_factory=list)
    #: where the plan's costs came from: ``declared`` (the graph's) or ``profile`` (measured runs)
    costs: str = "declared"
    #: the cost profile after this run (what it measured merged into the one it planned with)
    profile: object = None
    #: worker id -> the batch job (SLURM, PBS) it ran in, for workers started as jobs
    jobs: dict = field(default_factory=dict)
    #: the graph's sink tasks (no consumer): what the run produced for its user
    sinks: list = field(default_factory=list)
    #: why there is no prediction (empty where there is one)
    no_prediction: str = ""

    @property
    def predicted_makespan(self) -> float | None:
        """The predicted makespan in (scaled) seconds; None where there is none (``no_prediction``
        says why)."""
        if callable(self.prediction):
            self.prediction = float(self.prediction())
        p = self.prediction
        if p is None or not math.isfinite(p):
            if not self.no_prediction:
                self.no_prediction = "the run was not predicted"
            return None
        return p

    @property
    def planned_makespan(self) -> float | None:
        """The plan's own makespan in (scaled) seconds (None without a plan)."""
        return self.plan.makespan * self.time_scale if self.plan is not None else None

    @property
    def prediction_error(self) -> float | None:
        """|measured - predicted| / predicted (None without a prediction)."""
        p = self.predicted_makespan
        return abs(self.measured_makespan - p) / p if p is not None and p > 0 else None

    def summary(self) -> str:
        """One line: the prediction and its error (or why there is none), what was measured, the
        placement fidelity where there was a plan, the tasks and transfers."""
        p = self.predicted_makespan
        head = (
            f"predicted makespan {p:.3f} s, measured {self.measured_makespan:.3f} s (error {self.prediction_error:.1%})"
            if p is not None
            else f"measured makespan {self.measured_makespan:.3f} s (no prediction: {self.no_prediction})"
        )
        fid = f", placement fidelity {self.placement_fidelity:.0%}" if self.placement_fidelity is not None else ""
        return f"{self.scheduler}: {head}{fid}, {len(self.trace.runs)} tasks, {len(self.trace.transfers)} transfers"

    def to_dict(self) -> dict:
        """A JSON-ready dict: the figures, the workers, per task its run and plan, the transfers."""
        return {
            "scheduler": self.scheduler,
            "predicted_makespan": self.predicted_makespan,
            "planned_makespan": self.planned_makespan,
            "measured_makespan": self.measured_makespan,
            "placement_fidelity": self.placement_fidelity,
            "prediction_error": self.prediction_error,
            **({"no_prediction": self.no_prediction} if self.predicted_makespan is None else {}),
            "replans": self.replans,
            "dispatch_overhead": self.dispatch_overhead,
            "time_scale": self.time_scale,
            "size_scale": self.size_scale,
            "costs": self.costs,
            "notes": self.notes,
            "workers": [
                {
                    "id": w.id,
                    "address": w.address,
                    "speed": w.speed,
                    "cores": w.cores,
                    **({"job": self.jobs[w.id]} if w.id in self.jobs else {}),
                }
                for w in self.cluster.workers
            ],
            "results": {str(t): result_entry(self.results[t]) for t in self.sinks if t in self.results},
            "tasks": self.tasks,
            "transfers": [t._asdict() for t in self.trace.transfers],
        }

    def chrome_trace(self) -> dict:
        """The run as a Chrome trace document (open in Perfetto or chrome://tracing): the measured
        run's workers and network (``measured: ...`` tracks) above the plan's workers (``planned:
        ...``, in the same seconds), so a glance shows where the run left its plan."""
        events = self.trace.chrome_trace("measured: ")
        if self.plan is not None:
            k = self.time_scale
            planned = Trace(
                [
                    Run(t, t, w, s * k, f * k)
                    for t, w, s, f in zip(
                        self.plan.tasks, self.plan.workers, self.plan.start.tolist(), self.plan.finish.tolist()
                    )
                ],
                [],
            )
            events += planned.chrome_trace("planned: ")
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def result_lines(self, limit: int = 5, width: int = 72) -> list:
        """``task = value`` for the first ``limit`` sink tasks (each value's repr cut to ``width``),
        and how many more there are.

        Parameters
        ----------
        limit, width : int
        """
        shown = [t for t in self.sinks if t in self.results]
        lines = [f"{t} = {_short(self.results[t], width)}" for t in shown[:limit]]
        if len(shown) > limit:
            lines.append(f"... and {len(shown) - limit} more sink tasks (every result: report.results)")
        return lines

    def save(self, path) -> None:
        """Write :meth:`to_dict` as JSON, atomically.

        Parameters
        ----------
        path : str or os.PathLike
        """
        from ...formats._util import atomic_write

        atomic_write(path, json.dumps(self.to_dict(), indent=1, default=str) + "\n")


#: a sink's result goes into the report file as JSON when its JSON text is at most this long
RESULT_CHARS = 10_000


def _short(value, width: int) -> str:
    try:
        text = repr(value)
    except Exception as e:  # noqa: BLE001 - a user's object whose repr raises: say what it is
        text = f"<{type(value).__name__}: repr raised {type(e).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def result_entry(value) -> dict:
    """A sink's result as the report file keeps it: ``value`` itself where it is JSON of at most
    :data:`RESULT_CHARS` characters (numbers, strings, lists, dicts), else its type and a short
    repr; ``type`` always.

    Parameters
    ----------
    value : object
    """
    entry = {"type": f"{type(value).__module__}.{type(value).__qualname__}".removeprefix("builtins.")}
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and len(text) <= RESULT_CHARS:
        entry["value"] = value
    else:
        entry["repr"] = _short(value, 200)
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int):
            entry["nbytes"] = nbytes
    return entry


def report_from_stream(
    graph: TaskGraph,
    records,
    *,
    scheduler: str,
    client,
    cluster: Cluster,
    key_of: dict,
    task_of: dict,
    plan,
    predicted: float,
    planned_worker: dict,
    results: dict,
    replans: int,
    t_submit: float,
    time_scale: float,
    size_scale: float,
    incoming: dict | None = None,
    clocks: dict | None = None,
) -> RunReport:
    """The :class:`RunReport` of a run, from the records of Dask's task stream.

    Parameters
    ----------
    graph : TaskGraph
    records : list of dict
        ``distributed.get_task_stream`` records (``key``, ``worker``, ``startstops``).
    scheduler : str
        The scheduler's name.
    client : distributed.Client
        Names the workers that are not in ``cluster`` (joined later).
    cluster : Cluster
        The cluster model the run planned with (its workers' addresses map to ids).
    key_of, task_of : dict
        Task id -> current Dask key, and back.
    plan : Schedule or None
    predicted : float or callable
        The predicted makespan in (scaled) seconds, or a function computing it.
    planned_worker : dict
        Task id -> the worker of the latest plan.
    results : dict
        Task id -> result.
    replans : int
    t_submit : float
        Wall-clock time of the first submission (``time.time()``).
    time_scale, size_scale : float
    incoming : dict, optional
        Worker address -> its received transfers (``transfer_incoming_log`` entries): the report's
        transfers are exactly these, for the run's keys.
    clocks : dict, optional
        Worker address -> ``{"compute": {key: correction}, "delay": correction now}``: taken off
        the task stream's times (Dask adds each worker's heartbeat-based estimate of the
        scheduler's clock, which jitters), so that runs and transfers are all on the workers' own
        clocks.

    Returns
    -------
    RunReport

    Raises
    ------
    TaskflowError
        The stream recorded no task of this run.
    """
    worker_of_addr = {}
    for w in cluster.workers:
        worker_of_addr[w.address] = w.id
    for addr, w in workers_info(client).items():
        worker_of_addr.setdefault(addr, str(w.get("name", addr)))
    runs, transfers = [], []
    start_of = {}
    for r in records:
        key = r["key"]
        t = task_of.get(tuple(key) if isinstance(key, list) else key)
        if t is None:
            continue  # a task of another run
        span = last_compute(r["startstops"])
        if span is None:
            continue
        clock = (clocks or {}).get(r["worker"])
        d = clock["compute"].get(key, clock["delay"]) if clock else 0.0
        start_of[t] = (span[0] - d, span[1] - d, worker_of_addr.get(r["worker"], r["worker"]))
    for dst, entries in (incoming or {}).items():
        for e in entries:
            for key, nbytes in e["keys"].items():
                t = task_of.get(key)
                if t is not None:
                    transfers.append(
                        (
                            t,
                            worker_of_addr.get(e["who"], e["who"]),
                            worker_of_addr.get(dst, dst),
                            float(nbytes),
                            e["start"],
                            e["stop"],
                        )
                    )
    transfers.sort(key=lambda x: (x[4], x[5], str(x[0])))
    if not start_of:
        raise RunFailed("the task stream recorded no task of this run")
    origin = min(v[0] for v in start_of.values())
    for t in graph.ids:
        if t in start_of:
            s, f, w = start_of[t]
            runs.append(Run(t, t, w, s - origin, f - origin))
    trace = Trace(
        runs,
        [Transfer(t, s, d, b, x - origin, y - origin) for t, s, d, b, x, y in transfers],
        scheduler=scheduler,
        network="dask",
    )
    measured = max(r.finish for r in runs)
    planned = {}
    if plan is not None:
        planned = {
            t: (w, s * time_scale, f * time_scale)
            for t, w, s, f in zip(plan.tasks, plan.workers, plan.start.tolist(), plan.finish.tolist())
        }
    rows = []
    same = 0
    for r in runs:
        pw = planned_worker.get(r.task)
        same += pw is not None and str(pw) == str(r.worker)
        row = {
            "task": r.task,
            "worker": r.worker,
            "planned_worker": pw,
            "start": r.start,
            "finish": r.finish,
            "category": category(graph, r.task),
        }
        if r.task in planned:
            row["predicted_start"] = planned[r.task][1]
            row["predicted_finish"] = planned[r.task][2]
            row["deviation"] = r.finish - planned[r.task][2]
        rows.append(row)
    fidelity = same / len(runs) if planned_worker else None  # no plan: no fidelity (not 0)
    return RunReport(
        scheduler,
        results,
        trace,
        predicted,
        measured,
        fidelity,
        plan,
        cluster,
        rows,
        replans,
        origin - t_submit,
        time_scale,
        size_scale,
        sinks=graph.sinks(),
    )


def decision_note(scheduler: str, decision: str, redecisions: int) -> str:
    """What the adaptive scheduler's guard decided last for a run, as a report's note.

    Parameters
    ----------
    scheduler : str
    decision : {"plan", "dask", "subset"}
    redecisions : int
    """
    what = {
        PLAN: "placed by its plan",
        SUBSET: "left to Dask's own scheduling on a subset of its workers (the others, slower or behind a "
        "narrow link, predicted or measured to lengthen it)",
    }.get(decision, "left to Dask's own scheduling (no plan predicted to win by the margin)")
    return f"{scheduler}: {what}; decided {1 + redecisions} time(s) as the run's durations were learned"
