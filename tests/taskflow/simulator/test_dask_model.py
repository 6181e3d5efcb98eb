"""The simulator's model of Dask's own scheduling decisions (``dask-model``), rule by rule, and the
periodic call it steals on."""

import collections

import pytest

from taskflow import Cluster, TaskGraph, Worker, simulate
from taskflow.scheduling import DynamicScheduler
from taskflow.runtime.messages import workers_info
from taskflow.runtime.predict import dask_priorities
from tests.conftest import NO_HTTP

NO_STEAL = {"steal_interval": None}


def chain(n, cost=1.0, size=0.0, name="c"):
    g = TaskGraph(name)
    for i in range(n):
        g.add_task(f"c{i}", cost=cost, output_size=size)
        if i:
            g.add_edge(f"c{i - 1}", f"c{i}")
    return g


def fan(width, cost=1.0, size=0.0, kind="s"):
    """One root whose output ``width`` tasks of one kind read, and a sink."""
    g = TaskGraph("fan")
    g.add_task("root", cost=0.1, output_size=size)
    for i in range(width):
        g.add_task(f"{kind}{i}", cost=cost, output_size=size)
        g.add_edge("root", f"{kind}{i}")
    g.add_task("sink", cost=0.1)
    for i in range(width):
        g.add_edge(f"{kind}{i}", "sink")
    return g


def workers_of(trace):
    return {r.task: r.worker for r in trace.runs}


@pytest.mark.parametrize("n_tasks", range(8))
def test_a_lone_root_goes_round_robin_from_n_tasks_in_the_table_order(n_tasks):
    c = Cluster([Worker(f"w{i}", speed=1 + i) for i in range(4)])
    order = ["w2", "w0", "w3", "w1"]
    tr = simulate(
        chain(3), c, "dask-model", scheduler_options={"n_tasks": n_tasks, "order": order, **NO_STEAL}, validate=True
    )
    where = workers_of(tr)
    assert where["c0"] == order[n_tasks % 4]
    # its consumers go to where their input is, however slow that worker is
    assert where["c1"] == where["c2"] == where["c0"]


def test_several_roots_are_spread_one_per_empty_worker_in_turn():
    g = TaskGraph("roots")
    for i in range(4):
        g.add_task(f"r{i}", cost=1.0)
    c = Cluster.homogeneous(4)
    tr = simulate(g, c, "dask-model", scheduler_options={"n_tasks": 1, **NO_STEAL}, validate=True)
    assert sorted(workers_of(tr).values()) == ["w0", "w1", "w2", "w3"]
    assert tr.makespan == pytest.approx(1.0)


def test_a_task_goes_to_the_holder_of_its_inputs_where_it_starts_earliest():
    g = TaskGraph("two")
    g.add_task("a", cost=1.0, output_size=100.0)
    g.add_task("b", cost=3.0, output_size=100.0)
    g.add_task("x", cost=1.0)
    g.add_edge("a", "x")
    g.add_edge("b", "x")
    c = Cluster.homogeneous(2, bandwidth=100.0)
    tr = simulate(g, c, "dask-model", scheduler_options={"n_tasks": 0, **NO_STEAL}, validate=True)
    where = workers_of(tr)
    assert where["a"] != where["b"]
    # when x is ready both hold an input of the same size; both are empty: the first of the table
    assert where["x"] == "w0"


def test_root_ish_tasks_are_queued_so_a_fast_worker_takes_more_of_them():
    g = TaskGraph("flat")
    for i in range(40):
        g.add_task(f"t{i}", cost=1.0)
    c = Cluster([Worker("slow", 1.0), Worker("fast", 4.0)])
    queued = collections.Counter(
        workers_of(simulate(g, c, "dask-model", scheduler_options=NO_STEAL, validate=True)).values()
    )
    # pulled by free slots: the fast worker runs about four times as many
    assert queued["fast"] >= 3 * queued["slow"]
    # without queuing (saturation inf) every task is sent at once, by estimated load: an even split
    pushed = collections.Counter(
        workers_of(
            simulate(g, c, "dask-model", scheduler_options={"saturation": float("inf"), **NO_STEAL}, validate=True)
        ).values()
    )
    assert pushed["fast"] == pushed["slow"] == 20


