"""Where a training run's time went, task by task: every epoch's measured runs as one Chrome trace
(:func:`chrome_trace`), and one iteration's runs as a schedule, a row per worker
(:func:`iteration_schedule`), for :func:`taskflow.app.plot.gantt` to draw (``taskflow train
--timeline``).

A run keeps, per epoch, the :class:`~taskflow.trace.Trace` its graph's run measured, where that
epoch started on the run's wall clock, and each task's ``(category, iteration, rank)``
(:class:`EpochTrace`); :class:`~taskflow.training.History` holds them in ``traces`` (in memory, not
in ``-o``'s JSON).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from ..errors import UsageError

__all__ = ["EpochTrace", "epoch_trace", "chrome_trace", "iteration_schedule"]


class EpochTrace(NamedTuple):
    """One epoch's measured run."""

    #: the epoch (counted from 0)
    epoch: int
    #: seconds on the run's wall clock when the epoch started
    start: float
    #: its runs and transfers
    trace: object
    #: task id -> (category, iteration or None, rank or None)
    kinds: dict


def epoch_trace(epoch: int, start: float, graph, trace) -> EpochTrace:
    """What :func:`chrome_trace` and :func:`iteration_gantt` need of an epoch.

    Parameters
    ----------
    epoch : int
    start : float
    graph : TaskGraph
        The epoch's graph (its tasks' ``meta``).
    trace : Trace
    """
    kinds = {}
    for r in trace.runs:
        md = graph.task(r.task).meta
        kinds[r.task] = (md.get("category", "other"), md.get("iteration"), md.get("rank"))
    return EpochTrace(epoch, start, trace, kinds)


def chrome_trace(traces, path) -> None:
    """Every epoch's runs and transfers as one Chrome trace (Perfetto, ``chrome://tracing``): a
    process per worker, a track of transfers per destination, times on the run's wall clock; each
    slice's ``args`` hold its task, category, iteration, rank and epoch.

    Parameters
    ----------
    traces : list of EpochTrace
    path : path
    """
    from ..formats import atomic_write

    events = []
    for ep in traces:
        for ev in ep.trace.chrome_trace():
            ev["ts"] += ep.start * 1e6
            if ev["cat"] == "task":
                cat, it, rank = ep.kinds.get(ev["args"]["task"], ("other", None, None))
                ev["args"].update(category=cat, iteration=it, rank=rank, epoch=ep.epoch + 1)
                ev["cat"] = cat
            events.append(ev)
    atomic_write(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}) + "\n")


def iteration_schedule(traces, iteration=None) -> tuple:
    """One iteration's runs: ``(schedule, transfers, title)``, the runs named by their category
    (``forward-backward#3``: a Gantt chart colours them alike), the transfers into them, times from
    the iteration's first task, and a title that says which iteration and how long it took.

    Parameters
    ----------
    traces : list of EpochTrace
    iteration : int, optional
        Default: the middle iteration of the last epoch (after start-up, before its end).

    Raises
    ------
    UsageError
        No epoch was recorded, or the iteration is not in them.
    """
    from ..schedule import Schedule

    if not traces:
        raise UsageError("no epoch ran in this process: there is no iteration to draw")
    if iteration is None:
        its = sorted({k[1] for k in traces[-1].kinds.values() if k[1] is not None})
        if not its:
            raise UsageError("the last epoch's tasks name no iteration")
        iteration = its[len(its) // 2]
    for ep in traces:
        runs = [r for r in ep.trace.runs if ep.kinds.get(r.task, (None, None))[1] == iteration]
        if runs:
            break
    else:
        raise UsageError(f"iteration {iteration} is in none of the epochs this run recorded")
    t0 = min(r.start for r in runs)
    names = [f"{ep.kinds[r.task][0]}#{k}" for k, r in enumerate(runs)]  # coloured by category
    plan = Schedule(
        names,
        [r.worker for r in runs],
        [r.start - t0 for r in runs],
        [r.finish - t0 for r in runs],
        scheduler="measured",
    )
    tasks = {r.task for r in runs}
    moves = [x._replace(start=x.start - t0, finish=x.finish - t0) for x in ep.trace.transfers if x.task in tasks]
    wall = max(r.finish for r in runs) - t0
    return plan, moves, f"iteration {iteration + 1} (epoch {ep.epoch + 1}): {wall * 1e3:.1f} ms, a row per worker"
