import json

import pytest

import schedulers
from taskflow import Cluster, Schedule, TaskGraph, Worker, load_cluster, load_graphs, simulate
from taskflow.errors import TaskflowError
from workflows.scientific import random_layered

from tests.conftest import EXAMPLES, shared_graph_files

DYNAMIC = schedulers.available("dynamic")
# every scheduler the simulator carries out (a plan with task copies is a plan only: see test_heft_dup)
ALL = [n for n in schedulers.available() if not schedulers.scheduler_class(n).duplicates]


def cluster_for(path):
    if path.name.startswith("heft_paper"):
        return load_cluster(EXAMPLES / "heft_paper.cluster.json")
    return Cluster(
        [Worker(f"w{i}", speed=s, cores=4) for i, s in enumerate([1, 1.5, 2, 3])], bandwidth=125e6, latency=1e-3
    )


# ---------------------------------------------------------------- consistency with plans
@pytest.mark.parametrize("path", shared_graph_files(), ids=lambda p: p.name)
def test_simple_network_reproduces_static_plans_exactly(path):
    c = cluster_for(path)
    for g in load_graphs(path):
        for name in ("heft", "cpop", "blevel"):
            plan = schedulers.get_scheduler(name).schedule(g, c)
            trace = simulate(g, c, name, network="simple")
            trace.validate(g, c)
            assert trace.makespan == pytest.approx(plan.makespan, rel=1e-9, abs=1e-12), (g.name, name)
            planned = {t: s for t, s in zip(plan.tasks, plan.start.tolist())}
            assert all(abs(r.start - planned[r.task]) <= 1e-9 * max(1, plan.makespan) for r in trace.runs)
            maxmin = simulate(g, c, name, network="maxmin", plan=plan)
            maxmin.validate(g, c)
            assert maxmin.makespan >= trace.makespan * (1 - 1e-12), (g.name, name)


# ---------------------------------------------------------------- max-min by hand
def fan_in(sizes, bandwidth=100.0):
    """Sources s0.. on w0.. each send sizes[k] bytes to a sink on the last worker."""
    g = TaskGraph("fan-in")
    n = len(sizes)
    for k, z in enumerate(sizes):
        g.add_task(f"s{k}", cost=1.0, output_size=z)
    g.add_task("sink", cost=1.0)
    for k in range(n):
        g.add_edge(f"s{k}", "sink")
    c = Cluster.homogeneous(n + 1, bandwidth=bandwidth)
    plan = Schedule(
        [f"s{k}" for k in range(n)] + ["sink"],
        [f"w{k}" for k in range(n)] + [f"w{n}"],
        [0.0] * n + [0.0],
        [1.0] * n + [1.0],
    )
    return g, c, plan


def test_two_transfers_into_one_worker_each_get_half_its_bandwidth():
    g, c, plan = fan_in([100, 100])
    simple = simulate(g, c, network="simple", plan=plan)
    maxmin = simulate(g, c, network="maxmin", plan=plan)
    # simple: each 100 B at 100 B/s after the sources finish at 1 -> 2; maxmin: 50 B/s each -> 3
    assert sorted(t.finish for t in simple.transfers) == [2.0, 2.0]
    assert [t.finish for t in maxmin.transfers] == pytest.approx([3.0, 3.0])
    assert {r.task: r.start for r in maxmin.runs}["sink"] == pytest.approx(3.0)
    maxmin.validate(g, c)


def test_a_backplane_is_shared_by_flows_that_share_no_worker():
    """Two disjoint pairs (w0 -> w1, w2 -> w3), 100 B each at 100 B/s: without a backplane both take
    1 s; a 100 B/s backplane halves each (2 s); a 150 B/s one leaves 75 B/s each; 'simple' ignores it."""

    def pairs(meta_b=None):
        g = TaskGraph("pairs")
        for a, b in (("a", "b"), ("c", "d")):
            g.add_task(a, cost=1.0, output_size=100)
            g.add_task(b, cost=1.0, meta=meta_b if b == "b" else None)
            g.add_edge(a, b)
        return g

    g = pairs()
    plan = Schedule(["a", "c", "b", "d"], ["w0", "w2", "w1", "w3"], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 2.0, 2.0])
    for backplane, secs in ((None, 1.0), (100.0, 2.0), (150.0, 100 / 75), (1e9, 1.0)):
        c = Cluster.homogeneous(4, bandwidth=100.0).replace(backplane=backplane)
        tr = simulate(g, c, network="maxmin", plan=plan)
        tr.validate(g, c)
        assert [t.finish - t.start for t in tr.transfers] == pytest.approx([secs, secs]), backplane
        assert simulate(g, c, network="simple", plan=plan).makespan == pytest.approx(3.0)
    # with priority classes the first class takes the backplane first
    g = pairs({"priority": 1})
    c = Cluster.homogeneous(4, bandwidth=100.0).replace(backplane=100.0)
    tr = simulate(g, c, network="maxmin", plan=plan)
    assert sorted(t.finish for t in tr.transfers) == pytest.approx([2.0, 3.0])


