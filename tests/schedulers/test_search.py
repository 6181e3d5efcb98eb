"""heft-search: never longer than HEFT, reproducible for a seed, within its budget, and a real
improvement where rank functions matter."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import schedulers
from schedulers.heft_search import DEFAULT_BUDGET, parse_budget
from taskflow import Cluster, CostModel
from workflows.scientific import random_layered

from tests.strategies import problems


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(problems())
def test_heft_search_is_valid_and_never_longer_than_heft(problem):
    g, c = problem
    heft = schedulers.get_scheduler("heft").schedule(g, c)
    for budget in (1, 5, DEFAULT_BUDGET):
        s = schedulers.get_scheduler("heft-search", seed=3, budget=budget).schedule(g, c)
        s.validate(g, c)
        assert s.makespan <= heft.makespan
        assert s.extra["evaluations"] <= budget
    one = schedulers.get_scheduler("heft-search", seed=3, budget=1).schedule(g, c)
    assert [(a.task, a.worker, a.start) for a in one] == [(a.task, a.worker, a.start) for a in heft]


def test_the_search_is_reproducible_for_a_seed_and_finds_shorter_plans():
    shorter = 0
    for seed in range(6):
        g = random_layered(
            120, shape=1.0, out_degree=3, ccr=1.0, beta=1.0, seed=seed, workers=[f"w{k}" for k in range(4)]
        )
        c = Cluster.homogeneous(4, bandwidth=1.0)
        m = CostModel(g, c)
        heft = schedulers.get_scheduler("heft").schedule(g, c, cost_model=m).makespan
        a = schedulers.get_scheduler("heft-search", seed=seed, budget=40).schedule(g, c, cost_model=m)
        b = schedulers.get_scheduler("heft-search", seed=seed, budget=40).schedule(g, c, cost_model=m)
        assert [(x.task, x.worker, x.start) for x in a] == [(x.task, x.worker, x.start) for x in b]
        assert a.makespan <= heft
        shorter += a.makespan < heft * 0.999
    assert shorter >= 4  # on graphs with unrelated costs the search almost always finds something


def test_a_budget_is_evaluations_or_seconds():
    assert parse_budget("64") == {"budget": 64}
    assert parse_budget("2s")["seconds"] == 2.0
    for bad in ("0", "-3", "fast", "0s", "1.5"):
        with pytest.raises(ValueError, match="budget"):
            parse_budget(bad)


def test_lookahead_sees_what_a_placement_does_to_the_children():
    """a finishes earliest on w0 (1.0 against 1.1), so HEFT puts it there; but its child b runs
    well only on w1 and a's output takes 10 s to move: HEFT's b ends at 1 + 10 + 1 = 12. Looking
    at b, a goes to w1 and b ends at 1.1 + 1 = 2.1."""
    from taskflow import TaskGraph, Worker

    g = TaskGraph("lookahead")
    g.add_task("a", costs={"w0": 1.0, "w1": 1.1}, output_size=10.0)
    g.add_task("b", costs={"w0": 100.0, "w1": 1.0})
    g.add_edge("a", "b")
    c = Cluster([Worker("w0"), Worker("w1")], bandwidth=1.0)
    heft = schedulers.get_scheduler("heft").schedule(g, c)
    look = schedulers.get_scheduler("lookahead").schedule(g, c)
    look.validate(g, c)
    assert heft.worker_of() == {"a": "w0", "b": "w1"} and heft.makespan == pytest.approx(12.0)
    assert look.worker_of() == {"a": "w1", "b": "w1"} and look.makespan == pytest.approx(2.1)


def test_lookahead_is_heft_on_a_chain_of_tasks_without_choices():
    """With one worker every rule gives the same plan."""
    g = random_layered(50, ccr=1.0, seed=2)
    c = Cluster.homogeneous(1)
    a = schedulers.get_scheduler("heft").schedule(g, c)
    b = schedulers.get_scheduler("lookahead").schedule(g, c)
    assert [(x.task, x.start) for x in a] == [(x.task, x.start) for x in b]
