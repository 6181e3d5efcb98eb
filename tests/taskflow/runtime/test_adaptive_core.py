"""The adaptive scheduler's decision core driven by the simulator (``taskflow simulate --scheduler
adaptive``) and by the Dask plugin: the same facts give the same decisions."""

from __future__ import annotations

import copy
import time

import dask
import pytest
from distributed import Client, LocalCluster

import taskflow
from taskflow import Cluster, TaskGraph, get_scheduler
from taskflow.runtime.predict import DASK, PLAN, SUBSET
from taskflow.runtime.decide import AdaptiveCore
from taskflow.runtime.simulated import simulate_adaptive
from tests.conftest import NO_HTTP


def fan_in(n: int = 12, cost: float = 1.0) -> TaskGraph:
    g = TaskGraph("fan-in")
    for i in range(n):
        g.add_task(f"part-{i}", cost=cost)
    g.add_task("total-0", cost=cost)
    for i in range(n):
        g.add_edge(f"part-{i}", "total-0", size=1e3)
    return g


def test_on_workers_alike_the_simulated_adaptive_scheduler_leaves_every_run_to_dask_s_own():
    g, cluster = fan_in(), Cluster.heterogeneous([1.0, 1.0])
    core = AdaptiveCore()
    for _ in range(3):
        trace, d = simulate_adaptive(g, cluster, core=core)
        assert d.choice == DASK and d.predicted != d.predicted  # nothing weighed, nothing predicted
        assert trace.scheduler == "adaptive (dask)" and not trace.problems(g, cluster)
    # the same as the simulator's model of Dask's own scheduling, run for run
    assert trace.makespan == taskflow.simulate(g, cluster, "dask-model").makespan


@pytest.mark.parametrize("cores", [(1, 1, 1, 2), (2, 1, 1, 1)])
def test_a_task_needing_more_cores_than_the_fastest_workers_have_is_never_held_away_from_its_worker(cores):
    from taskflow import Worker

    # found by the simulator's property test: the fastest workers (held to) had one core each
    g = TaskGraph("wide")
    g.add_task("t0", cost=1.0, cores=2)
    speeds = (4, 3, 2, 1) if cores[-1] == 2 else (1, 2, 3, 4)
    cluster = Cluster([Worker(f"w{i}", s, k) for i, (s, k) in enumerate(zip(speeds, cores))], bandwidth=1, latency=0)
    trace, d = simulate_adaptive(g, cluster, network="simple")
    assert not trace.problems(g, cluster)
    assert d.choice != SUBSET or max(w.cores for w in cluster.workers if w.id in d.held) >= 2


def test_runs_of_the_same_work_follow_the_measured_runs_in_simulation_as_in_dask():
    """One fast worker and two slow ones: the first run of the work (its costs just learned) is
    the guard's among Dask's own choices, held to the fast worker; its measured makespan is not
    kept (it learned as it went); the second is the guard's again, kept with its predictions of
    all three; the third tries the plan (predicted shorter than the hold, and Dask's own on every
    worker predicted beyond the band: never tried); from then on the one measured shortest."""
    g, cluster = fan_in(), Cluster.heterogeneous([8.0, 1.0, 1.0])
    core = AdaptiveCore()
    got = [simulate_adaptive(g, cluster, core=core) for _ in range(6)]
    choices = [d.choice for _, d in got]
    assert choices[:3] == [SUBSET, SUBSET, PLAN], choices
    assert got[0][1].held == ["w0"]
    (book,) = core.outcomes.values()
    assert set(book.predicted) == {DASK, SUBSET, PLAN}  # the second run's guard predicted the three
    assert book.predicted[PLAN] < book.predicted[SUBSET] < book.predicted[DASK]
    assert book.measured[SUBSET] == [got[1][0].makespan] and not book.measured[DASK]
    assert book.measured[PLAN] == [tr.makespan for tr, _ in got[2:]]  # each run after it kept under it
    assert got[2][0].makespan < got[1][0].makespan and set(choices[3:]) == {PLAN}  # the shorter, kept
    for trace, d in got:
        assert not trace.problems(g, cluster) and trace.scheduler == f"adaptive ({d.choice})"
        if d.choice == SUBSET:
            assert {r.worker for r in trace.runs} == {"w0"}


def test_taskflow_simulate_with_the_adaptive_scheduler_runs_its_decision(tmp_path, capsys):
    from taskflow.app.cli import main
    from taskflow.formats import save_cluster, save_graph

    save_graph(fan_in(), tmp_path / "g.json")
    save_cluster(Cluster.heterogeneous([8.0, 1.0, 1.0]), tmp_path / "c.json")
    args = ["simulate", str(tmp_path / "g.json"), "--cluster", str(tmp_path / "c.json"), "-q"]
    assert main(args + ["--scheduler", "adaptive,heft"]) == 0
    out = capsys.readouterr().out
    assert "adaptive (subset) on maxmin" in out and "heft on maxmin" in out


def _slow_on_0(i):
    """20 ms, four times as long on the worker named 0."""
    from distributed import get_worker

    time.sleep(0.02 * (4 if str(get_worker().name) == "0" else 1))
    return i


def _first_decisions(dask_scheduler):
    from taskflow.runtime.messages import PLUGIN_NAME

    plugin = dask_scheduler.plugins[PLUGIN_NAME]
    return [(r.adapt.first, r.adapt.path[0], r.adapt.signature) for r in plugin.runs.values() if r.adapt.first]


