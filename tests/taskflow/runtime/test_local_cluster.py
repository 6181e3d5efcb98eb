"""The embedded LocalCluster's workers reuse freed memory for received outputs, and give it back
before Dask's memory thresholds would count it against them."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

from distributed import Client, LocalCluster

from taskflow.runtime.messages import workers_info
from taskflow.runtime.launch.local import MMAP_THRESHOLD, local_cluster, worker_environ
from taskflow.runtime.worker.worker_plugin import REUSE_ENV, trim_if_high
from taskflow.runtime.worker.worker_plugin import TRIM_CALLBACK
from taskflow.runtime.client.session import ensure_plugin
from tests.conftest import NO_HTTP

VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX", REUSE_ENV)


def test_worker_environ_trims_only_above_half_the_limit(monkeypatch):
    from distributed.system import MEMORY_LIMIT

    from taskflow.runtime.launch.local import heap_size

    monkeypatch.delenv(REUSE_ENV, raising=False)
    base = {"OMP_NUM_THREADS": 1, "MALLOC_TRIM_THRESHOLD_": 65536}
    env = worker_environ(2e9, base)
    assert env["OMP_NUM_THREADS"] == 1
    assert env["MALLOC_MMAP_THRESHOLD_"] == MMAP_THRESHOLD
    assert env["MALLOC_TRIM_THRESHOLD_"] == 1_000_000_000
    assert env["MALLOC_ARENA_MAX"] == 1
    assert worker_environ(64e9, base)["MALLOC_TRIM_THRESHOLD_"] == 32_000_000_000
    assert worker_environ(0, base)["MALLOC_TRIM_THRESHOLD_"] == int(MEMORY_LIMIT / 2)  # no limit: the machine's
    # the heap grown at start stays under the threshold, so releasing it gives nothing back
    assert heap_size(2e9) == 500_000_000 and heap_size(64e9) == heap_size(0) == 1 << 30
    for limit in (64e6, 2e9, 64e9, 0):
        assert heap_size(limit) < worker_environ(limit, base)["MALLOC_TRIM_THRESHOLD_"]
    assert base == {"OMP_NUM_THREADS": 1, "MALLOC_TRIM_THRESHOLD_": 65536}  # not changed in place
    monkeypatch.setenv(REUSE_ENV, "0")
    assert worker_environ(2e9, base) == base


class _Libc:
    def __init__(self):
        self.calls = []

    def malloc_trim(self, pad):
        self.calls.append(pad)
        return 1


class _Worker:
    def __init__(self, limit, rss):
        self.memory_manager = type("M", (), {"memory_limit": limit})()
        self.monitor = type("S", (), {"get_process_memory": lambda s: rss})()


def test_trim_only_above_half_the_limit():
    libc = _Libc()
    assert not trim_if_high(_Worker(1000, 400), libc)
    assert not trim_if_high(_Worker(None, 10**12), libc)  # no limit: Dask never acts on memory either
    assert libc.calls == []
    assert trim_if_high(_Worker(1000, 600), libc)
    assert libc.calls == [0]


def _flags():
    return {k: os.environ.get(k) for k in VARS}


def _stealing(dask_scheduler):
    return "stealing" in dask_scheduler.extensions


def test_local_cluster_sets_its_workers_and_leaves_this_process_alone(monkeypatch):
    monkeypatch.delenv(REUSE_ENV, raising=False)
    # a Nanny that started before leaves Dask's own MALLOC_TRIM_THRESHOLD_ in this process: Dask
    # takes it over its configuration, so it must not win over ours
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    before = dict(os.environ)
    with local_cluster(2, 1, work_stealing=False, memory_limit="2GB") as lc, Client(lc) as c:
        seen = c.run(_flags)
        assert len(seen) == 2
        for flags in seen.values():
            assert flags == {
                "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
                "MALLOC_TRIM_THRESHOLD_": "1000000000",
                "MALLOC_ARENA_MAX": "1",
                REUSE_ENV: "1",
            }
        assert c.run_on_scheduler(_stealing) is False
        ensure_plugin(c)
        assert all(c.run(lambda dask_worker: TRIM_CALLBACK in dask_worker.periodic_callbacks).values())
    assert dict(os.environ) == before
    with local_cluster(1, 1, work_stealing=True) as lc, Client(lc) as c:
        assert c.run_on_scheduler(_stealing) is True
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):  # Dask's own cluster: no reuse, no trimming
        assert list(c.run(_flags).values())[0][REUSE_ENV] is None
        ensure_plugin(c)
        assert not any(c.run(lambda dask_worker: TRIM_CALLBACK in dask_worker.periodic_callbacks).values())


def _make(i, n):
    return np.zeros(n, dtype=np.uint8)


def _nbytes(x):
    return int(x.nbytes)


def _faults():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _wait_released(c, timeout: float = 10.0) -> None:
    """Wait (bounded) until no worker holds any data: the round's outputs are freed."""
    deadline = time.time() + timeout
    while any(c.run(lambda dask_worker: len(dask_worker.data)).values()) and time.time() < deadline:
        time.sleep(0.05)


