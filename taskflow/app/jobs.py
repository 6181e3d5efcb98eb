"""Job schedulers compared on one trace (``taskflow jobs simulate``): each simulated
(:func:`taskflow.jobs.simulate_jobs`), one table of the papers' metrics, one figure (the completion
times' CDF and the busy workers over time)."""

from __future__ import annotations

from ..jobs import JobCluster, JobTrace, simulate_jobs
from ..jobscheduling import COMMON_OPTIONS, get_job_scheduler
from .plot import plain_text

__all__ = ["job_scheduler_for", "compare_jobs", "jobs_table", "plot_jobs", "COLUMNS"]

#: the table's columns: metric -> (heading, unit scale)
COLUMNS = {
    "avg_jct": "avg JCT",
    "median_jct": "median",
    "p95_jct": "p95",
    "p99_jct": "p99",
    "makespan": "makespan",
    "avg_queueing": "avg queue",
    "utilization": "util.",
    "max_rho": "max rho",
    "preemptions": "preempt.",
}


def job_scheduler_for(name: str, trace: JobTrace, **options):
    """A new job scheduler by name with its options; ``gittins`` without a ``distribution`` gets the
    trace's own job sizes (worker-seconds) as one, as Tiresias estimates it from the cluster's
    history: the distribution, never a job's own duration.

    Parameters
    ----------
    name : str
    trace : JobTrace
    **options
        The options it takes (others are left out: one set of options serves a comparison).

    Raises
    ------
    TaskflowError
        An unknown name or a bad option.
    """
    cls = type(get_job_scheduler(name))
    mine = {k: v for k, v in options.items() if k in cls.option_names + COMMON_OPTIONS and v is not None}
    if "distribution" in cls.option_names and "distribution" not in mine:
        mine["distribution"] = [j.service for j in trace.jobs]
    return cls(**mine)


def compare_jobs(
    trace: JobTrace,
    cluster: JobCluster | None,
    names,
    restore: float = 0.0,
    skip_too_large: bool = False,
    on_run=None,
    interference=None,
    network=None,
    progress=None,
    drain: float = 0.0,
    **options,
) -> list:
    """Each job scheduler of ``names`` on ``trace``: a list of :class:`~taskflow.jobs.JobRun`.

    Parameters
    ----------
    trace : JobTrace
    cluster : JobCluster, optional
    names : list of str
    restore : float
    skip_too_large : bool
    on_run : callable, optional
        Called with each run as it ends.
    interference : Interference, optional
        The slowdowns of jobs sharing a node (the simulator's, and the job schedulers' that read it).
    network : JobNetwork, optional
        The slowdowns of jobs sharing racks' uplinks.
    progress : callable, optional
        Called with the number of jobs that finished, as they finish, in every run.
    drain : float
        Seconds a preempted job goes on to its checkpoint (:func:`~taskflow.jobs.simulate_jobs`).
    **options
        Job schedulers' options (each takes those it knows).

    Raises
    ------
    TaskflowError
    """
    runs = []
    for name in names:
        sched = job_scheduler_for(name, trace, interference=interference, **options)
        run = simulate_jobs(
            trace,
            cluster,
            sched,
            restore=restore,
            skip_too_large=skip_too_large,
            interference=interference,
            network=network,
            progress=progress,
            drain=drain,
        )
        runs.append(run)
        if on_run is not None:
            on_run(run)
    return runs


def _fmt(key: str, v) -> str:
    if key == "utilization":
        return f"{v:.1%}"
    if key in ("max_rho",):
        return f"{v:.2f}"
    if key == "preemptions":
        return f"{int(v):,}"
    return f"{v:,.1f}" if abs(v) < 1e5 else f"{v:,.0f}"


def jobs_table(runs) -> str:
    """The runs side by side: completion times and queueing in seconds, utilization, Themis' rho,
    preemptions; best average JCT first.

    Parameters
    ----------
    runs : list of JobRun
    """
    rows = sorted(((r.scheduler, r.metrics()) for r in runs), key=lambda x: x[1]["avg_jct"])
    width = {k: max(len(h), *(len(_fmt(k, m[k])) for _, m in rows)) for k, h in COLUMNS.items()}
    head = f"{'job scheduler':<14}" + "".join(f" {h:>{width[k]}}" for k, h in COLUMNS.items())
    lines = [head, "-" * len(head)]
    for name, m in rows:
        lines.append(f"{name:<14}" + "".join(f" {_fmt(k, m[k]):>{width[k]}}" for k in COLUMNS))
    lines += [
        "",
        "JCT: job completion time (finish less arrival), seconds; avg queue: seconds from arrival to first "
        "start; util.: the busy share of the workers from the first arrival to the last finish; max rho: "
        "Themis' finish-time fairness, the worst job's completion time over its time on an equal share "
        "(1: fair)",
    ]
    return "\n".join(lines)


@plain_text
def plot_jobs(runs, path) -> None:
    """Two panels: each scheduler's job completion times as a CDF (log scale), and its busy
    workers over time.

    Parameters
    ----------
    runs : list of JobRun
    path : path
        PNG, SVG or PDF.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from ..formats import save_figure

    fig, (cdf, util) = plt.subplots(1, 2, figsize=(11, 3.8))
    for k, run in enumerate(runs):
        jct = np.sort([r.jct for r in run.records if r.finish is not None])
        cdf.step(jct, np.arange(1, len(jct) + 1) / len(jct), where="post", color=f"C{k}", label=run.scheduler)
        t = [a for a, _ in run.busy]
        util.step(
            [x / 3600 for x in t],
            [n for _, n in run.busy],
            where="post",
            color=f"C{k}",
            label=run.scheduler,
            linewidth=0.8,
        )
    cdf.set_xscale("log")
    cdf.set_xlabel("job completion time (s)")
    cdf.set_ylabel("share of jobs")
    cdf.set_title("completion times", fontsize=10)
    cdf.legend(fontsize=8)
    util.set_xlabel("time (hours)")
    util.set_ylabel("busy workers")
    util.set_ylim(0, runs[0].workers * 1.05 if runs else 1)
    util.set_title("utilization over time", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, plt.close, dpi=110)
