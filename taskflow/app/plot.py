"""Gantt charts (matplotlib, drawn off-screen)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["gantt", "gantt_compare"]


def _draw(ax, rows, workers, title):
    """rows: (task, worker, start, finish)."""
    y = {w: k for k, w in enumerate(workers)}
    cmap = plt.get_cmap("tab20")
    cats = {}
    for task, w, s, f in rows:
        cat = str(task).split("#")[0].rstrip("0123456789_-") or str(task)
        color = cmap(cats.setdefault(cat, len(cats)) % 20)
        ax.barh(y.get(w, 0), max(f - s, 1e-9), left=s, height=0.8, color=color, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(workers)))
    ax.set_yticklabels([str(w) for w in workers])
    ax.set_ylabel("worker")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)


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
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(workers) + 1.5))
    _draw(ax, rows, workers, title or f"{schedule.scheduler}: makespan {schedule.makespan:.3g} s")
    ax.set_xlabel("time (s)")
    fig.tight_layout()
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
    measured = [(r.task, r.worker, r.start, r.finish) for r in report.trace.runs]
    for r in measured:
        if r[1] not in workers:
            workers.append(r[1])
    n = 2 if report.plan is not None else 1
    fig, axes = plt.subplots(n, 1, figsize=(11, (0.5 * len(workers) + 1.2) * n + 0.8), sharex=True, squeeze=False)
    k = 0
    if report.plan is not None:
        ts = report.time_scale
        pred = [(a.task, a.worker, a.start * ts, a.finish * ts) for a in report.plan]
        _draw(axes[0][0], pred, workers, f"{report.scheduler}: predicted, makespan {report.predicted_makespan:.3g} s")
        k = 1
    _draw(axes[k][0], measured, workers, f"{report.scheduler}: measured on Dask, makespan {report.measured_makespan:.3g} s")
    axes[-1][0].set_xlabel("time since the first task started (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
