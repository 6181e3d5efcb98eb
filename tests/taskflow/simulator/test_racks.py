"""Racks in the cluster model: what every model sees (a cross-rack pair gets at most the uplink),
what maxmin adds (the flows through one uplink share it), how the format keeps them, and the
contention-aware HEFT that plans with them."""

from __future__ import annotations

import json

import pytest

from taskflow import Cluster, ClusterError, TaskflowError, TaskGraph, Worker, get_scheduler, simulate
from taskflow.costs import CostModel
from workflows.scientific import random_layered

IDS = ["w0", "w1", "w2", "w3"]
RACKS = {"w0": "a", "w1": "a", "w2": "b", "w3": "b"}


def _pinned(w):
    return {x: (0.001 if x == w else 1000.0) for x in IDS}


def _two_cross_flows_and_one_local() -> TaskGraph:
    g = TaskGraph("cross")
    for s, d in (("w0", "w2"), ("w1", "w3")):
        g.add_task(f"a{s}", cost=0.001, costs=_pinned(s), output_size=10e6)
        g.add_task(f"b{d}", cost=0.001, costs=_pinned(d))
        g.add_edge(f"a{s}", f"b{d}")
    g.add_task("c", cost=0.001, costs=_pinned("w0"), output_size=10e6)
    g.add_task("d", cost=0.001, costs=_pinned("w1"))
    g.add_edge("c", "d")
    return g


def test_flows_leaving_a_rack_share_its_uplink_in_maxmin_only():
    g = _two_cross_flows_and_one_local()
    racked = Cluster([Worker(w) for w in IDS], bandwidth=25e6, racks=RACKS, uplink=2.5e6)
    flat = Cluster([Worker(w) for w in IDS], bandwidth=25e6)
    took = {}
    for name, c in (("racked", racked), ("flat", flat)):
        for net in ("simple", "maxmin"):
            tr = simulate(g, c, "heft", network=net)
            tr.validate(g, c)
            took[name, net] = {t.task: t.finish - t.start for t in tr.transfers}
    # alone a cross pair gets the uplink: 10 MB / 2.5 MB/s = 4 s, in every model
    assert took["racked", "simple"] == pytest.approx({"aw0": 4.0, "aw1": 4.0, "c": 0.4})
    # the two flows leaving rack a share its uplink: 1.25 MB/s each, 8 s; the local flow out of w0
    # gets what w0's upload has left (25 - 1.25 MB/s)
    assert took["racked", "maxmin"] == pytest.approx({"aw0": 8.0, "aw1": 8.0, "c": 10e6 / 23.75e6})
    assert took["flat", "maxmin"]["aw1"] == pytest.approx(0.4)


def test_the_rack_model_is_checked_kept_and_carried():
    c = Cluster(
        [Worker(w) for w in IDS], bandwidth=25e6, bandwidths={"w0": {"w2": 50e6, "w1": 1e6}}, racks=RACKS, uplink=2.5e6
    )
    assert c.bandwidth_between("w0", "w2") == 2.5e6  # the uplink caps a faster pair
    assert c.bandwidth_between("w0", "w1") == 1e6 and c.bandwidth_between("w2", "w3") == 25e6
    from taskflow.formats.native import cluster_from_dict, cluster_to_dict

    back = cluster_from_dict(cluster_to_dict(c))
    assert back == c and back.racks == RACKS and back.uplink == 2.5e6
    assert (
        c.rack_count == 2 and list(c.rack_index) == [0, 0, 1, 1] and c.replace(racks=None, uplink=None).rack_count == 0
    )
    sub = c.subset(["w0", "w2"])
    assert sub.racks == {"w0": "a", "w2": "b"} and sub.bandwidth_between("w2", "w0") == 2.5e6
    assert c.replace(racks=None, uplink=None).bandwidth_between("w0", "w2") == 50e6
    for kwargs, msg in (
        ({"racks": RACKS}, "go together"),
        ({"uplink": 1.0}, "go together"),
        ({"racks": {**RACKS, "w9": "a"}, "uplink": 1.0}, "unknown worker 'w9'"),
        ({"racks": {"w0": "a"}, "uplink": 1.0}, "worker 'w1' has no rack"),
        ({"racks": {**RACKS, "w0": 1.5}, "uplink": 1.0}, "rack label must be a str or int"),
        ({"racks": RACKS, "uplink": -1.0}, "uplink"),
    ):
        with pytest.raises(ClusterError, match=msg):
            Cluster([Worker(w) for w in IDS], **kwargs)


