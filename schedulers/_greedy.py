"""ETF and min-min: the greedy loop that looks at every ready task against every worker at each step
(the two schedulers differ in the key), and its glue from a CostModel."""

import numpy as np
from taskflow.jit import kernel

from ._profile import INF, data_ready, earliest_start, empty_plan, occupy_on
from .base import kernel_inputs
from .ranks import b_level


def greedy(cost_model, mode: int):
    """Plan with :func:`_greedy_loop` (mode 0: ETF, 1: min-min); ``(worker, start, finish)``."""
    return _greedy_loop(*kernel_inputs(cost_model), b_level(cost_model), mode)


@kernel(cache=True)
def _greedy_loop(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx, lat, inv, level, mode):
    """ETF (mode 0): of all (ready task, worker) pairs the earliest start, ties to the higher
    ``level`` (b-level). Min-min (mode 1): the ready task whose best finish is earliest, there.
    Append placement. Start times of ready tasks are cached and refreshed only on the worker that
    just received a task, so a step costs O(ready) rather than O(ready x workers)."""
    n, W, worker, start, finish, times, usage, K = empty_plan(durations)
    remaining = np.empty(n, np.int64)
    ready = np.empty(n, np.int64)
    nready = 0
    drt = np.zeros((n, W))
    est = np.zeros((n, W))
    for i in range(n):
        remaining[i] = pred_ptr[i + 1] - pred_ptr[i]
        if remaining[i] == 0:
            ready[nready] = i
            nready += 1
            for w in range(W):
                est[i, w] = earliest_start(times[w], usage[w], K[w], 0.0, durations[i, w], tcores[i], wcores[w], False)
    for _ in range(n):
        bi = -1
        bw = -1
        bpos = -1
        bkey = INF
        blev = -INF
        for r in range(nready):
            i = ready[r]
            for w in range(W):
                d = durations[i, w]
                if d == INF:
                    continue
                key = est[i, w] if mode == 0 else est[i, w] + d
                better = bi < 0 or key < bkey
                if not better and key == bkey:
                    if mode == 0:
                        better = level[i] > blev or (level[i] == blev and i < bi)
                    else:
                        better = i < bi
                if better:
                    bi, bw, bpos, bkey, blev = i, w, r, key, level[i]
        i, w = bi, bw
        d = durations[i, w]
        worker[i] = w
        start[i] = est[i, w]
        finish[i] = est[i, w] + d
        occupy_on(w, times, usage, K, start[i], finish[i], tcores[i])
        ready[bpos] = ready[nready - 1]
        nready -= 1
        for r in range(nready):  # only worker w changed
            j = ready[r]
            if durations[j, w] < INF:
                est[j, w] = earliest_start(
                    times[w], usage[w], K[w], drt[j, w], durations[j, w], tcores[j], wcores[w], False
                )
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[e]
            remaining[j] -= 1
            if remaining[j] == 0:
                row = drt[j]
                data_ready(j, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, row)
                for x in range(W):
                    if durations[j, x] < INF:
                        est[j, x] = earliest_start(
                            times[x], usage[x], K[x], row[x], durations[j, x], tcores[j], wcores[x], False
                        )
                ready[nready] = j
                nready += 1
    return worker, start, finish
