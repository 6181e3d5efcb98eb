"""HEFT's order with transfers that take CPU from both ends: the plan the ``adaptive`` scheduler makes
inside Dask, where each worker is one process whose event loop serializes, sends, receives and
unpacks every input it serves or fetches on the same cores (or the same CPU quota) its tasks run
on.

Tasks go in decreasing upward rank (HEFT's), each to the worker where it would finish earliest.
An input from another worker costs ``message + bytes * per_byte`` seconds of CPU at speed 1 on the
sender and on the receiver (divided by each one's speed): it arrives that long after its producer
finished, plus the pair's latency and bytes / bandwidth, and the receiver's task starts no sooner
than its CPU has taken every input in. The sender's CPU time is taken from its next tasks (its
queue ends that much later). An output sent to a worker once is there for every later task.
Each core of a worker is a timeline (no gap search); a sender's CPU time is taken from its core
that frees first. On a worker held to a quarter core by a
cgroup quota, serving an output to a full-core worker costs four times what it costs there: HEFT,
which counts only the network, spreads a shuffle over both and loses the quarter core's share to
its transfers.
"""

from __future__ import annotations

import numpy as np

from .ranks import upward_rank

__all__ = ["transfer_cpu_schedule", "MOST_PAIRS"]

#: tasks x workers above which the plan is HEFT's own (this loop is plain Python)
MOST_PAIRS = 40_000


def transfer_cpu_schedule(cost_model, message: float, per_byte: float) -> tuple:
    """Per-task-index arrays ``(worker, start, finish)`` of the rule in the module docstring.

    Parameters
    ----------
    cost_model : CostModel
        Densified.
    message : float
        CPU seconds at speed 1 each transfer costs each end.
    per_byte : float
        CPU seconds at speed 1 each byte moved costs each end.
    """
    a = cost_model.arrays
    cluster = cost_model.cluster
    n, workers = a.n, len(cluster)
    durations = np.asarray(cost_model.durations)
    speed = np.asarray(cluster.speed, dtype=np.float64)
    inv, lat = cost_model.inv_bandwidth, cost_model.latency_matrix
    ptr, idx = a.pred_ptr.tolist(), a.pred_idx.tolist()
    size = a.size[a.pred_eid].tolist()
    worker = np.full(n, -1, dtype=np.int64)
    start, finish = np.zeros(n), np.zeros(n)
    free = [np.zeros(int(c)) for c in cluster.cores]  # per worker, when each core frees
    there: dict = {}  # (task, worker) -> when its output arrived there
    for t in np.argsort(-np.asarray(upward_rank(cost_model), dtype=np.float64), kind="stable").tolist():
        best = None
        for w in range(workers):
            if not np.isfinite(durations[t, w]):
                continue
            ready, taken, sends, arrivals = 0.0, 0.0, {}, {}
            for k in range(ptr[t], ptr[t + 1]):
                p = idx[k]
                v = int(worker[p])
                if v == w:
                    ready = max(ready, finish[p])
                    continue
                got = there.get((p, w))
                if got is None:
                    cpu = message + size[k] * per_byte
                    sent, taken_here = cpu / speed[v], cpu / speed[w]
                    got = finish[p] + sent + lat[v, w] + size[k] * inv[v, w] + taken_here
                    sends[v] = sends.get(v, 0.0) + sent
                    taken += taken_here
                    arrivals[p, w] = got
                ready = max(ready, got)
            begin = max(float(free[w].min()) + taken, ready)
            end = begin + durations[t, w]
            if best is None or end < best[0]:
                best = (end, w, begin, sends, arrivals)
        end, w, begin, sends, arrivals = best
        worker[t], start[t], finish[t] = w, begin, end
        free[w][int(free[w].argmin())] = end
        for v, secs in sends.items():
            free[v][int(free[v].argmin())] += secs  # serving the input takes the sender's CPU from its next tasks
        there.update(arrivals)
    return worker, start, finish
