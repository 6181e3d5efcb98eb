import pytest

import schedulers
from taskflow import Cluster, UnknownSchedulerError


def test_registry_lists_and_builds():
    assert {"random", "round-robin"} <= set(schedulers.available())
    assert schedulers.get_scheduler("random", seed=4).seed == 4
    with pytest.raises(UnknownSchedulerError, match="known schedulers: .*round-robin"):
        schedulers.get_scheduler("heftt")


def test_random_is_reproducible_for_a_seed(heft_graph, heft_cluster):
    a = schedulers.get_scheduler("random", seed=7).schedule(heft_graph, heft_cluster)
    b = schedulers.get_scheduler("random", seed=7).schedule(heft_graph, heft_cluster)
    assert a.workers == b.workers and (a.start == b.start).all()
    others = [schedulers.get_scheduler("random", seed=s).schedule(heft_graph, heft_cluster).workers for s in range(8)]
    assert len({tuple(w) for w in others}) > 1


def test_round_robin_deals_workers_in_turn(diamond):
    c = Cluster.homogeneous(3, bandwidth=100.0)
    s = schedulers.get_scheduler("round-robin").schedule(diamond, c)
    assert s.worker_of() == {"a": "w0", "b": "w1", "c": "w2", "d": "w0"}
    # b waits for a's 100 B (1 s) on w1; c for 200 B (2 s) on w2; d for b's 50 B and c's 10 B
    a = {x.task: (x.start, x.finish) for x in s}
    assert a["b"] == (3.0, 6.0) and a["c"] == (4.0, 5.0) and a["d"] == (6.5, 8.5)
    s.validate(diamond, c)
