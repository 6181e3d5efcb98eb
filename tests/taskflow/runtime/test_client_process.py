"""What a run costs the client's process: results fetched straight from workers on this machine,
and the garbage collector kept off the objects that existed before the run."""

import gc
import threading

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

from taskflow import TaskFailed, compute, run
from taskflow.runtime.client import dask_collections, runner, waiting
from taskflow.runtime.client.waiting import frozen_heap, gather, workers_reachable

from tests import runtime_graphs as rg
from tests.conftest import NO_HTTP


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
    ) as lc:
        yield lc


@pytest.fixture
def client(cluster):
    with Client(cluster) as c:
        yield c


@pytest.fixture
def scheduler_gathers(cluster):
    """How often the (in-process) scheduler was asked to fetch results for a client."""
    handlers = cluster.scheduler.handlers
    original = handlers["gather"]
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs.get("keys"))
        return original(*args, **kwargs)

    handlers["gather"] = counting
    yield calls
    handlers["gather"] = original


def test_results_come_straight_from_workers_on_this_machine(client, scheduler_gathers):
    g = rg.layered(width=6, depth=2)
    rep = run(g, "heft", client=client, quiet=True)
    assert rep.results["total"] == rg.expected_total(6, 2)
    x = da.arange(64, chunks=8)
    assert compute((x * 2).sum(), client=client) == (int(np.arange(64).sum() * 2),)
    assert scheduler_gathers == []
    # the same client fetching through the scheduler (Dask's default) is what the counter sees
    f = client.submit(sum, [1, 2, 3])
    assert gather(client, [f], direct=False) == [6]
    assert len(scheduler_gathers) == 1


def test_only_loopback_workers_or_a_client_that_says_so_are_reached_directly(cluster, client):
    assert workers_reachable(client)  # a LocalCluster listens on 127.0.0.1
    assert workers_reachable(client, ["tcp://127.0.0.1:4000", "tcp://[::1]:4001", "tcp://localhost:4002"])
    assert not workers_reachable(client, ["tcp://127.0.0.1:4000", "tcp://10.0.0.2:4001"])
    assert not workers_reachable(client, ["tcp://node17.cluster:4000"])
    assert not workers_reachable(client, [])
    with Client(cluster, direct_to_workers=True) as direct:
        assert workers_reachable(direct, ["tcp://10.0.0.2:4001"])


def _freeze_counts(monkeypatch, module=None):
    """Record ``gc.get_freeze_count()`` and the thresholds whenever a run (or a compute) waits for
    its tasks."""
    seen = []
    module = module or runner
    original = module.wait_for

    def recording(*args, **kwargs):
        seen.append((gc.get_freeze_count(), gc.get_threshold()))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, "wait_for", recording)
    return seen


def test_a_run_freezes_the_heap_while_it_runs_and_thaws_it_after(client, monkeypatch):
    assert gc.get_freeze_count() == 0
    thresholds = gc.get_threshold()
    seen = _freeze_counts(monkeypatch)
    rep = run(rg.layered(width=4, depth=2), "heft", client=client, quiet=True)
    assert rep.results["total"] == rg.expected_total(4, 2)
    frozen, during = seen[0]
    assert frozen > 1000  # every object that existed before the run
    assert during[:2] == thresholds[:2] and during[2] >= waiting.RUN_FULL_COLLECTIONS  # no full collection
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds
    # a run that fails thaws it too
    with pytest.raises(TaskFailed, match="explodes"):
        run(rg.failing(), "heft", client=client, quiet=True)
    assert len(seen) == 2 and seen[1][0] > 1000
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds


def test_compute_holds_the_collector_the_same_way(client, monkeypatch):
    thresholds = gc.get_threshold()
    seen = _freeze_counts(monkeypatch, dask_collections)
    x = da.ones((40, 40), chunks=10)
    assert compute(x.sum(), client=client) == (1600.0,)
    frozen, during = seen[0]
    assert frozen > 1000 and during[2] >= waiting.RUN_FULL_COLLECTIONS
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == thresholds


