"""Workers as batch jobs: a SLURM or PBS cluster through dask-jobqueue.

:func:`start_jobqueue` starts one Dask worker per batch job (``dask_jobqueue.SLURMCluster`` or
``PBSCluster``; the job scripts are dask-jobqueue's, not ours) with the Dask scheduler in this
process, and waits, bounded, until every job runs its worker. A job that does not start in time
(the queue is full, the request cannot be met) fails the run with the jobs' own state and reason
from the batch system; nothing is left queued. :func:`job_ids` asks each worker for the batch
job it runs in (``SLURM_JOB_ID`` / ``PBS_JOBID``), which run reports list beside the workers.

A worker whose job is cancelled (``scancel``) or runs out of walltime is a lost worker like any
other: the scheduler plugin re-plans the unfinished work on the workers left.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

from ...errors import LaunchError, MissingExtra, UsageError
from ..messages import workers_info
from ..worker.worker_plugin import job_id

__all__ = ["start_jobqueue", "job_ids", "KINDS", "SUBMIT", "JOB_WAIT"]

#: The batch systems taken, by name -> dask_jobqueue class.
KINDS = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}
#: Each batch system's submission command.
SUBMIT = {"slurm": "sbatch", "pbs": "qsub"}
#: Seconds to wait for every job's worker by default.
JOB_WAIT = 120.0


def start_jobqueue(
    kind: str,
    jobs: int,
    cores: int = 1,
    memory: str = "2GB",
    walltime: str = "01:00:00",
    queue: str | None = None,
    interface: str | None = None,
    wait: float = JOB_WAIT,
    work_stealing: bool = False,
    log_directory: str | None = None,
):
    """Start ``jobs`` batch jobs of one Dask worker each; return ``(client, cluster)`` once all
    of them run their worker.

    Parameters
    ----------
    kind : {"slurm", "pbs"}
    jobs : int
    cores, memory, walltime, queue
        Each job's request (dask-jobqueue's ``cores``, ``memory``, ``walltime``, ``queue``); one
        worker process per job with ``cores`` threads.
    interface : str, optional
        The network interface the scheduler and workers use (e.g. ``ib0``; ``lo`` on one machine).
    wait : float
        Seconds to wait for every worker.
    work_stealing : bool
        Dask's work stealing in the scheduler (off for static plans, which restrict every task).
    log_directory : str, optional
        Where the jobs write their output (dask-jobqueue's default: the current folder).

    Raises
    ------
    TaskflowError
        dask-jobqueue or the batch system's commands are missing, a bad request, or not every job
        ran its worker within ``wait`` seconds (the message gives each waiting job's state and
        reason; every job is cancelled).
    """
    import dask

    if kind not in KINDS:
        raise UsageError(f"unknown job queue {kind!r}; known: {', '.join(KINDS)}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"jobs must be >= 1, got {jobs!r}")
    try:
        import dask_jobqueue
    except ImportError:
        raise MissingExtra("running on a batch system needs dask-jobqueue: pip install dask-jobqueue") from None
    submit = SUBMIT[kind]
    if shutil.which(submit) is None:
        raise LaunchError(f"--jobqueue {kind}: {submit} is not on this machine (is this a {kind.upper()} login node?)")
    if interface is not None:
        _check_interface(interface)
    # the interface applies to the scheduler and the workers alike
    options = dict(
        cores=cores,
        processes=1,
        memory=memory,
        walltime=walltime,
        queue=queue,
        interface=interface,
        scheduler_options={"dashboard": False, "dashboard_address": ":0"},
    )  # never a taken 8787
    if log_directory:
        options["log_directory"] = log_directory
    with dask.config.set({"distributed.scheduler.work-stealing": bool(work_stealing)}):
        try:
            cluster = getattr(dask_jobqueue, KINDS[kind])(**options)
        except (ValueError, TypeError) as e:
            raise UsageError(f"--jobqueue {kind}: {e}") from None
    from distributed import Client

    client = None
    deadline = time.monotonic() + wait  # the submissions count too: a hanging sbatch is waited for no longer
    submissions = _Submissions().__enter__()
    try:
        _submit(cluster, jobs, kind, submissions, wait)
        client = Client(cluster)
        while len(workers_info(client)) < jobs and time.monotonic() < deadline:
            time.sleep(0.2)
        have = len(workers_info(client))
        if have < jobs:
            ids = [getattr(j, "job_id", None) for j in cluster.workers.values()]
            raise LaunchError(
                f"only {have} of {jobs} {kind.upper()} jobs ran a worker within {wait:g} s; "
                f"{_waiting(kind, [i for i in ids if i])}; every job is cancelled"
            )
        submissions.__exit__(None, None, None)
        return client, cluster
    except BaseException:
        _end_submissions(submit)
        for x in (client, cluster):
            try:
                if x is not None:
                    x.close()
            except Exception:  # noqa: BLE001 - closing after a failure: the first error is the one to report
                pass
        # the cluster may have started another submission between the first kill and its close
        _end_submissions(submit)
        submissions.__exit__(None, None, None)
        raise


class _Submissions:
    """While open, keeps what the background job submissions report (dask-jobqueue's errors go
    to the ``tornado.application`` log as tracebacks) instead of printing it."""

    def __enter__(self):
        import logging

        outer = self
        self.texts = []

        class Keep(logging.Handler):
            def emit(self, record):
                outer.texts.append(str(record.exc_info[1]) if record.exc_info else record.getMessage())

        self.log = logging.getLogger("tornado.application")  # distributed gives it a handler of its own
        self.saved = (self.log.handlers[:], self.log.propagate)
        self.log.handlers[:] = [Keep()]
        self.log.propagate = False
        return self

    def __exit__(self, *exc):
        self.log.handlers[:], self.log.propagate = self.saved

    def why(self) -> str:
        lines = [ln.strip() for t in self.texts for ln in t.splitlines() if ln.strip()]
        return next(
            (ln for ln in lines if "error" in ln.lower() and not ln.startswith("Exit code")),
            lines[-1] if lines else "no job id came back",
        )


def _check_interface(interface: str) -> None:
    """A TaskflowError unless ``interface`` is a network interface of this machine."""
    import psutil

    have = sorted(psutil.net_if_addrs())
    if interface not in have:
        raise UsageError(
            f"--interface {interface!r}: no such network interface on this machine (it has {', '.join(have)})"[:300]
        )


def _end_submissions(command: str) -> None:
    """Kill what is left of this process's ``command`` (sbatch, qsub) children: a submission that
    hangs outlives the wait for it otherwise."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == command:
                for p in [*child.children(recursive=True), child]:
                    p.kill()
        except psutil.Error:
            pass


def _submit(cluster, jobs: int, kind: str, submissions: _Submissions, wait: float) -> None:
    """Submit the jobs and wait for the submissions, ``wait`` seconds at most (not for the jobs to
    run): a batch system that refuses them (no controller, a bad partition) is one error now,
    with its own words, instead of a traceback in the log and a wait."""
    cluster.scale(jobs=jobs)
    try:
        cluster.sync(cluster._correct_state, callback_timeout=wait)  # waits for the submissions under way
    except RuntimeError as e:
        submissions.texts.append(str(e))
    except (TimeoutError, asyncio.TimeoutError):
        raise LaunchError(
            f"{kind.upper()}'s {SUBMIT[kind]} did not answer within {wait:g} s (--job-wait); every job is cancelled"
        ) from None
    if len(cluster.workers) < jobs or not all(getattr(j, "job_id", None) for j in cluster.workers.values()):
        raise LaunchError(f"{kind.upper()} refused the worker jobs: {submissions.why()}")


def _waiting(kind: str, ids) -> str:
    """The batch system's word on jobs that have not started: 'job 7 PENDING (Resources)'."""
    if kind == "slurm" and ids and shutil.which("squeue"):
        p = subprocess.run(
            ["squeue", "-h", "-o", "%i %T %r", "-j", ",".join(ids)], capture_output=True, text=True, timeout=30
        )
        rows = [line.split(None, 2) for line in p.stdout.splitlines() if line.strip()]
        waiting = [f"job {r[0]} {r[1]} ({r[2] if len(r) > 2 else '?'})" for r in rows if r[1] != "RUNNING"]
        if waiting:
            return "waiting: " + ", ".join(waiting)
    return f"jobs {', '.join(ids) or '(none submitted)'} have no worker"


def job_ids(client) -> dict:
    """Dask worker address -> the batch job it runs in, for the workers that run in one.

    Parameters
    ----------
    client : distributed.Client
    """
    try:
        got = client.run(job_id, on_error="return")
    except Exception:  # noqa: BLE001 - a report without job ids rather than no report
        return {}
    return {a: j for a, j in got.items() if isinstance(j, str)}
