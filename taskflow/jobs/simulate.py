"""Jobs arriving over time on a shared cluster, simulated at the level of jobs: :func:`simulate_jobs`.

The simulator is the clock and the bookkeeping; the job scheduler (a decision core,
:mod:`taskflow.jobscheduling`) decides. Events are jobs arriving, jobs finishing and, for a
scheduler with a ``round``, rounds ending; at each the scheduler gets the event and a
:class:`~taskflow.jobscheduling.View`, and its decisions are checked and carried out, preemptions
first. A running job progresses one second of its ``duration`` per second (less beside jobs that
slow it: ``interference``, a table of slowdowns per pair of models sharing a node, applied as the
jobs on a node change); a job restarted after a
preemption first spends ``restore`` seconds on its workers restoring its checkpoint (the price of a
preemption: saving is counted there too). Every decision is checked: a worker given to two jobs, a
job started before it arrived or twice, or on another number of workers than it asked for, is an
error naming the scheduler and the job; a scheduler that leaves jobs waiting on an idle cluster
with nothing left to happen is one too (it would never end).

What comes back (:class:`JobRun`): per job its arrival, first start, finish, completion time,
queueing delay and preemptions; the busy workers over time; and the metrics the papers report
(:meth:`JobRun.metrics`): average, median, 95th and 99th percentile job completion time, makespan,
queueing delay, utilization, finish-time fairness (Themis' rho) and preemptions.
"""

from __future__ import annotations

import dataclasses
import heapq
import math

import numpy as np

from ..errors import SchedulerError
from ..jobscheduling import Arrived, Finished, JobScheduler, JobState, Preempt, Tick, View, get_job_scheduler
from .ledger import Ledger
from .model import JobCluster, JobTrace

__all__ = ["simulate_jobs", "JobRun", "JobRecord"]

_EPS = 1e-9


@dataclasses.dataclass
class JobRecord:
    """One job's life in a run."""

    #: the job
    job: object
    #: seconds from the trace's start
    arrival: float
    #: its first start (None: never started)
    start: float | None = None
    #: when it finished (None: not finished)
    finish: float | None = None
    #: times it was preempted
    preemptions: int = 0
    #: worker-seconds it held workers (restoring included)
    held: float = 0.0
    #: each stretch it ran: ``(start, end, workers)``
    runs: list = dataclasses.field(default_factory=list)

    def longest_wait(self) -> float:
        """The longest stretch it waited after it arrived (before its first run, or between two)."""
        ends = [self.arrival] + [b for _, b, _ in self.runs[:-1]]
        return max((a - e for e, (a, _, _) in zip(ends, self.runs)), default=0.0)

    @property
    def jct(self) -> float:
        """Job completion time: finish less arrival."""
        return self.finish - self.arrival

    @property
    def queueing(self) -> float:
        """Seconds from arrival to first start."""
        return self.start - self.arrival