def _received_faults(c, n=20_000_000, k=8) -> list:
    """Page faults on the receiving worker per round of moving ``k`` outputs of ``n`` bytes."""
    from distributed import wait

    a, b = sorted(workers_info(c))
    out = []
    for _ in range(3):
        made = [c.submit(_make, i, n, workers=[a], pure=False) for i in range(k)]
        wait(made)
        f0 = c.run(_faults, workers=[b])[b]
        used = [c.submit(_nbytes, x, workers=[b], pure=False) for x in made]
        assert c.gather(used) == [n] * k
        out.append(c.run(_faults, workers=[b])[b] - f0)
        del made, used
        _wait_released(c)
    return out


def test_received_outputs_reuse_freed_memory(monkeypatch):
    """A worker that reuses freed memory takes far fewer page faults receiving outputs after the
    first round than one that gets fresh pages for every output. Both clusters are warmed as
    taskflow warms the clusters it starts (nothing happens on the one without reuse): with one
    arena for all of a worker's threads, a heap grown only by the first round's buffers could still
    need to grow in the second (1,094 faults against 3,348 fresh, once, under CI's load)."""
    from taskflow.runtime.launch.local import warm_heaps

    monkeypatch.delenv(REUSE_ENV, raising=False)
    with local_cluster(2, 1, memory_limit="4GB") as lc, Client(lc) as c:
        assert all(warm_heaps(c).values())
        reuse = _received_faults(c)
    monkeypatch.setenv(REUSE_ENV, "0")
    with local_cluster(2, 1, memory_limit="4GB") as lc, Client(lc) as c:
        assert list(c.run(_flags).values())[0]["MALLOC_MMAP_THRESHOLD_"] is None
        assert not any(warm_heaps(c).values())
        fresh = _received_faults(c)
    # fresh pages for 160 MB: at least 80 faults with 2 MiB huge pages, 39,000 with 4 KiB pages
    assert min(fresh[1:]) >= 80
    assert max(reuse[1:]) * 4 < min(fresh[1:]), (reuse, fresh)


def _fill(i, n):
    return np.ones(n, dtype=np.uint8)  # every page written, as a task's real output would be


def _made_faults(c, n=20_000_000, k=8) -> list:
    """Page faults on a worker per round of its tasks making ``k`` outputs of ``n`` bytes (in its
    thread pool, not on its event loop), each round released before the next."""
    from distributed import wait

    (a,) = sorted(workers_info(c))
    out = []
    for _ in range(3):
        f0 = c.run(_faults, workers=[a])[a]
        made = [c.submit(_fill, i, n, workers=[a], pure=False) for i in range(k)]
        wait(made)
        out.append(c.run(_faults, workers=[a])[a] - f0)
        del made
        _wait_released(c)
    return out


@pytest.mark.parametrize("k", [8, pytest.param(35, marks=pytest.mark.slow)])  # make test runs one, make test-all both
def test_outputs_made_by_tasks_reuse_the_warmed_heap(monkeypatch, k):
    """A task's output is allocated by a thread of the worker's pool: with one arena it comes from
    the heap :func:`warm_heaps` grew and kept, round after round, instead of fresh pages each time.
    35 outputs of 20 MB outgrow the heap grown at start (450 MB of a 2 GB limit): the heap grows in
    the first round and keeps what it grew when they are released (glibc gives the free top of a
    heap back, all of it, only above the trim threshold)."""
    from taskflow.runtime.launch.local import warm_heaps

    monkeypatch.delenv(REUSE_ENV, raising=False)
    with local_cluster(1, 1, memory_limit="2GB") as lc, Client(lc) as c:
        warm_heaps(c)
        reuse = _made_faults(c, k=k)
    monkeypatch.setenv(REUSE_ENV, "0")
    with local_cluster(1, 1, memory_limit="2GB") as lc, Client(lc) as c:
        fresh = _made_faults(c, k=k)
    # fresh pages for 160 MB: at least 80 faults with 2 MiB huge pages, 39,000 with 4 KiB pages
    assert min(fresh) >= 80
    grown = reuse if k == 8 else reuse[1:]  # (the first round of 700 MB grows the heap)
    assert max(grown) * 4 < min(fresh), (reuse, fresh)


