"""Placement inside the Dask scheduler (the taskflow scheduler plugin): every graph placed, any
worker loss survived in the scheduler's own event, bounded failure when nothing can go on."""

import logging
import os
import threading
import time

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest
from distributed import Client, LocalCluster, get_task_stream

import taskflow
from taskflow import Cluster, TaskflowError, TaskGraph, Worker, compute, run
from taskflow.runtime.client import runner
from taskflow.runtime.messages import workers_info
from taskflow.runtime.scheduler.plugin import TaskflowPlugin

from tests import runtime_graphs as rg
from tests.conftest import NO_HTTP, EXAMPLES
from tests.taskflow.runtime import dask_states
from taskflow.app.loopback import Loopback


def chain(n=12, seconds=0.4):
    """An emulated chain: a run that lasts about ``n x seconds``."""
    g = TaskGraph("chain")
    prev = None
    for i in range(n):
        g.add_task(f"c{i}", cost=seconds, output_size=1000)
        if prev:
            g.add_edge(prev, f"c{i}")
        prev = f"c{i}"
    return g


def when_busy(client, names, action, timeout=30.0):
    """Call ``action`` (in a thread) once every worker named in ``names`` is running a task, so a
    kill always hits planned work whatever the machine's load."""

    def watch():
        t0 = time.time()
        while time.time() - t0 < timeout:
            info = workers_info(client)
            busy = {str(w["name"]) for a, w in info.items() if client.processing(a).get(a)}
            if busy and set(names) <= busy:
                break
            time.sleep(0.05)
        action()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def wait_for(condition, what: str, timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    t0 = time.time()
    while not condition():
        assert time.time() - t0 < timeout, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.05)


def plans_on_scheduler(client) -> dict:
    """Every key the plugin has placed -> the address of its latest planned worker."""

    def read(dask_scheduler):
        p = dask_scheduler.plugins["taskflow"]
        return {k: r.addr[w] for r in p.runs.values() for k, w in r.plan.items() if w in r.addr}

    return client.run_on_scheduler(read)


@pytest.fixture
def loopback3(tmp_path):
    lb = Loopback(tmp_path, workers=("wa", "wb", "wc"))
    try:
        yield lb.start()
    finally:
        lb.stop()


@pytest.fixture(scope="module")
def intact3(tmp_path_factory):
    """Three loopback workers wa, wb, wc shared by the module's tests that lose none of them."""
    lb = Loopback(tmp_path_factory.mktemp("intact3"), workers=("wa", "wb", "wc"))
    try:
        yield lb.start()
    finally:
        lb.stop()


def test_a_worker_lost_between_planning_and_submission_is_replanned(loopback3, monkeypatch):
    """The race the client-side watch loop had: the plan names a worker that dies before the graph
    is submitted. The plugin re-plans in the scheduler when the loss happens."""
    register = runner._Runner._register
    victim = {}

    def register_then_kill(self, graph, model):
        plan = register(self, graph, model)
        name = max(set(plan.workers), key=plan.workers.count)  # the worker with most planned tasks
        victim["name"] = name
        loopback3.kill_worker(name)
        t0 = time.time()
        while name in {str(w["name"]) for w in workers_info(self.client).values()}:
            assert time.time() - t0 < 30, "the scheduler did not notice the loss"
            time.sleep(0.05)
        return plan

    monkeypatch.setattr(runner._Runner, "_register", register_then_kill)
    g = rg.layered(width=6, depth=2)
    with Client(scheduler_file=str(loopback3.sched_file)) as c:
        t0 = time.time()
        rep = run(g, "heft", client=c, quiet=True, timeout=60)
        assert time.time() - t0 < 30
    assert rep.results["total"] == rg.expected_total(6, 2)
    assert rep.replans >= 1
    assert {r.task for r in rep.trace.runs} == set(g.ids)  # every task reported
    assert all(r.worker != victim["name"] for r in rep.trace.runs)
    assert rep.placement_fidelity == 1.0  # every task ran where the latest plan put it


def test_losing_every_worker_then_starting_one_completes(loopback3):
    g = chain(12, 0.4)

    def chaos():
        for name in ("wa", "wb", "wc"):
            loopback3.kill_worker(name)
        wait_for(lambda: not workers_info(c), "the scheduler to see every worker gone")
        loopback3.start_worker("wd")

    with Client(scheduler_file=str(loopback3.sched_file)) as c:
        when_busy(c, [], chaos)  # as soon as some task runs
        rep = run(g, "heft", client=c, quiet=True, timeout=90)
    assert {r.task for r in rep.trace.runs} == set(g.ids)
    assert rep.replans >= 1 and "wd" in {r.worker for r in rep.trace.runs}
    assert all(rep.results[t].nbytes == 1000 for t in g.ids)


def test_losing_every_worker_fails_the_run_with_a_clear_error(tmp_path):
    lb = Loopback(tmp_path, workers=("wa", "wb")).start()
    try:
        with Client(scheduler_file=str(lb.sched_file)) as c:
            c.register_plugin(TaskflowPlugin(grace=2.0), name="taskflow")  # a short grace for the test

            def kill_all():
                lb.kill_worker("wa")
                lb.kill_worker("wb")

            when_busy(c, [], kill_all)  # as soon as some task runs
            t0 = time.time()
            with pytest.raises(taskflow.WorkersLost, match="every worker was lost and none joined within 2 s"):
                run(chain(20, 0.4), "heft", client=c, quiet=True, timeout=120)
            assert time.time() - t0 < 20
    finally:
        lb.stop()


def _nap(i, *deps):
    time.sleep(0.4)
    return i


def test_compute_says_it_lost_the_scheduler_and_nothing_replaces_that(tmp_path):
    """``taskflow.compute`` with the scheduler killed mid-run: the same clear error as ``run``, not
    the CancelledError its cleanup call used to raise over it."""
    import dask

    lb = Loopback(tmp_path, workers=("wa",)).start()
    try:
        with Client(scheduler_file=str(lb.sched_file)) as c:
            parts = [dask.delayed(_nap, pure=True)(i, dask_key_name=f"nap-{i}") for i in range(30)]
            when_busy(c, ["wa"], lb.kill_scheduler)
            t0 = time.time()
            with pytest.raises(taskflow.SchedulerLost, match="lost the Dask scheduler"):
                taskflow.compute(*parts, scheduler="heft", client=c, timeout=60)
            assert time.time() - t0 < 40
    finally:
        lb.stop()


def test_a_lost_scheduler_fails_the_client_in_bounded_time(tmp_path):
    lb = Loopback(tmp_path, workers=("wa",)).start()
    try:
        with Client(scheduler_file=str(lb.sched_file)) as c:
            when_busy(c, ["wa"], lb.kill_scheduler)
            t0 = time.time()
            with pytest.raises(taskflow.SchedulerLost, match="lost the Dask scheduler") as e:
                run(chain(30, 0.4), "heft", client=c, quiet=True)
            assert isinstance(e.value, TaskflowError) and isinstance(e.value, ConnectionError)
            took = time.time() - t0
            print(f"lost scheduler reported after {took:.1f} s")
            assert took < 40
    finally:
        lb.stop()