def test_a_group_that_reads_many_tasks_is_not_root_ish():
    # 12 tasks of kind s read one root: root-ish (few dependencies); with rootish=(1, 1) not
    g = fan(12)
    c = Cluster([Worker("slow", 1.0), Worker("fast", 4.0)])
    rootish = simulate(g, c, "dask-model", scheduler_options=NO_STEAL, validate=True)
    held = simulate(g, c, "dask-model", scheduler_options={"rootish": (1, 1), **NO_STEAL}, validate=True)
    root_worker = workers_of(held)["root"]
    # not root-ish: every reader goes to the only holder of the root's output
    assert {w for t, w in workers_of(held).items() if t.startswith("s")} == {root_worker}
    assert len({w for t, w in workers_of(rootish).items() if t.startswith("s")}) == 2


def test_idle_workers_steal_on_the_balancing_tick():
    g = fan(12)
    c = Cluster.homogeneous(3)
    opts = {"rootish": (1, 1), "durations": {"s": 1.0, "root": 0.1, "sink": 0.1}}
    still = simulate(g, c, "dask-model", scheduler_options={**opts, **NO_STEAL}, validate=True)
    stolen = simulate(
        g, c, "dask-model", scheduler_options={**opts, "steal_interval": 0.5, "steal_phase": 0.25}, validate=True
    )
    assert len({r.worker for r in still.runs}) == 1 and still.makespan == pytest.approx(12.2)
    moved = [r for r in stolen.runs if r.worker != workers_of(stolen)["root"]]
    assert moved and stolen.makespan < still.makespan - 3
    # nothing moves before the first balancing, at 0.25 s: the first run elsewhere starts after it
    assert min(r.start for r in moved) >= 0.25


def test_a_running_task_is_never_stolen_and_every_task_runs_once():
    g = fan(30, cost=2.0)
    c = Cluster([Worker("w0", 1.0), Worker("w1", 3.0), Worker("w2", 0.5)])
    for seed in range(4):
        # (seed 3: no latency to steal with and inputs of zero bytes, the cheapest level)
        tr = simulate(
            g,
            c,
            "dask-model",
            seed=seed,
            validate=True,
            scheduler_options={"rootish": (1, 1), "steal_interval": 0.3, "steal_latency": 0.0 if seed == 3 else 0.1},
        )
        assert tr.problems(g, c) == []
        assert sorted(r.task for r in tr.runs) == sorted(g.ids)


def test_measured_durations_update_the_estimates_as_dask_does():
    # two prefixes; the estimate of "s" starts far too low, so no worker looks idle enough to steal
    # until the first runs of "s" are measured (each counts half in the average)
    g = fan(12, cost=1.0)
    c = Cluster.homogeneous(2)
    low = simulate(
        g,
        c,
        "dask-model",
        scheduler_options={"rootish": (1, 1), "durations": {"s": 1e-4}, "steal_interval": 0.5},
        validate=True,
    )
    right = simulate(
        g,
        c,
        "dask-model",
        scheduler_options={"rootish": (1, 1), "durations": {"s": 1.0}, "steal_interval": 0.5},
        validate=True,
    )
    assert low.makespan > right.makespan
    assert right.makespan < 12


def test_dask_order_priorities_run_a_workers_tasks():
    # three independent chains, all on one worker (no stealing): it runs them in dask.order's
    # order (depth first: a chain to its end before the next), not in the order they became ready
    g = TaskGraph("chains")
    for c in "abc":
        for i in range(3):
            g.add_task(f"{c}{i}", cost=1.0)
            if i:
                g.add_edge(f"{c}{i - 1}", f"{c}{i}")
    pos = dask_priorities(g)
    one = Cluster.homogeneous(1)
    tr = simulate(g, one, "dask-model", scheduler_options={"priorities": pos, **NO_STEAL}, validate=True)
    ran = [r.task for r in sorted(tr.runs, key=lambda r: r.start)]
    assert ran == sorted(g.ids, key=pos.__getitem__)
    assert [t[0] for t in ran] in (
        ["a"] * 3 + ["b"] * 3 + ["c"] * 3,
        ["c"] * 3 + ["b"] * 3 + ["a"] * 3,
        ["b"] * 3 + ["a"] * 3 + ["c"] * 3,
        ["a"] * 3 + ["c"] * 3 + ["b"] * 3,
        ["b"] * 3 + ["c"] * 3 + ["a"] * 3,
        ["c"] * 3 + ["a"] * 3 + ["b"] * 3,
    )


def test_dasks_keys_break_the_ties_of_its_priorities_and_so_where_roots_go():
    g = TaskGraph("pair")
    g.add_task("r0", cost=1.0)
    g.add_task("r1", cost=1.0)
    c = Cluster.homogeneous(2)
    firsts = []
    for keys in ({"r0": "z-0", "r1": "a-1"}, {"r0": "a-0", "r1": "z-1"}):
        pos = dask_priorities(g, keys)
        first = min(g.ids, key=pos.__getitem__)
        tr = simulate(g, c, "dask-model", scheduler_options={"priorities": pos, **NO_STEAL}, validate=True)
        assert workers_of(tr)[first] == "w0"  # the first decided takes the round-robin's start
        firsts.append(first)
    assert firsts[0] != firsts[1]