def _hold(n):
    import builtins

    builtins._taskflow_test_held = [bytearray(n), bytearray(n)]
    builtins._taskflow_test_held.pop(0)  # the first buffer freed below the second: the heap cannot shrink


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def test_retained_memory_goes_back_above_half_the_limit(monkeypatch):
    monkeypatch.delenv(REUSE_ENV, raising=False)
    limit = 1_000_000_000
    with local_cluster(1, 1, memory_limit=limit) as lc, Client(lc) as c:
        ensure_plugin(c)
        (addr,) = c.run(_rss)
        base = c.run(_rss)[addr]
        c.run(_hold, 300_000_000)  # on the worker's event loop: its main heap
        deadline = time.time() + 10
        rss = c.run(_rss)[addr]
        while rss > base + 450_000_000 and time.time() < deadline:
            time.sleep(0.2)
            rss = c.run(_rss)[addr]
        assert rss < base + 450_000_000, (base, rss)  # the freed 300 MB went back; the held 300 MB stay
        assert rss > base + 250_000_000


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc is Linux's")
def test_glibc_is_found():
    from taskflow.runtime.worker import worker_plugin

    assert hasattr(worker_plugin._libc(), "malloc_trim")


def _incoming_from(dask_worker):
    return sorted({t["who"] for t in dask_worker.transfer_incoming_log})


def test_warm_connections_makes_every_worker_fetch_from_every_other():
    from taskflow.runtime.launch.local import warm_connections

    with local_cluster(3, 1) as lc, Client(lc) as c:
        assert all(v == [] for v in c.run(_incoming_from).values())  # nothing has moved yet
        assert warm_connections(c, nbytes=4096) == 6
        got = c.run(_incoming_from)
        for addr, sources in got.items():
            assert sources == sorted(a for a in got if a != addr), addr
        # nothing of it stays in the cluster's memory
        deadline = time.monotonic() + 10
        while c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    with local_cluster(1, 1) as lc, Client(lc) as c:
        assert warm_connections(c) == 0  # one worker: no pair


def test_warm_heaps_grows_each_reusing_worker_heap_and_keeps_it():
    from distributed import LocalCluster

    from taskflow.runtime.launch.local import HEAP_SHARE, warm_heaps

    limit = 800e6  # a quarter of it is what a worker keeps for reuse
    with local_cluster(2, 1, memory_limit=limit) as lc, Client(lc) as c:
        before = c.run(_rss)
        grown = warm_heaps(c)
        after = c.run(_rss)
        want = int(int(limit / 4) * HEAP_SHARE)
        assert grown == {a: want for a in before}
        for a in before:  # freed, but the heap holds on to it: the pages stay the worker's
            assert after[a] - before[a] > 0.8 * want, (a, before[a], after[a])
    # a cluster taskflow did not start (no memory reuse) is left as it is
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        before = c.run(_rss)
        assert set(warm_heaps(c).values()) == {0}
        after = c.run(_rss)
        assert all(after[a] - before[a] < 20e6 for a in before)


def test_workers_info_is_never_the_clients_refreshed_cache():
    """The client refreshes its cached scheduler info on a timer, asking for no workers; a list of
    workers read from that cache is sometimes empty. Made frequent here (a 1 ms timer)."""
    import dask

    with dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}):
        with local_cluster(2, 1) as lc, Client(lc) as c:
            c.wait_for_workers(2)
            seen = [len(workers_info(c)) for _ in range(300)]
    assert seen == [2] * 300


def test_without_a_dashboard_none_is_served_and_dasks_busy_port_goes_unremarked():
    """Dask's scheduler serves its HTTP routes on port 8787 by default and warns when another
    cluster holds it; a cluster taskflow starts without a dashboard takes a free port quietly."""
    import socket
    import warnings

    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:
        pass  # something holds it already: the same situation
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with local_cluster(1, 1) as lc:
                import urllib.error
                import urllib.request

                port = lc.scheduler.http_server.port
                assert port != 8787
                with pytest.raises(urllib.error.HTTPError) as e:  # no dashboard page is served
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10)
                assert e.value.code == 404
    finally:
        holder.close()
    assert [str(w.message) for w in caught if "in use" in str(w.message)] == []


def _array_serializers():
    """Whether this worker's Dask has its numpy serializers registered (each way)."""
    from distributed.protocol.serialize import dask_deserialize, dask_serialize

    return [np.ndarray in registry._lookup for registry in (dask_serialize, dask_deserialize)]


def test_the_workers_plugin_registers_the_array_serializers_before_any_array_arrives():
    """Dask registers its numpy serializers on a worker's first array, on its event loop, parsing
    code while a task thread may be compiling (which CPython 3.11 can fail): the taskflow plugin
    registers them as it is installed, before any array arrives."""
    from taskflow.runtime.client.session import ensure_plugin

    with local_cluster(1, 1) as lc, Client(lc) as c:
        assert list(c.run(_array_serializers).values()) == [[False, False]]  # a fresh worker: not yet
        ensure_plugin(c)
        assert list(c.run(_array_serializers).values()) == [[True, True]]