def test_use_places_any_dask_code_inside_the_scheduler(client):
    x = da.random.RandomState(0).random((300, 300), chunks=100)
    expected = float(dask.compute((x @ x.T).sum(), scheduler="sync")[0])
    taskflow.use(client, "heft")
    try:
        with get_task_stream(client=client) as ts:
            got = float((x @ x.T).sum().compute())
        planned = plans_on_scheduler(client)
    finally:
        taskflow.use(client, None)
    assert got == pytest.approx(expected, rel=1e-12)
    ran = {r["key"]: r["worker"] for r in ts.data}
    assert ran and set(ran) <= set(planned)  # every task that ran was placed by the plugin
    assert all(planned[k] == w for k, w in ran.items())  # and ran where it was placed
    # back to Dask's own scheduling: nothing new is placed
    before = len(plans_on_scheduler(client))
    (x + 1).sum().compute()
    assert len(plans_on_scheduler(client)) <= before


def test_the_plugin_tells_a_client_what_its_latest_use_run_predicted_and_took(client):
    from taskflow.runtime.client.session import call

    x = da.random.RandomState(1).random((200, 200), chunks=50)
    taskflow.use(client, "heft")
    try:
        t0 = time.perf_counter()
        (x @ x.T).sum().compute()
        wall = time.perf_counter() - t0
        status = call(client, "taskflow_status", client=client.id)
    finally:
        taskflow.use(client, None)
    assert status["run"].startswith(client.id) and status["state"] == "finished"
    assert status["predicted"] > 0  # heft's plan of the whole graph
    assert 0 < status["makespan"] <= wall  # from the graph's arrival in the scheduler to its last key
    other = call(client, "taskflow_status", client="nobody")
    assert "run" not in other and "predicted" not in other


def test_use_refuses_dynamic_and_unknown_schedulers(client):
    with pytest.raises(TaskflowError, match="'work-stealing' is a dynamic scheduler"):
        taskflow.use(client, "work-stealing")
    with pytest.raises(taskflow.UnknownSchedulerError):
        taskflow.use(client, "heftt")


@pytest.mark.parametrize("scheduler", ["heft", "cpop", "blevel"])
def test_compute_on_dask_collections_equals_dask_and_runs_where_planned(client, scheduler):
    x = da.random.RandomState(1).random((200, 200), chunks=50)
    arrays = ((x @ x.T).sum(axis=0), x.rechunk((100, 40)).mean(axis=1))
    bag = db.from_sequence(range(40), npartitions=8).map(lambda v: v * v).filter(lambda v: v % 3).sum()

    @dask.delayed
    def inc(v):
        return v + 1

    delayed = inc(inc(2)) + inc(3)
    expected = dask.compute(*arrays, bag, delayed, scheduler="sync")
    got, rep = compute(*arrays, bag, delayed, scheduler=scheduler, client=client, report=True)
    assert np.allclose(got[0], expected[0], rtol=1e-12) and np.allclose(got[1], expected[1], rtol=1e-12)
    assert got[2:] == expected[2:]
    assert rep.placement_fidelity == 1.0 and len(rep.trace.runs) > 20


def test_compute_survives_a_lost_worker(tmp_path):
    lb = Loopback(tmp_path, workers=("wa", "wb", "wc")).start()
    try:

        @dask.delayed
        def slow_inc(v):
            time.sleep(0.3)
            return v + 1

        vals = [slow_inc(i) for i in range(12)]
        total = dask.delayed(sum)([slow_inc(v) for v in vals])
        with Client(scheduler_file=str(lb.sched_file)) as c:
            when_busy(c, ["wb"], lambda: lb.kill_worker("wb"))
            got, rep = compute(total, scheduler="heft", client=c, report=True, timeout=60)
        assert got == (sum(range(12)) + 24,)
        assert rep.replans >= 1
        assert all(r.worker != "wb" or r.finish - r.start < 1.0 for r in rep.trace.runs)
    finally:
        lb.stop()


def test_compute_refuses_unknown_options_and_simulator_only_schedulers(client):
    x = da.ones(10, chunks=5).sum()
    with pytest.raises(TypeError, match="nonsense_option"):
        compute(x, client=client, nonsense_option=42)
    with pytest.raises(TaskflowError, match="'blevel-dynamic' runs in the simulator only"):
        compute(x, scheduler="blevel-dynamic", client=client)
    with pytest.raises(taskflow.UnknownSchedulerError):
        compute(x, scheduler="heftt", client=client)


def test_compute_reuses_the_active_client(client):
    """No cluster is started when the process already has a client (a notebook's)."""
    x = da.arange(100, chunks=10).sum()
    with get_task_stream(client=client) as ts:
        assert compute(x) == (4950,)
    assert len(ts.data) >= 10  # it ran on the active client's cluster


def test_computing_one_collection_again_reports_and_learns_only_that_run(client):
    """Workers keep a key's startstops when it is computed again (a collection computed twice
    has the same keys): each report holds only its own run, inside its own wall time."""
    x = da.random.RandomState(3).random((400, 400), chunks=100)
    work = ((x @ x.T) + x).sum(axis=0)
    expected = work.compute(scheduler="sync")
    reports = []
    for _ in range(3):
        t0 = time.time()
        got, rep = compute(work, scheduler="heft", client=client, report=True)
        wall = time.time() - t0
        assert np.allclose(got[0], expected)
        assert all(0 <= r.start <= r.finish <= wall for r in rep.trace.runs)
        busy = sum(r.finish - r.start for r in rep.trace.runs)
        assert busy <= wall * len(workers_info(client))
        reports.append(rep)
    assert len({len(r.trace.runs) for r in reports}) == 1


def _restricted(dask_scheduler) -> int:
    return sum(1 for ts in dask_scheduler.tasks.values() if ts.worker_restrictions)


def _runs_made(dask_scheduler) -> int:
    return dask_scheduler.plugins["taskflow"]._count


def test_a_plan_does_not_outlive_its_run(client):
    """Dask keeps a task's state while a client's release is on its way, so a collection sent
    again reuses it: after taskflow.compute returns, and after taskflow.use is switched off, no
    task keeps the old plan's worker restrictions, and Dask's own scheduling is Dask's."""
    x = da.random.RandomState(4).random((300, 300), chunks=100)
    work = ((x @ x.T) + x).sum(axis=0)
    compute(work, scheduler="round-robin", client=client)
    assert client.run_on_scheduler(_restricted) == 0
    taskflow.use(client, "round-robin")
    try:
        made = client.run_on_scheduler(_runs_made)
        kept = client.compute(work)
        kept.result()
        assert client.run_on_scheduler(_runs_made) > made  # placed while the scheduler is on
        # and finished with its last key: the run is forgotten and its restrictions gone at once
        assert client.run_on_scheduler(_restricted) == 0
        del kept
    finally:
        taskflow.use(client, None)
    again = client.compute(work)
    again.result()
    assert client.run_on_scheduler(_restricted) == 0
    del again