def test_transfer_priorities_are_strict_and_work_conserving():
    """s0 -> hi (priority 1) and s1 -> lo on w2: hi's bytes go first at the full 100 B/s, lo's wait.
    With s0 also sending to a second consumer on w3, s0's upload is split 50/50 and lo takes the
    download capacity hi leaves (50 B/s)."""

    def build(extra):
        g = TaskGraph("prio")
        g.add_task("s0", cost=1.0, output_size=100)
        g.add_task("s1", cost=1.0, output_size=100)
        g.add_task("hi", cost=1.0, meta={"priority": 1})
        g.add_task("lo", cost=1.0)
        g.add_edge("s0", "hi")
        g.add_edge("s1", "lo")
        tasks, workers = ["s0", "s1", "hi", "lo"], ["w0", "w1", "w2", "w2"]
        if extra:
            g.add_task("far", cost=1.0, meta={"priority": 1})
            g.add_edge("s0", "far")
            tasks, workers = tasks + ["far"], workers + ["w3"]
        plan = Schedule(tasks, workers, [0.0] * len(tasks), [1.0] * len(tasks))
        return g, Cluster.homogeneous(4, bandwidth=100.0), plan

    g, c, plan = build(False)
    tr = simulate(g, c, network="maxmin", plan=plan)
    assert {t.task: t.finish for t in tr.transfers} == pytest.approx({"s0": 2.0, "s1": 3.0})
    tr.validate(g, c)
    g, c, plan = build(True)
    tr = simulate(g, c, network="maxmin", plan=plan)
    done = {(t.task, t.destination): t.finish for t in tr.transfers}
    assert done[("s0", "w2")] == pytest.approx(3.0) and done[("s0", "w3")] == pytest.approx(3.0)
    assert done[("s1", "w2")] == pytest.approx(3.0)  # 50 B/s alongside, not starved
    assert {t.finish for t in simulate(g, c, network="simple", plan=plan).transfers} == {2.0}  # no contention
    bad = g.copy()
    bad._meta[bad.arrays.index["lo"]] = {"priority": "high"}
    with pytest.raises(TaskflowError, match="task 'lo': meta priority must be a finite number"):
        simulate(bad, c, network="maxmin", plan=plan)


def test_rates_are_recomputed_when_a_transfer_ends():
    g, c, plan = fan_in([100, 300])
    tr = simulate(g, c, network="maxmin", plan=plan)
    done = {t.task: t.finish for t in tr.transfers}
    # both at 50 B/s until the small one ends at 1 + 2 = 3 (large has 100 of 300); then 100 B/s: 5
    assert done["s0"] == pytest.approx(3.0)
    assert done["s1"] == pytest.approx(5.0)


def test_upload_is_shared_too_and_latency_comes_first():
    g = TaskGraph()
    g.add_task("src", cost=1.0, output_size=100)
    g.add_task("a", cost=1.0)
    g.add_task("b", cost=1.0)
    g.add_edge("src", "a")
    g.add_edge("src", "b")
    c = Cluster.homogeneous(3, bandwidth=100.0, latency=0.5)
    plan = Schedule(["src", "a", "b"], ["w0", "w1", "w2"], [0, 0, 0], [1, 1, 1])
    tr = simulate(g, c, network="maxmin", plan=plan)
    assert [t.finish for t in tr.transfers] == pytest.approx([1 + 0.5 + 2.0] * 2)
    simple = simulate(g, c, network="simple", plan=plan)
    assert [t.finish for t in simple.transfers] == pytest.approx([2.5, 2.5])


