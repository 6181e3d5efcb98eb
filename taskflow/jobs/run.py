"""What a run of a trace did, simulated or real: :class:`JobRun` (each job's :class:`JobRecord`,
the busy workers over time) and the papers' metrics (:meth:`JobRun.metrics`): average, median,
95th and 99th percentile job completion time, makespan, queueing delay, utilization,
finish-time fairness (Themis' rho) and preemptions; :meth:`JobRun.violations`, the rules every run
keeps."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["JobRun", "JobRecord"]

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
    #: the pairs of job ids that took turns on the same workers (Crossover)
    shared: list = dataclasses.field(default_factory=list)

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
        return {
            "jobs": len(done),
            "avg_jct": float(jct.mean()),
            "median_jct": float(np.median(jct)),
            "p95_jct": float(np.percentile(jct, 95)),
            "p99_jct": float(np.percentile(jct, 99)),
            "makespan": t1 - t0,
            "avg_queueing": float(q.mean()),
            "median_queueing": float(np.median(q)),
            "utilization": self.utilization(t0, t1),
            "max_rho": float(max(rho, default=float("nan"))),
            "avg_rho": float(np.mean(rho)) if rho else float("nan"),
            "preemptions": int(sum(r.preemptions for r in self.records)),
        }

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
        pairs = {tuple(p) for p in self.shared}
        held: dict = {}  # worker -> [(start, end, job id)]
        for r in self.records:
            if r.finish is None:
                out.append(f"job {r.job.id!r} did not finish")
            for a, b, ws in r.runs:
                if a < r.arrival - eps or (r.finish is not None and b > r.finish + eps) or b < a:
                    out.append(
                        f"job {r.job.id!r} ran {a:g}-{b:g} s, outside its arrival {r.arrival:g} s and its "
                        f"finish {r.finish}"
                    )
                lo, hi = r.job.sizes
                if not lo <= len(set(ws)) <= hi:
                    out.append(
                        f"job {r.job.id!r} ran on {len(set(ws))} workers, it asks for "
                        f"{lo if lo == hi else f'{lo}-{hi}'}"
                    )
                for w in ws:
                    held.setdefault(w, []).append((a, b, r.job.id))
        for w, spans in held.items():
            spans.sort()
            for (a0, b0, j0), (a1, b1, j1) in zip(spans, spans[1:]):
                if a1 < b0 - eps and tuple(sorted((j0, j1))) not in pairs:
                    out.append(
                        f"worker {w!r} held by jobs {j0!r} ({a0:g}-{b0:g} s) and {j1!r} ({a1:g}-{b1:g} s) at once"
                    )
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
        return {
            "scheduler": self.scheduler,
            "workers": self.workers,
            "metrics": self.metrics(),
            "jobs": [
                {
                    "id": r.job.id,
                    "arrival": r.arrival,
                    "start": r.start,
                    "finish": r.finish,
                    "jct": r.jct if r.finish is not None else None,
                    "preemptions": r.preemptions,
                    "runs": [[a, b, list(w)] for a, b, w in r.runs],
                }
                for r in self.records
            ],
            "busy": self.busy,
            "rejected": [{"id": j.id, "why": why} for j, why in self.rejected],
        }
