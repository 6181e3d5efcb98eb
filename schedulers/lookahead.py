"""``lookahead``: HEFT with one level of lookahead.

L. F. Bittencourt, R. Sakellariou, E. R. M. Madeira, "DAG scheduling using a lookahead variant
of the Heterogeneous Earliest Finish Time algorithm", 18th Euromicro International Conference on
Parallel, Distributed and Network-based Processing (PDP), 2010, 27-34. doi:10.1109/PDP.2010.56

Tasks go in decreasing upward rank, as in HEFT. Where HEFT puts a task on the worker where it
finishes earliest, this tries the task on every worker: it is placed there tentatively (earliest
finish, insertion), then each of its children, in decreasing rank, is placed tentatively by
HEFT's own rule given everything placed so far (the task and the earlier children included; a
child's parents not placed yet do not count in its data-ready time). The task goes to the worker
that minimises the latest finish among its children (its own finish when it has none); ties go
to the earlier own finish, then to the lower worker. The tentative placements are then dropped:
each child is placed for real in its own turn.

HEFT looks only at the task it places; lookahead sees what a placement does to the tasks that
need its output. The cost is a factor of about (children x workers) over HEFT's placement.
Tentative children are taken to hold their whole worker while they run (exact for one-core
workers, conservative for several cores).
"""

from __future__ import annotations

import heapq

import numpy as np
from taskflow.jit import kernel

from ._profile import INF, data_ready, earliest_start, empty_plan, max_degree, place, ready_heap, start_avoiding
from .base import Scheduler, kernel_inputs, register, to_schedule
from .ranks import upward_rank

__all__ = ["Lookahead"]


@register
class Lookahead(Scheduler):
    """Lookahead HEFT (Bittencourt, Sakellariou, Madeira 2010); the rule is in the module docstring."""

    name = "lookahead"
    summary = "HEFT choosing each worker by its children's earliest finish (Bittencourt et al. 2010)"

    def plan(self, cost_model):
        result = _lookahead_loop(*kernel_inputs(cost_model), np.asarray(upward_rank(cost_model), dtype=np.float64))
        return to_schedule(cost_model, result, self.name)


@kernel(cache=True)
def _lookahead_loop(durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx, lat, inv, priority):
    """Lookahead HEFT (Bittencourt, Sakellariou, Madeira 2010): tasks in decreasing ``priority``;
    for each worker ``w``, the task is tentatively placed there (earliest finish, insertion), then
    each of its children, in decreasing priority, is tentatively placed by HEFT's rule (earliest
    finish over all workers) given the placements so far, the task's and the earlier children's
    included (a child's parents not yet placed are left out of its data-ready time). The task
    goes to the worker that minimises the latest of its children's finish times (its own finish
    when it has none); ties to the earliest own finish, then the lower worker."""
    n, W, worker, start, finish, times, usage, K = empty_plan(durations)
    remaining = np.empty(n, np.int64)
    maxs = max_degree(succ_ptr)
    # tentative tasks per worker: at most the task and its children
    ex_s = np.empty((W, maxs + 1))
    ex_f = np.empty((W, maxs + 1))
    nex = np.zeros(W, np.int64)
    kids = np.empty(maxs, np.int64)
    tw = np.empty(maxs, np.int64)  # a child's tentative worker and finish
    tf = np.empty(maxs)
    heap = ready_heap(pred_ptr, priority, remaining)
    drt = np.empty(W)
    while len(heap) > 0:
        i = heapq.heappop(heap)[1]  # the ready task of highest priority
        data_ready(i, W, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, drt)
        c = tcores[i]
        # children in decreasing priority (ties: lower index)
        nk = 0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[e]
            b = nk
            while b > 0 and (
                priority[kids[b - 1]] < priority[j] or (priority[kids[b - 1]] == priority[j] and kids[b - 1] > j)
            ):
                kids[b] = kids[b - 1]
                b -= 1
            kids[b] = j
            nk += 1
        best_w = -1
        best_s = 0.0
        best_key = INF
        best_own = INF
        for w in range(W):
            d = durations[i, w]
            if d == INF:
                continue
            s = earliest_start(times[w], usage[w], K[w], drt[w], d, c, wcores[w], True)
            f_own = s + d
            for q in range(W):
                nex[q] = 0
            ex_s[w, 0] = s
            ex_f[w, 0] = f_own
            nex[w] = 1
            worker[i] = w  # tentatively, for the children's data-ready times
            finish[i] = f_own
            key = f_own
            if nk > 0:
                key = 0.0
                for a in range(nk):
                    j = kids[a]
                    best_cf = INF
                    best_cq = -1
                    best_cs = 0.0
                    for q in range(W):
                        dq = durations[j, q]
                        if dq == INF:
                            continue
                        ready = 0.0
                        for k in range(pred_ptr[j], pred_ptr[j + 1]):
                            p = pred_idx[k]
                            wp = worker[p]
                            fp = finish[p]
                            if wp < 0:
                                # an earlier child placed tentatively?
                                found = -1
                                for b in range(a):
                                    if kids[b] == p:
                                        found = b
                                if found < 0:
                                    continue  # not placed yet: left out
                                wp = tw[found]
                                fp = tf[found]
                            t = fp if wp == q else fp + lat[wp, q] + pred_size[k] * inv[wp, q]
                            if t > ready:
                                ready = t
                        sq = start_avoiding(
                            times[q], usage[q], K[q], ready, dq, tcores[j], wcores[q], ex_s[q], ex_f[q], nex[q]
                        )
                        if sq + dq < best_cf:
                            best_cf = sq + dq
                            best_cq = q
                            best_cs = sq
                    if best_cq < 0:
                        continue
                    tw[a] = best_cq
                    tf[a] = best_cf
                    ex_s[best_cq, nex[best_cq]] = best_cs
                    ex_f[best_cq, nex[best_cq]] = best_cf
                    nex[best_cq] += 1
                    if best_cf > key:
                        key = best_cf
            worker[i] = -1
            if best_w < 0 or key < best_key or (key == best_key and f_own < best_own):
                best_key = key
                best_own = f_own
                best_w = w
                best_s = s
        place(
            i,
            best_w,
            best_s,
            durations[i, best_w],
            c,
            worker,
            start,
            finish,
            times,
            usage,
            K,
            succ_ptr,
            succ_idx,
            remaining,
            priority,
            heap,
        )
    return worker, start, finish