def test_an_output_is_sent_to_a_worker_once():
    g = TaskGraph()
    g.add_task("src", cost=1.0, output_size=100)
    for k in range(3):
        g.add_task(f"c{k}", cost=1.0)
        g.add_edge("src", f"c{k}")
    c = Cluster.homogeneous(2, bandwidth=100.0)
    plan = Schedule(["src", "c0", "c1", "c2"], ["w0", "w1", "w1", "w1"], [0, 2, 3, 4], [1, 3, 4, 5])
    for net in ("simple", "maxmin"):
        tr = simulate(g, c, network=net, plan=plan)
        assert len(tr.transfers) == 1 and tr.transfers[0].bytes == 100


# ---------------------------------------------------------------- truth vs estimates, faults
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("network", ["simple", "maxmin"])
def test_every_trace_validates_with_noise_stragglers_and_a_failure(name, network):
    c = Cluster(
        [Worker(f"w{i}", speed=s, cores=k) for i, (s, k) in enumerate([(1, 2), (2, 1), (1.5, 2), (3, 1)])],
        bandwidth=50.0,
        latency=0.05,
    )
    g = random_layered(60, shape=1.0, out_degree=2, ccr=1.0, seed=4, bandwidth=50.0)
    # the exact scheduler's search is bounded small: what is tested here is the simulator, not the solver
    options = {"budget": 0.1} if name == "optimal" else None
    base = simulate(g, c, name, network=network, scheduler_options=options)
    for kw in (
        dict(noise=0.5, seed=2),
        dict(stragglers={"w1": (4.0, 20.0)}),
        dict(fail={"w2": base.makespan * 0.4}),
        dict(fail={"w0": 5.0, "w3": base.makespan * 0.6}, noise=0.3),
    ):
        tr = simulate(g, c, name, network=network, validate=True, scheduler_options=options, **kw)
        tr.validate(g, c)
        counts = {}
        for r in tr.runs:
            counts[r.task] = counts.get(r.task, 0) + 1
        assert set(counts) == set(g.ids)  # nothing lost
        assert {t for t, k in counts.items() if k > 1} == tr.recomputed  # nothing else ran twice
        if "fail" not in kw:
            assert not tr.recomputed and not tr.lost


def failure_graph(edge_ab):
    """a (w0) feeds b (w1, edge size edge_ab) and c (w0, 10 B); c (long) feeds the sink d (w1)."""
    g = TaskGraph()
    g.add_task("a", cost=1.0, output_size=10)
    g.add_task("b", cost=1.0)
    g.add_task("c", cost=5.0, output_size=1)
    g.add_task("d", cost=1.0)
    g.add_edge("a", "b", size=edge_ab)
    g.add_edge("a", "c", size=10)
    g.add_edge("c", "d")
    c = Cluster.homogeneous(2, bandwidth=10.0)
    plan = Schedule(
        ["a", "b", "c", "d"], ["w0", "w1", "w0", "w1"], [0, 1 + edge_ab / 10, 1, 6.1], [1, 2 + edge_ab / 10, 6, 7.1]
    )
    plan.validate(g, c)
    return g, c, plan


def test_failure_recomputes_exactly_the_lost_outputs_still_needed():
    # w0 dies at 3 while c runs there; c must rerun on w1 and needs a's 10 B: w1 holds none (the
    # a -> b edge carried 0 B), so a is recomputed too. b and its output are untouched.
    g, c, plan = failure_graph(edge_ab=0)
    tr = simulate(g, c, "heft", network="simple", plan=plan, fail={"w0": 3.0})
    tr.validate(g, c)
    assert tr.recomputed == {"a"}
    assert [x[0] for x in tr.lost] == ["c"]
    runs = {r.run: r for r in tr.runs}
    assert runs["a#2"].worker == "w1" and runs["a#2"].start == pytest.approx(3.0)
    assert runs["c"].worker == "w1" and runs["c"].start == pytest.approx(4.0)
    assert tr.served_by == {"c": {"a": "a#2"}}
    assert tr.makespan == pytest.approx(4.0 + 5.0 + 1.0)


def test_a_surviving_copy_prevents_recomputation():
    g, c, plan = failure_graph(edge_ab=10)  # b's worker received all of a's output
    tr = simulate(g, c, "heft", network="simple", plan=plan, fail={"w0": 3.0})
    tr.validate(g, c)
    assert tr.recomputed == set() and [x[0] for x in tr.lost] == ["c"]


