"""Learning costs from measurements, without a cluster: speeds, the network, Dask's own placement."""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import schedulers
from taskflow import Cluster, CostProfile, TaskGraph, Worker
from taskflow.runtime.measured import learned_speeds, speeds_on
from taskflow.simulator import simulate
from taskflow.trace import Run, Trace, Transfer


def _runs(graph, cluster, placement, overhead=0.0):
    """Runs of ``graph`` one after another per worker, each taking cost / speed + overhead."""
    clock, out = {}, []
    for t, w in placement.items():
        d = graph.task(t).cost / cluster.worker(w).speed + overhead
        s = clock.get(w, 0.0)
        out.append(Run(t, t, w, s, s + d))
        clock[w] = s + d
    return out


def test_speeds_are_learned_when_the_scheduler_gave_the_big_tasks_to_the_fast_worker():
    """Costs 1..8 of one prefix: the fast worker (4x) ran the four biggest, the slow one the four
    smallest. Mean durations per worker make the fast one look only 1.5x faster; durations per unit
    of declared cost give 4x."""
    g = TaskGraph("biased")
    for k in range(1, 9):
        g.add_task(f"t{k}", cost=float(k))
    c = Cluster([Worker("slow", 1.0), Worker("fast", 4.0)])
    runs = _runs(g, c, {f"t{k}": ("slow" if k <= 4 else "fast") for k in range(1, 9)})
    naive = np.mean([r.finish - r.start for r in runs if r.worker == "slow"]) / np.mean(
        [r.finish - r.start for r in runs if r.worker == "fast"]
    )
    assert naive == pytest.approx(2.5 / 1.625)
    sp = learned_speeds(g, runs)
    assert sp["fast"] / sp["slow"] == pytest.approx(4.0)


def test_prefixes_of_millisecond_tasks_do_not_flatten_the_learned_speeds():
    """'work' tasks take cost / speed; 'tiny' ones 3 ms anywhere (Dask's own overhead). Each prefix
    ran on both workers; weighting by measured seconds keeps the 4x."""
    g = TaskGraph("mixed")
    place = {}
    for k in range(8):
        g.add_task(f"work{k}", cost=2.0)
        g.add_task(f"tiny{k}", cost=1e-6)
        place[f"work{k}"] = place[f"tiny{k}"] = "fast" if k % 2 else "slow"
    c = Cluster([Worker("slow", 1.0), Worker("fast", 4.0)])
    runs = _runs(g, c, place, overhead=0.003)
    sp = learned_speeds(g, runs)
    assert sp["fast"] / sp["slow"] == pytest.approx(4.0, rel=0.05)
    # an unweighted mean over the two prefixes would say about 2x
    assert sp["fast"] / sp["slow"] > 3.5


def test_a_worker_that_ran_nothing_keeps_its_declared_speed_relative_to_the_measured_ones():
    declared = {"a": 1.0, "b": 1.0, "c": 2.0, "d": 4.0}
    # learned on c and d only, in units where c is 1.0
    sp = speeds_on(declared, {"c": 1.0, "d": 2.0})
    assert sp == pytest.approx({"a": 0.5, "b": 0.5, "c": 1.0, "d": 2.0})
    assert speeds_on(declared, {}) == declared


def _report(graph, runs, transfers=(), plan=None, scale=1.0):
    return SimpleNamespace(trace=Trace(list(runs), list(transfers)), time_scale=scale, plan=plan)


