"""Real training jobs arriving over time on one Dask cluster, admitted by a job scheduler:
:func:`run_jobs`, and the profile that lets the job simulator predict them: :func:`profile_jobs`.

The job scheduler is the same decision core the simulator drives (:mod:`taskflow.jobscheduling`):
here the clock is the wall clock, a job arrives at its trace time (seconds after the run starts),
and every decision is checked by the same :class:`~taskflow.jobs.ledger.Ledger`. A started job is
:func:`taskflow.train` on the workers it was given (``on_workers``: its tasks held to them, rank
``r`` on the ``r``-th), in a thread of this process, beside the other jobs on the same cluster; its
work is ``ceil(iterations / epoch_iterations)`` epochs of ``epoch_iterations`` iterations, and its
checkpoint is written after each. A preempted job stops at its next epoch boundary, after that
checkpoint (the job that takes its workers first waits for it), and a restarted one resumes from
the checkpoint on whatever workers it is given: it ends with the parameters of an uninterrupted run.

What comes back is a :class:`~taskflow.jobs.JobRun`, as from the simulator (the same metrics, table
and plots), with each job's :class:`~taskflow.training.History` in ``histories``.

:func:`profile_jobs` measures, per kind of job (model, workers, batch), the seconds a start costs
and the seconds an epoch takes alone, and per pair of kinds how much slower an epoch is beside the
other (an :class:`~taskflow.jobs.Interference` table: every worker of this cluster is on one
machine); :func:`predicted_trace` turns a trace into the simulator's durations.
"""

from __future__ import annotations

import dataclasses
import math
import os
import queue
import statistics
import tempfile
import threading
import time

from ..errors import RunFailed, RunTimeout, SchedulerError, UsageError
from ..jobs import Interference, JobCluster, JobRecord, JobRun, JobTrace
from ..jobs.ledger import Ledger
from ..jobscheduling import Arrived, Finished, JobScheduler, JobState, Resize, Tick, View, get_job_scheduler

__all__ = ["run_jobs", "profile_jobs", "predicted_trace", "warm_up", "JobProfile", "one_machine"]

_JOIN = 600.0  # seconds a job waits for the segment holding its workers to end its epoch


class _Stop(Exception):
    """Raised from ``on_epoch`` to stop a preempted job at its epoch boundary."""


def _epochs(job, per_epoch: int) -> int:
    return max(1, math.ceil(job.iterations / per_epoch))


def _check_jobs(jobs, models) -> None:
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
    stop: threading.Event | None = None
    thread: threading.Thread | None = None