@pytest.mark.parametrize("name", DYNAMIC)
def test_dynamic_schedulers_are_told_of_a_lost_worker(name):
    g = random_layered(80, out_degree=2, seed=3, bandwidth=100.0)
    c = Cluster.homogeneous(3, bandwidth=100.0)
    tr = simulate(g, c, name, network="maxmin", fail={"w1": 30.0})
    tr.validate(g, c)
    assert all(r.worker != "w1" or r.finish <= 30.0 for r in tr.runs)


def test_noise_is_seeded_and_information_modes_reach_the_scheduler():
    g = random_layered(50, out_degree=2, seed=1, bandwidth=10.0)
    c = Cluster.heterogeneous([1, 2, 4], bandwidth=10.0)
    a = simulate(g, c, "heft", network="simple", noise=0.3, seed=5)
    b = simulate(g, c, "heft", network="simple", noise=0.3, seed=5)
    d = simulate(g, c, "heft", network="simple", noise=0.3, seed=6)
    assert a.makespan == b.makespan != d.makespan
    workers = {
        m: [r.worker for r in simulate(g, c, "heft", network="simple", information=m).runs]
        for m in ("exact", "mean", "blind")
    }
    assert workers["exact"] != workers["blind"]  # the plan was made from other costs
    for m in ("mean", "blind", "user"):
        simulate(g, c, "heft", network="maxmin", information=m).validate(g, c)


def test_decision_latency_and_interval():
    g = random_layered(40, out_degree=2, seed=2, bandwidth=10.0)
    c = Cluster.homogeneous(3, bandwidth=10.0)
    base = simulate(g, c, "heft", network="simple")
    late = simulate(g, c, "heft", network="simple", decision_latency=2.5)
    assert late.makespan == pytest.approx(base.makespan + 2.5)
    assert min(r.start for r in late.runs) == pytest.approx(2.5)
    ws = simulate(g, c, "work-stealing", network="simple")
    slow = simulate(g, c, "work-stealing", network="simple", scheduler_interval=5.0, decision_latency=1.0)
    slow.validate(g, c)
    assert slow.makespan > ws.makespan


# ---------------------------------------------------------------- static vs dynamic
def wide_graph():
    g = TaskGraph("wide")
    g.add_task("src", cost=1, output_size=1000)
    for i in range(64):
        g.add_task(f"t{i}", cost=10, output_size=1000)
        g.add_edge("src", f"t{i}")
    g.add_task("sink", cost=1)
    for i in range(64):
        g.add_edge(f"t{i}", "sink")
    return g


def test_work_stealing_beats_a_static_plan_under_a_straggler_and_noise():
    g, c = wide_graph(), Cluster.homogeneous(4, bandwidth=1e6)
    for kw in (dict(stragglers={"w1": (5.0, 0.0)}), dict(noise=1.0, seed=1)):
        heft = simulate(g, c, "heft", network="maxmin", **kw)
        ws = simulate(g, c, "work-stealing", network="maxmin", **kw)
        assert ws.makespan < 0.9 * heft.makespan, kw


def test_static_plan_beats_work_stealing_when_communication_dominates():
    cl = Cluster.homogeneous(4, bandwidth=1.0, prefix="p")
    g = random_layered(200, shape=1.0, out_degree=3, ccr=10.0, beta=1.0, workers=cl.ids, seed=0)
    heft = simulate(g, cl, "heft", network="simple")
    ws = simulate(g, cl, "work-stealing", network="simple")
    assert heft.makespan < 0.8 * ws.makespan


# ---------------------------------------------------------------- errors and outputs
def test_bad_simulation_requests():
    g = wide_graph()
    c = Cluster.homogeneous(2)
    with pytest.raises(TaskflowError, match="unknown network model 'fast'"):
        simulate(g, c, network="fast")
    with pytest.raises(TaskflowError, match="fail: unknown worker 'w7'"):
        simulate(g, c, fail={"w7": 1.0})
    with pytest.raises(TaskflowError, match="at least one must survive"):
        simulate(g, c, fail={"w0": 1.0, "w1": 2.0})
    with pytest.raises(TaskflowError, match="unknown information mode"):
        simulate(g, c, information="psychic")