def test_tasks_not_yet_run_get_the_measured_cost_and_output_of_their_prefix():
    """A collection computed again: its tasks are new to Dask (no nbytes yet), but the plugin saw
    their prefix run: the cost is the measured seconds at speed 1, the output the prefix's mean
    bytes; a prefix never seen gets the mean measured cost (its output Dask's figure)."""
    from distributed.scheduler import DEFAULT_DATA_SIZE

    p = TaskflowPlugin()
    # "mm" ran twice on fast f (0.1 s each) and twice on slow s (0.4 s each): f is 4x s
    p.durations = {"mm": {"f": [0.2, 2], "s": [0.8, 2]}}
    p.sizes = {"mm": [16e6, 2]}
    p.dask_scheduler = dask_states.scheduler()  # Dask's own guess for a prefix never run: 0.5 s

    def ts(key, prefix, nbytes=-1, deps=()):
        state = "memory" if nbytes >= 0 else "waiting"
        return dask_states.task(key, state, prefix, nbytes=nbytes, dependencies=set(deps))

    a = ts("a", "mm")
    b = ts("b", "new", deps=[a])
    c = ts("c", "mm", nbytes=123, deps=[b])
    g = p.graph_of([a, b, c])
    speeds = p.learned_speeds()
    assert speeds["f"] / speeds["s"] == pytest.approx(4.0)
    assert g.task("a").cost == pytest.approx(0.1 * speeds["f"]) == pytest.approx(0.4 * speeds["s"])
    # a prefix never seen: what the measured tasks cost (Dask's 0.5 s default is a placeholder)
    assert g.task("b").cost == pytest.approx(g.task("a").cost) and g.task("c").cost == g.task("a").cost
    assert p.graph_of([ts("d", "new")]).task("d").cost == 0.5  # nothing measured among them: Dask's
    b.prefix.duration_average = 0.7  # Dask measured it in an earlier run: its figure
    assert p.graph_of([a, b, c]).task("b").cost == 0.7
    assert (
        g.task("a").output_size == 8e6
        and g.task("b").output_size == DEFAULT_DATA_SIZE
        and g.task("c").output_size == 123
    )
    assert g.edge_size("a", "b") == 8e6


def test_incoming_rates_sum_each_senders_recent_big_messages_once():
    """The heartbeat metric reads only the log entries that arrived since the last call, skips
    small messages and keeps a window per sender."""
    from collections import deque
    from types import SimpleNamespace

    from taskflow.runtime.worker.worker_plugin import IncomingRates

    w = SimpleNamespace(transfer_incoming_log=deque())
    rates = IncomingRates(window=2, smallest=1000)

    def arrive(who, nbytes, secs):
        w.transfer_incoming_log.append({"who": who, "total": nbytes, "start": 10.0, "stop": 10.0 + secs})

    arrive("a", 4000, 1.0)
    arrive("a", 500, 1.0)  # small: latency, not rate
    arrive("b", 9000, 3.0)
    assert rates(w) == {"a": [4000.0, 1.0], "b": [9000.0, 3.0]}
    assert rates(w) == {"a": [4000.0, 1.0], "b": [9000.0, 3.0]}  # nothing new: nothing counted twice
    arrive("a", 2000, 1.0)
    arrive("a", 6000, 1.0)
    assert rates(w)["a"] == [8000.0, 2.0]  # the window keeps the last two


def test_compute_learns_the_rates_workers_receive_at_and_predicts(client):
    """After Dask collections moved megabytes between the workers, the plugin knows the rate of
    each direction from the workers' heartbeats, and the next compute's report carries the plan's
    predicted makespan."""
    x = da.random.RandomState(5).random((2000, 2000), chunks=500)  # 2 MB chunks
    work = (x @ x.T).sum(axis=0)
    compute(work, scheduler="round-robin", client=client)
    names = sorted(str(w["name"]) for w in workers_info(client).values())

    def learned(dask_scheduler):
        from taskflow.runtime.scheduler.reading import received_rates

        return received_rates(dask_scheduler)

    deadline = time.time() + 20
    while time.time() < deadline:  # heartbeats carry them: within a few seconds
        rates = client.run_on_scheduler(learned)
        if all(rates.get(a, {}).get(b) for a in names for b in names if a != b):
            break
        time.sleep(0.5)
    assert all(1e6 < rates[a][b] < 1e11 for a in names for b in names if a != b), rates
    got, rep = compute(work, scheduler="heft", client=client, report=True)
    assert 0 < rep.predicted_makespan < 100 * rep.measured_makespan  # a plan's figure, not nan


def test_the_plugin_counts_only_the_latest_compute_of_a_key():
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler([dask_states.worker("tcp://a:1", name="w0")])
    p.dask_scheduler.tasks["k"] = dask_states.task("k", "memory", "pre", nbytes=800)
    stops = [
        {"action": "compute", "start": 0.0, "stop": 0.5},
        {"action": "transfer", "start": 9.0, "stop": 9.2},
        {"action": "compute", "start": 10.0, "stop": 10.25},
    ]
    p.transition("k", "processing", "memory", worker="tcp://a:1", startstops=stops)
    assert p.durations["pre"] == {"w0": [0.25, 1, 0.25]}
    assert p.sizes["pre"] == [800.0, 1]  # its output, for tasks of the prefix not yet run