class _Runner:
    """One run of a trace: the clock, the ledger, the job threads."""

    def __init__(self, trace, sched, models, data, client, names, train_options, workdir, epoch_iterations,
                 timeout, on_event):
        self.trace, self.sched, self.models, self.data = trace, sched, models, data
        self.client, self.names = client, names
        self.options, self.workdir, self.per_epoch = train_options, workdir, epoch_iterations
        self.timeout, self.on_event = timeout, on_event
        self.reports: queue.Queue = queue.Queue()
        self.holder: dict = {}  # worker -> the thread of the segment that last held it
        self.ledger = Ledger(sched.name, len(names))
        self.live: dict = {}
        self.histories: dict = {}
        self.nodes = (0,) * len(names)  # one machine: every worker on one node

    def now(self) -> float:
        return time.monotonic() - self.t0

    def go(self) -> JobRun:
        jobs = sorted(self.trace.jobs, key=lambda j: (j.arrival, j.id))
        xs = [_Real(j, JobRecord(j, j.arrival), k) for k, j in enumerate(jobs)]
        self.t0 = time.monotonic()
        nxt, period = 0, self.sched.round
        tick = (xs[0].job.arrival + period) if period and xs else math.inf
        try:
            while nxt < len(xs) or self.live:
                t_arr = xs[nxt].job.arrival if nxt < len(xs) else math.inf
                if not self.live and period:
                    tick = max(tick, t_arr)
                wake = min(t_arr, tick if self.live else math.inf)
                if wake == math.inf and not any(x.workers for x in self.live.values()) and not any(
                        x.thread is not None and x.thread.is_alive() for x in self.live.values()):
                    stuck = next(iter(self.live.values()))
                    raise SchedulerError(f"job scheduler {self.sched.name!r} leaves job {stuck.job.id!r} waiting on "
                                         f"an idle cluster with nothing left to happen (it would never finish)")
                if self.timeout is not None and self.now() > self.timeout:
                    raise RunTimeout(f"the run of {len(xs)} jobs took longer than its timeout of "
                                        f"{self.timeout:g} s; stopped")
                happened = self._reports(min(wake - self.now(), 5.0))
                now = self.now()
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
        return JobRun(self.sched.name, len(self.names), [x.rec for x in xs], self.ledger.steps)

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
            if kind == "failed":
                raise RunFailed(f"job {jid!r} failed: {payload}") from payload
            if kind == "stopped":
                continue  # its preemption was decided (and its workers handed on) already
            self.histories[jid] = payload
            if x.workers:
                x.rec.runs.append((x.run_start, now, x.workers))
                self.ledger.release(x.workers)
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
            done = x.done + (now - x.run_start if x.workers else 0.0)
            got = sum((b - a) * len(w) for a, b, w in x.rec.runs) + (
                (now - x.run_start) * len(x.workers) if x.workers else 0.0)
            states.append(JobState(x.job, bool(x.workers), x.workers, done, got,
                                   0.0 if x.workers else now - x.waited_since, x.last_run,
                                   max(0.0, x.job.duration - done) if oracle else None, x.rec.preemptions))
        return View(now, tuple(sorted(self.ledger.free)), self.nodes, tuple(states))

    def _apply(self, decisions, now) -> None:
        live = self.live
        if any(isinstance(d, Resize) for d in decisions):
            raise SchedulerError(f"job scheduler {self.sched.name!r} resizes a job: resizing is simulated only "
                                 f"(a real job runs on the workers it started on)")
        stopped, started, _ = self.ledger.check(
            decisions, now, lambda j: live[j].workers if j in live else (),
            lambda j: live[j].job.workers if j in live and not live[j].workers else None)
        for jid in stopped:
            x = live[jid]
            x.stop.set()
            x.rec.runs.append((x.run_start, now, x.workers))
            x.done += now - x.run_start
            x.last_run, x.workers, x.waited_since = now - x.run_start, (), now
            x.rec.preemptions += 1
        for jid, ws in started:
            self._start(live[jid], ws, now)
        self.ledger.mark(now)

    def _start(self, x: _Real, ws: tuple, now: float) -> None:
        x.workers, x.run_start = ws, now
        x.segment += 1
        if x.rec.start is None:
            x.rec.start = now
        before = {self.holder[w] for w in ws if w in self.holder}
        stop = x.stop = threading.Event()
        job, segment = x.job, x.segment
        names = [self.names[w] for w in ws]
        epochs = _epochs(job, self.per_epoch)
        ck = os.path.join(self.workdir, f"job{x.index}.ckpt")

        def body():
            from . import train

            for t in before:  # the jobs that held these workers end their epoch first
                t.join(_JOIN)

            def on_epoch(history):
                if stop.is_set() and len(history.epochs) < epochs:
                    raise _Stop()
            try:
                h = train(self.models[job.model], self.data, epochs=epochs, iterations=self.per_epoch,
                          workers=len(names), batch=job.batch or self.options.get("batch", 32), client=self.client,
                          on_workers=names, checkpoint=ck, quiet=True, on_epoch=on_epoch,
                          **{k: v for k, v in self.options.items() if k != "batch"})
            except _Stop:
                self.reports.put(("stopped", job.id, segment, None))
            except BaseException as e:  # said to the runner, which stops the run with it
                self.reports.put(("failed", job.id, segment, e))
            else:
                self.reports.put(("finished", job.id, segment, h))
        th = threading.Thread(target=body, name=f"job-{job.id}", daemon=True)
        x.thread = th
        for w in ws:
            self.holder[w] = th
        th.start()

    def _abandon(self) -> None:
        """Stop every job at its next epoch boundary and wait a bounded time for them."""
        for x in self.live.values():
            if x.stop is not None:
                x.stop.set()
        end = time.monotonic() + 60.0
        for th in set(self.holder.values()):
            th.join(max(0.0, end - time.monotonic()))