def test_a_heap_the_caller_froze_or_a_collector_turned_off_is_left_alone():
    gc.freeze()
    try:
        before = gc.get_freeze_count()  # (a frozen object that dies leaves the count)
        with frozen_heap():
            assert gc.get_freeze_count() > 0.9 * before
        assert gc.get_freeze_count() > 0.9 * before  # still the caller's
    finally:
        gc.unfreeze()
    gc.disable()
    try:
        with frozen_heap():
            assert gc.get_freeze_count() == 0 and gc.get_threshold()[2] < waiting.RUN_FULL_COLLECTIONS
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(KeyError):
        with frozen_heap():
            assert gc.get_freeze_count() > 0
            raise KeyError("the caller's error goes through")
    assert gc.get_freeze_count() == 0


def test_overlapping_runs_share_one_freeze_and_do_not_count_the_frozen_heap_each(monkeypatch):
    """Jobs of a shared cluster run from threads: the first run in freezes, the last out thaws, and
    none of the later ones walks the frozen heap (``gc.get_freeze_count`` is O(frozen objects): asked
    by every epoch of every job, it held the interpreter longer as the heap grew)."""
    thresholds = gc.get_threshold()
    counted = []
    real = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: counted.append(1) or real())
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with frozen_heap():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with frozen_heap():
            b_in.set()
            a_out.wait(10)  # A has left: the heap stays frozen while B runs
            seen["b alone"] = (real(), gc.get_threshold()[2])

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen["b alone"][0] > 1000 and seen["b alone"][1] >= waiting.RUN_FULL_COLLECTIONS
    assert len(counted) == 1  # asked once, by the first run in, before anything was frozen
    assert real() == 0 and gc.get_threshold() == thresholds


def test_the_plugins_are_installed_once_per_client_and_scheduler(client, monkeypatch):
    """A run asks for the plugins each time (a job of a shared cluster: each epoch); through the same
    client of the same scheduler nothing is sent again."""
    from taskflow.runtime.client.session import ensure_plugin

    ensure_plugin(client)
    sent = []
    monkeypatch.setattr(client, "register_plugin", lambda *a, **k: sent.append(a))
    for _ in range(2):
        rep = run(rg.layered(width=2, depth=2), "heft", client=client, quiet=True)
        assert rep.results["total"] == rg.expected_total(2, 2)
    assert sent == []
    assert client.run_on_scheduler(lambda dask_scheduler: "taskflow" in dask_scheduler.plugins)


class _CountingLog(list):
    """A transfer log that counts the entries read back."""

    read = 0

    def __reversed__(self):
        for e in list.__reversed__(self):
            type(self).read += 1
            yield e

    def __iter__(self):
        for e in list.__iter__(self):
            type(self).read += 1
            yield e


def test_a_run_reads_back_only_its_own_part_of_a_long_lived_workers_logs():
    """A worker's transfer log and clock corrections grow to 200,000 entries over a long life (a
    shared cluster's jobs run one graph per epoch); a run's report reads from the newest back to
    its start, not the whole history each time (what slowed each later run of a trace)."""
    from types import SimpleNamespace

    from taskflow.runtime.worker.worker_plugin import TransferLog, worker_records

    plugin = TransferLog()
    log = _CountingLog()
    for k in range(20_000):  # old runs: a transfer a millisecond, 1,000 s ago
        t = 1000.0 + k * 1e-3
        log.append({"keys": {f"old{k}": 1}, "start": t, "stop": t + 5e-4, "total": 8, "who": "w1"})
        plugin.delays[("fetch", f"old{k}")] = (0.0, t)
        plugin.delays[("compute", f"oldc{k}")] = (0.0, t)
    for k in range(30):  # this run's, from 2,000 s on
        t = 2000.0 + k * 1e-2
        log.append({"keys": {f"new{k}": 1}, "start": t, "stop": t + 5e-3, "total": 8, "who": "w1"})
        plugin.delays[("fetch", f"new{k}")] = (0.25, t)
        plugin.delays[("compute", f"newc{k}")] = (0.25, t)
    worker = SimpleNamespace(plugins={TransferLog.name: plugin}, scheduler_delay=0.25, transfer_incoming_log=log)
    got = worker_records(1999.0, dask_worker=worker)
    assert [e["keys"] for e in got["transfers"]] == [{f"new{k}": 1} for k in range(30)]
    assert got["transfers"][0]["start"] == pytest.approx(2000.0 - 0.25)
    assert sorted(got["compute"]) == sorted(f"newc{k}" for k in range(30))
    assert _CountingLog.read < 100  # not the 20,000 entries of the runs before
