"""Who holds which worker, and every job scheduler's decision checked against it: :class:`Ledger`.

The job simulator (:mod:`taskflow.jobs.simulate`) and the Dask runner
(:mod:`taskflow.training.jobrun`) keep one each and trust no scheduler: a preemption of a job that
does not run, a start of a job that runs, has not arrived or has finished, on another number of
workers than it asks for, or on a worker another job holds, is a :class:`SchedulerError` naming the
scheduler, the time and the job.
"""

from __future__ import annotations

from ..errors import SchedulerError, UsageError
from ..jobscheduling import JobState, Preempt, Resize, Start

__all__ = ["Ledger"]


class Ledger:
    """The free workers and each held worker's job.

    Parameters
    ----------
    scheduler : str
        The job scheduler's name (in errors).
    workers : int
        The cluster's workers, ``0 .. workers - 1``.
    start : float
        When the ledger opens (the first utilization step).
    """

    def __init__(self, scheduler: str, workers: int, start: float = 0.0):
        self.scheduler = scheduler
        self.workers = workers
        self.free = set(range(workers))
        self.owner: dict = {}  # worker -> job id
        self.down: set = set()  # lost and not back
        self.second: dict = {}  # worker -> the job sharing it with its owner (Crossover)
        #: job -> the job it shares its workers with (both ways)
        self.pairs: dict = {}
        #: ``(time, busy workers)`` at each change (:meth:`mark`)
        self.steps = [(start, 0)]

    def mark(self, now: float) -> None:
        """Note the busy workers at ``now`` (a step of the utilization over time).

        Parameters
        ----------
        now : float
        """
        n = self.busy
        if self.steps[-1][0] == now:
            self.steps[-1] = (now, n)
        elif self.steps[-1][1] != n:
            self.steps.append((now, n))

    def state(self, x, now: float, done: float, got: float, oracle: bool) -> JobState:
        """What a job scheduler sees of a live job ``x`` (the simulator's or the real runner's: its
        ``job``, ``workers``, ``waited_since``, ``last_run`` and record ``rec``) at ``now``, having
        done ``done`` seconds of its duration and held ``got`` worker-seconds; its remaining time
        where the scheduler is an ``oracle``.

        Parameters
        ----------
        x : object
        now, done, got : float
        oracle : bool
        """
        return JobState(
            x.job,
            bool(x.workers),
            x.workers,
            done,
            got,
            0.0 if x.workers else now - x.waited_since,
            x.last_run,
            max(0.0, x.job.duration - done) if oracle else None,
            x.rec.preemptions,
            self.pairs.get(x.job.id),
        )

    @property
    def busy(self) -> int:
        """Workers held."""
        return len(self.owner)

    def lose(self, worker: int):
        """``worker`` is lost: neither free nor held until :meth:`add` (once its jobs release it);
        the job that held it, or None.

        Parameters
        ----------
        worker : int

        Raises
        ------
        UsageError
            A worker not in the cluster, or lost already.
        """
        if not 0 <= worker < self.workers or worker in self.down:
            why = "it is lost already" if worker in self.down else f"the cluster has {self.workers} workers, from 0"
            raise UsageError(f"worker {worker!r} cannot be lost: {why}")
        self.down.add(worker)
        self.free.discard(worker)
        return self.owner.get(worker)

    def add(self, worker: int) -> None:
        """``worker`` is back (or joins), free.

        Parameters
        ----------
        worker : int

        Raises
        ------
        UsageError
            A worker that is not lost.
        """
        if worker not in self.down:
            raise UsageError(
                f"worker {worker!r} cannot be added: it is not lost (the cluster has "
                f"{self.workers} workers, numbered from 0)"
            )
        self.down.discard(worker)
        self.free.add(worker)

    def grow(self) -> int:
        """A worker the cluster did not have joins, free: its number (the next one).

        Returns
        -------
        int
        """
        self.workers += 1
        self.free.add(self.workers - 1)
        return self.workers - 1

    def check(self, decisions, now: float, running, waiting, sizes=None) -> tuple:
        """``(preempted ids, [(job id, workers)] started, [(job id, workers)] resized)``:
        ``decisions`` checked in order, preemptions first, then resizes, then starts (a job
        preempted may start again at once; a start may take what a shrink left), the workers moved
        in the ledger.

        Parameters
        ----------
        decisions : iterable of Start, Resize or Preempt
        now : float
        running : callable
            Job id -> its workers if it runs, else an empty tuple.
        waiting : callable
            Job id -> the workers it asks for if it has arrived and waits, else None.
        sizes : callable, optional
            Job id -> ``(fewest, most)`` workers it may run on (default: what ``waiting`` says).

        Raises
        ------
        SchedulerError
            A decision that breaks a rule (named).
        """
        decisions = list(decisions)
        name = self.scheduler
        stopped: dict = {}  # job id -> its size
        for d in decisions:
            if isinstance(d, Preempt):
                held = running(d.job_id)
                if not held or d.job_id in stopped:
                    raise SchedulerError(
                        f"job scheduler {name!r} at {now:g} s: preempts job {d.job_id!r}, which is not running"
                    )
                self.release(held, d.job_id)
                stopped[d.job_id] = len(held)
            elif not isinstance(d, (Start, Resize)):
                raise SchedulerError(
                    f"job scheduler {name!r}: a decision must be Start, Resize or Preempt, got {type(d).__name__}"
                )
        resized = [self._resize(d, now, running, sizes, stopped) for d in decisions if isinstance(d, Resize)]
        started = []
        for d in decisions:
            if not isinstance(d, Start):
                continue
            ws = tuple(d.workers)
            size = stopped[d.job_id] if d.job_id in stopped else waiting(d.job_id)
            if size is None or any(j == d.job_id for j, _ in started):
                state = (
                    "running"
                    if running(d.job_id) or any(j == d.job_id for j, _ in started)
                    else "not waiting (not arrived, or finished)"
                )
                raise SchedulerError(f"job scheduler {name!r} at {now:g} s: starts job {d.job_id!r}, which is {state}")
            lo, hi = sizes(d.job_id) if sizes is not None else (size, size)
            if not lo <= len(ws) <= hi or len(set(ws)) != len(ws):
                asks = f"{lo}" if lo == hi else f"{lo}-{hi}"
                raise SchedulerError(
                    f"job scheduler {name!r} at {now:g} s: starts job {d.job_id!r} on "
                    f"{len(set(ws))} workers, it asks for {asks}"
                )
            if d.beside is not None:
                self._pair(d, ws, now, running, stopped)
                started.append((d.job_id, ws))
                continue
            taken = [w for w in ws if w not in self.free]
            if taken:
                w = taken[0]
                whose = (
                    f"job {self.owner[w]!r}'s"
                    if w in self.owner
                    else "lost"
                    if w in self.down
                    else "not in the cluster"
                )
                raise SchedulerError(
                    f"job scheduler {name!r} at {now:g} s: starts job {d.job_id!r} on worker {w!r}, which is {whose}"
                )
            for w in ws:
                self.free.discard(w)
                self.owner[w] = d.job_id
            started.append((d.job_id, ws))
        return list(stopped), started, resized

    def _resize(self, d, now, running, sizes, stopped) -> tuple:
        """Check and carry out a :class:`Resize`: ``(job id, workers)``."""
        name, ws = self.scheduler, tuple(d.workers)
        held = () if d.job_id in stopped else running(d.job_id)
        lo, hi = sizes(d.job_id) if sizes is not None and held else (len(held), len(held))
        why = (
            "is not running"
            if not held
            else "shares its workers (Crossover)"
            if d.job_id in self.pairs
            else f"may run on {lo}-{hi} workers"
            if not lo <= len(set(ws)) <= hi or len(set(ws)) != len(ws)
            else None
        )
        taken = [w for w in ws if w not in held and w not in self.free]
        if why is None and taken:
            whose = f"job {self.owner[taken[0]]!r}'s" if taken[0] in self.owner else "not free"
            why = f"cannot take worker {taken[0]!r} ({whose})"
        if why:
            raise SchedulerError(
                f"job scheduler {name!r} at {now:g} s: resizes job {d.job_id!r} to {len(ws)} workers, but it {why}"
            )
        for w in set(held) - set(ws):
            self.owner.pop(w, None)
            if w not in self.down:
                self.free.add(w)
        for w in ws:
            self.free.discard(w)
            self.owner[w] = d.job_id
        return d.job_id, ws

    def _pair(self, d, ws, now, running, stopped) -> None:
        """Check and note a Crossover start: ``d.job_id`` on the workers of ``d.beside``."""
        name, other = self.scheduler, d.beside
        held = () if other in stopped else running(other)
        why = (
            "is not running"
            if not held
            else "shares its workers already"
            if other in self.pairs
            else f"runs on other workers than {sorted(ws)}"
            if set(held) != set(ws)
            else None
        )
        if why:
            raise SchedulerError(
                f"job scheduler {name!r} at {now:g} s: starts job {d.job_id!r} beside job {other!r}, which {why}"
            )
        for w in ws:
            self.second[w] = d.job_id
        self.pairs[d.job_id], self.pairs[other] = other, d.job_id

    def release(self, workers, job=None) -> None:
        """``workers`` are free again (``job``, their job, stopped or finished); a worker ``job``
        shared (Crossover) stays with the other.

        Parameters
        ----------
        workers : iterable of int
        job : str, optional
        """
        partner = self.pairs.pop(job, None) if job is not None else None
        if partner is not None:
            self.pairs.pop(partner, None)
        for w in workers:
            if w in self.second:  # shared: the other keeps it
                if self.second[w] != job:
                    self.owner[w] = self.second[w]
                del self.second[w]
                continue
            if w not in self.down:
                self.free.add(w)
            self.owner.pop(w, None)
