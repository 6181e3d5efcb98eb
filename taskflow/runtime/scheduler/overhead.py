"""Dask's own cost per task, as the workers show it: the gaps between one worker thread's tasks.

A task on Dask costs more than its compute time: the scheduler decides and sends it, the worker
unpacks it, runs it in its thread pool and reports back, and the next task a thread runs starts
only after that (Dask's documentation puts it near a millisecond a task; on a small machine whose
cores the scheduler shares with the workers, more). A simulation without it predicts a graph of
many millisecond tasks at half its length. :class:`DispatchGaps` keeps, for each worker thread,
when its latest task stopped computing; each next task's start, less that stop (or less the end of
the task's own input transfers, which the cost model counts apart), is a gap. The worker's part of it is
work on its CPU: a worker held to a quarter of a core shows gaps 3-5 times a full core's. So the
cost is kept at speed 1 (each gap times its worker's learned speed), and the plugin adds the mean
of the shortest :data:`SHARE` of the latest gaps to the cost of every task it plans or predicts
where the cluster declares no ``task_overhead``: on a worker of speed ``s`` a task then costs it
``1 / s`` as long. The longest gaps are a worker waiting for work the graph has not made ready,
which the simulation models itself.

A transfer between two workers is the same kind of work for both of them (a message handled, its
bytes pickled, copied and unpacked by each one's event loop): the adaptive scheduler's plan inside Dask
charges each end the cost per task plus :data:`BYTE_SECONDS` a byte, at speed 1.
"""

from __future__ import annotations

from collections import deque

from ..measured import last_compute

__all__ = ["DispatchGaps", "KEPT", "SHARE", "LEAST", "LONGEST", "BYTE_SECONDS"]

#: gaps kept (the latest)
KEPT = 2000
#: the share of the gaps, shortest first, that the overhead is the mean of
SHARE = 0.9
#: fewer gaps than this: no overhead learned
LEAST = 20
#: a gap longer than this (seconds) is a worker waiting for work, whatever the share
LONGEST = 1.0
#: CPU seconds at speed 1 a byte moved between two workers costs each end (400 MB/s: the quarter-core
#: worker, at speed 0.4, took bytes in at 150-200 MB/s from the full-core one)
BYTE_SECONDS = 2.5e-9
#: worker threads remembered at most (beyond, the table starts again)
THREADS = 10_000


class DispatchGaps:
    """The gaps between consecutive tasks of each worker thread (see the module's text).

    Parameters
    ----------
    kept : int
        How many of the latest gaps are kept.

    Examples
    --------
    >>> g = DispatchGaps()
    >>> for i in range(30):
    ...     g.add("w0", 1, [{"action": "compute", "start": i * 0.012, "stop": i * 0.012 + 0.01}])
    >>> round(g.overhead(), 4), round(g.overhead({"w0": 2.0}), 4)
    (0.002, 0.004)
    """

    def __init__(self, kept: int = KEPT):
        self.gaps: deque = deque(maxlen=kept)  # (worker, seconds)
        self.last: dict = {}  # (worker, thread) -> when its latest task stopped computing

    def add(self, worker: str, thread, startstops) -> None:
        """A task finished on ``thread`` of ``worker`` with these ``startstops`` (the worker's
        ``{"action", "start", "stop"}`` entries, in its own clock)."""
        compute = last_compute(startstops)
        if compute is None:
            return
        start, stop = compute
        fetched = max(
            (s["stop"] for s in startstops or () if s.get("action") == "transfer" and s["stop"] <= start),
            default=float("-inf"),
        )
        if len(self.last) >= THREADS:
            self.last.clear()
        prev = self.last.get((worker, thread))
        self.last[(worker, thread)] = stop
        if prev is not None:
            gap = start - max(prev, fetched)
            if 0.0 <= gap <= LONGEST:
                self.gaps.append((worker, gap))

    def overhead(self, speeds: dict | None = None) -> float | None:
        """Seconds per task at speed 1: the mean of the shortest :data:`SHARE` of the gaps kept,
        each times its worker's speed in ``speeds`` (worker -> speed; 1 where not given); None
        with fewer than :data:`LEAST` gaps."""
        if len(self.gaps) < LEAST:
            return None
        speeds = speeds or {}
        scaled = sorted(gap * speeds.get(worker, 1.0) for worker, gap in self.gaps)
        short = scaled[: max(1, int(len(scaled) * SHARE))]
        return sum(short) / len(short)
