"""``heft-search``: HEFT's plan, improved by a budgeted search over priority lists.

A list scheduler is two decisions: the order in which ready tasks are placed (a priority per task)
and where each goes (earliest finish, with insertion). HEFT fixes the order by the upward rank at
mean costs; H. Zhao and R. Sakellariou ("An experimental investigation into the rank function of
the heterogeneous earliest finish time scheduling algorithm", Euro-Par 2003, LNCS 2790:189-194)
showed that other ways of weighing a task's costs in the rank change HEFT's makespan by large
amounts, with no way that wins everywhere. This scheduler spends a small budget of evaluations of
the compiled list-scheduling kernel (one evaluation costs about what HEFT's own placement costs)
on finding the order that wins on the graph and cluster at hand:

1. HEFT itself (upward rank, mean costs): the plan to beat;
2. the upward rank with each task's duration at its median, best and worst over the workers (Zhao
   and Sakellariou), and without communication;
3. CPOP's priority, rank_u + rank_d (Topcuoglu et al. 2002), and PEFT's, the mean of the
   optimistic cost table with the table as a placement bias (Arabnejad and Barbosa 2014);
4. then, for what is left of the budget, in turn: a task of the best schedule's critical chain
   (from the last task back through whatever made each start when it did) forced onto another
   worker it can run on, the rest placed by the list scheduler as before; and a random
   multiplicative perturbation of the best priority list so far (each priority x
   exp(sigma N(0, 1)), sigma cycling 0.02 .. 0.3). Both draw from a generator seeded by ``seed``;
   a change is kept when it shortens the schedule (hill climbing).

Every candidate is a complete list schedule, valid by construction. The shortest one wins; a tie
or nothing shorter keeps HEFT's plan, so the result is never longer than HEFT's. Options:
``budget`` (evaluations, default :data:`DEFAULT_BUDGET`) and ``seconds`` (a wall-clock limit, off by
default: set, the result depends on the machine's speed, so only ``budget`` is reproducible).
"""

from __future__ import annotations

import time

import numpy as np
from taskflow.jit import kernel

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import (
    downward_rank_kernel,
    upward_rank_kernel,
    downward_rank,
    mean_costs,
    optimistic_cost_table,
    upward_rank,
)

__all__ = ["HEFTSearch", "DEFAULT_BUDGET", "MAX_BUDGET", "parse_budget"]

#: Evaluations of the list-scheduling kernel by default (HEFT's plan is the first).
DEFAULT_BUDGET = 16
_SIGMAS = (0.02, 0.05, 0.1, 0.2, 0.3)


#: the largest budget a command line accepts: evaluations, and seconds
MAX_BUDGET = (1_000_000, 3600.0)


def parse_budget(text) -> dict:
    """Scheduler options of a budget written as ``64`` (evaluations) or ``2s`` (seconds).

    Parameters
    ----------
    text : str or int

    Raises
    ------
    ValueError
        Neither a positive whole number nor a positive number of seconds ending in ``s``, or above
        :data:`MAX_BUDGET`.
    """
    s = str(text).strip().lower()
    try:
        if s.endswith("s"):
            v = float(s[:-1])
            if 0 < v <= MAX_BUDGET[1]:
                return {"seconds": v, "budget": 1 << 30}
        else:
            v = int(s)
            if 1 <= v <= MAX_BUDGET[0]:
                return {"budget": v}
    except ValueError:
        pass
    raise ValueError(
        f"budget {text!r}: expected evaluations (a whole number 1..{MAX_BUDGET[0]:,}) or seconds "
        f"such as 2s (at most {MAX_BUDGET[1]:g}s)"[:300]
    )


