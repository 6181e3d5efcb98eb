"""The simulator's compiled event loop (taskflow.simulator.fastpath) against the engine it stands
in for: the same runs, in the same order, at the same times, on the same workers, and the same
transfers, on random graphs and clusters and on the shapes the scale benchmark runs."""

import os
import signal

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from taskflow import Cluster, TaskGraph
from taskflow.errors import TaskflowError
from taskflow.jit import compiled, interpreted
from taskflow.simulator import Simulator, fastpath
from workflows.scientific import genome_like, random_layered

from tests.strategies import clusters, graphs


def _both(g, c, scheduler="work-stealing", **kw):
    """The engine's trace and the compiled loop's (its plain-Python twin unless told otherwise)."""
    events = Simulator(g, c, scheduler, "maxmin", **kw)
    engine = events.run(compiled=False)
    sim = Simulator(g, c, scheduler, "maxmin", **kw)
    assert fastpath.unsupported(sim) is None
    loop = sim.run(compiled=True)
    assert loop.meta["engine"] == "compiled" and "engine" not in engine.meta
    # the flows moved by the same kernels: the same rate solves, repaired or whole alike
    assert {k: sim.stats[k] for k in events.stats} == events.stats
    return engine, loop


def _same(engine, loop):
    assert loop.runs == engine.runs  # the same runs, ended in the same order
    assert loop.num_transfers == engine.num_transfers
    assert loop.transfers == engine.transfers
    assert loop.makespan == engine.makespan


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_compiled_loop_runs_what_the_engine_runs_on_random_graphs_and_clusters(data):
    """Speeds, cores, multi-core tasks, per-pair bandwidths, racks, latencies, zero-byte edges and
    infinite bandwidth: every corner the strategies draw."""
    c = data.draw(clusters(max_workers=6))
    g = data.draw(graphs(c, max_tasks=60))
    with interpreted():
        _same(*_both(g, c))


#: static schedulers the plan loop is checked under (list schedulers, clustering, a random plan)
PLANNERS = ["heft", "heft-append", "cpop", "blevel", "mct", "etf", "peft", "minmin", "random", "round-robin"]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_compiled_loop_carries_out_a_plan_as_the_engine_does_on_random_graphs_and_clusters(data):
    """A static plan, each worker in plan order, inputs moved eagerly or once all are computed:
    the same runs, transfers and makespan as the engine, whatever the plan."""
    c = data.draw(clusters(max_workers=6))
    g = data.draw(graphs(c, max_tasks=60))
    scheduler = data.draw(st.sampled_from(PLANNERS))
    fetch = data.draw(st.sampled_from(["eager", "ready"]))
    with interpreted():
        engine, loop = _both(g, c, scheduler, fetch=fetch)
    _same(engine, loop)


def test_the_compiled_loop_carries_out_a_given_plan_file_and_refuses_one_that_misses_a_task():
    g = random_layered(300, shape=1.0, out_degree=2, ccr=1.0, seed=4, bandwidth=1e8)
    c = Cluster.heterogeneous([1.0, 2.0, 3.0, 1.0, 2.0, 4.0], bandwidth=1e8, latency=1e-4)
    plan = Simulator(g, c, "blevel", "maxmin").run(compiled=False).to_schedule()  # a plan no scheduler makes
    with interpreted():
        engine, loop = _both(g, c, None, plan=plan)
    _same(engine, loop)
    assert loop.num_transfers > 20
    short = type(plan)(plan.tasks[1:], plan.workers[1:], plan.start[1:], plan.finish[1:])
    with pytest.raises(TaskflowError, match="plan does not place every task exactly once"):
        Simulator(g, c, None, "maxmin", plan=short).run(compiled=True)


