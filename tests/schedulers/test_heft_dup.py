"""heft-dup and task copies: the validator's rules for a task that runs more than once, the
paper example, and the places that refuse a plan with copies."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedulers
import taskflow
from taskflow import Cluster, CostModel, Schedule, TaskGraph, Worker
from taskflow.errors import FormatError, TaskflowError
from taskflow.formats.native import schedule_from_dict
from taskflow.schedule import Assignment
from workflows.scientific import random_layered

from tests.conftest import EXAMPLES

GRAPH, CLUSTER = EXAMPLES / "heft_paper.graph.json", EXAMPLES / "heft_paper.cluster.json"


def fork():
    """a (1 s) feeds b and c (1 s each); a's output takes 5 s to move between the two workers."""
    g = TaskGraph("fork")
    g.add_task("a", cost=1.0, output_size=5.0)
    g.add_task("b", cost=1.0)
    g.add_task("c", cost=1.0)
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    return g, Cluster.homogeneous(2, bandwidth=1.0)


def test_a_copy_saves_the_transfer_and_the_validator_checks_every_execution():
    g, c = fork()
    heft = schedulers.get_scheduler("heft").schedule(g, c).validate(g, c)
    assert heft.makespan == pytest.approx(3.0)  # all three on one worker: the transfer costs more
    dup = schedulers.get_scheduler("heft-dup").schedule(g, c).validate(g, c)
    assert dup.makespan == pytest.approx(2.0)  # a on both workers, b and c side by side
    assert [(x.task, x.start, x.finish) for x in dup.copies] == [("a", 0.0, 1.0)]
    assert dup.copies[0].worker != dup.assignment("a").worker
    w0, w1 = dup.assignment("a").worker, dup.copies[0].worker
    ok = Schedule(["a", "b", "c"], [w0, w0, w1], [0, 1, 1], [1, 2, 2], copies=[("a", w1, 0, 1)])
    assert ok.problems(g, c) == [] and ok.makespan == 2.0
    # without the copy, c starts before a's output can be on its worker
    bare = Schedule(["a", "b", "c"], [w0, w0, w1], [0, 1, 1], [1, 2, 2])
    assert bare.problems(g, c) == ["task 'c' starts at 1 before its input from 'a' is ready at 6"]
    # a copy is a task like any other: its duration, its inputs, its worker's cores, where it runs
    cases = {
        (("a", w1, 0, 2),): f"copy of task 'a' runs 2 s on worker '{w1}'; its duration there is 1 s",
        (("a", w0, 0, 1),): f"task 'a' runs more than once on worker '{w0}'",
        (("a", w1, 0, 1), ("a", w1, 0, 1)): f"task 'a' runs more than once on worker '{w1}'",
        (("a", "w9", 0, 1),): "a copy of task 'a' is on unknown worker 'w9'",
        (("z", w1, 0, 1),): "a copy of task 'z' is scheduled but the task is not in the graph",
        (("a", w1, -1, 0),): "copy of task 'a': start -1 / finish 0 must be finite and start >= 0",
    }
    for copies, problem in cases.items():
        s = Schedule(["a", "b", "c"], [w0, w0, w1], [0, 1, 1], [1, 2, 2], copies=copies)
        assert problem in s.problems(g, c), copies
    clash = Schedule(["a", "b", "c"], [w0, w0, w1], [0, 1, 1.5], [1, 2, 2.5], copies=[("a", w1, 1, 2)])
    assert any("runs 2 cores at once" in p for p in clash.problems(g, c))


def test_a_copy_waits_for_its_own_inputs():
    g = TaskGraph("chain")
    g.add_task("r", cost=1.0, output_size=2.0)
    g.add_task("a", cost=1.0, output_size=5.0)
    g.add_task("b", cost=1.0)
    g.add_edge("r", "a")
    g.add_edge("a", "b")
    c = Cluster.homogeneous(2, bandwidth=1.0)
    # r on w0; a's copy on w1 needs r's output there: ready at 1 + 2 = 3
    early = Schedule(["r", "a", "b"], ["w0", "w0", "w1"], [0, 1, 2], [1, 2, 3], copies=[("a", "w1", 1, 2)])
    assert "copy of task 'a' on worker 'w1' starts at 1 before its input from 'r' is ready at 3" in early.problems(g, c)
    on_time = Schedule(["r", "a", "b"], ["w0", "w0", "w1"], [0, 1, 4], [1, 2, 5], copies=[("a", "w1", 3, 4)])
    assert on_time.problems(g, c) == []
    # an input may come from a copy of the producer: r copied onto w1 too, then a's copy can start at 1
    both = Schedule(
        ["r", "a", "b"], ["w0", "w0", "w1"], [0, 1, 2], [1, 2, 3], copies=[("r", "w1", 0, 1), ("a", "w1", 1, 2)]
    )
    assert both.problems(g, c) == [] and both.makespan == 3.0


