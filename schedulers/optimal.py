"""``optimal``: the whole scheduling problem as a constraint model, solved exactly by CP-SAT.

Heuristics are judged by how far they are from the best schedule, and on real workflows that
distance is unknown: the usual lower bound (the critical path at each task's fastest duration, or
the work over the cluster's capacity) ignores communication and can sit 30-50% below every schedule
that exists. Exact formulations of task scheduling with communication delays are published as
integer programs (S. Venugopalan and O. Sinnen, "ILP formulations for optimal task scheduling with
communication delays on parallel systems", IEEE TPDS 26(1):142-151, 2015); this module states the
same problem for a constraint solver, Google OR-Tools' CP-SAT (lazy clause generation, with the
interval and scheduling propagators that suit it), in the cost model every other scheduler of this
package works in:

* each task runs once, on exactly one worker that can run it, for its duration there (an optional
  interval per feasible worker, exactly one present);
* a worker's tasks overlap only as far as its cores allow (no-overlap on one-core workers,
  cumulative on the others);
* a task starts after each input's producer finishes, plus the transfer time between their two
  workers when they differ (latency + bytes / bandwidth of that pair);
* minimise the makespan.

Redundant constraints make the solver's bound useful sooner: each worker's load is at most the
makespan, and every task starts no earlier than its longest path of fastest durations from a source
and finishes no later than the makespan less that path to a sink. Workers that are identical
(speed, cores, costs, links) are interchangeable, so the lower-numbered one is made to take the
lower-numbered task (symmetry breaking).

Times are integers in the model: every duration and transfer time is scaled so that HEFT's makespan
is a million units and rounded *down*, so the solver's bound is a lower bound of the real problem;
the schedule returned is the solver's placement and order, timed again in exact arithmetic by the
shared list-scheduling kernel (each task on its worker, in the solver's start order, as early as
its inputs allow), and validated like every other.

HEFT's plan is computed first and given to the solver as its starting point; the result is never
longer than HEFT's. The search is bounded by ``budget``, CP-SAT's deterministic time (default
:data:`DEFAULT_BUDGET`; about as many seconds on a 2-core machine, and the same answer on every
machine for a given OR-Tools version), and optionally by ``seconds`` of wall clock (then the answer
depends on the machine). One search thread by default (``threads``), for the same reason. The
solver's deterministic clock can stall: on a 12-task graph on one 4-core worker it counted 0.04
units in 5 s of search. So a search without ``seconds`` also stops after :data:`STALL_SECONDS` wall
seconds per unit of budget; ``extra["stopped"]`` says ``"wall clock"`` when a wall-clock limit ended
it (the answer then depends on the machine).

The schedule's ``extra`` says what was proved: ``status`` (``optimal``: no schedule of one placement
per task is shorter; ``feasible``: the best found within the budget), ``lower_bound`` (the solver's
bound or the graph's own lower bound, whichever is higher: no schedule is shorter) and ``gap`` (the
share of the makespan that the bound leaves unproved). Graphs of more than ``max_pairs`` (task,
worker) pairs (default :data:`MAX_PAIRS`) are not modelled; the schedule is then HEFT's, with
``status`` ``too large``. Small graphs (tens of tasks) are typically solved to optimality in
seconds; a few hundred tasks give a good bound at best.
"""

from __future__ import annotations

import math

import numpy as np

from taskflow.errors import MissingExtra, SchedulerError
from taskflow.analysis import lower_bound

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import downward_rank_kernel, upward_rank_kernel, upward_rank

__all__ = ["Optimal", "DEFAULT_BUDGET", "MAX_PAIRS", "STALL_SECONDS", "solve"]

#: CP-SAT deterministic time by default (about seconds).
DEFAULT_BUDGET = 2.0
#: Wall seconds per unit of budget after which a search without ``seconds`` stops: the
#: deterministic clock can stall (0.04 units in 5 s on one graph), and a plan must end. Far above
#: what a unit takes where the clock runs (up to 34 s per unit, 401 tasks on 4 workers).
STALL_SECONDS = 60.0
#: The largest graph modelled: tasks x workers.
MAX_PAIRS = 1000
_UNITS = 1_000_000  # HEFT's makespan in model units
#: CP-SAT 9.15's presolve can certify a wrong optimum (google/or-tools issue 5293, open; seen here
#: too: on the HEFT paper's graph on 4 workers at speeds 1-4 it proved 0.937 x HEFT optimal where
#: 0.925 exists, and switching off its inclusion detection or the whole presolve gave 0.925). The
#: bound is this scheduler's claim, so presolve is off: on the real-workflow family it made no
#: measurable difference to what was proved
_SOLVER_PARAMETERS = {"cp_model_presolve": False}