def test_a_task_only_some_workers_can_run_goes_to_one_of_them():
    g = TaskGraph("restricted")
    g.add_task("big", cost=1.0, cores=4)
    g.add_task("any", cost=1.0)
    g.add_edge("any", "big")
    c = Cluster([Worker("small", cores=1), Worker("large", cores=4)])
    for n in range(2):
        tr = simulate(g, c, "dask-model", scheduler_options={"n_tasks": n}, validate=True)
        assert workers_of(tr)["big"] == "large"


def test_the_periodic_call_comes_every_tick_and_stops_with_the_run():
    calls = []

    class Ticker(DynamicScheduler):
        name = "ticker-test"

        def start(self, view):
            self.tick, self.tick_phase = 0.4, 0.1

        def on_ready(self, tasks, view):
            return [(i, 0) for i in tasks]

        def on_tick(self, view):
            calls.append(round(view.now, 6))
            return []

    tr = simulate(chain(3, cost=1.0), Cluster.homogeneous(1), Ticker(), validate=True)
    assert tr.makespan == pytest.approx(3.0)
    assert calls == pytest.approx([0.1 + 0.4 * k for k in range(8)])  # 0.1 ... 2.9, none after 3.0


# ---------------------------------------------------------------- against Dask itself
@pytest.fixture(scope="module")
def dask_client():
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        yield c


def test_the_prediction_of_dasks_own_scheduling_follows_where_dask_puts_a_lone_root(dask_client):
    """A chain on a slow and a fast worker: Dask puts its root (and so the whole chain) on worker
    ``n_tasks % 2`` of its table, and each run moves ``n_tasks`` on by the chain's length, so two
    runs in a row land on different workers; the prediction, read from the scheduler's state at
    submission, follows."""
    from taskflow import run
    from taskflow.runtime.client.session import call, ensure_plugin

    client = dask_client
    g = chain(5, cost=1.0, size=1000.0)
    model = Cluster([Worker("0", speed=1.0), Worker("1", speed=4.0)], bandwidth=1e9)
    speed = {"0": 1.0, "1": 4.0}
    ensure_plugin(client)
    roots = []
    for _ in range(2):
        state = call(client, "taskflow_dask_state", prefixes=["c"])
        assert set(state["workers"]) == set(workers_info(client))
        rep = run(g, "work-stealing", client=client, cluster=model, time_scale=0.2, quiet=True, timeout=60)
        by_address = {w.address: str(w.id) for w in rep.cluster.workers}
        root = workers_of(rep.trace)["c0"]
        assert root == by_address[state["workers"][state["n_tasks"] % 2]]
        assert set(workers_of(rep.trace).values()) == {root}
        # five tasks of 0.2 s on the root's worker, at its speed
        assert rep.predicted_makespan == pytest.approx(5 * 0.2 / speed[root], rel=0.15)
        roots.append(root)
    assert roots[0] != roots[1]
    assert call(client, "taskflow_dask_state", prefixes=["c"])["durations"]["c"] > 0


def test_a_peer_to_peer_shuffle_s_outputs_go_where_dask_s_shuffle_extension_pins_them():
    """Outputs marked ``p2p: (position, outputs)`` go by range sharding over the table, whatever
    their inputs' place: with 4 workers, 8 outputs in pairs; the order of the table counts."""
    g = TaskGraph("p2p")
    g.add_task("barrier", cost=0.0)
    for j in range(8):
        g.add_task(f"out{j}", cost=1.0, meta={"p2p": (j, 8)})
        g.add_edge("barrier", f"out{j}")
    c = Cluster.homogeneous(4)
    order = ["w3", "w1", "w0", "w2"]
    tr = simulate(g, c, "dask-model", scheduler_options={"order": order}, validate=True)
    where = workers_of(tr)
    assert [where[f"out{j}"] for j in range(8)] == [w for w in order for _ in range(2)]
    plain = TaskGraph("plain")  # unmarked, they follow their input (and stealing)
    plain.add_task("barrier", cost=0.0)
    for j in range(8):
        plain.add_task(f"out{j}", cost=1.0)
        plain.add_edge("barrier", f"out{j}")
    assert len(set(workers_of(simulate(plain, c, "dask-model", scheduler_options=NO_STEAL)).values())) == 1
