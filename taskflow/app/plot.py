"""Gantt charts (matplotlib, drawn off-screen)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..formats import save_figure  # noqa: E402

__all__ = ["gantt", "gantt_compare", "plain_text"]


MAX_LEGEND = 12


def plain_text(fn):
    """Decorate a function that draws: while it runs, matplotlib reads text as text (an id or a
    name such as ``$\\frac{1}{$`` is not parsed as a formula, which could fail the plot).

    Parameters
    ----------
    fn : callable
    """
    import functools

    @functools.wraps(fn)
    def drawing(*args, **kwargs):
        with matplotlib.rc_context({"text.parse_math": False}):
            return fn(*args, **kwargs)

    return drawing


def _category(task) -> str:
    """A task's category from its id: the part before a run suffix and trailing digits."""
    return str(task).split("#")[0].rstrip("0123456789_-") or str(task)


def _colours(categories) -> dict:
    """One colour per category, the same in every panel; past ``MAX_LEGEND`` categories, grey."""
    cmap = plt.get_cmap("tab20")
    order = list(dict.fromkeys(categories))
    return {c: (cmap(k % 20) if k < MAX_LEGEND else (0.75, 0.75, 0.75, 1.0)) for k, c in enumerate(order)}


#: a worker's row with more runs than this is drawn in :data:`WINDOWS` time windows instead of
#: run by run: hundreds of thin bars (short tasks between Dask's overheads) read as a barcode
MERGE_ABOVE = 40
WINDOWS = 60


def _windows(rows, transfers, t0: float, t1: float):
    """Per worker and time window: the category that ran longest in it and the share of the
    window that was busy; and the windows in which bytes arrived."""
    width = (t1 - t0) / WINDOWS or 1.0
    busy: dict = {}
    for r in rows:
        w, s, f = r[1], r[2], r[3]
        cat = r[4] if len(r) > 4 else _category(r[0])
        for b in range(max(0, int((s - t0) / width)), min(WINDOWS, int((f - t0) / width) + 1)):
            lo, hi = t0 + b * width, t0 + (b + 1) * width
            overlap = min(f, hi) - max(s, lo)
            if overlap > 0:
                cell = busy.setdefault((w, b), {})
                cell[cat] = cell.get(cat, 0.0) + overlap
    cells = [
        (w, t0 + b * width, width, max(c, key=c.get), min(1.0, sum(c.values()) / width)) for (w, b), c in busy.items()
    ]
    arriving = set()
    for d, s, f in transfers:
        for b in range(max(0, int((s - t0) / width)), min(WINDOWS, int((f - t0) / width) + 1)):
            arriving.add((d, b))
    return cells, [(d, t0 + b * width, t0 + (b + 1) * width) for d, b in sorted(arriving, key=str)]


def _draw(ax, rows, workers, title, colours=None, transfers=()):
    """rows: (task, worker, start, finish[, category]); transfers: (destination, start, finish),
    drawn as black marks under the receiving worker's row. Where a worker's row would hold more
    than :data:`MERGE_ABOVE` runs, the row is drawn in :data:`WINDOWS` time windows: each the
    colour of the category that ran longest in it, as tall as the share of it the worker was busy
    (the title says so)."""
    y = {w: k for k, w in enumerate(workers)}
    colours = colours or _colours(r[4] if len(r) > 4 else _category(r[0]) for r in rows)
    per_worker = {}
    for r in rows:
        per_worker[r[1]] = per_worker.get(r[1], 0) + 1
    span = max((r[3] for r in rows), default=0.0) - min((r[2] for r in rows), default=0.0)
    crowded = max(per_worker.values(), default=0) > MERGE_ABOVE
    if crowded:
        t0 = min(r[2] for r in rows)
        cells, transfers = _windows(rows, list(transfers), t0, t0 + span)
        for w, s, width, cat, share in cells:
            ax.barh(
                y.get(w, 0), width, left=s, height=0.7 * max(share, 0.08), color=colours.get(cat, "grey"), linewidth=0
            )
        title += f"\n{len(rows):,} runs in {WINDOWS} windows: colour, the kind that ran most; height, the time busy"
    else:
        for r in rows:
            task, w, s, f = r[:4]
            cat = r[4] if len(r) > 4 else _category(task)
            ax.barh(
                y.get(w, 0),
                max(f - s, 1e-9),
                left=s,
                height=0.7,
                color=colours.get(cat, "grey"),
                edgecolor="black",
                linewidth=0.3,
            )
    for dst, s, f in transfers:
        ax.hlines(y.get(dst, 0) - 0.42, s, f, color="black", linewidth=2.5)
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels([f"worker {w}" for w in workers])
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return colours


def _legend(fig, colours, transfers: bool) -> None:
    """Task categories (only where there are several: one colour says nothing) and the transfer mark."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    items = []
    if len(colours) > 1:
        items = [Patch(color=c, label=k) for k, c in list(colours.items())[:MAX_LEGEND]]
        if len(colours) > MAX_LEGEND:
            items.append(Patch(color=(0.75, 0.75, 0.75), label=f"{len(colours) - MAX_LEGEND} more categories"))
    if transfers:
        items.append(Line2D([0], [0], color="black", linewidth=2.5, label="bytes arriving (transfer)"))
    if items:
        fig.legend(
            handles=items,
            loc="center right",
            fontsize=8,
            title="task category" if len(colours) > 1 else None,
            title_fontsize=8,
        )


@plain_text
def gantt(schedule, path, title=None, workers=None, *, graph=None, transfers=()):
    """A Gantt chart of one schedule or several (a panel each, one time axis), one row per worker,
    written as PNG.

    Parameters
    ----------
    schedule : Schedule or list of Schedule
    path : str or os.PathLike
    title : str or list of str, optional
        One per schedule (default: its scheduler and makespan).
    workers : list, optional
        Row order (default: the workers used, sorted).
    graph : TaskGraph, optional
        Colours tasks by the graph's categories (default: by id, without trailing digits).
    transfers : iterable of Transfer, optional
        Drawn as black marks under the receiving worker (a simulated trace's transfers); with
        several schedules, a list of such iterables, one per schedule.
    """
    many = isinstance(schedule, (list, tuple))
    plans = list(schedule) if many else [schedule]
    titles = list(title) if isinstance(title, (list, tuple)) else [title] * len(plans)
    moves = list(transfers) if many and transfers else [transfers] * len(plans) if not many else [()] * len(plans)
    if graph is not None:
        from ..analysis import task_kind

        def cat(t):
            return task_kind(graph, t) if t in graph else _category(t)
    else:
        cat = _category
    rows = [[(a.task, a.worker, a.start, a.finish, cat(a.task)) for a in plan] for plan in plans]
    workers = workers or sorted({r[1] for rs in rows for r in rs}, key=str)
    colours = _colours(r[4] for rs in rows for r in rs)
    fig, axes = plt.subplots(
        len(plans), 1, figsize=(12, (0.5 * len(workers) + 1.1) * len(plans) + 0.5), sharex=True, squeeze=False
    )
    for ax, plan, rs, t, moved in zip(axes[:, 0], plans, rows, titles, moves):
        _draw(
            ax,
            rs,
            workers,
            t or f"{plan.scheduler}: makespan {plan.makespan:.4g} s",
            colours,
            [(m.destination, m.start, m.finish) for m in moved],
        )
    axes[-1][0].set_xlabel("time (s)")
    drawn = any(moves)
    fig.tight_layout(rect=(0, 0, 0.8 if len(colours) > 1 or drawn else 1, 1))
    _legend(fig, colours, bool(drawn))
    save_figure(fig, path, plt.close)


@plain_text
def gantt_compare(report, path):
    """The predicted plan (scaled) above the measured run, same time axis.

    Parameters
    ----------
    report : RunReport
    path : str or os.PathLike
    """
    workers = [w.id for w in report.cluster.workers]
    cat = {row["task"]: row.get("category") or _category(row["task"]) for row in report.tasks}
    measured = [(r.task, r.worker, r.start, r.finish, cat.get(r.task, _category(r.task))) for r in report.trace.runs]
    for r in measured:
        if r[1] not in workers:
            workers.append(r[1])
    colours = _colours(r[4] for r in measured)
    n = 2 if report.plan is not None else 1
    # one time axis, unless the plan and the run differ by more than 2x (guessed costs): then each
    # panel gets its own, so the shorter one is not squashed into a corner
    ratio = (
        (report.predicted_makespan or report.measured_makespan) / report.measured_makespan
        if report.measured_makespan > 0
        else 1.0
    )
    shared = n == 1 or 0.5 <= ratio <= 2.0
    fig, axes = plt.subplots(n, 1, figsize=(13, (0.5 * len(workers) + 1.2) * n + 0.8), sharex=shared, squeeze=False)
    k = 0
    if report.plan is not None:
        ts = report.time_scale
        pred = [
            (a.task, a.worker, a.start * ts, a.finish * ts, cat.get(a.task, _category(a.task))) for a in report.plan
        ]
        _draw(
            axes[0][0],
            pred,
            workers,
            f"{report.scheduler}: the plan (durations as the cost model predicts them), "
            + (
                f"predicted makespan {report.predicted_makespan:.3g} s"
                if report.predicted_makespan is not None
                else f"no prediction ({report.no_prediction})"
            )
            + ("" if shared else " (its own time axis: the costs planned with look like guesses)"),
            colours,
        )
        if not shared:
            axes[0][0].set_xlabel("planned time (s)")
        k = 1
    moved = [(t.destination, t.start, t.finish) for t in report.trace.transfers]
    _draw(
        axes[k][0],
        measured,
        workers,
        f"{report.scheduler}: measured on Dask, makespan {report.measured_makespan:.3g} s",
        colours,
        moved,
    )
    axes[-1][0].set_xlabel("time since the first task started (s)")
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    _legend(fig, colours, bool(moved))
    save_figure(fig, path, plt.close)