def test_the_heft_paper_example_and_the_file_round_trip(tmp_path):
    g, c = taskflow.load_graph(GRAPH), taskflow.load_cluster(CLUSTER)
    heft = schedulers.get_scheduler("heft").schedule(g, c)
    dup = schedulers.get_scheduler("heft-dup").schedule(g, c).validate(g, c)
    assert heft.makespan == 80 and dup.makespan < heft.makespan and dup.copies
    # every copy earns its place: without any single one, the plan breaks
    for k in range(len(dup.copies)):
        fewer = Schedule(dup.tasks, dup.workers, dup.start, dup.finish, copies=dup.copies[:k] + dup.copies[k + 1 :])
        assert fewer.problems(g, c), k
    doc = json.loads(json.dumps(dup.to_dict()))
    assert doc["makespan"] == dup.makespan and len(doc["copies"]) == len(dup.copies)
    back = schedule_from_dict(doc)
    assert back.copies == dup.copies and back.problems(g, c) == []
    assert "+t" in dup.table(c) and "copies" not in back.extra
    doc["copies"][0].pop("worker")
    with pytest.raises(FormatError, match=r"copies\[0\]: missing field 'worker'"):
        schedule_from_dict(doc)
    # no copies allowed: HEFT's plan itself
    none = schedulers.get_scheduler("heft-dup", max_copies=0).schedule(g, c)
    assert not none.copies and list(none) == list(heft)
    with pytest.raises(ValueError, match="max_copies"):
        schedulers.get_scheduler("heft-dup", max_copies=-1).schedule(g, c)


def test_the_simulator_and_the_runtime_refuse_a_plan_with_copies(tmp_path, capsys):
    g, c = fork()
    with pytest.raises(TaskflowError, match="'heft-dup' runs some tasks more than once.*the simulator"):
        taskflow.simulate(g, c, "heft-dup")
    dup = taskflow.plan(g, c, "heft-dup")
    assert dup.copies
    with pytest.raises(TaskflowError, match="the plan runs 1 task copies"):
        taskflow.simulate(g, c, plan=dup)
    with pytest.raises(TaskflowError, match="'heft-dup' runs some tasks more than once.*the Dask runtime"):
        taskflow.run(g, "heft-dup", workers=1)
    import dask

    with pytest.raises(TaskflowError, match="'heft-dup' runs some tasks more than once.*the Dask runtime"):
        taskflow.compute(dask.delayed(sum)([1, 2]), scheduler="heft-dup")
    with pytest.raises(TaskflowError, match="'heft-dup' runs some tasks more than once.*the Dask runtime"):
        taskflow.use(object(), "heft-dup")  # refused before the client is used
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin

    reply = TaskflowPlugin().handle_use("client-1", "heft-dup")
    assert reply["status"] == "error" and "runs some tasks more than once" in reply["error"]
    assert TaskflowPlugin().handle_use("client-1", "heft") == {"status": "OK"}
    # the CLI: a one-line error and status 2; `taskflow schedule` writes the plan with its copies
    from taskflow.app.cli import main

    assert main(["simulate", str(GRAPH), "--cluster", str(CLUSTER), "--scheduler", "heft-dup"]) == 2
    assert "runs some tasks more than once" in capsys.readouterr().err
    out = tmp_path / "plan.json"
    assert (
        main(["schedule", str(GRAPH), "--cluster", str(CLUSTER), "--scheduler", "heft-dup", "-o", str(out), "-q"]) == 0
    )
    assert json.loads(out.read_text())["copies"]


@st.composite
def comm_heavy(draw):
    """A random layered graph whose transfers are long next to its work, on a mixed cluster."""
    n = draw(st.integers(2, 40))
    seed = draw(st.integers(0, 10_000))
    ccr = draw(st.sampled_from([0.5, 2.0, 10.0]))
    speeds = draw(st.lists(st.sampled_from([1.0, 1.5, 2.0, 4.0]), min_size=1, max_size=5))
    cores = draw(st.sampled_from([1, 2]))
    g = random_layered(
        n,
        shape=draw(st.sampled_from([0.5, 1.0, 2.0])),
        out_degree=3,
        ccr=ccr,
        beta=0.5,
        seed=seed,
        workers=[f"w{k}" for k in range(len(speeds))],
    )
    c = Cluster(
        [Worker(f"w{k}", s, cores) for k, s in enumerate(speeds)],
        bandwidth=1.0,
        latency=draw(st.sampled_from([0.0, 0.5])),
    )
    return g, c


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(comm_heavy(), st.sampled_from([1, 4]))
def test_heft_dup_plans_are_valid_on_comm_heavy_graphs(problem, k):
    g, c = problem
    s = schedulers.get_scheduler("heft-dup", max_copies=k).schedule(g, c)
    assert s.problems(g, c) == []
    assert s.makespan >= taskflow.lower_bound(g, c) * (1 - 1e-9)
    assert all(isinstance(x, Assignment) for x in s.copies) and s.extra["copies_made"] == len(s.copies)


def test_copies_shorten_plans_where_transfers_dominate():
    shorter = longer = 0
    for seed in range(8):
        g = random_layered(
            60, shape=1.0, out_degree=3, ccr=5.0, beta=0.5, seed=seed, workers=[f"w{k}" for k in range(4)]
        )
        c = Cluster.heterogeneous([1, 2, 3, 4], bandwidth=1.0)
        m = CostModel(g, c)
        h = schedulers.get_scheduler("heft").schedule(g, c, cost_model=m).makespan
        d = schedulers.get_scheduler("heft-dup").schedule(g, c, cost_model=m).validate(g, c, cost_model=m)
        shorter += d.makespan < h * 0.99
        longer += d.makespan > h * 1.0001
    assert shorter >= 6 and longer <= 1