@pytest.mark.parametrize(
    "shape, workers, latency", [("layered", 8, 1e-4), ("layered", 24, 0.0), ("genome", 16, 1e-4), ("fan", 12, 1e-3)]
)
def test_the_compiled_loop_runs_the_scale_benchmark_s_shapes_as_the_engine_does(shape, workers, latency):
    """Enough tasks that idle workers steal, many flows share ports, and the rate solver repairs."""
    if shape == "layered":
        g = random_layered(400, shape=1.0, out_degree=2, ccr=1.0, seed=3, bandwidth=1e8)
    elif shape == "genome":
        g = genome_like(3, 60, 3, seed=2)
    else:  # one producer's output to many consumers with different sizes: a flow waited on by several
        g = TaskGraph("fan")
        g.add_task("src", cost=1.0, output_size=5e7)
        for i in range(80):
            g.add_task(f"c{i}", cost=0.5 + i % 7)
            g.add_edge("src", f"c{i}", size=1e6 * (1 + i % 5))
        g.add_task("sink", cost=1.0)
        for i in range(0, 80, 3):
            g.add_edge(f"c{i}", "sink", size=1e5 * i)
    c = Cluster.heterogeneous([1.0 + (i % 4) for i in range(workers)], bandwidth=1e8, latency=latency)
    with interpreted():
        engine, loop = _both(g, c)
    _same(engine, loop)
    assert loop.num_transfers > 20


def test_the_compiled_loop_runs_in_pieces_that_make_the_same_moves_and_let_python_interrupt_it(monkeypatch):
    """Run 25 events at a time, the loop returns to Python many times and its trace is the
    engine's. Ctrl-C while a piece runs is held until it returns (a signal handler raising inside
    a callback of compiled code comes out as a chain of SystemErrors), then ends the run as a
    KeyboardInterrupt."""
    g = random_layered(300, shape=1.0, out_degree=2, ccr=1.0, seed=5, bandwidth=1e8)
    c = Cluster.heterogeneous([1.0, 2.0, 3.0, 1.0, 2.0], bandwidth=1e8, latency=1e-4)
    calls = []
    whole = fastpath.simulate_ws

    def piece(*args):
        calls.append(args[-1])
        return whole(*args)

    monkeypatch.setattr(fastpath, "simulate_ws", piece)
    monkeypatch.setattr(fastpath, "CHUNK", 25)
    with interpreted():
        engine, loop = _both(g, c)
    _same(engine, loop)
    assert len(calls) > 300 / 25 and set(calls) == {25}

    finished = []

    def interrupted(*args):  # Ctrl-C arrives while the fourth piece runs
        calls.append(args[-1])
        if len(calls) == 4:
            os.kill(os.getpid(), signal.SIGINT)
        out = whole(*args)
        finished.append(len(calls))
        return out

    calls.clear()
    monkeypatch.setattr(fastpath, "simulate_ws", interrupted)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with interpreted(), pytest.raises(KeyboardInterrupt):
            Simulator(g, c, "work-stealing", "maxmin").run(compiled=True)
        assert len(calls) == 4 and finished == [1, 2, 3, 4]  # the piece ran to its end; none after it
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler put back
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_compiled_loop_is_taken_by_itself_from_its_size_on_and_names_what_it_does_not_cover(monkeypatch):
    g = random_layered(120, shape=1.0, out_degree=2, ccr=1.0, seed=1, bandwidth=1e8)
    c = Cluster.heterogeneous([1.0, 2.0, 3.0], bandwidth=1e8)
    monkeypatch.setattr(fastpath, "MIN_TASKS", 100)
    monkeypatch.setenv("TASKFLOW_COMPILE", "always")  # as where the loop's machine code is cached
    with interpreted():
        assert Simulator(g, c, "work-stealing", "maxmin").run().meta["engine"] == "compiled"
        assert "engine" not in Simulator(g, c, "work-stealing", "maxmin").run(compiled=False).meta
        monkeypatch.setattr(fastpath, "MIN_TASKS", 121)
        assert "engine" not in Simulator(g, c, "work-stealing", "maxmin").run().meta
        # not cached: the loop's first compile is taken from COLD_TASKS on only
        monkeypatch.setattr(fastpath, "MIN_TASKS", 100)
        monkeypatch.setenv("TASKFLOW_COMPILE", "auto")
        monkeypatch.setattr(fastpath, "ready", lambda sim: False)
        monkeypatch.setattr(fastpath, "COLD_TASKS", 121)
        assert "engine" not in Simulator(g, c, "work-stealing", "maxmin").run().meta
        monkeypatch.setattr(fastpath, "COLD_TASKS", 120)
        assert Simulator(g, c, "work-stealing", "maxmin").run().meta["engine"] == "compiled"
        monkeypatch.setenv("TASKFLOW_COMPILE", "never")
        assert "engine" not in Simulator(g, c, "work-stealing", "maxmin").run().meta
    monkeypatch.setenv("TASKFLOW_COMPILE", "always")
    cases = {
        "scheduler 'blevel-dynamic'": dict(scheduler="blevel-dynamic"),
        "plan_order='ready'": dict(scheduler="heft", plan_order="ready"),
        "network 'simple'": dict(network="simple"),
        "noise, stragglers or failures": dict(noise=0.1),
        "a scheduler interval": dict(scheduler_interval=1.0),
        "validate=True": dict(validate=True),
        "blind to speeds": dict(scheduler_options={"knows_speeds": False}),
    }
    for why, kw in cases.items():
        args = {"scheduler": "work-stealing", "network": "maxmin", **kw}
        scheduler, network = args.pop("scheduler"), args.pop("network")
        sim = Simulator(g, c, scheduler, network, **args)
        assert why in fastpath.unsupported(sim)
        with pytest.raises(TaskflowError, match=f"the compiled loop does not cover this run: .*{why}"):
            sim.run(compiled=True)
        with interpreted():  # above the size, what it does not cover goes to the engine
            assert "engine" not in Simulator(g, c, scheduler, network, **args).run().meta


