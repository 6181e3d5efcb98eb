"""Gantt charts (matplotlib, drawn off-screen)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["gantt", "gantt_compare"]


MAX_LEGEND = 12


def _category(task) -> str:
    """A task's category from its id: the part before a run suffix and trailing digits."""
    return str(task).split("#")[0].rstrip("0123456789_-") or str(task)


def _colours(categories) -> dict:
    """One colour per category, the same in every panel; past ``MAX_LEGEND`` categories, grey."""
    cmap = plt.get_cmap("tab20")
    order = list(dict.fromkeys(categories))
    return {c: (cmap(k % 20) if k < MAX_LEGEND else (0.75, 0.75, 0.75, 1.0)) for k, c in enumerate(order)}


def _draw(ax, rows, workers, title, colours=None, transfers=()):
    """rows: (task, worker, start, finish[, category]); transfers: (destination, start, finish),
    drawn as black marks under the receiving worker's row."""
    y = {w: k for k, w in enumerate(workers)}
    colours = colours or _colours(r[4] if len(r) > 4 else _category(r[0]) for r in rows)
    for r in rows:
        task, w, s, f = r[:4]
        cat = r[4] if len(r) > 4 else _category(task)
        ax.barh(y.get(w, 0), max(f - s, 1e-9), left=s, height=0.7, color=colours.get(cat, "grey"),
                edgecolor="black", linewidth=0.3)
    for dst, s, f in transfers:
        ax.hlines(y.get(dst, 0) - 0.42, s, f, color="black", linewidth=2.5)
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels([f"worker {w}" for w in workers])
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return colours


def _legend(fig, colours, transfers: bool) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    items = [Patch(color=c, label=k) for k, c in list(colours.items())[:MAX_LEGEND]]
    if len(colours) > MAX_LEGEND:
        items.append(Patch(color=(0.75, 0.75, 0.75), label=f"{len(colours) - MAX_LEGEND} more categories"))
    if transfers:
        items.append(Line2D([0], [0], color="black", linewidth=2.5, label="bytes arriving (transfer)"))
    fig.legend(handles=items, loc="center right", fontsize=8, title="task category", title_fontsize=8)


def gantt(schedule, path, title=None, workers=None):
    """A Gantt chart of a schedule (or a trace's schedule), one row per worker, written as PNG.

    Parameters
    ----------
    schedule : Schedule
    path : str or os.PathLike
    title : str, optional
    workers : list, optional
        Row order (default: the workers used, sorted).
    """
    rows = [(a.task, a.worker, a.start, a.finish) for a in schedule]
    workers = workers or sorted({r[1] for r in rows}, key=str)
    fig, ax = plt.subplots(figsize=(12, 0.5 * len(workers) + 1.5))
    colours = _draw(ax, rows, workers, title or f"{schedule.scheduler}: makespan {schedule.makespan:.3g} s")
    ax.set_xlabel("time (s)")
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    _legend(fig, colours, False)
    fig.savefig(path, dpi=120)
    plt.close(fig)


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
    fig, axes = plt.subplots(n, 1, figsize=(13, (0.5 * len(workers) + 1.2) * n + 0.8), sharex=True, squeeze=False)
    k = 0
    if report.plan is not None:
        ts = report.time_scale
        pred = [(a.task, a.worker, a.start * ts, a.finish * ts, cat.get(a.task, _category(a.task)))
                for a in report.plan]
        _draw(axes[0][0], pred, workers, f"{report.scheduler}: the plan (durations as the model predicts them), "
              f"predicted makespan {report.predicted_makespan:.3g} s", colours)
        k = 1
    moved = [(t.destination, t.start, t.finish) for t in report.trace.transfers]
    _draw(axes[k][0], measured, workers, f"{report.scheduler}: measured on Dask, makespan "
          f"{report.measured_makespan:.3g} s", colours, moved)
    axes[-1][0].set_xlabel("time since the first task started (s)")
    fig.tight_layout(rect=(0, 0, 0.82, 1))
    _legend(fig, colours, bool(moved))
    fig.savefig(path, dpi=120)
    plt.close(fig)