def test_dask_s_own_placement_is_kept_and_replayed_as_a_plan(tmp_path):
    """A run under Dask's own scheduling (no plan): the profile keeps where and in which order each
    task ran; the replayed plan, simulated, reproduces that run; a graph the profile does not cover
    gets no replay. A planned run keeps no placement."""
    g = TaskGraph("diamond")
    for t, cost in (("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 1.0)):
        g.add_task(t, cost=cost, output_size=0)
    for a, b in (("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")):
        g.add_edge(a, b)
    c = Cluster([Worker("0", 1.0), Worker("1", 1.0)], bandwidth=np.inf)
    runs = [
        Run("a", "a", "1", 10.0, 11.0),
        Run("c", "c", "1", 11.0, 13.0),
        Run("b", "b", "0", 11.0, 13.0),
        Run("d", "d", "0", 13.0, 14.0),
    ]
    prof = CostProfile.learn(g, _report(g, runs, scale=0.5))
    assert prof.dask_placement == {"a": ["1", 0.0], "b": ["0", 2.0], "c": ["1", 2.0], "d": ["0", 6.0]}
    plan = prof.dask_plan(g, c)
    tr = simulate(g, c, "heft", network="maxmin", plan=plan, plan_order="ready")
    assert {r.task: r.worker for r in tr.runs} == {"a": "1", "b": "0", "c": "1", "d": "0"}
    assert tr.makespan == pytest.approx(4.0)
    path = tmp_path / "p.json"
    prof.save(path)
    assert CostProfile.load(path).dask_placement == prof.dask_placement
    bigger = g.copy()
    bigger.add_task("e", cost=1.0)
    assert prof.dask_plan(bigger, c) is None
    assert prof.dask_plan(g, Cluster([Worker("0"), Worker("2")])) is None  # worker "1" is gone
    assert CostProfile.learn(g, _report(g, runs, plan=plan)).dask_placement == {}


def test_the_backplane_and_pair_rates_come_from_what_transfers_did_together():
    """Alone, 0->1 moves 100 MB/s; when 2->3 runs at the same time each gets 50 MB/s: the pair keeps
    its own capacity, the backplane is the 100 MB/s they had together, and a profile applied to a
    model makes the maxmin network share it."""
    from taskflow.runtime.measured import network_of

    xs = [
        Transfer("a", "0", "1", 10e6, 0.0, 0.1),
        Transfer("b", "0", "1", 10e6, 1.0, 1.2),
        Transfer("c", "2", "3", 10e6, 1.0, 1.2),
    ]
    _, pairs, backplane = network_of(xs)
    assert pairs["0"]["1"] == pytest.approx(95e6)  # the 90th percentile of 50 and 100 MB/s
    assert backplane == pytest.approx(100e6)
    prof = CostProfile(bandwidth=pairs, backplane=backplane, runs=1)
    c = Cluster([Worker(str(k)) for k in range(4)], bandwidth=1e9)
    _, c2 = prof.apply(TaskGraph("empty"), c, time_scale=1.0, size_scale=1.0)
    assert c2.backplane == pytest.approx(100e6)
    # a pair never measured gets the median of the measured ones
    assert c2.bandwidth_between("1", "0") == pytest.approx(np.median([pairs["0"]["1"], pairs["2"]["3"]]))


def test_dask_like_work_stealing_estimates_ignore_worker_speeds():
    """knows_speeds=False: every task is estimated at its mean duration over the workers, as Dask's
    per-prefix estimates are; infeasible workers stay infeasible."""
    from taskflow.costs import CostModel

    g = TaskGraph("two")
    g.add_task("a", costs={"0": 4.0, "1": 1.0})
    g.add_task("b", costs={"0": 2.0, "1": 2.0}, cores=2)  # worker 1 has one core: it cannot run b
    m = CostModel(g, Cluster([Worker("0", cores=2), Worker("1")]))
    d = m.durations
    assert d.tolist() == [[4.0, 1.0], [2.0, np.inf]]
    view = SimpleNamespace(cost_model=m)
    blind = schedulers.get_scheduler("work-stealing", knows_speeds=False)
    blind.start(view)
    assert blind.d[0].tolist() == [2.5, 2.5] and blind.d[1, 0] == 2.0 and np.isinf(blind.d[1, 1])
    aware = schedulers.get_scheduler("work-stealing")
    aware.start(view)
    assert aware.d is d


def test_the_backplane_is_a_capacity_not_how_busy_the_network_was():
    """Most of the run one transfer moves at 100 MB/s, for a fifth of it four move together at
    100 MB/s each: the network carried 400 MB/s, which the learned backplane says (its median
    level, 100 MB/s, would make a plan of concurrent transfers look four times slower)."""
    from taskflow.runtime.measured import network_of

    xs = [Transfer("solo", "0", "1", 80e6, 0.0, 0.8)]
    xs += [Transfer(f"t{k}", str(k), str((k + 1) % 4), 20e6, 0.8, 1.0) for k in range(4)]
    _, _, backplane = network_of(xs)
    assert backplane == pytest.approx(400e6)


def test_the_dispatch_overhead_is_the_mean_gap_because_gaps_add_up_along_a_chain():
    """A chain of 21 tasks on one worker, each ready when the one before ends: 19 gaps of 1 ms and
    one of 181 ms (the worker descheduled once). The chain took 200 ms besides its work; planned
    with the learned overhead per task, the simulator says so. The median (1 ms) would say 20 ms."""
    from taskflow.runtime.measured import dispatch_gap

    g = TaskGraph("chain")
    for k in range(21):
        g.add_task(f"t{k}", cost=0.1)
        if k:
            g.add_edge(f"t{k - 1}", f"t{k}")
    gaps = [0.001] * 19 + [0.181]
    runs, clock = [], 0.0
    for k in range(21):
        runs.append(Run(f"t{k}", f"t{k}", "w", clock, clock + 0.1))
        clock += 0.1 + (gaps[k] if k < 20 else 0.0)
    overhead = dispatch_gap(g, runs, [])
    assert overhead == pytest.approx(0.01)
    c = Cluster([Worker("w")], task_overhead=overhead)
    lost = simulate(g, c, "heft", network="simple").makespan - 21 * 0.1
    assert lost == pytest.approx(sum(gaps), rel=0.06)  # 21 overheads for 20 gaps


def _affine_runs(graph, speeds, placement, fixed, spikes=None):
    """Runs taking ``fixed`` + cost / speed (+ a spike for some tasks), one after another per worker."""
    clock, out = {}, []
    for t, w in placement.items():
        d = fixed + graph.task(t).cost / speeds[w] + (spikes or {}).get(t, 0.0)
        s = clock.get(w, 0.0)
        out.append(Run(t, t, w, s, s + d))
        clock[w] = s + d
    return out


def test_a_moved_task_keeps_its_fixed_part_and_one_noisy_sample_does_not_decide_its_cost(tmp_path):
    """Durations are 0.05 s + cost / speed. Planned from the profile: a task moved from the slow
    worker to the 4x faster one takes 0.05 + cost / 4 there, where scaling its whole duration by
    the learned speeds misses both small and big tasks. When one task's run took 0.3 s longer at
    random, it is planned near its true duration, not at its sample."""
    g = TaskGraph("affine")
    for k in range(1, 25):
        g.add_task(f"w{k}", cost=0.05 * k)
    c = Cluster([Worker("slow", 1.0), Worker("fast", 4.0)])
    speeds = {"slow": 1.0, "fast": 4.0}
    place = {f"w{k}": "slow" if k % 2 else "fast" for k in range(1, 25)}

    def learn(spikes):
        runs = _affine_runs(g, speeds, place, 0.05, spikes)
        return CostProfile.learn(g, SimpleNamespace(trace=Trace(runs, []), time_scale=1.0, plan=None))

    prof = learn({})
    m = prof.models["w"]
    assert m["fixed"] == pytest.approx(0.05) and m["r2"] == pytest.approx(1.0)
    assert m["unit"] == {"slow": pytest.approx(1.0), "fast": pytest.approx(0.25)}
    g2, _ = prof.apply(g, c)
    whole, _ = replace(prof, models={}).apply(g, c)  # the profile without its model
    learned_fast = speeds_on(speeds, prof.speeds)["fast"]
    for t in ("w1", "w23"):  # ran on the slow worker
        true = 0.05 + g.task(t).cost / 4
        assert prof.tasks[t]["slow"] == pytest.approx(0.05 + g.task(t).cost)
        assert g2.task(t).costs["fast"] == pytest.approx(true)
        assert abs(whole.task(t).cost / learned_fast - true) > 0.02  # 0.034 s and 0.362 s
    # w12 took 0.05 + 0.15 + 0.3 s once: planned near its true 0.2 s
    noisy = learn({"w12": 0.3})
    assert noisy.tasks["w12"]["fast"] == pytest.approx(0.5)
    assert noisy.apply(g, c)[0].task("w12").costs["fast"] == pytest.approx(0.2, abs=0.05)
    # kept in the file, and merged
    noisy.save(tmp_path / "p.json")
    back = CostProfile.load(tmp_path / "p.json")
    assert back.models == noisy.models
    both = prof.merge(back)
    assert both.runs == 2
    assert both.models["w"]["fixed"] == pytest.approx((0.05 + noisy.models["w"]["fixed"]) / 2)


def test_durations_the_declared_costs_do_not_explain_keep_each_task_s_own_sample():
    """Declared costs all alike (guesses), or unrelated to the durations: no model; each task is
    planned with what it measured."""
    g = TaskGraph("guessed")
    for k in range(8):
        g.add_task(f"u{k}", cost=1.0)
        g.add_task(f"v{k}", cost=float(k + 1))
    c = Cluster([Worker("a", 1.0), Worker("b", 1.0)])
    runs = []
    for k in range(8):
        w = "ab"[k % 2]
        runs.append(Run(f"u{k}", f"u{k}", w, 0.0, 0.1 * (k + 1)))
        runs.append(Run(f"v{k}", f"v{k}", w, 0.0, [0.9, 0.1, 0.5, 0.7, 0.2, 0.8, 0.3, 0.6][k]))
    prof = CostProfile.learn(g, SimpleNamespace(trace=Trace(runs, []), time_scale=1.0, plan=None))
    assert prof.models == {}
    g2, _ = prof.apply(g, c)
    assert g2.task("u3").costs == {"b": pytest.approx(0.4)}
    assert g2.task("v4").costs == {"a": pytest.approx(0.2)}