def test_trace_document_and_chrome_trace(tmp_path):
    g, c, plan = failure_graph(edge_ab=0)
    tr = simulate(g, c, "heft", network="maxmin", plan=plan, fail={"w0": 3.0})
    doc = tr.to_dict()
    assert doc["format"] == "taskflow-schedule/1" and doc["makespan"] == tr.makespan
    assert {a["task"] for a in doc["assignments"]} == {"a", "a#2", "b", "c", "d"}
    assert all(set(t) == {"task", "source", "destination", "bytes", "start", "finish"} for t in doc["transfers"])
    events = tr.chrome_trace()
    assert {e["ph"] for e in events} == {"X"} and any(e["pid"] == "network" for e in events)
    json.dumps(events)


# ---------------------------------------------------------------- property test
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from tests.strategies import problems  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    problem=problems(max_tasks=40),
    name=st.sampled_from(ALL),
    network=st.sampled_from(["simple", "maxmin"]),
    noise=st.sampled_from([0.0, 0.5]),
    fail_at=st.one_of(st.none(), st.floats(0.0, 60.0)),
    seed=st.integers(0, 5),
    interval=st.sampled_from([0.0, 0.0, 1.0]),
    latency=st.sampled_from([0.0, 0.5]),
    plan_order=st.sampled_from(["strict", "ready"]),
    fetch=st.sampled_from(["eager", "ready"]),
)
def test_random_simulations_always_validate(
    problem, name, network, noise, fail_at, seed, interval, latency, plan_order, fetch
):
    g, c = problem
    fail = {c.ids[-1]: fail_at} if fail_at is not None and len(c) > 1 else None
    # a worker may be the only one able to run a multi-core task: then it cannot be lost
    if fail and int(g.arrays.cores.max()) > int(c.cores[:-1].max()):
        fail = None
    tr = simulate(
        g,
        c,
        name,
        network=network,
        noise=noise,
        fail=fail,
        seed=seed,
        scheduler_interval=interval,
        decision_latency=latency,
        validate=True,
        plan_order=plan_order,
        fetch=fetch,
    )
    assert tr.problems(g, c) == []
    counts = {}
    for r in tr.runs:
        counts[r.task] = counts.get(r.task, 0) + 1
    assert set(counts) == set(g.ids)
    assert {t for t, k in counts.items() if k > 1} == tr.recomputed


def test_a_consumer_joining_a_transfer_late_gets_its_bytes_now_not_in_the_past():
    # regression: work stealing assigned a task after part of a transfer it needed had already
    # arrived; the arrival was scheduled in the past and the task started before its input
    from taskflow.app.suite import BW, build_workflow

    g = build_workflow(("layered", 10.0), 2)
    c = Cluster([Worker(f"w{i}", 1.0, 1) for i in range(4)], bandwidth=BW, latency=1e-3)
    for net in ("simple", "maxmin"):
        tr = simulate(g, c, "work-stealing", network=net, seed=2)
        assert tr.problems(g, c) == []


# ---------------------------------------------------------------- the state machine
def test_the_documented_transition_table_is_the_one_the_engine_uses():
    from taskflow.simulator import engine
    from taskflow.simulator.states import TaskState

    rows = []
    for line in engine.__doc__.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in TaskState.__members__ and words[1] in TaskState.__members__:
            rows.append((TaskState[words[0]], TaskState[words[1]]))
    g = random_layered(10, seed=1)
    sim = engine.Simulator(g, Cluster.homogeneous(2), "heft")
    assert len(rows) == len(set(rows)) == 7
    assert set(rows) == set(sim._transitions)
    for (a, b), move in sim._transitions.items():
        assert move.__name__ == f"_transition_{a.name.lower()}_{b.name.lower()}"


def test_a_move_outside_the_table_is_an_internal_error_and_validate_checks_preconditions():
    from taskflow.simulator.engine import Simulator
    from taskflow.simulator.states import DONE, QUEUED, RUNNING

    g = TaskGraph()
    g.add_task("a", cost=1.0)
    c = Cluster.homogeneous(2)
    sim = Simulator(g, c, "heft", network="simple", validate=True)
    with pytest.raises(RuntimeError, match="task 'a': no transition WAITING -> DONE"):
        sim._transition(0, DONE)
    sim._transition(0, QUEUED, 1)
    assert (sim.status[0], sim.assigned[0], sim.queued_on(1)) == (QUEUED, 1, [0])
    sim.free[1] = 0  # no free core: starting it now breaks a precondition
    with pytest.raises(AssertionError):
        sim._transition(0, RUNNING, 1)
    quiet = Simulator(g, c, "heft", network="simple")  # without validate nothing is checked
    quiet._transition(0, QUEUED, 1)
    quiet.free[1] = 0
    quiet._transition(0, RUNNING, 1)
    assert quiet.status[0] == RUNNING and quiet.free[1] == -1