def test_the_cluster_crosses_to_the_plugin_as_a_cluster_file_racks_included(tmp_path):
    from taskflow.formats import save_cluster
    from taskflow.runtime.messages import cluster_from_message, cluster_message

    c = Cluster(
        [Worker(w, speed=1.0 + k) for k, w in enumerate(IDS)],
        bandwidth=25e6,
        racks=RACKS,
        uplink=2.5e6,
        bandwidths={"w0": {"w1": 1e6}},
    )
    text = cluster_message(c)
    back = cluster_from_message(text)
    assert back == c and back.racks == RACKS and back.uplink == 2.5e6 and back.bandwidths == c.bandwidths
    save_cluster(c, tmp_path / "c.json")
    assert json.loads(text) == json.loads((tmp_path / "c.json").read_text())  # the file's document
    with pytest.raises(TaskflowError, match="the run's cluster"):
        cluster_from_message('{"format": "taskflow-cluster/1", "workers": "w0"}')


def test_a_declared_cluster_over_the_live_workers():
    """What the plugin plans on and the client predicts with: declared speeds, live cores and
    addresses, a joined worker on a rack of its own, pairs of departed workers dropped."""
    a, b, c_, d = IDS[:4]
    declared = Cluster(
        [Worker(w, speed=2.0) for w in IDS],
        bandwidth=25e6,
        racks=RACKS,
        uplink=2.5e6,
        bandwidths={a: {b: 1e6}, b: {d: 3e6}},
        latency=0.01,
    )
    live = [
        Worker(a, 1.0, 4, address="tcp://a"),
        Worker(c_, 1.0, 2, address="tcp://c"),
        Worker("new", 3.0, 8, address="tcp://n"),
    ]
    got = declared.on_workers(live)
    assert got.ids == [a, c_, "new"]
    assert [w.speed for w in got.workers] == [2.0, 2.0, 3.0]  # declared, declared, as joined
    assert [w.cores for w in got.workers] == [4, 2, 8] and got.worker("new").address == "tcp://n"
    assert got.racks == {a: RACKS[a], c_: RACKS[c_], "new": "joined:new"} and got.uplink == 2.5e6
    assert got.bandwidths == {}  # both declared pairs lost a worker
    assert got.latency == 0.01 and got.bandwidth == 25e6
    flat = Cluster([Worker(w) for w in IDS]).on_workers(live)
    assert flat.racks is None and flat.uplink is None


def test_heft_contention_is_heft_when_transfers_are_free():
    g = random_layered(60, ccr=1.0, seed=5)
    for c in (
        Cluster.heterogeneous([1, 2, 4], bandwidth=float("inf")),
        Cluster.heterogeneous([1, 1, 2, 3], bandwidth=float("inf"), latency=0.5),
    ):
        a = get_scheduler("heft").schedule(g, c)
        b = get_scheduler("heft-contention").schedule(g, c)
        b.validate(g, c)
        assert [(x.task, x.worker, x.start) for x in a] == [(x.task, x.worker, x.start) for x in b]


def test_heft_contention_stops_spreading_work_over_a_shared_uplink():
    """HEFT sees each cross-rack pair at the uplink's rate as if alone; with four workers in two
    racks and a communication-heavy graph it sends so much through the uplink that the max-min
    network makes it far longer than planned. Queuing transfers on the ports avoids that."""
    g = random_layered(40, shape=1.0, out_degree=2, ccr=2.0, seed=3, bandwidth=25e6, mean_cost=1.0)
    c = Cluster([Worker(w) for w in IDS], bandwidth=25e6, racks=RACKS, uplink=2.5e6)
    heft = simulate(g, c, "heft", network="maxmin")
    ours = simulate(g, c, "heft-contention", network="maxmin")
    ours.validate(g, c)
    assert ours.makespan < 0.7 * heft.makespan
    # and its plan is an honest estimate of what the shared network does (HEFT's is not)
    plan = get_scheduler("heft-contention").schedule(g, c, cost_model=CostModel(g, c))
    assert abs(ours.makespan - plan.makespan) < 0.25 * ours.makespan
    assert get_scheduler("heft").schedule(g, c).makespan < 0.5 * heft.makespan