@dataclasses.dataclass
class JobRun:
    """What a simulated (or a real) run of a trace did."""

    #: the job scheduler's name
    scheduler: str
    #: the cluster's workers
    workers: int
    #: per job, in arrival order
    records: list
    #: ``(time, busy workers)`` at each change
    busy: list
    #: jobs set aside before the run, with why
    rejected: list = dataclasses.field(default_factory=list)
    #: a real run's: job id -> the History of its training (:func:`taskflow.training.jobrun.run_jobs`)
    histories: dict = dataclasses.field(default_factory=dict)

    def metrics(self) -> dict:
        """``{"jobs", "avg_jct", "median_jct", "p95_jct", "p99_jct", "makespan", "avg_queueing",
        "median_queueing", "utilization", "max_rho", "avg_rho", "preemptions"}``: completion times in
        seconds; utilization the busy share of the workers from the first arrival to the last finish;
        rho (Themis' finish-time fairness) a job's completion time over the time it would take on an
        equal share of the cluster among the jobs present in its lifetime (1: fair)."""
        done = [r for r in self.records if r.finish is not None]
        jct = np.array([r.jct for r in done]) if done else np.zeros(1)
        q = np.array([r.queueing for r in done]) if done else np.zeros(1)
        t0 = min(r.arrival for r in self.records)
        t1 = max((r.finish for r in done), default=t0)
        rho = self._rho(done)
        return {"jobs": len(done), "avg_jct": float(jct.mean()), "median_jct": float(np.median(jct)),
                "p95_jct": float(np.percentile(jct, 95)), "p99_jct": float(np.percentile(jct, 99)),
                "makespan": t1 - t0, "avg_queueing": float(q.mean()), "median_queueing": float(np.median(q)),
                "utilization": self.utilization(t0, t1), "max_rho": float(max(rho, default=float("nan"))),
                "avg_rho": float(np.mean(rho)) if rho else float("nan"),
                "preemptions": int(sum(r.preemptions for r in self.records))}

    def violations(self, eps: float = 1e-6) -> list:
        """What breaks the rules every run must keep, one line each (none: an empty list): a worker
        held by two jobs at once, a job that ran before it arrived or after it finished, on
        another number of workers than it asked for, or did not finish.

        Parameters
        ----------
        eps : float
            Seconds two stretches may overlap by (a real run's clock readings).
        """
        out = []
        held: dict = {}  # worker -> [(start, end, job id)]
        for r in self.records:
            if r.finish is None:
                out.append(f"job {r.job.id!r} did not finish")
            for a, b, ws in r.runs:
                if a < r.arrival - eps or (r.finish is not None and b > r.finish + eps) or b < a:
                    out.append(f"job {r.job.id!r} ran {a:g}-{b:g} s, outside its arrival {r.arrival:g} s and its "
                               f"finish {r.finish}")
                if len(set(ws)) != r.job.workers:
                    out.append(f"job {r.job.id!r} ran on {len(set(ws))} workers, it asks for {r.job.workers}")
                for w in ws:
                    held.setdefault(w, []).append((a, b, r.job.id))
        for w, spans in held.items():
            spans.sort()
            for (a0, b0, j0), (a1, b1, j1) in zip(spans, spans[1:]):
                if a1 < b0 - eps:
                    out.append(f"worker {w!r} held by jobs {j0!r} ({a0:g}-{b0:g} s) and {j1!r} ({a1:g}-{b1:g} s) at "
                               f"once")
        return out

    def utilization(self, t0: float, t1: float) -> float:
        """The busy share of the workers between ``t0`` and ``t1``.

        Parameters
        ----------
        t0, t1 : float
        """
        if t1 <= t0:
            return 0.0
        area, pts = 0.0, self.busy + [(t1, 0)]
        for (a, n), (b, _) in zip(pts, pts[1:]):
            lo, hi = max(a, t0), min(b, t1)
            if hi > lo:
                area += n * (hi - lo)
        return area / (self.workers * (t1 - t0))

    def _rho(self, done) -> list:
        """Per job, completion time over its time on a 1/N share (N: the jobs present, on average
        over its lifetime: the integral of the count of jobs present, from prefix sums)."""
        if not done:
            return []
        a = np.array([r.arrival for r in done])
        f = np.array([r.finish for r in done])
        times = np.concatenate([a, f])
        steps = np.concatenate([np.ones(len(a)), -np.ones(len(f))])
        order = np.argsort(times, kind="stable")
        t, count = times[order], np.cumsum(steps[order])  # jobs present from t[k] to t[k + 1]
        area = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(t))])  # the integral up to t[k]

        def integral(x):
            k = np.searchsorted(t, x, side="right") - 1
            return area[k] + count[k] * (x - t[k])
        n = (integral(f) - integral(a)) / np.maximum(f - a, _EPS)
        work = np.array([r.job.duration for r in done])
        want = np.array([r.job.workers for r in done], dtype=float)
        share = self.workers / np.maximum(n, 1.0)
        alone = work * np.maximum(1.0, want / share)
        return [float(x) for x in (f - a) / alone]

    def to_dict(self) -> dict:
        """JSON-ready: the scheduler, the metrics, each job's record, the utilization steps."""
        return {"scheduler": self.scheduler, "workers": self.workers, "metrics": self.metrics(),
                "jobs": [{"id": r.job.id, "arrival": r.arrival, "start": r.start, "finish": r.finish,
                          "jct": r.jct if r.finish is not None else None, "preemptions": r.preemptions,
                          "runs": [[a, b, list(w)] for a, b, w in r.runs]}
                         for r in self.records],
                "busy": self.busy, "rejected": [{"id": j.id, "why": why} for j, why in self.rejected]}


