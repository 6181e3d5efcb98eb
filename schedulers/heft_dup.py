"""``heft-dup``: HEFT with critical-parent duplication.

HEFT's order and insertion policy (H. Topcuoglu, S. Hariri, M.-Y. Wu, IEEE TPDS 13(3), 2002), with
the duplication step of the "critical parent" family of duplication-based list schedulers:
T. Hagras, J. Janeček, "A high performance, low complexity algorithm for compile-time task
scheduling in heterogeneous systems", Parallel Computing 31(7):653-670, 2005 (HCPFD), and
Y. Dai, X. Zhang, "A synthesized heuristic task scheduling algorithm", The Scientific World
Journal 2014, 465702, doi:10.1155/2014/465702 (HCPPEFT, steps 7-11 of its Algorithm 1).

Tasks go in decreasing upward rank. For each worker ``w`` the task's earliest start is found as in
HEFT (its data-ready time on ``w``, then the earliest idle gap). Then, up to ``max_copies`` times
(option, default 4): the task's *critical parent* on ``w``, the input that arrives last there
(the first such input on a tie), is copied onto ``w``, unless it already runs there, into the
earliest idle gap after that parent's own inputs can be on ``w`` (each from whichever of its
executions has it there first). The candidate keeps the copies up to the last one that made the
task start earlier; a copy that changes nothing (another input arrives as late) lets the next
critical parent be tried; the copying stops at a copy that makes the task start later, or when
the parent's copy would not finish before its output would have arrived. The task goes to the worker of the
earliest finish (ties: fewer copies, then the lower worker), with the copies that got it there.

The plan's :attr:`~taskflow.schedule.Schedule.copies` are these further executions; a consumer
takes each input from whichever execution has it on its worker first, and
:meth:`~taskflow.schedule.Schedule.validate` checks exactly that. Copies pay off where transfers
are long next to the work (high communication-to-computation ratio); on compute-bound workflows
the plan is HEFT's. A plan with copies is a plan only: the simulator and the Dask runtime run each
task once and refuse this scheduler with a one-line error. Cost: about twice HEFT's placement, plus
a copy's own data-ready time per copy tried.
"""

from __future__ import annotations

import heapq

import numpy as np
from taskflow.jit import kernel

from ._profile import INF, earliest_start, empty_plan, max_degree, occupy_on, place, ready_heap, start_avoiding
from .base import Scheduler, kernel_inputs, register
from .ranks import upward_rank
from taskflow.schedule import Schedule

__all__ = ["HEFTDup", "DEFAULT_MAX_COPIES"]

#: copies tried per task and worker by default
DEFAULT_MAX_COPIES = 4


@register
class HEFTDup(Scheduler):
    """HEFT with critical-parent duplication (after Hagras and Janeček 2005); the rule is in the
    module docstring."""

    name = "heft-dup"
    option_names = ("max_copies",)
    summary = "HEFT, copying a task's critical parents onto its worker when that starts it earlier"
    duplicates = True

    def plan(self, cost_model):
        k = self.options.get("max_copies", DEFAULT_MAX_COPIES)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"heft-dup: max_copies must be a whole number >= 0, got {k!r}")
        res = _dup_loop(*kernel_inputs(cost_model), np.asarray(upward_rank(cost_model), dtype=np.float64), int(k))
        worker, start, finish = res[:3]
        return Schedule.from_indices(
            cost_model.graph,
            cost_model.cluster,
            worker,
            start,
            finish,
            scheduler=self.name,
            extra={"copies_made": len(res[3])},
            copies=res[3:],
        )


@kernel(cache=True)
def _arrival(p, w, sz, worker, finish, chead, cnext, cw, cf, lat, inv):
    """When ``p``'s output can be on worker ``w``: the earliest over its executions (the task and
    its copies) of finish + transfer time (nothing when it ran on ``w``)."""
    wp = worker[p]
    best = finish[p] if wp == w else finish[p] + lat[wp, w] + sz * inv[wp, w]
    k = chead[p]
    while k >= 0:
        q = cw[k]
        t = cf[k] if q == w else cf[k] + lat[q, w] + sz * inv[q, w]
        if t < best:
            best = t
        k = cnext[k]
    return best


@kernel(cache=True)
def _ran_on(p, w, worker, chead, cnext, cw):
    """Whether ``p`` or one of its copies runs on worker ``w``."""
    if worker[p] == w:
        return True
    k = chead[p]
    while k >= 0:
        if cw[k] == w:
            return True
        k = cnext[k]
    return False