@register
class HEFTSearch(Scheduler):
    """HEFT improved by a budgeted, seeded search over priority lists; the rule is in the module
    docstring."""

    name = "heft-search"
    #: ``progress``: called with the share of the budget spent (0..1) as the search goes
    option_names = ("budget", "seconds", "progress")
    summary = "HEFT, then a budgeted search over rank functions and perturbed priorities (never worse)"

    def plan(self, cost_model):
        budget = int(self.options.get("budget", DEFAULT_BUDGET))
        seconds = self.options.get("seconds")
        if budget < 1:
            raise ValueError(f"heft-search: budget must be >= 1, got {budget}")
        t0 = time.perf_counter()
        t_end = t0 + float(seconds) if seconds else float("inf")
        progress = self.options.get("progress")
        a = cost_model.arrays
        rank_u = upward_rank(cost_model)
        free = np.full(a.n, -1, dtype=np.int64)
        best = {
            "prio": rank_u,
            "bias": None,
            "fixed": free,
            "result": list_schedule(cost_model, rank_u, insertion=True),
        }
        best["makespan"] = float(best["result"][2].max()) if a.n else 0.0
        spent = 1
        found = {"candidates": 1, "improved_by": "heft"}

        def consider(prio, bias=None, label="", fixed=None):
            nonlocal spent
            spent += 1
            if progress is not None and spent % 20 == 0:
                progress(min(1.0, max(spent / budget, (time.perf_counter() - t0) / float(seconds or "inf"))))
            fixed = best["fixed"] if fixed is None else fixed
            res = list_schedule(cost_model, prio, fixed=fixed, bias=bias, insertion=True)
            mk = float(res[2].max()) if a.n else 0.0
            found["candidates"] += 1
            if mk < best["makespan"] * (1 - 1e-12):
                best.update(prio=prio, bias=bias, fixed=fixed, result=res, makespan=mk)
                found["improved_by"] = label

        def left():
            return spent < budget and time.perf_counter() < t_end

        for label, make in self._variants(cost_model, rank_u):
            if not left():
                break
            prio, bias = make()
            consider(prio, bias, label)
        rng = np.random.default_rng(self.seed if self.seed is not None else 0)
        k = 0
        feasible = np.isfinite(cost_model.durations)
        while left():
            k += 1
            if k % 2 == 1 and a.n and feasible.sum() > a.n:  # move a task of the critical chain elsewhere
                chain = _critical_chain(cost_model, best["result"])
                i = int(chain[rng.integers(len(chain))])
                options = np.flatnonzero(feasible[i] & (np.arange(feasible.shape[1]) != best["result"][0][i]))
                if len(options):
                    fixed = best["fixed"].copy()
                    fixed[i] = int(options[rng.integers(len(options))])
                    consider(best["prio"], best["bias"], "a critical task moved", fixed)
                    continue
            sigma = _SIGMAS[(k // 2) % len(_SIGMAS)]
            base = best["prio"]
            consider(base * np.exp(sigma * rng.standard_normal(a.n)), best["bias"], f"perturbed (sigma {sigma})")
        return to_schedule(
            cost_model, best["result"], self.name, extra={"evaluations": spent, "won_by": found["improved_by"]}
        )

    @staticmethod
    def _variants(cost_model, rank_u):
        """(label, () -> (priority, bias)) in the order they are tried."""
        a = cost_model.arrays
        d = np.where(np.isfinite(cost_model.durations), cost_model.durations, np.nan)
        _, sc, pc = mean_costs(cost_model)

        def upward(w, comm=sc):
            return upward_rank_kernel(np.ascontiguousarray(w), a.succ_ptr, a.succ_idx, comm, a.topo), None

        def cpop():
            return rank_u + downward_rank(cost_model), None

        def peft():
            table = optimistic_cost_table(cost_model)
            return table.mean(axis=1), table

        def fastest_path():  # rank_d at best durations plus rank_u at best durations
            w = np.nanmin(d, axis=1)
            return (
                upward_rank_kernel(w, a.succ_ptr, a.succ_idx, sc, a.topo)
                + downward_rank_kernel(w, a.pred_ptr, a.pred_idx, pc, a.topo)
            ), None

        return [
            ("rank: median durations", lambda: upward(np.nanmedian(d, axis=1))),
            ("rank: best durations", lambda: upward(np.nanmin(d, axis=1))),
            ("rank: worst durations", lambda: upward(np.nanmax(d, axis=1))),
            ("rank: no communication", lambda: upward(cost_model.mean_duration(), np.zeros_like(sc))),
            ("cpop priority", cpop),
            ("peft", peft),
            ("best-duration path priority", fastest_path),
        ]


def _critical_chain(cost_model, result) -> np.ndarray:
    """Task indices of a critical chain of a list schedule: from the task that finishes last,
    back through whatever made each task start when it did (the input that arrived last, or the
    task before it on its worker)."""
    worker, start, finish = result
    a = cost_model.arrays
    order = np.lexsort((finish, worker))  # by worker, then finish
    return _chain(
        worker,
        start,
        finish,
        a.pred_ptr,
        a.pred_idx,
        np.ascontiguousarray(a.size[a.pred_eid]),
        cost_model.latency_matrix,
        cost_model.inv_bandwidth,
        order,
        worker[order],
        finish[order],
    )


@kernel(cache=True)
def _chain(worker, start, finish, pred_ptr, pred_idx, pred_size, lat, inv, order, w_sorted, f_sorted):
    n = worker.shape[0]
    chain = np.empty(n, np.int64)
    seen = np.zeros(n, np.bool_)
    i = int(np.argmax(finish))
    L = 0
    while True:
        chain[L] = i
        L += 1
        seen[i] = True
        s = start[i]
        w = worker[i]
        tol = 1e-9 * max(1.0, s)
        nxt = -1
        for k in range(pred_ptr[i], pred_ptr[i + 1]):
            p = pred_idx[k]
            wp = worker[p]
            ready = finish[p] if wp == w else finish[p] + lat[wp, w] + pred_size[k] * inv[wp, w]
            if abs(ready - s) <= tol:
                nxt = p
                break
        if nxt < 0:  # the task before it on its worker: one that finishes when it starts
            lo = np.searchsorted(w_sorted, w, "left")
            hi = np.searchsorted(w_sorted, w, "right")
            k = lo + np.searchsorted(f_sorted[lo:hi], s - tol, "left")
            if k < hi and abs(f_sorted[k] - s) <= tol:
                nxt = order[k]
        if nxt < 0 or seen[nxt]:
            return chain[:L]
        i = nxt