def _workers(client) -> list:
    """The cluster's worker names, in a stable order (numbers by value)."""
    info = client.scheduler_info(n_workers=-1)["workers"] if _takes_n(client) else client.scheduler_info()["workers"]
    names = [str(w.get("name", a)) for a, w in info.items()]
    return sorted(names, key=lambda n: (0, int(n), n) if n.isdigit() else (1, 0, n))


def _takes_n(client) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


def run_jobs(trace, scheduler, models: dict, data, *, client, epoch_iterations: int = 4, timeout: float | None = None,
             on_event=None, **train_options) -> JobRun:
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
    if sched.crossover is not None:
        raise UsageError("crossover is simulated only: a real job holds its workers alone")
    _check_jobs(trace.jobs, models)
    names = _workers(client)
    for j in trace.jobs:
        if j.workers > len(names):
            raise UsageError(f"job {j.id!r} asks for {j.workers} workers; the cluster has {len(names)}")
    with tempfile.TemporaryDirectory(prefix="taskflow-jobs-") as work:  # the jobs' checkpoints, removed after
        runner = _Runner(trace, sched, models, data, client, names, train_options, work, epoch_iterations, timeout,
                         on_event)
        out = runner.go()
    out.histories = runner.histories
    return out


@dataclasses.dataclass
class JobProfile:
    """What :func:`profile_jobs` measured."""

    #: (model, workers, batch) -> seconds a start costs beyond its epochs
    start: dict
    #: (model, workers, batch) -> seconds an epoch takes alone
    epoch: dict
    #: the slowdowns of kinds beside each other (every worker on one machine)
    interference: Interference
    #: iterations per epoch
    epoch_iterations: int
    #: the batch of a job that names none
    batch: int = 32

    def duration(self, job) -> float:
        """Seconds ``job`` takes alone from its start.

        Parameters
        ----------
        job : Job
        """
        k = _kind(job, self.batch)
        return self.start[k] + _epochs(job, self.epoch_iterations) * self.epoch[k]


def _kind(job, batch) -> tuple:
    return (job.model, job.workers, job.batch or batch)


def _label(kind) -> str:
    return f"{kind[0]}/{kind[1]}w/b{kind[2]}"