class _Live:
    """A job's mutable state in the simulator: its counters are brought up to date only when it
    starts, stops or finishes (:meth:`settle`); in between, :meth:`progress` reads them at a time."""

    __slots__ = ("job", "rec", "workers", "executed", "attained", "since", "run_start", "restore_until",
                 "waited_since", "last_run", "preempted", "version", "rate")

    def __init__(self, job, rec):
        self.job, self.rec = job, rec
        self.workers = ()
        self.executed = self.attained = 0.0
        self.since = job.arrival
        self.run_start = None
        self.restore_until = job.arrival
        self.waited_since = job.arrival
        self.last_run = 0.0
        self.preempted = False
        self.version = 0  # a finish time queued under another version is stale
        self.rate = 1.0  # seconds of its duration done per second run (below 1 beside others)

    def progress(self, t: float) -> tuple:
        """``(executed, attained)`` at ``t``."""
        if not self.workers:
            return self.executed, self.attained
        run = max(0.0, t - max(self.since, self.restore_until))
        return self.executed + run * self.rate, self.attained + run * len(self.workers)

    def settle(self, t: float) -> None:
        if self.workers:
            self.executed, self.attained = self.progress(t)
            self.rec.held += (t - self.since) * len(self.workers)
        self.since = t

    def finish_time(self) -> float:
        return max(self.since, self.restore_until) + max(0.0, self.job.duration - self.executed) / self.rate


