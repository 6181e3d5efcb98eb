"""Real training jobs arriving over time on one Dask cluster, admitted by a job scheduler:
:func:`run_jobs`.

The job scheduler is the same decision core the simulator drives (:mod:`taskflow.jobscheduling`):
here the clock is the wall clock, a job arrives at its trace time (seconds after the run starts),
and every decision is checked by the same :class:`~taskflow.jobs.ledger.Ledger`. A started job is
:func:`taskflow.train` on the workers it was given (``on_workers``: its tasks held to them, rank
``r`` on the ``r``-th), in a thread of this process, beside the other jobs on the same cluster; its
work is ``ceil(iterations / epoch_iterations)`` epochs of ``epoch_iterations`` iterations, and its
checkpoint is written after each. A preempted job stops at its next epoch boundary, after that
checkpoint (the job that takes its workers first waits for it), and a restarted one resumes from
the checkpoint on whatever workers it is given: it ends with the parameters of an uninterrupted run.
A resized elastic job stops so and goes on on its new workers (``train(..., elastic=True)``); a job
started beside another (Crossover) trains on that job's workers at once, waiting for neither.

Workers lost and added are Dask's own (:class:`~.jobworkers.Workers` looks every
:data:`~.jobworkers.POLL_SECONDS`): a lost worker's job stops as a preempted one does (it ends the
epoch it is in on the workers it has left, or where Dask puts it, and waits again from its
checkpoint) and the scheduler hears :class:`~taskflow.jobscheduling.WorkerLost`; a worker that
comes back or joins is free, and the scheduler hears :class:`~taskflow.jobscheduling.WorkerAdded`.
A job left waiting on workers that were lost waits :data:`REJOIN_SECONDS` for one to join.

What comes back is a :class:`~taskflow.jobs.JobRun`, as from the simulator (the same metrics, table
and plots), with each job's :class:`~taskflow.training.History` in ``histories``. The profile that
lets the job simulator predict such a run is :mod:`.jobprofile`'s.
"""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import tempfile
import threading
import time

from ..errors import RunFailed, RunTimeout, SchedulerError, UsageError, WorkersLost
from ..jobs import JobRecord, JobRun, JobTrace
from ..jobs.ledger import Ledger
from ..jobscheduling import (
    Arrived,
    Finished,
    JobScheduler,
    Start,
    Tick,
    View,
    WorkerAdded,
    WorkerLost,
    get_job_scheduler,
)
from .jobworkers import POLL_SECONDS, Workers, check_racks, workers_of

__all__ = ["run_jobs", "check_racks", "check_jobs", "epochs_of", "workers_of", "JOIN_SECONDS", "REJOIN_SECONDS"]

#: seconds a job waits for the segment holding its workers to end its epoch
JOIN_SECONDS = 600.0
#: seconds a run whose waiting jobs need workers that were lost waits for one to join
REJOIN_SECONDS = 60.0


class _Stop(Exception):
    """Raised from ``on_epoch`` to stop a preempted job at its epoch boundary."""


def epochs_of(job, per_epoch: int) -> int:
    """The epochs a real job trains: ``ceil(iterations / per_epoch)``, at least one.

    Parameters
    ----------
    job : Job
    per_epoch : int
        Iterations per epoch.
    """
    return max(1, math.ceil(job.iterations / per_epoch))


def check_jobs(jobs, models) -> None:
    """Every job names a model of ``models`` and its iterations.

    Parameters
    ----------
    jobs : iterable of Job
    models : dict

    Raises
    ------
    UsageError
        The first job that does not (named).
    """
    for j in jobs:
        if j.model not in models:
            raise UsageError(f"job {j.id!r}: model {j.model!r} is not one the run knows ({', '.join(sorted(models))})")
        if j.iterations is None:
            raise UsageError(f"job {j.id!r}: a real run needs its iterations")


@dataclasses.dataclass
class _Real:
    job: object
    rec: JobRecord
    index: int
    workers: tuple = ()
    done: float = 0.0  # seconds run in earlier segments
    run_start: float = 0.0
    waited_since: float = 0.0
    last_run: float = 0.0
    segment: int = 0
    cut: int = 0  # the segment a lost worker stopped (its failure is that loss)
    stop: threading.Event | None = None
    thread: threading.Thread | None = None


