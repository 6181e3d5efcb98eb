"""Job schedulers run for real (``taskflow jobs run``): each on the same Dask cluster
(:func:`taskflow.training.jobrun.run_jobs`), and, fed the jobs' profiled costs, simulated, so that
the simulator's prediction of each job's completion time and of the schedulers' ranking is
measured against the real run."""

from __future__ import annotations

import dataclasses
import statistics

from ..jobs import JobNetwork, JobRun
from ..training.jobprofile import one_machine, predicted_trace, profile_jobs, racks_machine, warm_up
from ..training.jobrun import run_jobs
from ..training.jobworkers import workers_of
from .jobs import compare_jobs, job_scheduler_for

__all__ = ["run_real_jobs", "prediction_table", "job_errors", "median_run"]


def run_real_jobs(
    trace,
    names,
    models: dict,
    data,
    client,
    *,
    epoch_iterations: int = 4,
    predict: bool = True,
    on_run=None,
    on_event=None,
    timeout=None,
    repeat: int = 1,
    racks: dict | None = None,
    uplink: float | None = None,
    **options,
) -> tuple:
    """``(real runs, simulated runs or None, profile or None)``: each job scheduler of ``names``
    on ``trace``'s real jobs; with ``predict``, the jobs profiled first and each scheduler
    simulated on their profiled durations and slowdowns (a restart costing a start, a preempted
    job going on half an epoch to its checkpoint). With ``repeat``, each scheduler runs that many
    times, the order of the schedulers turned by one each time (a machine that drifts slows each
    alike), and the real run of each is :func:`median_run` of its runs; each kind of job is
    measured alone again after each round, and the simulator fed the median of the passes
    (:meth:`~taskflow.training.jobprofile.JobProfile.joined`: a profile taken beside the runs).

    Parameters
    ----------
    trace : JobTrace
    names : list of str
    models : dict
        Model name -> factory.
    data
        What :func:`taskflow.train` takes.
    client : distributed.Client
    epoch_iterations : int
    predict : bool
    on_run : callable, optional
        Called with each real run as it ends.
    on_event : callable, optional
        Called with each event of the real runs (a progress line).
    timeout : float, optional
        Seconds each real run may take.
    repeat : int
        Runs per scheduler.
    racks : dict, optional
        Dask worker name -> its rack (the testbed's): jobs placed on racks; simulated on the same
        racks, with ``uplink`` (bytes per second) shared by the jobs crossing it
        (:meth:`~taskflow.training.jobprofile.JobProfile.iteration`).
    uplink : float, optional
    **options
        Job schedulers' options, and ``batch`` and ``seed`` for the jobs.

    Raises
    ------
    TaskflowError
        What :func:`~taskflow.training.jobrun.run_jobs` raises.
    """
    train_options = {k: options.pop(k) for k in ("batch", "seed") if options.get(k) is not None}
    profile = sim = None
    workers = len(client.scheduler_info()["workers"])
    real = trace
    if not predict:  # (the profile warms the cluster up itself)
        warm_up(trace, models, data, client=client, **train_options)

    def measure(**how):
        return profile_jobs(
            trace,
            models,
            data,
            client=client,
            epoch_iterations=epoch_iterations,
            racks=racks,
            uplink=uplink,
            **how,
            **train_options,
        )

    if predict:
        profile = measure()
        real = predicted_trace(trace, profile, label=False)
    runs: dict = {name: [] for name in names}
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            # a scheduler that knows durations reads the profile's (the real jobs name no other)
            run = run_jobs(
                real,
                job_scheduler_for(name, real, **options),
                models,
                data,
                client=client,
                epoch_iterations=epoch_iterations,
                timeout=timeout,
                on_event=on_event,
                racks=racks,
                **train_options,
            )
            runs[name].append(run)
            if on_run is not None:
                on_run(run)
        if predict and repeat > 1:  # the kinds alone again, after each round: a profile beside the runs
            profile = profile.joined(measure(pairs=False, warm=False))
    if predict:
        cluster = one_machine(workers) if not racks else racks_machine(workers_of(client), racks, uplink or 0.0)
        fed = predicted_trace(trace, profile)
        restore = statistics.median(profile.start.values())
        drain = statistics.median(profile.epoch.values()) / 2  # a preempted job stops at its epoch's end
        network = JobNetwork(cluster, profile.iteration) if racks and uplink else None
        sim = compare_jobs(
            fed,
            cluster,
            names,
            restore=restore,
            drain=drain,
            interference=profile.interference,
            network=network,
            **options,
        )
    return [median_run(runs[name]) for name in names], sim, profile


def median_run(runs: list) -> JobRun:
    """One run of the same trace and scheduler standing for several: each job's start, finish
    and preemptions the median of its runs' (its stretches and the busy workers the first
    run's); the run itself where there is one.

    Parameters
    ----------
    runs : list of JobRun
    """
    if len(runs) == 1:
        return runs[0]
    records = []
    for k, first in enumerate(runs[0].records):
        mine = [run.records[k] for run in runs]
        med = lambda f: first.arrival + statistics.median(f(r) - r.arrival for r in mine)
        records.append(
            dataclasses.replace(
                first,
                start=med(lambda r: r.start),
                finish=med(lambda r: r.finish),
                preemptions=int(statistics.median(r.preemptions for r in mine)),
            )
        )
    return JobRun(runs[0].scheduler, runs[0].workers, records, runs[0].busy, runs[0].rejected, runs[0].histories)


def job_errors(real, sim) -> list:
    """Per job, the simulated completion time's relative error against the real one.

    Parameters
    ----------
    real, sim : JobRun
        Of the same trace and scheduler.
    """
    pred = {r.job.id: r.jct for r in sim.records if r.finish is not None}
    return [abs(pred[r.job.id] - r.jct) / r.jct for r in real.records if r.finish is not None and r.job.id in pred]


def prediction_table(real: list, sim: list) -> str:
    """Per job scheduler: the real and the predicted average completion time, the median and the
    largest per-job error, each side's rank; and whether the rankings agree.

    Parameters
    ----------
    real, sim : list of JobRun
        In the same order of schedulers.
    """
    rank_real = {r.scheduler: k for k, r in enumerate(sorted(real, key=lambda r: r.metrics()["avg_jct"]), 1)}
    rank_sim = {r.scheduler: k for k, r in enumerate(sorted(sim, key=lambda r: r.metrics()["avg_jct"]), 1)}
    head = (
        f"{'job scheduler':<14} {'real avg JCT':>12} {'simulated':>10} {'median err.':>11} {'max err.':>9} "
        f"{'rank real':>9} {'rank sim.':>9}"
    )
    lines = [head, "-" * len(head)]
    for r, s in zip(real, sim):
        errs = job_errors(r, s)
        lines.append(
            f"{r.scheduler:<14} {r.metrics()['avg_jct']:>12.2f} {s.metrics()['avg_jct']:>10.2f} "
            f"{statistics.median(errs):>11.1%} {max(errs):>9.1%} {rank_real[r.scheduler]:>9} "
            f"{rank_sim[r.scheduler]:>9}"
        )
    same = [rank_real[r.scheduler] for r in real] == [rank_sim[r.scheduler] for r in real]
    lines += [
        "",
        f"err.: a job's simulated completion time against its real one; the rankings {'agree' if same else 'differ'}",
    ]
    return "\n".join(lines)