def test_the_simulator_replays_each_decision_the_plugin_made_in_dask_and_decides_the_same():
    """Five runs of one work under ``taskflow.use`` (worker 0 four times slower than the others),
    the scheduler deciding as each graph arrives (``replans=0``): each run's first decision, fed
    to a fresh core in the simulator with what the plugin's decision read (the graph and its
    learned costs, the cluster and its learned speeds, Dask's state, the measured runs of the same
    work then), comes out the same."""
    with (
        LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        taskflow.use(c, "adaptive", replans=0)
        try:
            for k in range(5):
                parts = [dask.delayed(_slow_on_0, pure=False)(i) for i in range(24)]
                (got,) = c.compute([dask.delayed(sum, pure=False)(parts)], sync=True)
                assert got == sum(range(24))
            decided = c.run_on_scheduler(_first_decisions)
        finally:
            taskflow.use(c, None)
    # the first run learns (left to Dask: nothing measured yet); the next ones are weighed
    assert len(decided) >= 2, decided
    assert any(book is not None and book.any_measured() for (_, _, _, book), _, _ in decided)
    scheduler = get_scheduler("adaptive", replans=0)
    for (graph, cluster, state, book), choice, signature in decided:
        core = AdaptiveCore()
        if book is not None:
            core.outcomes[signature] = copy.deepcopy(book)
        _, d = simulate_adaptive(graph, cluster, core=core, state=state, signature=signature, scheduler=scheduler)
        assert d.choice == choice, (choice, d, book)


@pytest.mark.parametrize("speeds", [[1.0, 1.0], [8.0, 1.0, 1.0]])
def test_the_core_needs_no_dask_scheduler(speeds):
    """The core decides from a run record and facts alone (no Dask objects, no clock)."""
    from taskflow.runtime.decide import GraphFacts, RunRecord

    g, cluster = fan_in(), Cluster.heterogeneous(speeds)
    core = AdaptiveCore()
    r = RunRecord(g, get_scheduler("adaptive"), cluster)
    r.adapt.signature = ("fan-in",)
    keys = list(g.ids)
    worth = core.worth_planning(r, keys, cluster, spread=max(speeds) / min(speeds), p2p=False, one_host=True)
    assert worth is (speeds[0] != speeds[1])
    if worth:
        d = core.decide(r, g, cluster, lambda: None, GraphFacts({k: k.split("-")[0] for k in keys}))
        assert d.choice == SUBSET and d.held == ["w0"] and r.adapt.estimates == {"part": 1.0, "total": 1.0}
        assert set(r.adapt.predictions) == {DASK, SUBSET}  # a first run: the plan not predicted


def test_a_simulated_hold_that_loses_its_last_worker_is_lifted_as_the_plugin_lifts_it():
    """Held to the fast worker, which fails mid-run: as in Dask (the plugin's ``lost_worker``), the
    run goes on under Dask's own scheduling on the workers left, and every task finishes."""
    g, cluster = fan_in(), Cluster.heterogeneous([8.0, 1.0, 1.0])
    trace, d = simulate_adaptive(g, cluster, fail={"w0": 0.5})
    assert d.choice == SUBSET and d.held == ["w0"]
    assert not trace.problems(g, cluster) and {r.task for r in trace.runs} == set(g.ids)
    assert {r.worker for r in trace.runs if r.start > 0.5} <= {"w1", "w2"} and trace.lost


def test_a_finished_task_decides_again_gives_up_a_try_or_does_nothing_by_the_core_alone():
    """The re-decisions within a run, from the core alone: a task twice as long as the estimate the
    last decision used (drift 0.3) decides again, with the costs as now estimated; not again within
    ``interval`` seconds, nor past ``replans``; a try that has run past its watch is given up,
    measured as long as it ran; a run fixed by its measured runs is never decided again."""
    from taskflow.runtime.adaptive_state import Phase
    from taskflow.runtime.decide import RunRecord, TaskDone

    g = fan_in(4)
    core = AdaptiveCore()
    r = RunRecord(g, get_scheduler("adaptive", interval=0.5, replans=1))
    core.decided(r, SUBSET)
    r.adapt.estimates, r.adapt.decided_at = {"part": 1.0}, 10.0
    later = fan_in(4, cost=2.0)

    def done(secs, now, elapsed=1.0):
        return TaskDone(
            "part", secs, "w0", now, elapsed, lambda: {}, lambda: 1.0, lambda: None, lambda: later.subgraph(["total-0"])
        )

    assert core.task_finished(r, done(1.2, 11.0)) == (None, None)  # 20% off: within the drift
    assert core.task_finished(r, done(2.0, 10.2)) == (None, None)  # within the interval of the last decision
    assert core.task_finished(r, done(2.0, 11.0)) == ("decide again", None)
    assert r.adapt.redecisions == 1 and r.graph.task("total-0").cost == 2.0 and r.graph.task("part-0").cost == 1.0
    assert core.task_finished(r, done(9.0, 20.0)) == (None, None)  # replans=1: no more
    trying = RunRecord(g, get_scheduler("adaptive"))
    trying.adapt.try_choice(2.5, DASK, [])
    assert core.task_finished(trying, done(1.0, 0.0, elapsed=2.0)) == (None, None)  # within its watch
    assert core.task_finished(trying, done(1.0, 0.0, elapsed=3.0)) == ("give up", 3.0)
    fixed = RunRecord(g, get_scheduler("adaptive"))
    fixed.adapt.move(Phase.FIXED)
    assert core.task_finished(fixed, done(99.0, 99.0)) == (None, None)
