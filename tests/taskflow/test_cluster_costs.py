import math

import numpy as np
import pytest

from taskflow import Cluster, ClusterError, CostModel, GraphError, TaskGraph, Worker


def test_transfer_model_latency_bandwidth_and_pairs():
    c = Cluster(
        [Worker("a"), Worker("b"), Worker("c", speed=2.0)], bandwidth=100.0, bandwidths={"a": {"b": 50.0}}, latency=0.5
    )
    assert c.transfer_time(200, "a", "a") == 0.0
    assert c.transfer_time(200, "a", "b") == pytest.approx(0.5 + 4.0)  # per-pair override
    assert c.transfer_time(200, "b", "a") == pytest.approx(0.5 + 2.0)  # other direction: scalar
    assert c.transfer_time(0, "a", "c") == pytest.approx(0.5)  # latency even for empty data
    assert c.bandwidth_between("a", "a") == math.inf
    # mean seconds/byte over the 6 ordered pairs: five at 1/100 and one at 1/50
    assert c.mean_inv_bandwidth() == pytest.approx((5 / 100 + 1 / 50) / 6)
    assert c.total_speed == 4.0 and c.total_cores == 3


def test_infinite_bandwidth_means_free_transfers():
    c = Cluster.homogeneous(2, bandwidth=math.inf)
    assert c.transfer_time(1e12, "w0", "w1") == 0.0


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        (dict(workers=[]), "no workers"),
        (dict(workers=[Worker("a"), Worker("a")]), "duplicate worker id 'a'"),
        (dict(workers=[Worker("a")], bandwidth=0), "bandwidth must be > 0"),
        (dict(workers=[Worker("a")], bandwidth=math.nan), "bandwidth must be > 0"),
        (dict(workers=[Worker("a")], latency=-1), "latency must be finite and >= 0"),
        (dict(workers=[Worker("a")], bandwidths={"a": {"zz": 5}}), "unknown worker 'zz'"),
        (dict(workers=[Worker("a")], task_overhead=-0.1), "task_overhead must be finite and >= 0"),
        (dict(workers=[Worker("a")], task_overhead="x"), "task_overhead must be a number"),
        (dict(workers=[Worker("a")], backplane=0), "backplane must be > 0"),
        (dict(workers=[Worker("a")], backplane="fast"), "backplane must be a number"),
    ],
)
def test_cluster_errors(kwargs, msg):
    with pytest.raises(ClusterError, match=msg):
        Cluster(**kwargs)


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(speed=0), "speed must be finite and > 0"),
        (dict(speed=math.inf), "speed must be finite and > 0"),
        (dict(cores=0), "cores must be an integer from 1"),
    ],
)
def test_worker_errors(kw, msg):
    with pytest.raises(ClusterError, match=f"worker 'x': {msg}"):
        Worker("x", **kw)


def test_homogeneous_zero_workers():
    with pytest.raises(ClusterError, match="no workers"):
        Cluster.homogeneous(0)


def test_duration_exact_costs_override_cost_over_speed():
    g = TaskGraph()
    g.add_task("t", cost=10.0, costs={"fast": 7.0})
    g.add_task("u", cost=10.0)
    c = Cluster([Worker("slow", speed=1.0), Worker("fast", speed=4.0)])
    m = CostModel(g, c)
    assert m.duration("t", "slow") == 10.0
    assert m.duration("t", "fast") == 7.0  # exact, not 10 / 4
    assert m.duration("u", "fast") == 2.5
    assert np.allclose(m.mean_duration(), [8.5, 6.25])
    assert np.allclose(m.min_duration(), [7.0, 2.5])


def test_task_overhead_adds_to_every_duration_and_carries_over():
    g = TaskGraph()
    g.add_task("t", cost=10.0, costs={"fast": 7.0})
    g.add_task("u", cost=10.0)
    c = Cluster([Worker("slow", speed=1.0), Worker("fast", speed=4.0)], task_overhead=0.5)
    m = CostModel(g, c)
    assert [m.duration("t", "slow"), m.duration("t", "fast"), m.duration("u", "fast")] == [10.5, 7.5, 3.0]
    assert c.subset(["fast"]).task_overhead == 0.5 and c.with_task_overhead(0.0) != c
    assert CostModel(g, c.with_task_overhead(0.0)).duration("u", "fast") == 2.5


def test_costs_naming_an_unknown_worker():
    g = TaskGraph()
    g.add_task("t1", costs={"p9": 3.0})
    with pytest.raises(GraphError, match="task 't1': costs name worker 'p9' that the cluster lacks"):
        CostModel(g, Cluster.homogeneous(2))


def test_multicore_tasks_cannot_run_on_small_workers():
    g = TaskGraph()
    g.add_task("big", cost=4.0, cores=4)
    c = Cluster([Worker("s", cores=2), Worker("l", cores=4)])
    m = CostModel(g, c)
    assert m.duration("big", "s") == math.inf and m.duration("big", "l") == 4.0
    with pytest.raises(GraphError, match="task 'big' needs 4 cores; the largest worker has 2"):
        CostModel(g, Cluster.homogeneous(3, cores=2))


def test_edge_transfer_uses_edge_size(diamond):
    c = Cluster.homogeneous(2, bandwidth=10.0, latency=1.0)
    m = CostModel(diamond, c)
    assert m.transfer(("a", "c"), "w0", "w1") == pytest.approx(1.0 + 200 / 10)
    assert m.transfer(("a", "c"), "w1", "w1") == 0.0
    assert np.allclose(m.transfer_row(100.0, 0), [0.0, 11.0])
