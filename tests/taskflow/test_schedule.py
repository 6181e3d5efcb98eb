import pytest

from taskflow import Cluster, Schedule, ScheduleError, TaskGraph, Worker, critical_path, lower_bound
from taskflow.analysis import sequential_time


@pytest.fixture
def cluster2():
    return Cluster.homogeneous(2, bandwidth=100.0, latency=0.0)


def good(diamond):
    # a on w0 [0,2]; b on w0 [2,5]; c on w1 after a's 200 B at 100 B/s: [4,5];
    # d on w0 waits for c's 10 B from w1: 5 + 0.1 -> [5.1, 7.1]
    return Schedule(["a", "b", "c", "d"], ["w0", "w0", "w1", "w0"], [0, 2, 4, 5.1], [2, 5, 5, 7.1], "hand")


def test_hand_made_schedule_is_valid(diamond, cluster2):
    s = good(diamond)
    assert s.problems(diamond, cluster2) == []
    assert s.validate(diamond, cluster2).makespan == pytest.approx(7.1)


def test_missing_duplicate_and_unknown(diamond, cluster2):
    s = Schedule(["a", "b", "b", "zz"], ["w0", "w0", "w0", "w9"], [0, 2, 2, 0], [2, 5, 5, 1])
    found = s.problems(diamond, cluster2)
    assert "task 'b' is scheduled more than once" in found
    assert "task 'zz' is scheduled but not in the graph" in found
    assert "task 'c' is not scheduled" in found and "task 'd' is not scheduled" in found
    assert any("unknown worker 'w9'" in p for p in found)
    with pytest.raises(ScheduleError, match="more problems"):
        s.validate(diamond, cluster2)


def test_wrong_duration_is_caught(diamond, cluster2):
    s = good(diamond)
    s.finish[1] = 4.0  # b takes 3 s, not 2
    assert s.problems(diamond, cluster2) == ["task 'b' runs 2 s on worker 'w0'; its duration there is 3 s"]


def test_precedence_with_transfer_time_is_caught(diamond, cluster2):
    s = Schedule(["a", "b", "c", "d"], ["w0", "w0", "w1", "w0"], [0, 2, 3, 5.1], [2, 5, 4, 7.1])
    found = s.problems(diamond, cluster2)
    # c may start only at 2 + 200/100 = 4 on the other worker
    assert found == ["task 'c' starts at 3 before its input from 'a' is ready at 4"]


def test_overlap_on_one_core_is_caught(diamond, cluster2):
    s = Schedule(["a", "b", "c", "d"], ["w0", "w0", "w0", "w0"], [0, 2, 2, 5], [2, 5, 3, 7])
    found = s.problems(diamond, cluster2)
    assert len(found) == 1 and "worker 'w0' runs 2 cores at once at t=2" in found[0]


def test_cores_allow_concurrency_and_multicore_tasks(diamond):
    c = Cluster([Worker("w0", cores=2)])
    s = Schedule(["a", "b", "c", "d"], ["w0"] * 4, [0, 2, 2, 5], [2, 5, 3, 7])
    assert s.problems(diamond, c) == []
    g = TaskGraph()
    g.add_task("x", cost=1, cores=2)
    g.add_task("y", cost=1)
    c3 = Cluster([Worker("w0", cores=2)])
    bad = Schedule(["x", "y"], ["w0", "w0"], [0, 0.5], [1, 1.5])
    assert "runs 3 cores at once" in bad.problems(g, c3)[0]
    ok = Schedule(["x", "y"], ["w0", "w0"], [0, 1], [1, 2])
    assert ok.problems(g, c3) == []


def test_durations_override_for_traces(diamond, cluster2):
    s = good(diamond)
    s.finish[0] = 2.5  # the world made a slower
    s.start[1], s.finish[1] = 2.5, 5.5
    s.start[2], s.finish[2] = 4.5, 5.5
    s.start[3], s.finish[3] = 5.6, 7.6
    assert s.problems(diamond, cluster2)  # not the planned durations
    assert s.problems(diamond, cluster2, durations={"a": 2.5}) == []


def test_metrics_by_hand(diamond, cluster2):
    s = good(diamond)
    m = s.metrics(diamond, cluster2)
    # critical path a-b-d = 7; work 8 over 2 workers = 4; sequential 8
    assert critical_path(diamond) == (7.0, ["a", "b", "d"])
    assert lower_bound(diamond, cluster2) == 7.0
    assert sequential_time(diamond, cluster2) == 8.0
    assert m["makespan"] == pytest.approx(7.1)
    assert m["slr"] == pytest.approx(7.1 / 7)
    assert m["speedup"] == pytest.approx(8 / 7.1)
    assert m["efficiency"] == pytest.approx(8 / 7.1 / 2)


def test_lower_bound_work_term_dominates_on_wide_graphs():
    g = TaskGraph()
    for i in range(10):
        g.add_task(i, cost=3.0)
    c = Cluster([Worker("a", speed=1.0), Worker("b", speed=2.0, cores=2)])
    # work 30 over capacity 1 + 2*2 = 5 -> 6; critical path at the fastest speed 1.5
    assert lower_bound(g, c) == pytest.approx(6.0)


def test_by_worker_and_table(diamond, cluster2):
    s = good(diamond)
    per = s.by_worker()
    assert [x.task for x in per["w0"]] == ["a", "b", "d"]
    assert "c[4-5]" in s.table(cluster2)