def simulate_jobs(trace, cluster: JobCluster | None = None, scheduler="fifo", *, restore: float = 0.0,
                  drain: float = 0.0,
                  skip_too_large: bool = False, max_events: int | None = None, interference=None,
                  network=None, progress=None) -> JobRun:
    """Run ``trace`` on ``cluster`` under the job scheduler ``scheduler`` (see the module docstring).

    Parameters
    ----------
    trace : JobTrace or list of Job
    cluster : JobCluster, optional
        Default: the trace's own.
    scheduler : str or JobScheduler
        A name (:func:`~taskflow.jobscheduling.get_job_scheduler`) or an instance (its state is
        changed by the run: give a new one each time).
    restore : float
        Seconds a preempted job spends restoring when it starts again.
    drain : float
        Seconds a preempted job goes on to its next checkpoint (work it keeps) before the job given
        its workers can start on them (a real run stops jobs at an iteration boundary).
    skip_too_large : bool
        Set aside (in ``rejected``) jobs larger than the cluster instead of refusing the trace.
    max_events : int, optional
        Stop with an error past this many events (default: 100 per job; a round counts only where no
        work was done since the round before and that one preempted jobs, or nothing runs).
    interference : Interference, optional
        How much slower a job runs beside the others on its nodes
        (:class:`~taskflow.jobs.interference.Interference`); default none.
    network : JobNetwork, optional
        How much slower a job spread over racks runs on their shared uplinks
        (:class:`~taskflow.jobs.network.JobNetwork`); default none. The two slowdowns multiply.
    progress : callable, optional
        Called with the number of jobs that finished, as they finish (a progress bar's update).

    Returns
    -------
    JobRun

    Raises
    ------
    TaskflowError
        No cluster, a job larger than it, a decision that breaks a rule (named), a scheduler that
        would never finish the trace.
    """
    from ..errors import UsageError

    trace = trace if isinstance(trace, JobTrace) else JobTrace(list(trace))
    cluster = cluster or trace.cluster
    if cluster is None:
        raise UsageError("a job trace needs a cluster: give one (the trace names none)")
    sched = scheduler if isinstance(scheduler, JobScheduler) else get_job_scheduler(scheduler)
    for what, v in (("restore", restore), ("drain", drain)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise UsageError(f"{what} must be seconds >= 0, got {v!r}")
    draining: dict = {}  # worker -> until when the job preempted from it goes on
    jobs, rejected = trace.fit(cluster, skip_too_large)
    records = [_Live(j, JobRecord(j, j.arrival)) for j in jobs]
    nodes = cluster.nodes
    ledger = Ledger(sched.name, cluster.workers, records[0].job.arrival if records else 0.0)
    free = ledger.free
    live: dict = {}  # job id -> _Live, arrived and not finished
    arrivals = list(records)
    nxt = 0
    period = sched.round
    tick = (arrivals[0].job.arrival + period) if period and arrivals else math.inf
    limit = max_events or (100 * len(records) + 10)
    events = 0
    # a round counts as an event where no work was done since the last and either that one preempted
    # (restores that never end) or nothing runs; rounds of jobs taking turns and doing work do not
    worked = [0.0, 0.0, False]  # work settled so far, at the last round, whether that round preempted
    finishing: list = []  # (finish time, version, job id) of the running jobs: a heap
    running = [0]
    oracle = sched.knows_durations
    on_node: dict = {}  # node -> the running jobs with a worker there (with interference)
    touched: set = set()  # nodes whose jobs changed since their speeds were last worked out
    racks = cluster.worker_racks
    across: set = set()  # running jobs spread over racks (with a network)
    net: dict = {}  # job id -> its speed on the shared uplinks (below 1), for jobs across racks
    crossed = [False]  # the jobs across racks changed since their speeds were last worked out

    def moved(x, on: bool) -> None:
        """``x`` starts on its workers' nodes (``on``) or leaves them."""
        if interference is not None:
            for n in {nodes[w] for w in x.workers}:
                (on_node.setdefault(n, set()).add if on else on_node.setdefault(n, set()).discard)(x.job.id)
                touched.add(n)
        if network is not None and network.spans(x.workers):
            (across.add if on else across.discard)(x.job.id)
            crossed[0] = True

    def rerate(now) -> None:
        """Each running job whose neighbours or uplinks changed at the speed they leave it."""
        ids = set().union(*(on_node.get(n, ()) for n in touched))
        touched.clear()
        if crossed[0]:
            crossed[0] = False
            new = network.speeds([(live[j].job, live[j].workers) for j in sorted(across)])
            ids |= {j for j in set(net) | set(new) if net.get(j, 1.0) != new.get(j, 1.0)}
            net.clear()
            net.update(new)
        for jid in sorted(ids):
            x = live.get(jid)
            if x is None or not x.workers:
                continue
            rate = net.get(jid, 1.0)
            if interference is not None:
                beside = set().union(*(on_node[n] for n in {nodes[w] for w in x.workers})) - {jid}
                rate *= interference.speed(x.job, [live[y].job for y in sorted(beside)])
            if rate != x.rate:
                x.settle(now)
                x.rate = rate
                x.version += 1
                heapq.heappush(finishing, (x.finish_time(), x.version, jid))

    def view(now):
        states = []
        for x in live.values():
            done, got = x.progress(now)
            states.append(JobState(x.job, bool(x.workers), x.workers, done, got,
                                   0.0 if x.workers else now - x.waited_since, x.last_run,
                                   max(0.0, x.job.duration - done) if oracle else None, x.rec.preemptions))
        return View(now, tuple(sorted(free)), nodes, tuple(states), racks)

    def apply(decisions, now):
        stopped, started = ledger.check(decisions, now, lambda j: live[j].workers if j in live else (),
                                        lambda j: live[j].job.workers if j in live and not live[j].workers else None)
        for jid in stopped:
            x = live[jid]
            before = x.executed
            x.settle(now)
            if drain:  # it goes on to its checkpoint: that work is kept, its workers busy meanwhile
                x.executed = min(x.executed + drain * x.rate, x.job.duration * (1 - 1e-9))
                for w in x.workers:
                    draining[w] = now + drain
            worked[0] += x.executed - before
            moved(x, False)
            x.rec.runs.append((x.run_start, now, x.workers))
            x.last_run, x.workers, x.waited_since = now - x.run_start, (), now
            x.version += 1
            running[0] -= 1
            x.rec.preemptions += 1
            x.preempted = True
            x.rate = 1.0  # (worked out again where it starts next)
        for jid, ws in started:
            x = live[jid]
            x.settle(now)
            x.workers, x.run_start = ws, now
            moved(x, True)
            wait = max((draining.pop(w, now) for w in ws), default=now) - now if draining else 0.0
            x.restore_until = now + max(0.0, wait) + (restore if x.preempted else 0.0)
            x.version += 1
            running[0] += 1
            heapq.heappush(finishing, (x.finish_time(), x.version, x.job.id))
            if x.rec.start is None:
                x.rec.start = now
        ledger.mark(now)

    while nxt < len(arrivals) or live:
        t_arr = arrivals[nxt].job.arrival if nxt < len(arrivals) else math.inf
        while finishing and (finishing[0][2] not in live or live[finishing[0][2]].version != finishing[0][1]):
            heapq.heappop(finishing)  # a preempted run's finish, stale
        t_fin = finishing[0][0] if finishing else math.inf
        if not live and period:  # an empty cluster: the rounds start again with the next arrival
            tick = max(tick, t_arr)
        now = min(t_arr, t_fin, tick if live else math.inf)
        if now == math.inf:  # jobs wait, nothing runs, nothing will arrive: the scheduler is stuck
            stuck = next(iter(live.values()))
            raise SchedulerError(f"job scheduler {sched.name!r} leaves job {stuck.job.id!r} waiting on an idle "
                                 f"cluster with nothing left to happen (it would never finish)")
        is_tick = bool(period) and tick <= now + _EPS and now < min(t_arr, t_fin)
        if not is_tick or (worked[0] <= worked[1] + _EPS and (worked[2] or not running[0])):
            events += 1
        if events > limit:
            raise SchedulerError(f"job scheduler {sched.name!r}: more than {limit:,} events for {len(records):,} "
                                 f"jobs; stopped (does it preempt without end?)")
        # everything that happens at `now` is in the view before the scheduler hears of any of it
        happened = []
        ending = []
        while finishing and finishing[0][0] <= now + _EPS:
            _, version, jid = heapq.heappop(finishing)
            x = live.get(jid)
            if x is not None and x.version == version:
                ending.append(x)
        for x in ending:
            x.settle(now)
            worked[0] += x.job.duration
            running[0] -= 1
            x.rec.runs.append((x.run_start, now, x.workers))
            x.executed = x.job.duration
            moved(x, False)
            ledger.release(x.workers)
            x.workers = ()
            x.rec.finish = now
            del live[x.job.id]
            happened.append(Finished(now, x.job.id, x.attained))
        if ending and progress is not None:
            progress(len(ending))
        while nxt < len(arrivals) and arrivals[nxt].job.arrival <= now:
            x = arrivals[nxt]
            nxt += 1
            x.since = x.waited_since = now
            live[x.job.id] = x
            happened.append(Arrived(now, x.job))
        if period and tick <= now + _EPS:
            tick = now + period
            happened.append(Tick(now))
        for ev in happened:
            decisions = sched.decide(ev, view(now))
            if isinstance(ev, Tick):
                worked[1], worked[2] = worked[0], any(isinstance(d, Preempt) for d in decisions)
            apply(decisions, now)
        if touched or crossed[0]:
            rerate(now)
        if live and not running[0] and nxt >= len(arrivals) and not period:
            stuck = next(iter(live.values()))
            raise SchedulerError(f"job scheduler {sched.name!r} leaves job {stuck.job.id!r} waiting on an idle "
                                 f"cluster with nothing left to happen (it would never finish)")
    return JobRun(sched.name, cluster.workers, [x.rec for x in records], ledger.steps, rejected)