def profile_jobs(trace, models: dict, data, *, client, epoch_iterations: int = 4, epochs: int = 8,
                 pairs: bool = True, **train_options) -> JobProfile:
    """Measure each kind of job in ``trace`` alone, and each pair of kinds side by side, as a real
    run trains them (a checkpoint after every epoch; the cluster warmed up first).

    Parameters
    ----------
    trace, models, data, client, epoch_iterations, train_options
        As :func:`run_jobs`.
    epochs : int
        Epochs per measurement: the first includes the start; the median of the others is an
        epoch's seconds (side by side: of those that ran while the other job was in its epochs
        too, not starting).
    pairs : bool
        Measure the pairs too (else no interference).

    Returns
    -------
    JobProfile

    Raises
    ------
    TaskflowError
        As :func:`run_jobs`.
    """
    from . import train

    trace = trace if isinstance(trace, JobTrace) else JobTrace(list(trace))
    _check_jobs(trace.jobs, models)
    batch = train_options.pop("batch", 32)
    names = _workers(client)
    kinds = sorted({_kind(j, batch) for j in trace.jobs})

    with tempfile.TemporaryDirectory(prefix="taskflow-profile-") as work:
        def measure(kind, on, out, n=epochs):
            """``out``: ``[(start, [(time an epoch began, its seconds) ...])]``, an epoch's seconds
            from one epoch's end to the next (its graph, its run, its checkpoint)."""
            ck = os.path.join(work, f"{threading.get_ident()}-{time.perf_counter_ns()}.ckpt")
            ends: list = []
            t = time.perf_counter()
            train(models[kind[0]], data, epochs=n, iterations=epoch_iterations, workers=kind[1], batch=kind[2],
                  client=client, on_workers=on, checkpoint=ck, quiet=True,
                  on_epoch=lambda h: ends.append(time.perf_counter()), **train_options)
            out.append((t, list(zip(ends, [b - a for a, b in zip(ends, ends[1:])]))))

        warm_up(trace, models, data, client=client, batch=batch, **train_options)
        start, epoch = {}, {}
        for kind in kinds:
            got: list = []
            measure(kind, names[:kind[1]], got)
            t, eps = got[0]
            epoch[kind] = statistics.median(x for _, x in eps)
            start[kind] = max(0.0, eps[0][0] - t - epoch[kind])  # to the first epoch's end, less an epoch
        shares = {}
        for a in kinds if pairs else ():
            for b in kinds:
                if (_label(b), _label(a)) in shares or a[1] + b[1] > len(names):
                    continue
                got_a: list = []
                got_b: list = []
                ta = threading.Thread(target=measure, args=(a, names[:a[1]], got_a), daemon=True)
                ta.start()
                measure(b, names[a[1]:a[1] + b[1]], got_b)
                ta.join(_JOIN)
                if got_a and got_b:  # the epochs run while both were past their first epoch and not done
                    lo = max(got_a[0][1][0][0], got_b[0][1][0][0])
                    hi = min(got_a[0][1][-1][0], got_b[0][1][-1][0])
                    for x, y, got in ((a, b, got_a), (b, a, got_b)):
                        # (a pair that barely overlapped, on a loaded machine: all its epochs)
                        inside = [d for t0, d in got[0][1] if t0 >= lo and t0 + d <= hi] or [d for _, d in got[0][1]]
                        shares[(_label(x), _label(y))] = min(1.0, epoch[x] / statistics.median(inside))
    return JobProfile(start, epoch, Interference(shares), epoch_iterations, batch)


def warm_up(trace, models: dict, data, *, client, batch: int = 32, **train_options) -> None:
    """Train each model of ``trace`` for two short epochs on every worker of ``client``'s cluster:
    each worker's first torch, model and data, which no job's start should be charged with.

    Parameters
    ----------
    trace, models, data, client, batch, train_options
        As :func:`run_jobs`.
    """
    from . import train

    names = _workers(client)
    with tempfile.TemporaryDirectory(prefix="taskflow-warm-") as work:
        for k, model in enumerate(sorted({j.model for j in trace.jobs})):
            n = len(names)
            train(models[model], data, epochs=2, iterations=2, workers=n, batch=n * max(1, batch // n), client=client,
                  on_workers=names, checkpoint=os.path.join(work, f"{k}.ckpt"), quiet=True, **train_options)


def predicted_trace(trace, profile: JobProfile, label: bool = True) -> JobTrace:
    """``trace`` with each job's ``duration`` from ``profile`` and, with ``label``, its ``model``
    its kind's label (the key of the profile's interference table): what the job simulator is
    fed. Without ``label``: what a real run's schedulers that know durations read.

    Parameters
    ----------
    trace : JobTrace
    profile : JobProfile
    label : bool
    """
    jobs = [dataclasses.replace(j, duration=profile.duration(j),
                                **({"model": _label(_kind(j, profile.batch))} if label else {}))
            for j in trace.jobs]
    return JobTrace(jobs, trace.cluster, trace.name)


def one_machine(workers: int) -> JobCluster:
    """The job cluster of a single machine's Dask workers: one node of ``workers``.

    Parameters
    ----------
    workers : int
    """
    return JobCluster(1, 1, workers, name=f"{workers} workers on one machine")