def test_the_plugin_learns_dask_s_cost_per_task_from_the_gaps_between_a_thread_s_tasks():
    """Each next task of a worker thread starting 3 ms after the one before stopped (or 1 ms
    after its own input arrived): Dask's cost per task comes from those gaps, at speed 1 (a worker
    twice as fast shows half the gap for the same work); gaps of other threads do not mix."""
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler([dask_states.worker("tcp://a:1", nthreads=2, name="w0")])
    for i in range(40):
        key = f"k{i}"
        p.dask_scheduler.tasks[key] = dask_states.task(key, "memory", "pre", nbytes=8)
        t0 = (i // 2) * 0.013 + (i % 2) * 0.0005  # two threads, their tasks interleaved in time
        stops = [{"action": "compute", "start": t0, "stop": t0 + 0.010}]
        if i % 4 == 0:  # an input that arrived 1 ms before the compute: the gap counts from it
            stops.insert(0, {"action": "transfer", "start": t0 - 0.004, "stop": t0 - 0.001})
        p.transition(key, "processing", "memory", worker="tcp://a:1", thread=i % 2, startstops=stops)
    # 38 gaps: 9 of 1 ms (thread 0's tasks whose input came last) and 29 of 3 ms; the longest tenth left out
    assert p.gaps.overhead() == pytest.approx((0.001 * 9 + 0.003 * 25) / 34, rel=1e-6)
    assert p.gaps.overhead({"w0": 2.0}) == pytest.approx(2 * p.gaps.overhead(), rel=1e-9)


def test_on_dask_the_cost_per_task_learned_is_less_than_a_chain_s_time_per_task(client):
    """A chain of no-op tasks on a real cluster: each task waits for the one before, so its time
    per task is Dask's cost per task plus the compute; the cost learned from the chain's own gaps
    is positive and no more.
    A plan of the chain made afterwards counts it on every task: its predicted makespan is at
    least the 60 tasks' cost at the fastest worker's speed (their compute is microseconds)."""
    from taskflow.runtime.client.session import call

    link = dask.delayed(lambda x: x + 1, pure=True)
    node = 0
    for i in range(60):
        node = link(node, dask_key_name=f"overhead-chain-{i}")
    taskflow.use(client, "adaptive")

    def forget_gaps(dask_scheduler):  # the module's earlier tests ran on this cluster, perhaps under more load
        from taskflow.runtime.scheduler.overhead import DispatchGaps

        dask_scheduler.plugins["taskflow"].gaps = DispatchGaps()

    client.run_on_scheduler(forget_gaps)
    try:
        t0 = time.perf_counter()
        assert client.compute(node, sync=True) == 60
        per_task = (time.perf_counter() - t0) / 60
    finally:
        taskflow.use(client, None)

    def learned(dask_scheduler):
        plugin = dask_scheduler.plugins["taskflow"]
        return plugin.gaps.overhead(plugin.learned_speeds()), max(plugin.learned_speeds().values(), default=1.0)

    overhead, fastest = client.run_on_scheduler(learned)  # at speed 1: a gap times its worker's speed
    assert overhead is not None and 0 < overhead < per_task * fastest
    taskflow.use(client, "heft")
    try:
        client.compute(node, sync=True)
        status = call(client, "taskflow_status", client=client.id)
    finally:
        taskflow.use(client, None)
    assert status["predicted"] >= 60 * overhead / fastest


def test_the_report_counts_exactly_the_transfers_dask_made(client):
    """Six producers of known sizes feed one sink across two workers: the report lists exactly the
    outputs that moved (never one produced where the sink ran), with the bytes Dask moved, and
    agrees with the scheduler's task stream on how many fetches the sink made."""
    g = TaskGraph("fan-in")
    for i in range(6):
        g.add_task(f"p{i}", cost=0.05, output_size=(i + 1) * 10_000)
    g.add_task("sink", cost=0.05)
    for i in range(6):
        g.add_edge(f"p{i}", "sink")
    with get_task_stream(client=client) as ts:
        rep = run(g, "round-robin", client=client, quiet=True)
    where = {r.task: r.worker for r in rep.trace.runs}
    moved = [(t.task, t.source, t.destination, t.bytes) for t in rep.trace.transfers]
    expected = {
        (f"p{i}", where[f"p{i}"], where["sink"], float((i + 1) * 10_000))
        for i in range(6)
        if where[f"p{i}"] != where["sink"]
    }
    assert expected and len(moved) == len(expected) and set(moved) == expected
    assert all(0 <= t.start <= t.finish <= rep.measured_makespan for t in rep.trace.transfers)
    # the scheduler's record of the sink's fetches (one per message from a worker) agrees: the
    # same messages, as long (the report's times are on the workers' own clocks, the stream's
    # carry Dask's estimate of the scheduler's: one offset per message, the same at both ends)
    sink = next(r for r in ts.data if str(r["key"]).startswith("sink-sink~"))
    fetches = sorted(
        (s["source"], round(s["stop"] - s["start"], 6)) for s in sink["startstops"] if s["action"] == "transfer"
    )
    addr = {w.id: w.address for w in rep.cluster.workers}
    assert fetches == sorted({(addr[t.source], round(t.finish - t.start, 6)) for t in rep.trace.transfers})
    assert rep.to_dict()["transfers"][0]["bytes"] in {b for *_, b in expected}


MYDAG = """
import math

SCALE = 3


def square(x):
    return x * x * SCALE


def total(*xs):
    return math.fsum(xs)


def build():
    from taskflow import TaskGraph

    g = TaskGraph("mydag")
    parts = [g.add_task(f"sq{i}", fn=square, args=(i,), cost=0.01) for i in range(6)]
    g.add_task("total", fn=total, args=tuple(parts), cost=0.01)
    return g
"""


def test_the_callers_own_module_runs_on_workers_that_cannot_import_it(tmp_path, monkeypatch):
    """Functions from a local module (not installed, not on the workers' path) are sent by value."""
    import sys

    src = tmp_path / "code"
    src.mkdir()
    (src / "mydag_local.py").write_text(MYDAG)
    lb = Loopback(tmp_path / "cluster", workers=("wa", "wb"))
    (tmp_path / "cluster").mkdir()
    lb.start()
    try:
        monkeypatch.syspath_prepend(str(src))
        import mydag_local

        with Client(scheduler_file=str(lb.sched_file)) as c:
            assert not any(c.run(lambda: __import__("importlib").util.find_spec("mydag_local") is not None).values())
            rep = run(mydag_local.build(), "heft", client=c, quiet=True, timeout=60)
        assert rep.results["total"] == 3 * sum(i * i for i in range(6))
        # and from the command line, with the module in the current folder (as python -m finds it)
        monkeypatch.chdir(src)
        monkeypatch.delitem(sys.modules, "mydag_local")
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(src), "")])
        from taskflow.app.cli import main

        assert (
            main(
                [
                    "run",
                    "mydag_local:build",
                    "--scheduler-file",
                    str(lb.sched_file),
                    "-q",
                    "--report",
                    str(tmp_path / "r.json"),
                ]
            )
            == 0
        )
    finally:
        lb.stop()


def test_a_callable_that_cannot_be_sent_is_named_before_anything_runs(client):
    import threading as th

    lock = th.Lock()
    g = TaskGraph("unpicklable")
    g.add_task("fine", fn=abs, args=(-1,))
    g.add_task("holds-a-lock", fn=lambda: lock.locked())
    with pytest.raises(TaskflowError, match="task 'holds-a-lock': its callable .* cannot be sent to the workers"):
        run(g, "heft", client=client, quiet=True)


def test_a_cost_profile_learned_on_the_first_run_makes_the_second_prediction_good(client, tmp_path):
    """Declared costs are guesses (all 1.0; 'big' tasks take 0.6 s, 'small' 0.1 s): the first run
    says so; its measurements, saved as a profile, make the next run's prediction close."""
    path = tmp_path / "costs.json"
    g = rg.mixed_costs()
    with pytest.warns(taskflow.TaskflowWarning, match="costs or the network it used look like guesses"):
        first = run(g, "heft", client=client, profile=str(path))
    assert first.costs == "declared" and first.prediction_error > 0.25 and first.notes
    assert path.exists()
    prof = taskflow.CostProfile.load(path)
    assert prof.runs == 1 and prof.tasks["big0"] and all(0.5 < d < 0.9 for d in prof.tasks["big0"].values())
    assert prof.task_overhead is not None and 0 <= prof.task_overhead < 0.2
    second = run(g, "heft", client=client, quiet=True, profile=str(path))
    print(f"prediction error: first {first.prediction_error:.0%}, second {second.prediction_error:.0%}")
    assert second.costs == "profile (1 run(s))" and not second.notes
    assert second.prediction_error < 0.3 and second.prediction_error < first.prediction_error / 3
    assert taskflow.CostProfile.load(path).runs == 2


