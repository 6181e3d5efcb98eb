"""`optimal`: the exact CP-SAT scheduler, checked against an independent brute force, against every
other scheduler's schedules (its bound may never exceed one), and on the HEFT paper's example."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedulers
from taskflow import Cluster, CostModel, TaskGraph, Worker
from taskflow.errors import TaskflowError

from tests.strategies import clusters, graphs, problems


def optimal(g, c, **options):
    s = schedulers.get_scheduler("optimal", seed=0, **options).schedule(g, c)
    s.validate(g, c)
    return s


def brute_force(g, c) -> float:
    """The shortest makespan over every placement and every order, by enumeration (one-core
    workers): for a placement and a topological order, starting each task as early as its worker
    and its inputs allow is the best timing of that order, and some order gives the optimum."""
    m = CostModel(g, c)
    a = m.arrays
    n, W = a.n, m.num_workers
    preds = [
        [(int(a.pred_idx[k]), float(a.size[a.pred_eid[k]])) for k in range(a.pred_ptr[v], a.pred_ptr[v + 1])]
        for v in range(n)
    ]
    orders = [
        p
        for p in itertools.permutations(range(n))
        if all(p.index(u) < p.index(v) for v in range(n) for u, _ in preds[v])
    ]
    best = float("inf")
    for place in itertools.product(range(W), repeat=n):
        if not all(np.isfinite(m.durations[i, place[i]]) for i in range(n)):
            continue
        for order in orders:
            free = [0.0] * W
            finish = [0.0] * n
            for v in order:
                w = place[v]
                ready = max(
                    [finish[u] + (m.transfer_idx(size, place[u], w) if place[u] != w else 0.0) for u, size in preds[v]],
                    default=0.0,
                )
                finish[v] = max(ready, free[w]) + m.durations[v, w]
                free[w] = finish[v]
            best = min(best, max(finish))
    return best


@st.composite
def tiny_problems(draw):
    c = draw(clusters(max_workers=3, max_cores=1))
    return draw(graphs(c, max_tasks=5)), c


@given(problem=tiny_problems())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_optimal_equals_a_brute_force_over_every_placement_and_order(problem):
    g, c = problem
    s = optimal(g, c)
    truth = brute_force(g, c)
    assert s.extra["status"] == "optimal"
    assert s.makespan == pytest.approx(truth, rel=1e-5, abs=1e-9)
    assert s.extra["lower_bound"] <= truth * (1 + 1e-5) + 1e-9


@given(problem=problems(max_tasks=14))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_optimal_is_valid_never_longer_than_any_scheduler_and_its_bound_holds(problem):
    """The bound is a claim about every schedule: none of the other schedulers may beat it."""
    g, c = problem
    s = optimal(g, c, budget=1.0, seconds=5.0)
    others = {
        n: schedulers.get_scheduler(n, seed=0).schedule(g, c).makespan
        for n in ("heft", "cpop", "blevel", "peft", "heft-search", "lookahead", "etf")
    }
    assert s.makespan <= others["heft"] * (1 + 1e-9) + 1e-12
    assert s.extra["lower_bound"] <= min(others.values()) * (1 + 1e-5) + 1e-9
    assert s.extra["lower_bound"] <= s.makespan + 1e-12
    if s.extra["status"] == "optimal":  # proved: within the rounding of the model's times
        assert s.makespan <= min(others.values()) * (1 + 1e-4) + 1e-9
    if "stopped" not in s.extra:  # ended by its deterministic budget: the same answer again
        again = optimal(g, c, budget=1.0, seconds=5.0)
        assert again.makespan == s.makespan and again.worker_of() == s.worker_of()


def test_a_search_whose_deterministic_clock_stalls_ends_on_the_wall_clock():
    """CP-SAT counted 0.04 deterministic units in 5 s of search on this graph (one worker of four
    cores, two tasks of 3 and 4 cores): a budget alone never ended it."""
    c = Cluster([Worker("w0", 4.0, 4)], bandwidth=1.0, latency=2.0)
    g = TaskGraph("stall")
    for i, (cost, cores) in enumerate(
        [(0, 1), (6, 1), (1, 1), (0, 1), (4, 1), (18, 1), (13, 1), (0, 1), (0, 1), (2, 3), (18, 4), (0, 1)]
    ):
        g.add_task(f"t{i}", cost=float(cost), cores=cores, output_size=1.0)
    for a, b, size in [
        (2, 3, 141),
        (0, 6, 62),
        (1, 6, 186),
        (2, 8, 32),
        (6, 8, 138),
        (8, 9, 72),
        (7, 10, 142),
        (5, 11, 166),
        (6, 11, 164),
        (8, 11, 38),
        (10, 11, 171),
    ]:
        g.add_edge(f"t{a}", f"t{b}", size=float(size))
    from schedulers.optimal import STALL_SECONDS

    budget = 0.02  # stops after STALL_SECONDS x 0.02 = 1.2 s of wall clock
    t0 = time.perf_counter()
    s = optimal(g, c, budget=budget)
    took = time.perf_counter() - t0
    heft = schedulers.get_scheduler("heft").schedule(g, c)
    assert took < STALL_SECONDS * budget + 30  # bounded, whatever the machine
    # a machine fast enough proves it optimal in time; else the wall clock ended it, and says so,
    # or (a loaded machine's clock counting differently) the deterministic budget was spent first
    assert s.extra["status"] == "optimal" or (
        s.extra["status"] == "feasible" and s.extra.get("stopped", "wall clock") == "wall clock"
    )
    assert s.extra["lower_bound"] <= s.makespan <= heft.makespan
    # no time at all: nothing found, not even the hint accepted (as on a loaded machine), HEFT's
    # plan, and still said to be the wall clock's doing
    s = optimal(g, c, budget=1.0, seconds=1e-6)
    assert s.extra["stopped"] == "wall clock" and s.extra["status"] == "feasible"
    assert s.makespan <= heft.makespan


def test_the_heft_paper_example_is_73_on_its_own_processors(heft_graph, heft_cluster):
    s = optimal(heft_graph, heft_cluster)
    assert schedulers.get_scheduler("heft").schedule(heft_graph, heft_cluster).makespan == 80
    assert s.extra["status"] == "optimal" and s.extra["gap"] < 1e-5
    assert s.makespan == pytest.approx(73, rel=1e-5)


def test_a_wrong_certificate_of_the_solver_is_not_trusted(heft_graph):
    """CP-SAT 9.15 with presolve proved 0.937 x HEFT optimal on this instance, where a schedule
    of 0.925 x HEFT exists (heft-search finds it)."""
    g = heft_graph.with_costs(costs={t: None for t in heft_graph.ids})
    c = Cluster.heterogeneous([1, 2, 3, 4], bandwidth=125e6, latency=1e-3)
    found = schedulers.get_scheduler("heft-search", seed=0, budget=2000).schedule(g, c).makespan
    for seed in range(3):
        s = schedulers.get_scheduler("optimal", seed=seed).schedule(g, c)
        s.validate(g, c)
        assert s.extra["status"] == "optimal"
        assert s.makespan <= found * (1 + 1e-5) and s.extra["lower_bound"] <= found * (1 + 1e-5)


def test_identical_workers_are_interchangeable_and_the_answer_is_the_same():
    """Symmetry breaking on identical workers may not cut off the optimum: the same graph on two
    identical workers and on two workers that differ by a hair has the same optimum."""
    g = TaskGraph()
    for i in range(6):
        g.add_task(f"t{i}", cost=float(1 + i % 3), output_size=4.0)
    for u, v in [(0, 2), (1, 2), (0, 3), (2, 4), (3, 4), (1, 5)]:
        g.add_edge(f"t{u}", f"t{v}", size=3.0)
    same = Cluster([Worker("a"), Worker("b"), Worker("c")], bandwidth=1.0)
    near = Cluster([Worker("a"), Worker("b", speed=1.0 + 1e-12), Worker("c", speed=1.0 - 1e-12)], bandwidth=1.0)
    x, y = optimal(g, same), optimal(g, near)
    assert x.extra["status"] == y.extra["status"] == "optimal"
    assert x.makespan == pytest.approx(y.makespan, rel=1e-6) == pytest.approx(brute_force(g, same), rel=1e-6)


def test_a_graph_too_large_gets_heft_s_plan_and_says_so():
    g = TaskGraph()
    for i in range(60):
        g.add_task(f"t{i}", cost=1.0 + i % 5)
        if i:
            g.add_edge(f"t{i // 2}", f"t{i}", size=1.0)
    c = Cluster.heterogeneous([1, 2, 3, 4], bandwidth=1.0)
    s = optimal(g, c, max_pairs=100)
    assert s.extra["status"] == "too large" and s.extra["pairs"] == 240
    assert s.worker_of() == schedulers.get_scheduler("heft").schedule(g, c).worker_of()


@pytest.mark.parametrize(
    "options",
    [
        {"budget": 0},
        {"budget": -1.0},
        {"seconds": 0},
        {"threads": 0},
        {"budget": "lots"},
        {"threads": None},
        {"max_pairs": "x"},
    ],
)
def test_bad_options_are_errors(heft_graph, heft_cluster, options):
    with pytest.raises(TaskflowError, match="optimal: budget"):
        optimal(heft_graph, heft_cluster, **options)


@pytest.mark.parametrize("budget", [None, "5", "2s"])
def test_the_cli_says_what_optimal_proved(capsys, budget):
    from taskflow.app.cli import main

    from tests.conftest import EXAMPLES

    args = [
        "schedule",
        str(EXAMPLES / "heft_paper.graph.json"),
        "--cluster",
        str(EXAMPLES / "heft_paper.cluster.json"),
        "--scheduler",
        "optimal",
    ] + (["--budget", budget] if budget else [])
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "optimal: makespan 73" in out and "optimal: no schedule is shorter than 73 (gap 0.00%)" in out