class _Runner:
    """One run of a trace: the clock, the ledger, the job threads."""

    def __init__(
        self,
        trace,
        sched,
        models,
        data,
        client,
        names,
        train_options,
        workdir,
        epoch_iterations,
        timeout,
        on_event,
        racks=None,
    ):
        self.trace, self.sched, self.models, self.data = trace, sched, models, data
        self.client, self.names = client, names
        self.options, self.workdir, self.per_epoch = train_options, workdir, epoch_iterations
        self.timeout, self.on_event = timeout, on_event
        self.reports: queue.Queue = queue.Queue()
        self.holder: dict = {}  # worker -> the threads of the segments that last held it (two: a Crossover pair)
        self.shared: set = set()  # the pairs of jobs that took turns on the same workers
        self.ledger = Ledger(sched.name, len(names))
        self.live: dict = {}
        self.histories: dict = {}
        # one machine: every worker on one node; with racks, each rack a node (it is one machine still)
        self.workers = Workers(client, names, racks)
        self.names = self.workers.names  # (grows as workers join)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def go(self) -> JobRun:
        jobs = sorted(self.trace.jobs, key=lambda j: (j.arrival, j.id))
        xs = [_Real(j, JobRecord(j, j.arrival), k) for k, j in enumerate(jobs)]
        self.t0 = time.monotonic()
        nxt, period = 0, self.sched.round
        tick = (xs[0].job.arrival + period) if period and xs else math.inf
        stuck_since = None
        try:
            while nxt < len(xs) or self.live:
                t_arr = xs[nxt].job.arrival if nxt < len(xs) else math.inf
                if not self.live and period:
                    tick = max(tick, t_arr)
                wake = min(t_arr, tick if self.live else math.inf)
                if (
                    wake == math.inf
                    and not any(x.workers for x in self.live.values())
                    and not any(x.thread is not None and x.thread.is_alive() for x in self.live.values())
                ):
                    stuck_since = self.now() if stuck_since is None else stuck_since
                    self._stuck(self.now() - stuck_since)
                else:
                    stuck_since = None
                if self.timeout is not None and self.now() > self.timeout:
                    raise RunTimeout(
                        f"the run of {len(xs)} jobs took longer than its timeout of {self.timeout:g} s; stopped"
                    )
                happened = self._reports(min(wake - self.now(), POLL_SECONDS))
                now = self.now()
                happened[:0] = self._changes(now)
                while nxt < len(xs) and xs[nxt].job.arrival <= now:
                    x = xs[nxt]
                    nxt += 1
                    x.waited_since = now
                    self.live[x.job.id] = x
                    happened.append(Arrived(now, x.job))
                if period and tick <= now:
                    tick = now + period
                    happened.append(Tick(now))
                for ev in happened:
                    if self.on_event is not None:
                        self.on_event(ev)
                    self._apply(self.sched.decide(ev, self._view(now)), now)
        except BaseException:
            self._abandon()
            raise
        return JobRun(
            self.sched.name, len(self.names), [x.rec for x in xs], self.ledger.steps, shared=sorted(self.shared)
        )

    def _stuck(self, seconds: float) -> None:
        """Nothing runs and nothing will arrive, for ``seconds``: an error, unless jobs wait on
        lost workers, which have :data:`REJOIN_SECONDS` to come back."""
        stuck = next(iter(self.live.values()))
        if not self.ledger.down:
            raise SchedulerError(
                f"job scheduler {self.sched.name!r} leaves job {stuck.job.id!r} waiting on "
                f"an idle cluster with nothing left to happen (it would never finish)"
            )
        if seconds > REJOIN_SECONDS:
            down = sorted(self.ledger.down)
            lost = ", ".join(repr(self.names[w]) for w in down)
            raise WorkersLost(
                f"job {stuck.job.id!r} waits for {stuck.job.workers} workers: "
                f"{'workers' if len(down) > 1 else 'worker'} {lost} {'were' if len(down) > 1 else 'was'} lost and "
                f"no worker joined within {REJOIN_SECONDS:g} s"
            )

    def _changes(self, now: float, at_once: bool = False) -> list:
        """The workers lost and joined since the last look (:meth:`Workers.look`), as the events
        the scheduler hears: a lost worker's job (and its Crossover partner) stopped, waiting again."""
        lost, joined = self.workers.look(at_once)
        out = []
        for w in lost:
            jid = self.ledger.lose(w)
            for j in (jid, self.ledger.pairs.get(jid)) if jid is not None else ():
                x = self.live.get(j) if j is not None else None
                if x is not None and x.workers:
                    self.ledger.release(x.workers, j)
                    self._halt(x, now)
                    x.cut = x.segment
            out.append(WorkerLost(now, w, jid))
        for w in joined:
            if w < self.ledger.workers:
                self.ledger.add(w)
            else:
                self.ledger.grow()
            out.append(WorkerAdded(now, w))
        if out:
            self.ledger.mark(now)
        return out

    def _reports(self, wait: float) -> list:
        """What the job threads said, within ``wait`` seconds: the events for the scheduler."""
        out = []
        try:
            msgs = [self.reports.get(timeout=max(0.0, wait))]
        except queue.Empty:
            return out
        while True:
            try:
                msgs.append(self.reports.get_nowait())
            except queue.Empty:
                break
        for kind, jid, segment, payload in msgs:
            x = self.live.get(jid)
            if x is None or segment != x.segment:
                continue  # an older segment of a job started again since: the newer one speaks for it
            now = self.now()
            if kind == "failed" and segment != x.cut:
                out.extend(self._changes(now, at_once=True))  # did it fail for a worker lost?
            if kind == "failed" and segment != x.cut:
                raise RunFailed(f"job {jid!r} failed: {payload}") from payload
            if kind == "failed":
                continue  # a worker of its was lost: it waits again, from its checkpoint
            if kind == "stopped":
                continue  # its preemption was decided (and its workers handed on) already
            self.histories[jid] = payload
            if x.workers:
                x.rec.runs.append((x.run_start, now, x.workers))
                self.ledger.release(x.workers, jid)
                self.ledger.mark(now)
            x.workers = ()
            x.rec.finish = now
            del self.live[jid]
            out.append(Finished(now, jid, sum((b - a) * len(w) for a, b, w in x.rec.runs)))
        return out

    def _view(self, now) -> View:
        states = []
        oracle = self.sched.knows_durations
        for x in self.live.values():
            done = x.done + ((now - x.run_start) * len(x.workers) / x.job.workers if x.workers else 0.0)
            got = sum((b - a) * len(w) for a, b, w in x.rec.runs) + (
                (now - x.run_start) * len(x.workers) if x.workers else 0.0
            )
            states.append(self.ledger.state(x, now, done, got, oracle))
        w = self.workers
        return View(
            now, tuple(sorted(self.ledger.free)), w.nodes, tuple(states), w.racks, tuple(sorted(self.ledger.down))
        )

    def _apply(self, decisions, now) -> None:
        live = self.live
        stopped, started, resized = self.ledger.check(
            decisions,
            now,
            lambda j: live[j].workers if j in live else (),
            lambda j: live[j].job.workers if j in live and not live[j].workers else None,
            lambda j: live[j].job.sizes,
        )
        for jid in stopped:
            self._halt(live[jid], now)
        for jid, ws in resized:  # stopped at its epoch's end, it goes on on its new workers from its checkpoint
            self._stop(live[jid], now)
            self._start(live[jid], ws, now)
        beside = {d.job_id: d.beside for d in decisions if isinstance(d, Start) and d.beside is not None}
        for jid, ws in started:
            self._start(live[jid], ws, now, beside.get(jid))
        self.ledger.mark(now)

    def _halt(self, x: _Real, now: float) -> None:
        """``x`` stops (preempted, or a worker of its lost) and waits again."""
        self._stop(x, now)
        x.last_run, x.workers, x.waited_since = now - x.run_start, (), now
        x.rec.preemptions += 1

    def _stop(self, x: _Real, now: float) -> None:
        x.stop.set()
        x.rec.runs.append((x.run_start, now, x.workers))
        x.done += (now - x.run_start) * len(x.workers) / x.job.workers  # (an elastic job: in proportion)

    def _start(self, x: _Real, ws: tuple, now: float, beside: str | None = None) -> None:
        x.workers, x.run_start = ws, now
        x.segment += 1
        if x.rec.start is None:
            x.rec.start = now
        # the jobs that held these workers, and this job's own last segment, end their epoch first
        # (a job started beside another takes turns with it on its workers: it waits for none of them)
        partner = self.live[beside].thread if beside is not None else None
        if beside is not None:
            self.shared.add(tuple(sorted((x.job.id, beside))))
        before = {t for w in ws for t in self.holder.get(w, ()) if t is not partner}
        before |= {x.thread} if x.thread is not None else set()
        stop = x.stop = threading.Event()
        job, segment = x.job, x.segment
        names = [self.names[w] for w in ws]
        epochs = epochs_of(job, self.per_epoch)
        ck = os.path.join(self.workdir, f"job{x.index}.ckpt")

        def body():
            from . import train

            for t in before:
                t.join(JOIN_SECONDS)

            def on_epoch(history):
                if stop.is_set() and len(history.epochs) < epochs:
                    raise _Stop()

            try:
                h = train(
                    self.models[job.model],
                    self.data,
                    epochs=epochs,
                    iterations=self.per_epoch,
                    workers=len(names),
                    batch=job.batch or self.options.get("batch", 32),
                    client=self.client,
                    on_workers=names,
                    checkpoint=ck,
                    quiet=True,
                    on_epoch=on_epoch,
                    elastic=job.sizes[0] != job.sizes[1],
                    **{k: v for k, v in self.options.items() if k != "batch"},
                )
            except _Stop:
                self.reports.put(("stopped", job.id, segment, None))
            except BaseException as e:  # said to the runner, which stops the run with it
                self.reports.put(("failed", job.id, segment, e))
            else:
                self.reports.put(("finished", job.id, segment, h))

        th = threading.Thread(target=body, name=f"job-{job.id}", daemon=True)
        x.thread = th
        for w in ws:
            self.holder[w] = (th, partner) if partner is not None else (th,)
        th.start()

    def _abandon(self) -> None:
        """Stop every job at its next epoch boundary and wait a bounded time for them."""
        for x in self.live.values():
            if x.stop is not None:
                x.stop.set()
        end = time.monotonic() + 60.0
        for th in {t for ts in self.holder.values() for t in ts}:
            th.join(max(0.0, end - time.monotonic()))


