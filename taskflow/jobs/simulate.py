"""Jobs arriving over time on a shared cluster, simulated at the level of jobs: :func:`simulate_jobs`.

The simulator is the clock and the bookkeeping; the job scheduler (a decision core,
:mod:`taskflow.jobscheduling`) decides. Events are jobs arriving, jobs finishing, workers lost and
added and, for a scheduler with a ``round``, rounds ending; at each the scheduler gets the event and
a :class:`~taskflow.jobscheduling.View`, and its decisions are checked and carried out, preemptions
first. A running job progresses one second of its ``duration`` per second, less beside jobs that
slow it: ``interference``, a table of slowdowns per pair of models sharing a node, and ``network``,
jobs spread over racks sharing the uplinks (the time each adds to an iteration adds up: the one
stretches its computation, the other its allreduce), worked out again as the jobs on a node or an
uplink change. A preempted job goes on ``drain`` seconds to its checkpoint before its
workers pass on, and restarted, first spends ``restore`` seconds restoring it. Every decision is
checked: a worker given to two jobs, a job started before it arrived or twice, or on another number
of workers than it asked for, is an error naming the scheduler and the job; a scheduler that leaves
jobs waiting on an idle cluster with nothing left to happen is one too (it would never end).

What comes back is a :class:`~taskflow.jobs.run.JobRun`: per job its arrival, first start, finish,
stretches of running and preemptions; the busy workers over time; the papers' metrics."""

from __future__ import annotations

import heapq
import math

from ..errors import SchedulerError
from ..jobscheduling import (
    Arrived,
    Finished,
    JobScheduler,
    Preempt,
    Tick,
    View,
    WorkerAdded,
    WorkerLost,
    crossover_speed,
    get_job_scheduler,
)
from .ledger import Ledger
from .model import JobCluster, JobTrace
from .run import JobRecord, JobRun

__all__ = ["simulate_jobs", "JobRun", "JobRecord"]

_EPS = 1e-9


class _Live:
    """A job's mutable state in the simulator: its counters are brought up to date only when it
    starts, stops or finishes (:meth:`settle`); in between, :meth:`progress` reads them at a time."""

    __slots__ = (
        "job",
        "rec",
        "workers",
        "executed",
        "attained",
        "since",
        "run_start",
        "restore_until",
        "waited_since",
        "last_run",
        "preempted",
        "version",
        "rate",
    )

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
        """``(executed, attained)`` at ``t``: a restore is not progress but its workers are held,
        and attained service counts the workers held (as the real runner does, as Tiresias does)."""
        if not self.workers:
            return self.executed, self.attained
        run = max(0.0, t - max(self.since, self.restore_until))
        return self.executed + run * self.rate, self.attained + max(0.0, t - self.since) * len(self.workers)

    def settle(self, t: float) -> None:
        if self.workers:
            self.executed, self.attained = self.progress(t)
            self.rec.held += (t - self.since) * len(self.workers)
        self.since = t

    def finish_time(self) -> float:
        return max(self.since, self.restore_until) + max(0.0, self.job.duration - self.executed) / self.rate