def test_a_worker_s_queue_keeps_assignment_order_when_a_task_leaves_its_middle():
    """Tasks queued on a worker, one moved to another worker, one started: each worker's queue
    (``Simulator.queued_on``, the view's ``queued``) keeps the rest in assignment order, and the
    counts follow."""
    from taskflow.simulator.engine import Simulator
    from taskflow.simulator.states import QUEUED, RUNNING

    g = TaskGraph()
    for t in "abcd":
        g.add_task(t, cost=1.0)
    sim = Simulator(g, Cluster.homogeneous(2), "heft", network="simple", validate=True)
    for i in range(4):
        sim._transition(i, QUEUED, 1)
    sim._transition(1, QUEUED, 0)  # b moves to worker 0
    assert (sim.queued_on(0), sim.queued_on(1)) == ([1], [0, 2, 3])
    sim._transition(2, RUNNING, 1)  # c starts
    assert (sim.view.queued(0), sim.view.queued(1)) == ([1], [0, 3])
    assert sim.view.queued_counts().tolist() == [1, 2] and sim.view.nqueued(1) == 2
    sim._transition(0, QUEUED, 0)  # a joins worker 0's queue last
    assert (sim.queued_on(0), sim.queued_on(1), sim.view.running(1)) == ([1, 0], [3], [2])


def test_internal_invariant_breaks_are_not_user_errors():
    """The CLI reports TaskflowError as a user's mistake (exit 2); a broken invariant is a bug."""
    from taskflow.simulator.engine import Simulator

    g = random_layered(20, seed=2)
    sim = Simulator(g, Cluster.homogeneous(2), "heft", network="simple")
    sim.status[3] = sim.status[3].__class__.QUEUED  # a task left unfinished by a broken engine
    sim.assigned[3] = 1
    with pytest.raises(RuntimeError, match="unfinished task") as e:
        sim.check_finished()
    assert not isinstance(e.value, TaskflowError)


def test_a_plan_runs_strictly_or_as_dask_runs_it():
    """w0's plan: b (waits for x from w1, there at 5) then a (ready at once). Strictly, w0 idles
    until 5 and runs a after b; run as Dask runs a plan (the earliest-planned task that can run), a
    fills the gap."""
    g = TaskGraph()
    g.add_task("x", cost=5.0, output_size=0)
    g.add_task("b", cost=1.0)
    g.add_task("a", cost=1.0)
    g.add_edge("x", "b", size=0)
    c = Cluster.homogeneous(2, bandwidth=1e9)
    plan = Schedule(["x", "b", "a"], ["w1", "w0", "w0"], [0.0, 5.0, 6.0], [5.0, 6.0, 7.0])
    strict = simulate(g, c, network="simple", plan=plan)
    ready = simulate(g, c, network="simple", plan=plan, plan_order="ready", validate=True)
    starts = {r.task: r.start for r in strict.runs}
    assert starts == {"x": 0.0, "b": 5.0, "a": 6.0} and strict.makespan == 7.0
    starts = {r.task: r.start for r in ready.runs}
    assert starts == {"x": 0.0, "a": 0.0, "b": 5.0} and ready.makespan == 6.0
    ready.validate(g, c)
    with pytest.raises(TaskflowError, match="plan_order must be 'strict' or 'ready'"):
        simulate(g, c, plan=plan, plan_order="greedy")


def test_inputs_move_as_each_is_computed_or_once_all_are():
    """c on w1 needs a (w0, done at 1, 10 bytes at 10 B/s) and b (w0, done at 5): eagerly a's
    transfer runs 1-2 while b computes, then b's 5-6; fetched when c is ready (Dask's own
    scheduling), both leave at 5 and share w0's link: 5-7."""
    g = TaskGraph()
    g.add_task("a", cost=1.0, output_size=10)
    g.add_task("b", cost=4.0, output_size=10)
    g.add_task("c", cost=1.0)
    g.add_edge("a", "c")
    g.add_edge("b", "c")
    c = Cluster.homogeneous(2, bandwidth=10.0)
    plan = Schedule(["a", "b", "c"], ["w0", "w0", "w1"], [0.0, 1.0, 6.0], [1.0, 5.0, 7.0])
    eager = simulate(g, c, network="maxmin", plan=plan, plan_order="ready", validate=True)
    ready = simulate(g, c, network="maxmin", plan=plan, plan_order="ready", fetch="ready", validate=True)
    assert sorted((t.task, t.start, t.finish) for t in eager.transfers) == [("a", 1.0, 2.0), ("b", 5.0, 6.0)]
    assert sorted((t.task, t.start, t.finish) for t in ready.transfers) == [("a", 5.0, 7.0), ("b", 5.0, 7.0)]
    assert eager.makespan == 7.0 and ready.makespan == 8.0
    ready.validate(g, c)
    with pytest.raises(TaskflowError, match="fetch must be 'eager' or 'ready'"):
        simulate(g, c, plan=plan, fetch="later")