def test_a_profile_converts_measured_rates_to_the_runs_scales():
    g = TaskGraph("two")
    g.add_task("a", cost=9.0, output_size=100)
    g.add_task("b", cost=9.0)
    g.add_edge("a", "b")
    prof = taskflow.CostProfile(
        tasks={"a": {"0": 2.0}},
        prefixes={},
        speeds={"0": 2.0, "1": 1.0},
        bandwidth={"0": {"1": 1000.0}},
        task_overhead=0.01,
        runs=1,
    )
    c = Cluster([Worker("0"), Worker("1")], bandwidth=1e9)
    g2, c2 = prof.apply(g, c, time_scale=0.1, size_scale=0.5)
    assert g2.task("a").costs == {"0": 2.0} and g2.task("a").cost == pytest.approx(4.0)  # 2 s at speed 2
    assert g2.task("b").cost == 9.0 and not g2.task("b").costs  # nobody measured b
    assert [w.speed for w in c2.workers] == [2.0, 1.0]
    assert c2.bandwidth_between("0", "1") == pytest.approx(1000.0 * 0.1 / 0.5)
    assert c2.task_overhead == pytest.approx(0.1)  # 10 ms of real dispatch per task = 0.1 model s at scale 0.1


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"format": "taskflow-graph"}', "not a cost profile"),
        ('{"format": "taskflow-cost-profile", "tasks": {"a": 3}}', "field 'tasks' must map names"),
        (
            '{"format": "taskflow-cost-profile", "tasks": {"a": {"w": "x"}}}',
            "field 'tasks' \\['a'\\]\\['w'\\] must be a number",
        ),
        ("not json", "malformed JSON"),
        ('{"format": "taskflow-cost-profile", "runs": "x"}', "field 'runs' must be a whole number"),
        ('{"format": "taskflow-cost-profile", "backplane": -3}', "field 'backplane' must be finite and > 0"),
        ('{"format": "taskflow-cost-profile", "dask_placement": {"a": 3}}', "field 'dask_placement' must map"),
        ('{"format": "taskflow-cost-profile", "models": {"t": {"fixed": 1}}}', "field 'models' must map"),
        (
            '{"format": "taskflow-cost-profile", "models": {"t": {"fixed": -1, "unit": {"0": 1}}}}',
            "'fixed' must be finite",
        ),
        ("[" * 5000 + "]" * 5000, "nested more than"),
    ],
)
def test_a_bad_profile_is_refused_before_anything_runs(tmp_path, capsys, content, message, no_cluster):
    from taskflow.app.cli import main

    bad = tmp_path / "p.json"
    bad.write_text(content)
    with pytest.raises(taskflow.FormatError, match=message):
        taskflow.CostProfile.load(bad)
    assert main(["run", str(EXAMPLES / "heft_paper.graph.json"), "--profile", str(bad), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message.split()[0] in err[0]


def test_a_profile_that_is_a_device_is_refused_unread(capsys):
    from taskflow.app.cli import main

    with pytest.raises(taskflow.FormatError, match="is a device, expected a regular file"):
        taskflow.CostProfile.load("/dev/zero")
    assert main(["run", str(EXAMPLES / "heft_paper.graph.json"), "--profile", "/dev/zero", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a device" in err[0]


def test_the_command_line_reports_a_lost_scheduler_in_one_line(tmp_path):
    """No traceback reaches the user: one 'error:' line and exit status 1 (a run that failed)."""
    import subprocess
    import sys

    lb = Loopback(tmp_path, workers=("wa",)).start()
    try:
        path = tmp_path / "chain.json"
        taskflow.save_graph(chain(40, 0.3), path)
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskflow", "run", str(path), "--scheduler-file", str(lb.sched_file), "-q"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with Client(scheduler_file=str(lb.sched_file)) as watcher:  # kill once the run's tasks are running
            wait_for(
                lambda: any(watcher.processing().values()) or proc.poll() is not None,
                "the command's tasks to run",
                timeout=60,
            )
        lb.kill_scheduler()
        out, err = proc.communicate(timeout=60)
    finally:
        lb.stop()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 1, (out, err)
    assert len(lines) == 1 and lines[0].startswith("error: lost the Dask scheduler"), err


def test_the_profile_separates_latency_from_bandwidth_and_measures_dispatch_gaps():
    from taskflow.runtime.measured import dispatch_gap, network_of
    from taskflow.trace import Run, Transfer

    # three tiny transfers of 4 ms, two of 10 MB at 100 MB/s plus that latency
    xs = [
        Transfer("a", "0", "1", 100.0, 0.0, 0.004),
        Transfer("b", "0", "1", 10.0, 1.0, 1.004),
        Transfer("c", "1", "0", 1000.0, 2.0, 2.004),
        Transfer("d", "0", "1", 10e6, 3.0, 3.104),
        Transfer("e", "0", "1", 10e6, 4.0, 4.104),
    ]
    latency, bw, backplane = network_of(xs)
    assert latency == pytest.approx(0.004)
    assert bw == {"0": {"1": pytest.approx(100e6)}}
    assert backplane == pytest.approx(10e6 / 0.104)  # never two at once: one transfer's rate
    # contention: two pairs that each move 100 MB/s alone share 100 MB/s when both run (the host's
    # cores copy every byte): the pairs keep what they do alone, the backplane is what both did
    xs = [
        Transfer("a", "0", "1", 10e6, 0.0, 0.1),
        Transfer("b", "2", "3", 10e6, 1.0, 1.1),
        Transfer("c", "0", "1", 10e6, 2.0, 2.2),
        Transfer("d", "2", "3", 10e6, 2.0, 2.2),
        Transfer("e", "0", "1", 10e6, 3.0, 3.2),
        Transfer("f", "2", "3", 10e6, 3.0, 3.2),
    ]
    latency, bw, backplane = network_of(xs)
    assert latency is None
    assert bw["0"]["1"] == pytest.approx(100e6, rel=0.15) and bw["2"]["3"] == pytest.approx(100e6, rel=0.15)
    assert backplane == pytest.approx(100e6)
    # worker w: a ends at 1.0, b (ready since 0.5: its input is local) starts at 1.01; c waits for a
    # transfer from w2 that arrives at 2.0, so its gap says nothing about dispatch
    g = TaskGraph("gaps")
    for t in ("x", "a", "b", "c", "y"):
        g.add_task(t)
    g.add_edge("x", "b")
    g.add_edge("y", "c")
    runs = [
        Run("x", "x", "w", 0.0, 0.5),
        Run("a", "a", "w", 0.51, 1.0),
        Run("b", "b", "w", 1.01, 1.5),
        Run("y", "y", "w2", 0.0, 1.9),
        Run("c", "c", "w", 2.05, 2.5),
    ]
    gap = dispatch_gap(g, runs, [Transfer("y", "w2", "w", 10.0, 1.9, 2.0)])
    assert gap == pytest.approx(0.01)


def test_an_operator_preloads_the_plugin_and_every_client_is_placed(tmp_path):
    """dask scheduler --preload taskflow.runtime.scheduler.plugin, TASKFLOW_SCHEDULER=heft: a client that knows
    nothing of taskflow gets its graphs placed."""
    lb = Loopback(tmp_path, workers=("wa", "wb"), env={"TASKFLOW_SCHEDULER": "heft"})
    try:
        lb.start_scheduler(preload=["taskflow.runtime.scheduler.plugin"])
        for name in lb.names:
            lb.start_worker(name)
        lb.wait_for_workers(2)
        with Client(scheduler_file=str(lb.sched_file)) as c:
            x = da.random.RandomState(3).random((200, 200), chunks=50)
            with get_task_stream(client=c) as ts:
                got = float((x @ x.T).sum().compute())
            planned = plans_on_scheduler(c)
            scheduler = c.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins["taskflow"].default_scheduler)
        assert scheduler == "heft"
        assert got == pytest.approx(float(dask.compute((x @ x.T).sum(), scheduler="sync")[0]), rel=1e-12)
        ran = {r["key"]: r["worker"] for r in ts.data}
        assert ran and all(planned.get(k) == w for k, w in ran.items())
    finally:
        lb.stop()


@pytest.mark.parametrize(
    "times, expected",
    [
        # identical workers, noisy runs (up to +40%): one speed
        (
            {
                "a": [0.010, 0.014, 0.011, 0.013, 0.010, 0.012, 0.011],
                "b": [0.0105, 0.013, 0.014, 0.011, 0.012, 0.0108, 0.013],
            },
            {"a": 1.0, "b": 1.0},
        ),
        # b really takes twice as long, a little noise: half the speed
        (
            {
                "a": [0.010, 0.0102, 0.0101, 0.0103, 0.010, 0.0101, 0.0102],
                "b": [0.020, 0.0205, 0.0203, 0.0201, 0.020, 0.0204, 0.0202],
            },
            {"a": 1.5, "b": 0.75},
        ),
    ],
)
def test_calibration_reports_only_differences_larger_than_its_noise(times, expected):
    from taskflow.runtime.client.calibrate import _speeds

    class Done:
        def __init__(self, v):
            self.v = v

        def result(self):
            return self.v

    class Scripted:
        def __init__(self):
            self.left = {w: list(v) for w, v in times.items()}

        def submit(self, fn, workers, **kw):
            t = self.left[workers[0]].pop(0)
            return Done((t, t))

    got = _speeds(Scripted(), [(w, {"name": w}) for w in times])
    assert got == pytest.approx(expected, rel=0.02)


class _ScriptedKernel:
    """A client whose kernel runs return scripted (wall, cpu) seconds per worker."""

    def __init__(self, runs):
        self.left = {w: list(v) for w, v in runs.items()}

    def submit(self, fn, workers, **kw):
        v = self.left[workers[0]].pop(0)
        return type("Done", (), {"result": lambda self: v})()


def test_calibration_scales_a_cpu_limited_worker_by_its_share_of_a_core():
    """Worker b's cgroup allows a third of a core: between throttling periods it runs the short
    kernel as fast as a (and sometimes does), so its wall times say little; its CPU time over its
    share does: a third of a's speed. Without the limit known, the lucky wall time wins."""
    from taskflow.runtime.client.calibrate import _speeds

    a = [(0.016, 0.016)] * 7
    b = [(0.016, 0.016), (0.030, 0.016), (0.048, 0.016), (0.050, 0.016), (0.030, 0.016), (0.060, 0.016), (0.031, 0.016)]
    by_name = [("a", {"name": "a", "nthreads": 1}), ("b", {"name": "b", "nthreads": 1})]
    got = _speeds(_ScriptedKernel({"a": a, "b": b}), by_name, limits={"b": 1 / 3})
    assert got["a"] / got["b"] == pytest.approx(3.0, rel=0.01)
    blind = _speeds(_ScriptedKernel({"a": a, "b": b}), by_name)
    assert blind["a"] / blind["b"] == pytest.approx(1.0, rel=0.01)
    # two threads sharing a limit of one core: each has half a core
    two = _speeds(
        _ScriptedKernel({"a": a, "b": b}), [by_name[0], ("b", {"name": "b", "nthreads": 2})], limits={"b": 1.0}
    )
    assert two["a"] / two["b"] == pytest.approx(2.0, rel=0.01)


def _fake_proc(tmp_path, cgroup_lines, mounts):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text("".join(line + "\n" for line in cgroup_lines))
    (proc / "mountinfo").write_text(
        "".join(
            f"{k} 1 0:{k} {root} {point} rw - {fs} {fs} {opts}\n" for k, (root, point, fs, opts) in enumerate(mounts)
        )
    )
    return str(proc)


def test_cpu_limit_reads_the_smallest_quota_on_the_way_to_the_root(tmp_path):
    from taskflow.runtime.worker.worker_plugin import cpu_limit

    v1 = tmp_path / "cpu"
    (v1 / "outer" / "inner").mkdir(parents=True)
    for d, quota in ((v1, -1), (v1 / "outer", 50_000), (v1 / "outer" / "inner", 150_000)):
        (d / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        (d / "cpu.cfs_period_us").write_text("100000\n")
    proc = _fake_proc(
        tmp_path,
        ["4:memory:/x", "1:cpu:/outer/inner", "0::/"],
        [("/", str(v1), "cgroup", "rw,cpu"), ("/", str(tmp_path / "none"), "cgroup2", "rw")],
    )
    assert cpu_limit(proc) == pytest.approx(0.5)
    v2 = tmp_path / "v2"
    (v2 / "pod").mkdir(parents=True)
    (v2 / "cpu.max").write_text("max 100000\n")
    (v2 / "pod" / "cpu.max").write_text("250000 100000\n")
    proc2 = tmp_path / "p2"
    proc2.mkdir()
    assert cpu_limit(_fake_proc(proc2, ["0::/pod"], [("/", str(v2), "cgroup2", "rw")])) == pytest.approx(2.5)
    (v2 / "pod" / "cpu.max").write_text("max 100000\n")
    assert cpu_limit(str(proc2 / "proc")) is None
    assert cpu_limit(str(tmp_path / "missing")) is None


def test_cpu_limit_falls_back_to_the_declared_limit_where_cgroups_are_hidden(monkeypatch):
    from taskflow.runtime.worker.worker_plugin import CPU_LIMIT_ENV, cpu_limit

    monkeypatch.delenv(CPU_LIMIT_ENV, raising=False)
    real = cpu_limit()
    monkeypatch.setenv(CPU_LIMIT_ENV, "0.5")
    assert cpu_limit() == (real if real is not None else 0.5)
    monkeypatch.setenv(CPU_LIMIT_ENV, "lots")
    assert cpu_limit() == real


def test_the_workers_cpu_limits_are_a_prior_on_their_speeds_only_where_one_is_limited():
    """A worker's share of a core per thread: its cgroup's limit over its threads, at most 1; a
    worker with no limit, or a heartbeat without the metric, counts as a full core. Where no
    worker is limited below its threads nothing tells them apart: no prior at all."""
    from taskflow.runtime.scheduler.reading import cpu_shares
    from taskflow.runtime.worker.worker_plugin import CPU_METRIC

    def sched(*workers):
        states = [dask_states.worker(f"tcp://{n}:1", nthreads=t, name=n) for n, t, _ in workers]
        for ws, (_, _, metrics) in zip(states, workers):
            ws.metrics = metrics  # what its last heartbeat said
        return dask_states.scheduler(states)

    assert cpu_shares(sched(("a", 1, {CPU_METRIC: None}), ("b", 2, {CPU_METRIC: 0.5}), ("c", 1, {}))) == {
        "a": 1.0,
        "b": 0.25,
        "c": 1.0,
    }
    assert cpu_shares(sched(("a", 1, {CPU_METRIC: 4.0}), ("b", 2, {CPU_METRIC: 2.0}))) == {}  # none below its threads
    assert cpu_shares(sched(("a", 1, {}), ("b", 1, {CPU_METRIC: 0.0}), ("c", 1, {CPU_METRIC: "x"}))) == {}


def test_a_worker_reads_its_cpu_limit_again_only_after_a_while(monkeypatch):
    """The heartbeat metric reads the cgroup's files at most every ``every`` seconds: a worker moved
    into a limited cgroup after it started is seen limited at the next read."""
    from taskflow.runtime.worker import worker_plugin
    from taskflow.runtime.worker.worker_plugin import CpuLimit

    reads = []
    monkeypatch.setattr(worker_plugin, "cpu_limit", lambda: reads.append(1) or (0.25 if len(reads) > 1 else None))
    clock = [100.0]
    monkeypatch.setattr("taskflow.runtime.worker.worker_plugin.time.monotonic", lambda: clock[0])
    m = CpuLimit(every=5.0)
    assert m(None) is None and m(None) is None and len(reads) == 1
    clock[0] += 5.0
    assert m(None) == 0.25 and len(reads) == 2

    def broken():
        raise ValueError("a mountinfo line of a shape not understood")

    monkeypatch.setattr(worker_plugin, "cpu_limit", broken)
    clock[0] += 5.0
    assert m(None) is None and m.read_at == clock[0]  # no limit known, and not read again at once


def test_cpu_limit_of_a_process_in_a_real_cgroup():
    """Root with a writable cgroup v1 cpu hierarchy: a process put in a group with a quota of a
    quarter core reads exactly that."""
    import subprocess

    from taskflow.runtime.worker.worker_plugin import cpu_limit

    base = "/sys/fs/cgroup/cpu"
    if os.geteuid() != 0 or not os.path.isfile(f"{base}/cpu.cfs_quota_us"):
        pytest.skip("needs root and a cgroup v1 cpu hierarchy")
    d = f"{base}/taskflow-test-{os.getpid()}"
    os.makedirs(d, exist_ok=True)
    p = subprocess.Popen(["sleep", "30"])
    try:
        open(f"{d}/cpu.cfs_period_us", "w").write("100000")
        open(f"{d}/cpu.cfs_quota_us", "w").write("25000")
        open(f"{d}/cgroup.procs", "w").write(str(p.pid))
        assert cpu_limit(f"/proc/{p.pid}") == pytest.approx(0.25)
    finally:
        p.kill()
        p.wait()
        os.rmdir(d)


def _slow_on_worker_0(i):
    """20 ms of sleep, three times as long on the worker named 0."""
    from distributed import get_worker

    time.sleep(0.02 * (3 if str(get_worker().name) == "0" else 1))
    return i


def test_the_plugin_learns_worker_speeds_from_task_durations_and_plans_with_them():
    """Worker 0 takes three times as long for the same tasks: after tasks of one prefix ran on both
    workers, the plugin's learned speeds say so (no calibration, no declared speeds), and a HEFT
    plan of Dask code gives the fast worker most of the tasks. (A cluster of its own: what other
    tests ran would be evidence too.)"""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as client,
    ):
        _learns_speeds(client)


def _learns_speeds(client):
    from taskflow.runtime.client.session import call, ensure_plugin

    ensure_plugin(client)
    addrs = {str(w["name"]): a for a, w in workers_info(client).items()}
    futs = [client.submit(_slow_on_worker_0, i, workers=[addrs[str(i % 2)]], pure=False) for i in range(12)]
    assert client.gather(futs) == list(range(12))
    speeds = call(client, "taskflow_status")["learned_speeds"]
    assert speeds["1"] / speeds["0"] == pytest.approx(3.0, rel=0.3)
    work = [dask.delayed(_slow_on_worker_0, pure=False)(i) for i in range(12)]
    got, rep = compute(*work, scheduler="heft", client=client, report=True)
    assert list(got) == list(range(12))
    on_fast = sum(1 for r in rep.trace.runs if str(r.worker) == "1")
    assert on_fast >= 8, on_fast  # equal speeds would split them 6 / 6


def test_the_plugins_duration_table_is_bounded_and_skips_declared_runs(monkeypatch):
    """Prefixes past MAX_PREFIXES push out the oldest; tasks of a taskflow.run graph (declared
    costs, keys unique per run) are not recorded."""
    from types import SimpleNamespace

    from taskflow.runtime.scheduler import reading

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler([dask_states.worker("tcp://a:1", name="w0")])
    tasks = p.dask_scheduler.tasks

    def finish(key, prefix):
        tasks[key] = dask_states.task(key, "memory", prefix, nbytes=100)
        p.transition(
            key,
            "processing",
            "memory",
            worker="tcp://a:1",
            startstops=[{"action": "compute", "start": 0.0, "stop": 0.5}],
        )

    monkeypatch.setattr(reading, "MAX_PREFIXES", 3)
    for k in range(5):
        finish(f"k{k}", f"p{k}")
    assert list(p.durations) == ["p2", "p3", "p4"] and p.durations["p4"] == {"w0": [0.5, 1, 0.5]}
    assert list(p.sizes) == ["p2", "p3", "p4"]
    p.runs["r"] = SimpleNamespace(learned=False, plan={}, state="planned")
    p.key_run["declared-key"] = "r"
    finish("declared-key", "declared")
    assert "declared" not in p.durations


# ---------------------------------------------------------------- a run's states
@pytest.fixture
def validated(monkeypatch):
    """A fresh in-process cluster whose plugin checks every move of every run against its table."""
    monkeypatch.setenv("TASKFLOW_VALIDATE", "1")
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        c.register_plugin(TaskflowPlugin(validate=True), name="taskflow")
        yield lc, c


def test_a_use_run_is_finished_with_its_last_key_and_a_shutdown_after_it_logs_nothing(validated, caplog):
    lc, c = validated
    plugin = lc.scheduler.plugins["taskflow"]
    assert plugin.validate
    x = da.random.RandomState(5).random((200, 200), chunks=50)
    taskflow.use(c, "heft")
    try:
        got = float((x @ x.T).sum().compute())
    finally:
        taskflow.use(c, None)
    assert got == pytest.approx(float(dask.compute((x @ x.T).sum(), scheduler="sync")[0]))
    # finished with its last key, with no later graph needed: its keys released, no restriction left
    assert plugin._count >= 1 and plugin.runs and all(r.state == "finished" for r in plugin.runs.values())
    assert plugin.key_run == {} and not any(ts.worker_restrictions for ts in lc.scheduler.tasks.values())
    with caplog.at_level(logging.WARNING, logger="taskflow.runtime"):
        c.retire_workers(list(lc.scheduler.workers))  # the cluster goes down after the work is done
        t0 = time.time()
        while lc.scheduler.workers and time.time() - t0 < 30:
            time.sleep(0.05)
    assert not lc.scheduler.workers
    assert [r.getMessage() for r in caplog.records if r.name.startswith("taskflow")] == []


def test_a_registered_run_moves_through_its_states_and_a_worker_leaving_after_it_replans_nothing(validated):
    from taskflow.runtime.scheduler import runs

    lc, c = validated
    seen = []
    real = TaskflowPlugin.move

    def watch(self, r, to, *args):
        seen.append((r.state, to))
        return real(self, r, to, *args)

    TaskflowPlugin.move = watch
    try:
        rep = run(chain(6, 0.1), "heft", client=c, quiet=True)
        assert rep.placement_fidelity == 1.0 and len(rep.trace.runs) == 6
        assert seen[:3] == [
            (runs.REGISTERED, runs.PLANNED),
            (runs.PLANNED, runs.RUNNING),
            (runs.RUNNING, runs.FINISHED),
        ]
        assert set(seen) <= runs.TRANSITIONS
        # a graph computed again under use(): the estimate run goes registered -> running -> finished
        seen.clear()
        x = da.ones((100, 100), chunks=50)
        got = compute(x.sum(), scheduler="heft", client=c)
        assert float(got[0]) == 10_000.0
        assert (runs.REGISTERED, runs.RUNNING) in seen and (runs.RUNNING, runs.FINISHED) in seen
        seen.clear()
        c.retire_workers([next(iter(lc.scheduler.workers))])  # after the work: nothing to re-plan
        t0 = time.time()
        while len(lc.scheduler.workers) > 1 and time.time() - t0 < 30:
            time.sleep(0.05)
        assert len(lc.scheduler.workers) == 1 and not any(to == runs.REPLANNING for _, to in seen)
    finally:
        TaskflowPlugin.move = real


def test_a_move_outside_the_table_is_refused_when_validating():
    from taskflow.runtime.scheduler import runs

    p = TaskflowPlugin(validate=True)
    r = runs.GraphRun("r", chain(2, 0.1), taskflow.get_scheduler("heft"), None, None, owned=False)
    assert r.state == runs.REGISTERED
    with pytest.raises(AssertionError, match="no move from registered to finished"):
        p.move(r, runs.FINISHED)
    assert r.state == runs.REGISTERED
    # the table names a method for every allowed move, and only those
    assert set(p._transitions) == runs.TRANSITIONS
    assert all((a, b) in runs.TRANSITIONS for a in runs.STATES for b in runs.STATES if (a, b) in p._transitions)


def _add_slow_handler(dask_scheduler):
    import asyncio

    async def slow_echo(secs: float, value):
        await asyncio.sleep(secs)
        return value

    dask_scheduler.handlers["slow_echo"] = slow_echo


def _burn(stop):
    while not stop.is_set():
        pass


def test_a_call_answered_late_is_waited_for_while_the_scheduler_is_connected(client):
    """A call is watched, not cut at a fixed bound: a scheduler that answers after 5 of the call's
    bounds is waited for; past the call's limit the wait ends, naming the handler."""
    from taskflow.errors import RunTimeout
    from taskflow.runtime.client.session import call

    client.run_on_scheduler(_add_slow_handler)
    t0 = time.monotonic()
    assert call(client, "slow_echo", timeout=0.2, secs=1.0, value=7) == 7
    assert time.monotonic() - t0 < 30  # answered, not hung (a loaded machine's seconds included)
    with pytest.raises(RunTimeout, match="did not answer 'slow_echo' within 1 s"):
        call(client, "slow_echo", timeout=0.2, limit=0.6, secs=3.0, value=7)


def test_the_first_run_on_a_fresh_cluster_with_both_cores_busy_does_not_fail_on_a_bound(monkeypatch):
    """Both cores burned by two other processes and every call's bound 2 ms: the first
    taskflow.compute of a fresh cluster (its plugin installed, a 400-task graph registered and
    planned) waits for the busy scheduler and ends with the right result."""
    import multiprocessing

    from taskflow.runtime.client import session

    monkeypatch.setattr(session, "CALL_TIMEOUT", 0.002)
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    burners = [ctx.Process(target=_burn, args=(stop,), daemon=True) for _ in range(2)]
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        for b in burners:
            b.start()
        try:
            x = da.ones((200, 1000), chunks=(1, 1000))  # 200 chunks: 400+ tasks to plan
            got = taskflow.compute(x.sum(), scheduler="heft", client=c)
        finally:
            stop.set()
            for b in burners:
                b.join(10)
    assert float(got[0] if isinstance(got, tuple) else got) == 200_000.0


def _held_work(tag, n=16):
    parts = [dask.delayed(_nap, pure=True)(i, dask_key_name=f"nap{tag}-{i}") for i in range(n)]
    return dask.delayed(sum, pure=True)(parts, dask_key_name=f"sum{tag}-0")


#: declared speeds 8, 8 and 1: the adaptive scheduler's ``subset`` choice holds Dask to wa and wb
#: (and nothing else: no re-decision)
HELD = dict(choices=["subset"], replans=0)


def _declared_8_8_1():
    return Cluster([Worker("wa", 8.0), Worker("wb", 8.0), Worker("wc", 1.0)])


def test_a_run_held_to_its_fastest_workers_runs_only_there(intact3):
    scheduler = taskflow.get_scheduler("adaptive", **HELD)
    with Client(scheduler_file=str(intact3.sched_file)) as c:
        got, rep = compute(
            _held_work("a", 8), scheduler=scheduler, client=c, cluster=_declared_8_8_1(), report=True, timeout=60
        )
    assert got == (sum(range(8)),)
    assert {r.worker for r in rep.trace.runs} <= {"wa", "wb"} and len(rep.trace.runs) == 9
    assert any("on a subset of its workers" in n for n in rep.notes), rep.notes


def test_a_peer_to_peer_rechunk_is_held_to_its_fastest_workers_shuffle_included(intact3):
    """Dask's shuffle extension places a P2P rechunk's outputs itself, within the workers its
    barrier task is restricted to: the hold covers the whole graph, wc runs none of it, and the
    outputs it pinned stay pinned (each ran once where the extension put it)."""
    scheduler = taskflow.get_scheduler("adaptive", **HELD)
    x = da.random.RandomState(5).random_sample((400, 400), chunks=(400, 25))
    y = x.rechunk((25, 400), method="p2p")
    assert any(
        str(k[0] if isinstance(k, tuple) else k).startswith("rechunk-transfer") for k in y.__dask_graph__()
    )  # a P2P graph indeed
    want = x.compute(scheduler="sync").sum(axis=1)
    with Client(scheduler_file=str(intact3.sched_file)) as c:
        got, rep = compute(
            y.sum(axis=1), scheduler=scheduler, client=c, cluster=_declared_8_8_1(), report=True, timeout=60
        )
    np.testing.assert_allclose(got[0], want)
    assert rep.trace.runs and {r.worker for r in rep.trace.runs} <= {"wa", "wb"}, sorted(
        {r.worker for r in rep.trace.runs}
    )
    assert any("on a subset of its workers" in n for n in rep.notes), rep.notes


def _slow_block(b):
    time.sleep(0.15)
    return b


def test_a_held_peer_to_peer_rechunk_goes_on_when_a_worker_of_its_hold_is_lost(loopback3):
    """wa killed while the blocks before the shuffle run: the hold moves to wb, the shuffle's
    barrier with it, so Dask's shuffle extension pins every output there; the run completes with
    every result, wc running none of it."""
    scheduler = taskflow.get_scheduler("adaptive", **HELD)
    x = da.random.RandomState(6).random_sample((400, 400), chunks=(400, 25))
    y = x.map_blocks(_slow_block, dtype=float).rechunk((25, 400), method="p2p")
    want = x.compute(scheduler="sync").sum(axis=1)
    with Client(scheduler_file=str(loopback3.sched_file)) as c:
        when_busy(c, ["wa", "wb"], lambda: loopback3.kill_worker("wa"))
        t0 = time.time()
        got, rep = compute(
            y.sum(axis=1), scheduler=scheduler, client=c, cluster=_declared_8_8_1(), report=True, timeout=60
        )
        assert time.time() - t0 < 50
    np.testing.assert_allclose(got[0], want)
    assert "wc" not in {r.worker for r in rep.trace.runs}, sorted({r.worker for r in rep.trace.runs})


def test_a_run_held_to_its_fastest_workers_goes_on_when_they_are_lost(loopback3):
    """wa and wb killed once they run tasks: the hold moves to what is left (none: Dask's own on
    wc), and the run completes with every result instead of waiting for them in ``no-worker``."""
    scheduler = taskflow.get_scheduler("adaptive", **HELD)
    with Client(scheduler_file=str(loopback3.sched_file)) as c:

        def kill_fast():
            loopback3.kill_worker("wa")
            loopback3.kill_worker("wb")

        when_busy(c, ["wa", "wb"], kill_fast)
        t0 = time.time()
        got, rep = compute(
            _held_work("b"), scheduler=scheduler, client=c, cluster=_declared_8_8_1(), timeout=60, report=True
        )
        assert got == (sum(range(16)),) and time.time() - t0 < 50
        held = c.run_on_scheduler(
            lambda dask_scheduler: [
                sorted(ts.worker_restrictions or ())
                for k, ts in dask_scheduler.tasks.items()
                if str(k).startswith("napb")
            ]
        )
    assert any(n.startswith("adaptive: left to Dask's own scheduling (no plan") for n in rep.notes), rep.notes
    assert "wc" in {r.worker for r in rep.trace.runs}
    assert not any(held)  # nothing left held to a dead worker