@register
class Optimal(Scheduler):
    """An exact constraint model of the whole problem, solved by CP-SAT within a budget; the rule
    is in the module docstring."""

    name = "optimal"
    option_names = ("budget", "seconds", "threads", "max_pairs")
    summary = "exact: the whole problem as a CP-SAT model, optimal when proved within its budget (small graphs)"

    def plan(self, cost_model):
        o = self.options
        try:
            budget = float(o.get("budget", DEFAULT_BUDGET))
            seconds = None if o.get("seconds") is None else float(o["seconds"])
            threads = int(o.get("threads", 1))
            max_pairs = int(o.get("max_pairs", MAX_PAIRS))
        except (TypeError, ValueError):
            raise SchedulerError(
                f"optimal: budget, seconds, threads and max_pairs must be numbers (got budget="
                f"{o.get('budget')!r}, seconds={o.get('seconds')!r}, threads={o.get('threads')!r}, "
                f"max_pairs={o.get('max_pairs')!r})"
            ) from None
        if not budget > 0 or (seconds is not None and not seconds > 0) or threads < 1:
            raise SchedulerError(
                f"optimal: budget and seconds must be > 0 and threads >= 1 "
                f"(got budget={budget!r}, seconds={seconds!r}, threads={threads!r})"
            )
        a = cost_model.arrays
        heft = list_schedule(cost_model, upward_rank(cost_model), insertion=True)
        heft_mk = float(heft[2].max()) if a.n else 0.0
        bound = lower_bound(cost_model.graph, cost_model.cluster, cost_model)
        pairs = int(np.isfinite(cost_model.durations).sum())
        if a.n == 0 or heft_mk <= 0 or heft_mk - bound <= 1e-12 * heft_mk:
            return to_schedule(cost_model, heft, self.name, extra=_extra("optimal", heft_mk, bound))
        if pairs > max_pairs:
            return to_schedule(cost_model, heft, self.name, extra=_extra("too large", heft_mk, bound, pairs=pairs))
        result, status, solver_bound, stopped = solve(
            cost_model,
            heft,
            budget=budget,
            seconds=seconds,
            threads=threads,
            seed=self.seed if self.seed is not None else 0,
        )
        more = {"stopped": stopped} if stopped else {}
        if result is None:  # nothing within the budget, not even the hint: HEFT's plan
            return to_schedule(cost_model, heft, self.name, extra=_extra("feasible", heft_mk, bound, **more))
        mk = float(result[2].max())
        if mk > heft_mk:  # the solver's order timed exactly, no better than the plan it started from
            result, mk = heft, heft_mk
        best_bound = max(bound, solver_bound)
        if status == "optimal":  # proved on rounded-down times: optimal within the rounding
            best_bound = max(best_bound, min(mk, solver_bound))
        return to_schedule(cost_model, result, self.name, extra=_extra(status, mk, best_bound, **more))


def _extra(status, makespan, bound, **more) -> dict:
    bound = min(bound, makespan)
    gap = (makespan - bound) / makespan if makespan > 0 else 0.0
    return {"status": status, "lower_bound": bound, "gap": gap, **more}