@pytest.mark.slow
def test_the_compiled_loop_compiled_runs_what_the_engine_runs():
    """The numba-compiled loop itself (the tests above run its plain-Python twin), on a graph large
    enough that its arrays grow several times."""
    g = random_layered(3000, shape=1.0, out_degree=2, ccr=1.0, seed=5, bandwidth=1e8)
    c = Cluster.heterogeneous([1.0 + (i % 4) for i in range(40)], bandwidth=1e8, latency=1e-4)
    with compiled():
        for scheduler in ("work-stealing", "heft"):
            engine, loop = _both(g, c, scheduler)
            _same(engine, loop)
            assert np.isfinite(loop.makespan)


def test_kernels_compiled_without_reference_counting_allocate_nothing_and_return_no_array():
    """A kernel compiled with ``_nrt=False`` must not allocate an array, nor call a kernel that
    does (numba compiles a callee with its caller's flags), nor return a tuple or array to a
    caller that counts references (it would free it early)."""
    import ast
    import inspect

    from taskflow.jit import Kernel
    from taskflow.simulator import _datamoves, _loopstate, _planloop, _taskmoves, _wsloop
    from taskflow.simulator.network import _flows, _flowstate

    allocating = {"empty", "zeros", "full", "ones", "arange", "concatenate", "copy", "List", "empty_like"}
    checked = {}

    def bare(k):
        """The kernel ``k``, and every kernel it calls, allocates nothing and returns scalars."""
        if k in checked:
            return
        checked[k] = True
        tree = ast.parse(inspect.getsource(k.py_func).split("\n", 1)[1])  # without the decorator
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                assert called not in allocating, f"{k!r} allocates ({called})"
                target = k.py_func.__globals__.get(called) if isinstance(f, ast.Name) else None
                if isinstance(target, Kernel):
                    bare(target)
            if isinstance(node, ast.Return) and node.value is not None:
                assert not isinstance(node.value, (ast.Tuple, ast.List)), f"{k!r} returns a tuple"

    off = [
        k
        for mod in (_loopstate, _datamoves, _taskmoves, _flowstate, _flows, _wsloop, _planloop)
        for k in vars(mod).values()
        if isinstance(k, Kernel) and k.__module__ == mod.__name__ and k.options.get("_nrt", True) is False
    ]
    assert len(off) >= 20  # the loop's helpers
    for k in off:
        bare(k)
    names = {k.__name__ for k in off}
    assert not names & {
        "simulate_ws",
        "simulate_plan",
        "make_room",
        "_grown1",
        "next_time",
        "pop_due",
    }  # these allocate