def run_jobs(
    trace,
    scheduler,
    models: dict,
    data,
    *,
    client,
    epoch_iterations: int = 4,
    timeout: float | None = None,
    on_event=None,
    racks: dict | None = None,
    **train_options,
) -> JobRun:
    """Run the real jobs of ``trace`` on ``client``'s cluster under the job scheduler ``scheduler``
    (see the module docstring).

    Parameters
    ----------
    trace : JobTrace or list of Job
        Each job names a ``model`` of ``models`` and its ``iterations`` (``batch`` optional);
        ``workers`` of the cluster's; ``duration`` is what a scheduler that knows durations reads
        (:func:`predicted_trace` gives the profile's).
    scheduler : str or JobScheduler
    models : dict
        Model name -> factory, as :func:`taskflow.train` takes it.
    data
        As :func:`taskflow.train` takes it, for every job.
    client : distributed.Client
        The shared cluster: one job worker per Dask worker.
    epoch_iterations : int
        Iterations between two checkpoints (the points where a preempted job stops).
    timeout : float, optional
        Seconds the whole run may take.
    on_event : callable, optional
        Called with each event before the scheduler hears of it (a progress line).
    racks : dict, optional
        Dask worker name -> its rack (a :class:`~taskflow.cluster.Cluster`'s ``racks``, as the
        testbed's cluster file says them): the job scheduler places jobs on racks, each rack one
        node (default: every worker on one node, one machine).
    **train_options
        Passed to :func:`taskflow.train` (``batch``: the default per job, ``seed``, ``lr`` ...).

    Returns
    -------
    JobRun
        Its ``histories``: job id -> the :class:`~taskflow.training.History` of its last segment.

    Raises
    ------
    TaskflowError
        A job without a known model or iterations, a job larger than the cluster, a decision
        that breaks a rule, a job that failed (named), the timeout.
    """
    trace = trace if isinstance(trace, JobTrace) else JobTrace(list(trace))
    sched = scheduler if isinstance(scheduler, JobScheduler) else get_job_scheduler(scheduler)
    check_jobs(trace.jobs, models)
    names = workers_of(client)
    for j in trace.jobs:
        if j.workers > len(names):
            raise UsageError(f"job {j.id!r} asks for {j.workers} workers; the cluster has {len(names)}")
    check_racks(racks, names)
    with tempfile.TemporaryDirectory(prefix="taskflow-jobs-") as work:  # the jobs' checkpoints, removed after
        runner = _Runner(
            trace, sched, models, data, client, names, train_options, work, epoch_iterations, timeout, on_event, racks
        )
        out = runner.go()
    out.histories = runner.histories
    return out