def test_the_engine_makes_its_moves_by_the_compiled_loops_own_kernels():
    """Each move of a task or of data is written once (``_taskmoves``, ``_datamoves``): the
    engine's versions are those kernels' own code, run with the engine's kernels of flows and
    transitions bound in, and the compiled loops define nothing but their loop and work
    stealing's choices."""
    from taskflow.jit import Kernel
    from taskflow.simulator import _datamoves, _planloop, _taskmoves, _wsloop
    from taskflow.simulator._loopstate import NPLACED
    from taskflow.simulator.engine import Simulator

    sim = Simulator(random_layered(30, seed=3), Cluster.homogeneous(3), "work-stealing", network="maxmin")
    ran = {
        sim._place_k: _taskmoves.place,
        sim._apply_k: _taskmoves.apply_decisions,
        sim._start_ready: _taskmoves.start_ready,
        sim._in_order: _taskmoves.start_in_order,
        sim._ready: _taskmoves.runnable,
        sim._fetch: _datamoves.fetch_inputs,
        sim._released: _datamoves.consumer_released,
        sim._done: _datamoves.flow_done,
        sim._only_copy: _datamoves.only_copy,
    }
    for engine_version, k in ran.items():
        assert engine_version.__code__ is k.py_func.__code__, k
    # the rule reaches the engine's flows through what the engine bound, at any depth
    need = sim._fetch.__globals__["need_input"]
    assert need.__code__ is _datamoves.need_input.py_func.__code__
    assert need.__globals__["open_flow"] == sim._open_flow and need.__globals__["live_flow"] == sim._live_flow
    assert _datamoves.need_input.py_func.__globals__["open_flow"] is _datamoves.open_flow  # the kernel untouched
    own = {
        name
        for mod in (_wsloop, _planloop)
        for name, k in vars(mod).items()
        if isinstance(k, Kernel) and k.__module__ == mod.__name__
    }
    assert own == {"simulate_ws", "simulate_plan", "_choose_ready", "_choose_steal"}
    tr = sim.run(compiled=False)
    assert len(tr.runs) == 30 and sim.C[NPLACED] >= 30  # every task placed by the shared kernel


def test_a_ready_queue_first_come_first_served_and_a_heap_of_equal_priorities_start_the_same():
    """Where a dynamic scheduler's priorities are all equal the engine keeps each worker's ready
    tasks in the compiled loop's list (first come, first served); a scheduler that gives every
    task the same priority through its own ``priority`` gets the heap. Both start the same tasks
    at the same times."""
    from schedulers.work_stealing import WorkStealing
    from taskflow.simulator._loopstate import RQ_TASK
    from taskflow.simulator.engine import Simulator

    class Equal(WorkStealing):
        name = "work-stealing-equal"

        def priority(self, task):
            return 0.0

    g = random_layered(300, seed=5, ccr=1.0)
    c = Cluster.heterogeneous([1.0, 2.0, 3.0, 1.5], bandwidth=1e8)
    fifo = Simulator(g, c, "work-stealing", network="maxmin", validate=True)
    heaped = Simulator(g, c, Equal(seed=0), network="maxmin", validate=True)
    assert fifo.fifo and not heaped.fifo and heaped.heaped
    a, b = fifo.run(compiled=False), heaped.run(compiled=False)
    assert len(fifo.F[RQ_TASK]) >= len(g) and not any(fifo.rq)  # the list, not the heap
    assert not heaped.F[RQ_TASK]  # the heap, not the list
    assert [(r.task, r.worker, r.start, r.finish) for r in a.runs] == [
        (r.task, r.worker, r.start, r.finish) for r in b.runs
    ]
    assert [tuple(t) for t in a.transfers] == [tuple(t) for t in b.transfers]