@kernel(cache=True)
def _dup_loop(
    durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx, lat, inv, priority, max_copies
):
    """List scheduling with critical-parent duplication. Tasks go in decreasing ``priority``; on
    each worker ``w`` the task's start is computed as usual, then up to ``max_copies`` times its
    *critical parent* (the input that arrives last on ``w``, when it does not run there) is copied
    onto ``w``, into the earliest gap after that parent's own inputs can be there: the candidate
    keeps the copies up to the last one that made the task finish earlier (a copy that changes
    nothing lets the next critical parent be tried; one that delays the task ends it). The task
    goes to the worker of the earliest finish (ties: fewer copies, then the lower worker); the
    copies that got it there are kept.

    Returns ``(worker, start, finish, copy_task, copy_worker, copy_start, copy_finish)``."""
    n, W, worker, start, finish, times, usage, K = empty_plan(durations)
    remaining = np.empty(n, np.int64)
    heap = ready_heap(pred_ptr, priority, remaining)
    m = pred_idx.shape[0]
    cap = max(16, min(m, n * max_copies) + 1)
    ct = np.empty(cap, np.int64)
    cw = np.empty(cap, np.int64)
    cs = np.empty(cap)
    cf = np.empty(cap)
    cnext = np.empty(cap, np.int64)
    chead = np.full(n, -1, np.int64)
    nc = 0
    arr = np.empty(max_degree(pred_ptr))  # each input's arrival on the worker under study
    ex_s = np.empty(max_copies + 1)
    ex_f = np.empty(max_copies + 1)
    ex_p = np.empty(max_copies + 1, np.int64)
    best_ex_s = np.empty(max_copies + 1)
    best_ex_f = np.empty(max_copies + 1)
    best_ex_p = np.empty(max_copies + 1, np.int64)
    while len(heap) > 0:
        i = heapq.heappop(heap)[1]  # the ready task of highest priority
        c = tcores[i]
        p0 = pred_ptr[i]
        np_ = pred_ptr[i + 1] - p0
        best_w = -1
        best_s = 0.0
        best_f = INF
        best_n = 0
        for w in range(W):
            d = durations[i, w]
            if d == INF:
                continue
            ready = 0.0
            for k in range(np_):
                arr[k] = _arrival(
                    pred_idx[p0 + k], w, pred_size[p0 + k], worker, finish, chead, cnext, cw, cf, lat, inv
                )
                if arr[k] > ready:
                    ready = arr[k]
            s = earliest_start(times[w], usage[w], K[w], ready, d, c, wcores[w], True)
            w_f = s + d
            w_s = s
            w_n = 0
            nex = 0
            while nex < max_copies and np_ > 0:
                # the critical parent: the input that arrives last (the first such input on a tie)
                kc = 0
                for k in range(1, np_):
                    if arr[k] > arr[kc]:
                        kc = k
                p = pred_idx[p0 + kc]
                dp = durations[p, w]
                if dp == INF or arr[kc] <= 0.0 or _ran_on(p, w, worker, chead, cnext, cw):
                    break
                already = False
                for b in range(nex):
                    if ex_p[b] == p:
                        already = True
                if already:
                    break
                pready = 0.0
                for k in range(pred_ptr[p], pred_ptr[p + 1]):
                    t = _arrival(pred_idx[k], w, pred_size[k], worker, finish, chead, cnext, cw, cf, lat, inv)
                    if t > pready:
                        pready = t
                ps = start_avoiding(times[w], usage[w], K[w], pready, dp, tcores[p], wcores[w], ex_s, ex_f, nex)
                pf = ps + dp
                if pf >= arr[kc]:
                    break
                ex_s[nex] = ps
                ex_f[nex] = pf
                ex_p[nex] = p
                nex += 1
                arr[kc] = pf
                ready = 0.0
                for k in range(np_):
                    if arr[k] > ready:
                        ready = arr[k]
                s2 = start_avoiding(times[w], usage[w], K[w], ready, d, c, wcores[w], ex_s, ex_f, nex)
                if s2 + d < w_f:
                    w_f = s2 + d
                    w_s = s2
                    w_n = nex
                elif s2 + d > w_f:
                    break  # (no change: another input arrives as late; try copying that one too)
            if best_w < 0 or w_f < best_f or (w_f == best_f and w_n < best_n):
                best_w = w
                best_s = w_s
                best_f = w_f
                best_n = w_n
                for b in range(w_n):
                    best_ex_s[b] = ex_s[b]
                    best_ex_f[b] = ex_f[b]
                    best_ex_p[b] = ex_p[b]
        for b in range(best_n):
            p = best_ex_p[b]
            if nc == ct.shape[0]:
                ct = np.concatenate((ct, np.empty(nc, np.int64)))
                cw = np.concatenate((cw, np.empty(nc, np.int64)))
                cs = np.concatenate((cs, np.empty(nc)))
                cf = np.concatenate((cf, np.empty(nc)))
                cnext = np.concatenate((cnext, np.empty(nc, np.int64)))
            ct[nc] = p
            cw[nc] = best_w
            cs[nc] = best_ex_s[b]
            cf[nc] = best_ex_f[b]
            cnext[nc] = chead[p]
            chead[p] = nc
            nc += 1
            occupy_on(best_w, times, usage, K, best_ex_s[b], best_ex_f[b], tcores[p])
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
    return worker, start, finish, ct[:nc].copy(), cw[:nc].copy(), cs[:nc].copy(), cf[:nc].copy()
