"""The validator trusts no schedule: every kind of tampering with a valid plan is reported."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from taskflow import Cluster, Schedule, TaskGraph, Worker
from taskflow.simulator import plan as make_plan

from tests.strategies import problems

MUTATIONS = ("longer", "shorter", "negative", "early", "overlap", "all-at-zero", "unknown-worker", "missing", "twice")


def _mutated(plan: Schedule, graph: TaskGraph, cluster: Cluster, how: str, data) -> Schedule | None:
    """A copy of ``plan`` broken in one way (None when this plan offers no place for it)."""
    tasks, workers = list(plan.tasks), list(plan.workers)
    start, finish = plan.start.copy(), plan.finish.copy()
    dur = finish - start
    n = len(tasks)
    pick = data.draw(st.integers(0, n - 1), label="task")
    if how == "longer":
        finish[pick] += 1e-3 + 0.5 * dur[pick]
    elif how == "shorter":
        if dur[pick] <= 1e-3:
            return None
        finish[pick] = start[pick] + dur[pick] * 0.5
    elif how == "negative":
        finish[pick] = start[pick] - 1.0
    elif how == "early":
        # start a task just before an input can be there
        a = graph.arrays
        row = {t: k for k, t in enumerate(tasks)}
        cands = []
        for e in range(a.m):
            ks, kd = row[a.ids[int(a.src[e])]], row[a.ids[int(a.dst[e])]]
            ready = finish[ks] + cluster.transfer_time(float(a.size[e]), workers[ks], workers[kd])
            shift = 1e-6 * (1.0 + ready)
            if ready - shift >= 0 and ready > 0:
                cands.append((kd, ready - shift))
        if not cands:
            return None
        kd, at = cands[data.draw(st.integers(0, len(cands) - 1), label="edge")]
        finish[kd] = at + dur[kd]
        start[kd] = at
    elif how == "overlap":
        by = {}
        for k, w in enumerate(workers):
            if dur[k] > 1e-6 and cluster.worker(w).cores == 1:
                by.setdefault(w, []).append(k)
        pairs = [ks for ks in by.values() if len(ks) >= 2]
        if not pairs:
            return None
        ks = pairs[data.draw(st.integers(0, len(pairs) - 1), label="worker")]
        a, b = ks[0], ks[1]
        start[b], finish[b] = start[a], start[a] + dur[b]
    elif how == "all-at-zero":
        if not (dur > 1e-6).any():
            return None
        start[:] = 0.0
        finish[:] = 0.0
    elif how == "unknown-worker":
        workers[pick] = "no-such-worker"
    elif how == "missing":
        del tasks[pick], workers[pick]
        start, finish = np.delete(start, pick), np.delete(finish, pick)
    elif how == "twice":
        tasks.append(tasks[pick])
        workers.append(workers[pick])
        start, finish = np.append(start, start[pick]), np.append(finish, finish[pick])
    return Schedule(tasks, workers, start, finish)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problem=problems(max_tasks=30),
    name=st.sampled_from(["heft", "cpop", "blevel", "etf", "random"]),
    how=st.sampled_from(MUTATIONS),
    data=st.data(),
)
def test_every_mutation_of_a_valid_plan_is_reported(problem, name, how, data):
    graph, cluster = problem
    plan = make_plan(graph, cluster, name, seed=0) if name == "random" else make_plan(graph, cluster, name)
    assert plan.problems(graph, cluster) == []
    bad = _mutated(plan, graph, cluster, how, data)
    assume(bad is not None)
    found = bad.problems(graph, cluster)
    assert found, (how, bad.to_dict())


def test_tolerance_is_local_a_long_task_elsewhere_does_not_hide_a_violation():
    """A 100 s precedence violation next to a task of 1e12 s is reported (a tolerance relative to the
    makespan would have allowed 1,000 s)."""
    g = TaskGraph("long")
    g.add_task("a", cost=200.0)
    g.add_task("b", cost=10.0)
    g.add_edge("a", "b")
    g.add_task("huge", cost=1e12)
    c = Cluster([Worker("w0"), Worker("w1"), Worker("w2")], bandwidth=np.inf)
    s = Schedule(["a", "b", "huge"], ["w0", "w1", "w2"], [0.0, 100.0, 0.0], [200.0, 110.0, 1e12])
    found = s.problems(g, c)
    assert found == ["task 'b' starts at 100 before its input from 'a' is ready at 200"], found
    ok = Schedule(["a", "b", "huge"], ["w0", "w1", "w2"], [0.0, 200.0, 0.0], [200.0, 210.0, 1e12])
    assert ok.problems(g, c) == []


@pytest.mark.parametrize(
    "durations, message",
    [
        ({"a": -1.0}, "finite number >= 0"),
        ({"a": "1"}, "finite number >= 0"),
        ({"a": True}, "finite number >= 0"),
        ({"zz": 1.0}, "not in the graph"),
        ([1.0], "must map task ids"),
    ],
)
def test_declared_durations_are_checked(durations, message):
    from taskflow import ScheduleError

    g = TaskGraph("one")
    g.add_task("a", cost=1.0)
    c = Cluster([Worker("w0")])
    s = Schedule(["a"], ["w0"], [0.0], [1.0])
    with pytest.raises(ScheduleError, match=message):
        s.problems(g, c, durations=durations)


def _cli(capsys, *argv):
    from taskflow.app.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_derives_durations_from_the_model_unless_told_it_is_a_trace(capsys, tmp_path):
    """Every task at [0, 0] with declared durations 0 is invalid (the model says otherwise); with
    --trace the declared durations are used but still checked; served_by may only pick a run of
    the producer itself."""
    from tests.conftest import EXAMPLES

    graph, cluster = EXAMPLES / "heft_paper.graph.json", EXAMPLES / "heft_paper.cluster.json"
    plan = tmp_path / "plan.json"
    assert _cli(capsys, "schedule", graph, "--cluster", cluster, "--scheduler", "heft", "-o", plan, "-q")[0] == 0
    doc = json.loads(plan.read_text())
    for a in doc["assignments"]:
        a["start"] = a["finish"] = 0.0
    doc["durations"] = {a["task"]: 0.0 for a in doc["assignments"]}
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(doc))
    code, _, err = _cli(capsys, "validate", graph, "--cluster", cluster, "--schedule", forged)
    assert code == 1 and all(line.startswith("invalid: ") for line in err.strip().splitlines())
    doc["durations"] = {"t1": "zero"}
    forged.write_text(json.dumps(doc))
    code, _, err = _cli(capsys, "validate", graph, "--cluster", cluster, "--schedule", forged, "--trace")
    assert code == 1 and "durations['t1'] must be a finite number" in err
    doc = json.loads(plan.read_text())
    first, second = doc["assignments"][0]["task"], doc["assignments"][1]["task"]
    doc["served_by"] = {second: {first: second}}  # an input said to come from another task's run
    forged.write_text(json.dumps(doc))
    code, _, err = _cli(capsys, "validate", graph, "--cluster", cluster, "--schedule", forged, "--trace")
    assert code == 1 and "which is not a run of" in err