def solve(cost_model, start, budget=DEFAULT_BUDGET, seconds=None, threads=1, seed=0):
    """Solve ``cost_model`` exactly with CP-SAT, starting from the list schedule ``start``.

    Returns ``((worker, start, finish), status, bound, stopped)``: the solver's placement and order
    timed exactly by the list-scheduling kernel, ``"optimal"`` or ``"feasible"``, a lower bound of
    the makespan in seconds, and ``"wall clock"`` where a wall-clock limit ended the search (else
    ``None``); the first three ``None`` when nothing was found within the budget (on a loaded
    machine the wall clock can end the search before it accepts the hint).

    Parameters
    ----------
    cost_model : CostModel
    start : (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        Worker index, start and finish per task: the hint, and the horizon (its makespan).
    budget : float
        CP-SAT's deterministic time limit.
    seconds : float, optional
        A wall-clock limit as well (default: :data:`STALL_SECONDS` per unit of ``budget``).
    threads : int
        Search workers (1: the same answer every run).
    seed : int

    Raises
    ------
    TaskflowError
        OR-Tools is not installed.
    """
    try:
        from ortools.sat.python import cp_model
    except ImportError:  # pragma: no cover - a declared dependency
        raise MissingExtra("optimal: needs OR-Tools (pip install ortools)") from None
    a = cost_model.arrays
    n, W = a.n, cost_model.num_workers
    hw, hs, hf = start
    horizon_s = float(hf.max())
    scale = _UNITS / horizon_s
    with np.errstate(invalid="ignore", over="ignore"):
        D = np.where(np.isfinite(cost_model.durations), np.floor(cost_model.durations * scale), -1).astype(np.int64)
    H = _UNITS + 1
    m = cp_model.CpModel()
    s = [m.new_int_var(0, H, f"s{i}") for i in range(n)]
    e = [m.new_int_var(0, H, f"e{i}") for i in range(n)]
    mk = m.new_int_var(0, H, "makespan")
    on = {}
    intervals = [[] for _ in range(W)]
    demands = [[] for _ in range(W)]
    for i in range(n):
        lits = []
        for w in np.flatnonzero(D[i] >= 0):
            w = int(w)
            x = m.new_bool_var(f"x{i}_{w}")
            on[i, w] = x
            lits.append(x)
            intervals[w].append(m.new_optional_interval_var(s[i], int(D[i, w]), e[i], x, f"i{i}_{w}"))
            demands[w].append(int(a.cores[i]))
        m.add_exactly_one(lits)
        m.add(mk >= e[i])
    cores = cost_model.cluster.cores
    for w in range(W):
        if cores[w] == 1 or all(d >= cores[w] for d in demands[w]):
            m.add_no_overlap(intervals[w])
        else:
            m.add_cumulative(intervals[w], demands[w], int(cores[w]))
        load = [on[i, w] * int(D[i, w] * a.cores[i]) for i in range(n) if (i, w) in on]
        if load:
            m.add(sum(load) <= mk * int(cores[w]))
    _precedence(m, cost_model, a, s, e, on, scale)
    _heads_and_tails(m, a, D, s, e, mk)
    _break_symmetry(m, cost_model, D, on, n, W)
    m.minimize(mk)
    for i in range(n):
        m.add_hint(s[i], min(H, int(math.floor(hs[i] * scale))))
        for w in range(W):
            if (i, w) in on:
                m.add_hint(on[i, w], int(hw[i] == w))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = threads
    solver.parameters.random_seed = int(seed) % (2**31)
    solver.parameters.max_deterministic_time = float(budget)
    for key, value in _SOLVER_PARAMETERS.items():
        setattr(solver.parameters, key, value)
    solver.parameters.max_time_in_seconds = float(seconds) if seconds is not None else STALL_SECONDS * float(budget)
    # CP-SAT's own Ctrl-C handler would replace Python's and, once restored, leave SIGINT at its
    # default (the process killed by the next Ctrl-C, no cleanup); Python's handler stays, and the
    # solve ends within its time limit
    solver.parameters.catch_sigint_signal = False
    status = solver.solve(m)
    # neither proved nor out of deterministic time: the wall clock ended the search
    stopped = "wall clock" if status != cp_model.OPTIMAL and solver.deterministic_time < float(budget) else None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, None, None, stopped
    worker = np.array(
        [next(w for w in range(W) if (i, w) in on and solver.value(on[i, w])) for i in range(n)], dtype=np.int64
    )
    begins = np.array([solver.value(s[i]) for i in range(n)], dtype=np.float64)
    # the solver's order, timed exactly: earlier start first (ties: the topological order)
    order = np.empty(n)
    order[a.topo] = np.arange(n)
    prio = -(begins * (n + 1) + order)
    result = list_schedule(cost_model, prio, fixed=worker, insertion=True)
    return (
        result,
        ("optimal" if status == cp_model.OPTIMAL else "feasible"),
        solver.best_objective_bound / scale,
        stopped,
    )