def simulate_jobs(
    trace,
    cluster: JobCluster | None = None,
    scheduler="fifo",
    *,
    restore: float = 0.0,
    drain: float = 0.0,
    skip_too_large: bool = False,
    max_events: int | None = None,
    interference=None,
    network=None,
    progress=None,
    changes=(),
) -> JobRun:
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
    changes : iterable of (float, str, int)
        Workers lost and added: ``(time, "lost" or "added", worker)``. A lost worker's job stops
        there (its work so far kept, as at a checkpoint; a restart pays ``restore``) and waits
        again; the scheduler hears :class:`~taskflow.jobscheduling.WorkerLost` and
        :class:`~taskflow.jobscheduling.WorkerAdded`.

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
    near = (0,) * len(nodes) if interference is not None and interference.machine else nodes  # who slows whom
    ledger = Ledger(sched.name, cluster.workers, records[0].job.arrival if records else 0.0)
    free = ledger.free
    live: dict = {}  # job id -> _Live, arrived and not finished
    arrivals = list(records)
    nxt = 0
    period = sched.round
    tick = (arrivals[0].job.arrival + period) if period and arrivals else math.inf
    limit = max_events or (100 * len(records) + 10 + 2 * len(changes or ()))
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
    repaired: set = set()  # jobs whose Crossover partner changed since their speeds were worked out
    shared: set = set()  # the pairs that took turns on the same workers

    def moved(x, on: bool) -> None:
        """``x`` starts on its workers' nodes (``on``) or leaves them."""
        if interference is not None:
            for n in {near[w] for w in x.workers}:
                (on_node.setdefault(n, set()).add if on else on_node.setdefault(n, set()).discard)(x.job.id)
                touched.add(n)
        if network is not None and network.spans(x.workers):
            (across.add if on else across.discard)(x.job.id)
            crossed[0] = True

    def rerate(now) -> None:
        """Each running job whose neighbours or uplinks changed at the speed they leave it."""
        ids = set().union(*(on_node.get(n, ()) for n in touched)) | repaired
        touched.clear()
        repaired.clear()
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
            # the time the uplinks add and the time the neighbours add to an iteration add up (the one
            # stretches its allreduce, the others its computation)
            extra = 1.0 / net.get(jid, 1.0) - 1.0
            if interference is not None:
                beside = set().union(*(on_node[n] for n in {near[w] for w in x.workers})) - {jid}
                extra += 1.0 / interference.speed(x.job, [live[y].job for y in sorted(beside)]) - 1.0
            rate = len(x.workers) / x.job.workers / (1.0 + extra)  # (an elastic job: in proportion)
            other = ledger.pairs.get(jid)
            if other is not None:  # Crossover: taking turns on the same workers
                rate *= crossover_speed(sched.crossover(x.job.model), sched.crossover(live[other].job.model))
            if rate != x.rate:
                x.settle(now)
                x.rate = rate
                x.version += 1
                heapq.heappush(finishing, (x.finish_time(), x.version, jid))

    def view(now):
        states = []
        for x in live.values():
            states.append(ledger.state(x, now, *x.progress(now), oracle))
        return View(now, tuple(sorted(free)), nodes, tuple(states), racks, tuple(sorted(ledger.down)))

    def stop(x, now, drain):
        """``x`` stops (preempted, or a worker of its lost) and waits again."""
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

    def change(kind, w, now):
        """A worker lost or added: the event the scheduler hears."""
        if kind == "added":
            ledger.add(w)
            return WorkerAdded(now, w)
        jid = ledger.lose(w)
        for j in (jid, ledger.pairs.get(jid)) if jid is not None else ():
            if j is not None and live[j].workers:
                pair_changed([j])
                ledger.release(live[j].workers, j)
                stop(live[j], now, 0.0)
        return WorkerLost(now, w, jid)

    def pair_changed(jobs) -> None:
        """The jobs (and their Crossover partners) whose sharing of workers changes."""
        for j in jobs:
            other = ledger.pairs.get(j)
            repaired.update((j, other) if other is not None else (j,))
            if other is not None:
                shared.add(frozenset((j, other)))

    def apply(decisions, now):
        pair_changed([d.job_id for d in decisions if isinstance(d, Preempt)])
        stopped, started, resized = ledger.check(
            decisions,
            now,
            lambda j: live[j].workers if j in live else (),
            lambda j: live[j].job.workers if j in live and not live[j].workers else None,
            lambda j: live[j].job.sizes,
        )
        for jid in stopped:
            stop(live[jid], now, drain)
        pair_changed([jid for jid, _ in started if jid in ledger.pairs])
        for jid, ws in resized:  # an elastic job goes on on other workers, from its checkpoint
            x = live[jid]
            x.settle(now)
            moved(x, False)
            x.rec.runs.append((x.run_start, now, x.workers))
            x.workers, x.run_start = ws, now
            moved(x, True)
            x.restore_until = now + restore
            x.version += 1
            repaired.add(jid)
            heapq.heappush(finishing, (x.finish_time(), x.version, jid))
        repaired.update(jid for jid, ws in started if len(ws) != live[jid].job.workers)
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

    changes = _changes(changes, cluster.workers)
    nch = 0
    while nxt < len(arrivals) or live:
        t_arr = arrivals[nxt].job.arrival if nxt < len(arrivals) else math.inf
        t_chg = changes[nch][0] if nch < len(changes) and live else math.inf
        while finishing and (finishing[0][2] not in live or live[finishing[0][2]].version != finishing[0][1]):
            heapq.heappop(finishing)  # a preempted run's finish, stale
        t_fin = finishing[0][0] if finishing else math.inf
        if not live and period:  # an empty cluster: the rounds start again with the next arrival
            tick = max(tick, t_arr)
        now = min(t_arr, t_fin, t_chg, tick if live else math.inf)
        if now == math.inf:  # jobs wait, nothing runs, nothing will arrive: the scheduler is stuck
            stuck = next(iter(live.values()))
            raise SchedulerError(
                f"job scheduler {sched.name!r} leaves job {stuck.job.id!r} waiting on an idle "
                f"cluster with nothing left to happen (it would never finish)"
            )
        is_tick = bool(period) and tick <= now + _EPS and now < min(t_arr, t_fin, t_chg)
        if not is_tick or (worked[0] <= worked[1] + _EPS and (worked[2] or not running[0])):
            events += 1
        if events > limit:
            raise SchedulerError(
                f"job scheduler {sched.name!r}: more than {limit:,} events for {len(records):,} "
                f"jobs; stopped (does it preempt without end?)"
            )
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
            pair_changed([x.job.id])
            ledger.release(x.workers, x.job.id)
            x.workers = ()
            x.rec.finish = now
            del live[x.job.id]
            happened.append(Finished(now, x.job.id, x.attained))
        if ending and progress is not None:
            progress(len(ending))
        while nch < len(changes) and changes[nch][0] <= now:
            happened.append(change(changes[nch][1], changes[nch][2], now))
            nch += 1
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
        if touched or crossed[0] or repaired:
            rerate(now)
        if live and not running[0] and nxt >= len(arrivals) and not period and nch >= len(changes):
            stuck = next(iter(live.values()))
            raise SchedulerError(
                f"job scheduler {sched.name!r} leaves job {stuck.job.id!r} waiting on an idle "
                f"cluster with nothing left to happen (it would never finish)"
            )
    return JobRun(
        sched.name,
        cluster.workers,
        [x.rec for x in records],
        ledger.steps,
        rejected,
        shared=sorted(tuple(sorted(p)) for p in shared),
    )


def _changes(changes, workers: int) -> list:
    """``changes`` checked and in time order: ``(time, "lost" or "added", worker)``."""
    from ..errors import UsageError

    out = []
    for k, c in enumerate(changes or ()):
        try:
            t, kind, w = c
        except (TypeError, ValueError):
            raise UsageError(f"changes[{k}]: expected (time, 'lost' or 'added', worker), got {c!r}") from None
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise UsageError(f"changes[{k}]: the time must be seconds >= 0, got {t!r}")
        if kind not in ("lost", "added"):
            raise UsageError(f"changes[{k}]: a change is 'lost' or 'added', got {kind!r}")
        if isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < workers:
            raise UsageError(f"changes[{k}]: worker {w!r} is not one of the cluster's 0-{workers - 1}")
        out.append((float(t), kind, w))
    return sorted(out, key=lambda c: c[0])