def _precedence(m, cost_model, a, s, e, on, scale) -> None:
    """Start after every input's producer, plus the transfer time when their workers differ."""
    W = cost_model.num_workers
    lat, inv = cost_model.latency_matrix, cost_model.inv_bandwidth
    off = ~np.eye(W, dtype=bool)
    for v in range(a.n):
        for k in range(a.pred_ptr[v], a.pred_ptr[v + 1]):
            u = int(a.pred_idx[k])
            m.add(s[v] >= e[u])
            if W < 2:
                continue
            with np.errstate(invalid="ignore"):
                moving = lat + float(a.size[a.pred_eid[k]]) * inv
            T = np.floor(np.nan_to_num(moving, nan=0.0) * scale)
            T = np.minimum(T, _UNITS + 1).astype(np.int64)
            if T[off].max() <= 0:
                continue
            if T[off].min() == T[off].max():  # one time between any two workers: "same worker" literal
                together = []
                for w in range(W):
                    if (u, w) in on and (v, w) in on:
                        both = m.new_bool_var("")
                        m.add_bool_and([on[u, w], on[v, w]]).only_enforce_if(both)
                        m.add_bool_or([~on[u, w], ~on[v, w]]).only_enforce_if(~both)
                        together.append(both)
                far = m.new_bool_var("")
                m.add(sum(together) + far == 1)
                m.add(s[v] >= e[u] + int(T[off].min())).only_enforce_if(far)
                continue
            for wa in range(W):
                for wb in range(W):
                    if wa != wb and T[wa, wb] > 0 and (u, wa) in on and (v, wb) in on:
                        m.add(s[v] >= e[u] + int(T[wa, wb])).only_enforce_if([on[u, wa], on[v, wb]])


def _heads_and_tails(m, a, D, s, e, mk) -> None:
    """No task starts before its longest fastest-duration path from a source, nor finishes later
    than the makespan less its path to a sink (the ranks' own longest paths, without transfers)."""
    fastest = np.where(D >= 0, D, np.iinfo(np.int64).max).min(axis=1).astype(np.float64)
    free = np.zeros(len(a.succ_idx))
    head = downward_rank_kernel(fastest, a.pred_ptr, a.pred_idx, free, a.topo)
    tail = upward_rank_kernel(fastest, a.succ_ptr, a.succ_idx, free, a.topo) - fastest
    for i in range(a.n):
        m.add(s[i] >= int(round(head[i])))
        m.add(e[i] + int(round(tail[i])) <= mk)


def _break_symmetry(m, cost_model, D, on, n, W) -> None:
    """Of two identical workers (speed, cores, every task's time, every link), the lower-numbered
    one takes the lowest-numbered task the two run: each schedule keeps one of its relabellings."""
    c = cost_model.cluster
    lat, inv = cost_model.latency_matrix, cost_model.inv_bandwidth
    twin = [None] * W
    for w in range(W):
        for w2 in range(w + 1, W):
            if twin[w2] is not None or c.speed[w] != c.speed[w2] or c.cores[w] != c.cores[w2]:
                continue
            if not np.array_equal(D[:, w], D[:, w2]):
                continue
            rest = [x for x in range(W) if x not in (w, w2)]
            if not (
                np.array_equal(lat[w, rest], lat[w2, rest])
                and np.array_equal(lat[rest, w], lat[rest, w2])
                and np.array_equal(inv[w, rest], inv[w2, rest])
                and np.array_equal(inv[rest, w], inv[rest, w2])
                and lat[w, w2] == lat[w2, w]
                and inv[w, w2] == inv[w2, w]
            ):
                continue
            twin[w2] = w
            for i in range(n):
                if (i, w2) not in on:
                    continue
                earlier = [on[j, w] for j in range(i) if (j, w) in on]
                if earlier:
                    m.add_bool_or(earlier).only_enforce_if(on[i, w2])
                else:
                    m.add(on[i, w2] == 0)
            break
