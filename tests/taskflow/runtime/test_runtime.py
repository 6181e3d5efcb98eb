"""The Dask runtime, on real LocalClusters and a `dask scheduler` + `dask worker` pair on loopback."""

import os
import signal
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster, SchedulerPlugin

import taskflow
from taskflow import Cluster, TaskFailed, Worker, compute, run
from taskflow.app.plot import gantt_compare
from taskflow.runtime import cluster_from_dask, learn_costs

from tests import runtime_graphs as rg
from tests.conftest import NO_HTTP, shared


def test_emulated_montage_runs_where_planned_and_as_predicted(client, capsys):
    g = taskflow.load_graph(shared("wfinstances", "montage-chameleon-2mass-01d-001.json"))
    plan = taskflow.critical_path(g)
    rep = run(g, "heft", client=client, time_scale=0.065, size_scale=0.1, quiet=True)
    print(f"montage on 2 workers: predicted {rep.predicted_makespan:.2f} s, measured {rep.measured_makespan:.2f} s")
    assert 10 <= rep.predicted_makespan <= 20
    assert rep.placement_fidelity == 1.0
    assert all(row["worker"] == row["planned_worker"] for row in rep.tasks)
    assert abs(rep.measured_makespan - rep.predicted_makespan) <= 0.2 * rep.predicted_makespan
    assert len(rep.results) == len(g) and plan[0] > 0
    # real bytes moved: each emulated result is a buffer of its (scaled) output size
    big = max(g.tasks(), key=lambda t: t.output_size)
    assert rep.results[big.id].nbytes == int(big.output_size * 0.1)


def test_executable_graph_results_and_report(client, tmp_path):
    g = rg.layered(width=6, depth=2)
    rep = run(g, "cpop", client=client, quiet=True)
    assert rep.results["total"] == rg.expected_total(6, 2)
    d = rep.to_dict()
    for key in ("scheduler", "predicted_makespan", "measured_makespan", "placement_fidelity", "tasks"):
        assert key in d
    assert set(d["tasks"][0]) >= {"task", "worker", "planned_worker", "start", "finish"}
    assert 0 <= d["placement_fidelity"] <= 1
    rep.save(tmp_path / "r.json")
    gantt_compare(rep, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    # what the user's sink task returned is in the report file and in its summary lines
    import json

    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["results"] == {"total": {"type": "int", "value": rg.expected_total(6, 2)}}
    assert rep.sinks == ["total"] and rep.result_lines() == [f"total = {rg.expected_total(6, 2)}"]
    # the Chrome trace: a measured track per worker that ran a task, a planned track per planned worker
    doc = rep.chrome_trace()
    tasks = [e for e in doc["traceEvents"] if e["cat"] == "task"]
    measured = {e["args"]["task"] for e in tasks if e["pid"].startswith("measured: worker ")}
    planned = {e["args"]["task"]: e for e in tasks if e["pid"].startswith("planned: worker ")}
    assert measured == set(planned) == set(g.ids)
    a = rep.plan.assignment("total")
    assert planned["total"]["pid"] == f"planned: worker {a.worker}"
    assert planned["total"]["ts"] == pytest.approx(a.start * 1e6)


def test_a_result_too_large_or_not_json_is_kept_as_its_type_and_repr():
    from taskflow.runtime.client.report import RESULT_CHARS, result_entry

    assert result_entry([1, 2.5, "x"]) == {"type": "list", "value": [1, 2.5, "x"]}
    arr = result_entry(np.zeros(4))
    assert arr["type"] == "numpy.ndarray" and arr["repr"].startswith("array([0.") and arr["nbytes"] == 32
    big = result_entry("x" * (RESULT_CHARS + 1))
    assert "value" not in big and big["repr"].endswith("...") and len(big["repr"]) == 200
    assert result_entry(float("nan")) == {"type": "float", "repr": "nan"}  # JSON has no NaN


def test_a_task_that_raises_is_named_and_nothing_hangs(client):
    t0 = time.time()
    with pytest.raises(TaskFailed, match=r"task 'explodes' failed: ValueError: bad input 1") as e:
        run(rg.failing(), "heft", client=client, quiet=True, timeout=30)
    assert e.value.task == "explodes" and time.time() - t0 < 30
    assert e.value.results.get("ok") == 1  # what finished can be retrieved


def test_work_stealing_is_dasks_own_scheduler(client):
    g = rg.layered(width=4, depth=1)
    rep = run(g, "work-stealing", client=client, quiet=True)
    assert rep.results["total"] == rg.expected_total(4, 1)
    assert rep.plan is None and rep.predicted_makespan > 0


def test_compute_equals_dask_compute(client):
    x = da.arange(1000, chunks=100).reshape(10, 100).sum(axis=0) ** 2
    y = (da.ones((50, 50), chunks=10) * 3).mean()
    assert np.array_equal(compute(x, client=client)[0], dask.compute(x, scheduler="sync")[0])
    a, b = compute(x, y, scheduler="cpop", client=client)
    ex, ey = dask.compute(x, y, scheduler="sync")
    assert np.array_equal(a, ex) and b == ey

    @dask.delayed
    def inc(v):
        return v + 1

    @dask.delayed
    def add(u, v):
        return u + v

    d = add(inc(1), add(inc(2), inc(3)))
    assert compute(d, {"k": inc(10)}, client=client) == dask.compute(d, {"k": inc(10)}, scheduler="sync")


def test_calibration_makes_the_second_prediction_better(client):
    g = rg.mixed_costs()
    first = run(g, "heft", client=client, quiet=True)
    learned = learn_costs(g, first)
    second = run(learned, "heft", client=client, quiet=True)
    print(f"prediction error: first {first.prediction_error:.1%}, second {second.prediction_error:.1%}")
    assert second.prediction_error < first.prediction_error
    assert learned.task("big0").cost == pytest.approx(0.6, rel=0.5)


def test_cluster_from_dask(client):
    c = cluster_from_dask(client, speeds={"0": 2.0})
    assert sorted(w.id for w in c.workers) == ["0", "1"] and c.worker("0").speed == 2.0
    assert all(w.address.startswith("tcp://") for w in c.workers)
    cal = cluster_from_dask(client, calibrate=True)
    assert all(0.2 < w.speed < 5 for w in cal.workers) and cal.bandwidth > 1e6
    assert 1e-5 < cal.task_overhead < 0.5  # Dask spends some time per task, well under half a second
    with pytest.raises(taskflow.TaskflowError, match="unknown worker"):
        cluster_from_dask(client, speeds={"nope": 1.0})


def test_measured_task_overhead_brings_predictions_of_small_tasks_closer(client):
    import operator

    g = taskflow.TaskGraph("tiny")  # 2 x 60 tiny tasks: the run is mostly Dask's per-task time
    prev = [g.add_task(f"s{i}", fn=operator.add, args=(i, 1), cost=1e-5) for i in range(2)]
    for k in range(60):
        prev = [g.add_task(f"t{k}_{i}", fn=operator.add, args=(prev[i], 1), cost=1e-5) for i in range(2)]
    plain = run(g, "heft", client=client, quiet=True)
    model = cluster_from_dask(client, calibrate=True)
    with_overhead = run(g, "heft", client=client, cluster=model, quiet=True)
    print(f"prediction error: without {plain.prediction_error:.0%}, with overhead {with_overhead.prediction_error:.0%}")
    assert with_overhead.prediction_error < plain.prediction_error


def test_declared_speeds_shape_the_emulation(client):
    g = taskflow.TaskGraph("two")
    g.add_task("a", cost=1.0)
    g.add_task("b", cost=1.0)
    model = Cluster([Worker("0", speed=4.0), Worker("1", speed=1.0)], bandwidth=1e9)
    rep = run(g, "heft", client=client, cluster=model, time_scale=0.5, quiet=True)
    took = {r.task: (r.worker, r.finish - r.start) for r in rep.trace.runs}
    on_fast = [d for w, d in took.values() if w == "0"]
    assert on_fast and all(0.1 <= d <= 0.3 for d in on_fast)  # 1.0 / 4 x 0.5 = 0.125 s


def test_a_held_run_stays_on_the_workers_its_model_names(client):
    g = taskflow.TaskGraph("four")
    for k in range(4):
        g.add_task(f"t{k}", cost=0.01)
    only = Cluster([Worker("1")], bandwidth=1e9)
    held = run(g, "heft", client=client, cluster=only, time_scale=0.1, quiet=True, hold=True)
    assert {r.worker for r in held.trace.runs} == {"1"}
    # not held: the live worker the model does not name joins the plan, as one that joined would
    free = run(g, "heft", client=client, cluster=only, time_scale=0.1, quiet=True)
    assert {r.worker for r in free.trace.runs} == {"0", "1"}


def test_a_killed_worker_does_not_stop_the_run():
    g = rg.layered()
    with (
        LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        pids = c.run(os.getpid)
        victim = sorted(pids)[1]

        def kill():  # once the victim runs a task of the run
            t0 = time.time()
            while not c.processing(victim).get(victim) and time.time() - t0 < 30:
                time.sleep(0.05)
            os.kill(pids[victim], signal.SIGKILL)

        threading.Thread(target=kill, daemon=True).start()
        t0 = time.time()
        rep = run(g, "heft", client=c, quiet=True, timeout=60)
        assert time.time() - t0 < 60
        assert rep.results["total"] == rg.expected_total()
        assert rep.replans >= 1


@pytest.fixture
def loopback_cluster(tmp_path):
    """A real `dask scheduler` and two `dask worker` processes on 127.0.0.1."""
    from taskflow.app.loopback import Loopback

    lb = Loopback(tmp_path, workers=("wa", "wb"), nanny=True)
    try:
        lb.start()
        yield lb.sched_file
    finally:
        lb.stop()


def test_existing_scheduler_and_workers_on_loopback(loopback_cluster):
    g = rg.layered(width=4, depth=2)
    rep = run(g, "heft", scheduler_file=str(loopback_cluster), quiet=True)
    assert rep.results["total"] == rg.expected_total(4, 2)
    assert {w.id for w in rep.cluster.workers} == {"wa", "wb"}
    assert rep.placement_fidelity == 1.0
    import json

    addr = json.loads(loopback_cluster.read_text())["address"]
    rep2 = run(rg.layered(width=3, depth=1), "blevel", address=addr, quiet=True)
    assert rep2.results["total"] == rg.expected_total(3, 1)


@pytest.mark.parametrize(
    "kind", [pytest.param("ring", marks=pytest.mark.slow), pytest.param("tree", marks=pytest.mark.slow), "ps"]
)  # make test runs one, make test-all the three
def test_executable_data_parallel_training_equals_sequential_sgd(client, tmp_path, kind):
    from workflows.training import data_parallel, sgd_reference

    T, N, batch, hidden, lr, seed = 20, 2, 64, (32,), 0.5, 3  # 32 samples a rank
    g = data_parallel(
        workers=N,
        iterations=T,
        allreduce=kind,
        buckets=2,
        executable=True,
        dataset_dir=tmp_path,
        hidden=hidden,
        lr=lr,
        batch=batch,
        seed=seed,
        compression="fp16" if kind == "ps" else None,
    )
    rep = run(g, "heft", client=client, quiet=True)
    ref, losses = sgd_reference([tmp_path / f"shard{w}.npz" for w in range(N)], T, batch, [64, *hidden, 10], lr, seed)
    for w in range(N):
        for layer in range(2):
            W, b = rep.results[f"it{T - 1}.w{w}.update.l{layer}"]
            assert np.allclose(W, ref[layer][0], atol=1e-6, rtol=0) and np.allclose(b, ref[layer][1], atol=1e-6, rtol=0)
    loss = [np.mean([rep.results[f"it{t}.w{w}.loss"][0] for w in range(N)]) for t in range(T)]
    assert loss[-1] <= 0.5 * loss[0]
    assert loss == pytest.approx(losses, abs=1e-9)


def test_executable_local_sgd_on_dask_equals_its_reference(client, tmp_path):
    from workflows.training import local_sgd, local_sgd_reference

    T, N, H, batch, lr, seed = 8, 2, 3, 32, 0.5, 5  # 16 samples a rank
    g = local_sgd(
        workers=N,
        iterations=T,
        sync_every=H,
        allreduce="ring",
        buckets=2,
        executable=True,
        dataset_dir=tmp_path,
        hidden=(16,),
        lr=lr,
        batch=batch,
        seed=seed,
    )
    rep = run(g, "cpop", client=client, quiet=True)
    assert rep.placement_fidelity == 1.0
    ranks, losses = local_sgd_reference(
        [tmp_path / f"shard{w}.npz" for w in range(N)], T, batch, [64, 16, 10], lr, seed, H
    )
    for w in range(N):  # iteration 7 is local (8 is not a multiple of 3): the ranks differ
        for layer in range(2):
            W, b = rep.results[f"it{T - 1}.w{w}.local.l{layer}"]
            assert np.allclose(W, ranks[w][layer][0], atol=1e-9, rtol=0)
            assert np.allclose(b, ranks[w][layer][1], atol=1e-9, rtol=0)
    assert not np.allclose(ranks[0][0][0], ranks[1][0][0])
    loss = [np.mean([rep.results[f"it{t}.w{w}.loss"][0] for w in range(N)]) for t in range(T)]
    assert loss == pytest.approx(losses, abs=1e-9)


def _a_generator():
    yield 1


def test_a_result_that_cannot_be_sent_names_its_task(client):
    g = taskflow.TaskGraph("unsendable")
    g.add_task("fine", fn=abs, args=(-2,))
    g.add_task("gen", fn=_a_generator)
    with pytest.raises(taskflow.TaskflowError, match="task 'gen': its result cannot be sent from the worker"):
        run(g, "heft", client=client, quiet=True, timeout=60)


def test_running_an_empty_graph_says_so_before_any_cluster_starts(no_cluster):
    with pytest.raises(taskflow.TaskflowError, match="graph 'nothing' has no tasks: nothing to run"):
        run(taskflow.TaskGraph("nothing"), "heft")


def test_an_embedded_cluster_without_workers_is_refused_at_once(no_cluster):
    with pytest.raises(taskflow.TaskflowError, match="needs workers to be an integer from 1"):
        run(rg.mixed_costs(), "heft", workers=0)


def test_a_run_on_a_cluster_without_workers_waits_for_one_then_says_so(monkeypatch):
    from distributed import Scheduler

    from taskflow.runtime.client import connecting

    monkeypatch.setattr(connecting, "WAIT_FOR_WORKERS", 1.0)
    import asyncio

    async def main():
        async with Scheduler(dashboard_address=":0", port=0) as s:

            def go():
                with pytest.raises(taskflow.WorkersLost, match="has no worker"):
                    run(rg.mixed_costs(), "heft", address=s.address, quiet=True)

            await asyncio.get_running_loop().run_in_executor(None, go)

    asyncio.run(main())


def test_a_worker_that_joins_between_measuring_and_planning_enters_the_model():
    """The plugin plans on the live workers; one that joined after the client measured the cluster
    (named 'a', as `dask worker --name a` does) is added to the model with its cores, so the
    prediction and the report know it (this was a KeyError)."""
    from taskflow import Schedule
    from taskflow.runtime.client.runner import _Runner

    r = _Runner.__new__(_Runner)
    r.workers_info = [
        {"name": "b", "address": "tcp://b", "cores": 1, "speed": 1.0},
        {"name": "a", "address": "tcp://a", "cores": 2, "speed": 1.0},
    ]
    model = Cluster([Worker("b", address="tcp://b")])
    plan = Schedule(["x", "y"], ["a", "b"], [0.0, 0.0], [1.0, 1.0])
    joined = r._joined(model, plan)
    assert joined.ids == ["b", "a"] and joined.worker("a").cores == 2 and joined.worker("a").address == "tcp://a"
    assert r._joined(model, Schedule(["x"], ["b"], [0.0], [1.0])) is model


def test_the_gantt_colours_tasks_by_category_with_a_legend_and_marks_transfers(client, tmp_path):
    g = taskflow.TaskGraph("cats")
    a = g.add_task("load-1", cost=1.0, output_size=10_000, meta={"category": "load"})
    for k in range(3):
        g.add_task(f"fit{k}", cost=1.0, meta={"category": "fit"})
        g.add_edge(a.id, f"fit{k}")
    rep = run(
        g,
        "heft",
        client=client,
        cluster=Cluster([Worker("0"), Worker("1")], bandwidth=1e6),
        time_scale=0.05,
        quiet=True,
    )
    assert {row["task"]: row["category"] for row in rep.tasks} == {
        "load-1": "load",
        "fit0": "fit",
        "fit1": "fit",
        "fit2": "fit",
    }
    import matplotlib.pyplot as plt

    from taskflow.app import plot

    legends = []
    real_legend = plot._legend
    plot_legend = lambda fig, colours, transfers: (
        legends.append((list(colours), transfers)),  # noqa: E731
        real_legend(fig, colours, transfers),
    )
    plot._legend = plot_legend
    try:
        gantt_compare(rep, tmp_path / "g.png")
    finally:
        plot._legend = real_legend
        plt.close("all")
    assert legends == [(["load", "fit"], bool(rep.trace.transfers))]
    assert (tmp_path / "g.png").stat().st_size > 5000
    many = plot._colours(f"c{k}" for k in range(20))
    assert len(set(many.values())) == plot.MAX_LEGEND + 1  # past the legend's 12, one grey


def test_a_gantt_of_a_guessed_plan_gives_the_run_its_own_time_axis(client, tmp_path):
    """Costs 10x what the tasks take: the measured panel is not squashed into a tenth of the plan's axis."""
    import matplotlib.pyplot as plt

    g = rg.layered(width=2, depth=1)
    guessed = g.with_costs(cost={t: 3.0 for t in g.ids})  # the tasks take next to nothing
    rep = run(guessed, "heft", client=client, quiet=True)
    assert rep.predicted_makespan > 2 * rep.measured_makespan
    axes = []
    real_savefig = plt.Figure.savefig

    def keep(fig, *a, **kw):
        axes.extend(fig.axes)
        return real_savefig(fig, *a, **kw)

    plt.Figure.savefig = keep
    try:
        gantt_compare(rep, tmp_path / "g.png")
    finally:
        plt.Figure.savefig = real_savefig
        plt.close("all")
    plan_ax, run_ax = axes[:2]
    assert run_ax.get_xlim()[1] < 0.6 * plan_ax.get_xlim()[1]  # each panel spans its own times
    assert run_ax.get_xlim()[1] >= rep.measured_makespan


def test_a_run_longer_than_two_seconds_shows_a_progress_bar(client, capsys, monkeypatch):
    """On a terminal; where stderr is a log or a pipe there is no bar (its redraws would pile into
    one long line)."""
    import sys

    from taskflow.runtime.client.waiting import progress_bar

    assert progress_bar(8, "x").disable  # capsys's stderr is no terminal
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    g = rg.emulated_chain(8, 0.4, "slow-chain", "s")
    rep = run(g, "heft", client=client, cluster=Cluster([Worker("0"), Worker("1")]), quiet=False)
    err = capsys.readouterr().err
    assert rep.measured_makespan > 2.5
    assert "heft:" in err and "task/s" in err and "/8" in err  # tqdm's bar: name, rate, of 8 tasks
    quiet = run(g, "heft", client=client, cluster=Cluster([Worker("0"), Worker("1")]), quiet=True)
    assert quiet.measured_makespan > 2.5 and "task/s" not in capsys.readouterr().err


def test_a_dashboard_is_served_on_request_and_its_link_printed(tmp_path):
    """--dashboard serves Dask's dashboard on loopback and prints a link that answers; without it
    no link is printed."""
    import subprocess
    import sys
    import urllib.request

    from taskflow.runtime.client.connecting import connect, dashboard_link

    c, owned = connect(None, None, None, 1, 1, False, dashboard="127.0.0.1:0")
    try:
        link = dashboard_link(c)
        assert link.startswith("http://127.0.0.1:") and link.endswith("/status")
        with urllib.request.urlopen(link, timeout=30) as page:
            assert page.status == 200 and b"bokeh" in page.read().lower()
    finally:
        for x in owned:
            x.close()
    g = taskflow.TaskGraph("tiny")
    g.add_task("a", cost=0.01)
    taskflow.save_graph(g, tmp_path / "g.json")
    cmd = [sys.executable, "-m", "taskflow", "run", str(tmp_path / "g.json"), "--workers", "1"]
    shown = subprocess.run(cmd + ["--dashboard", "127.0.0.1:0"], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "Dask dashboard at http://127.0.0.1:" in shown.stderr, shown.stderr
    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and "dashboard" not in plain.stderr, plain.stderr
    bad = subprocess.run(cmd + ["--dashboard", "8787"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: --dashboard: must be HOST:PORT with a port from 0 to 65535, got '8787'"
    )


def test_a_dashboard_without_bokeh_is_refused_before_any_cluster_starts(monkeypatch, no_cluster):
    import importlib.util

    from taskflow.runtime.client import connecting

    real = importlib.util.find_spec
    monkeypatch.setattr(
        connecting.importlib.util, "find_spec", lambda name, *a: None if name == "bokeh" else real(name, *a)
    )
    g = taskflow.TaskGraph("tiny")
    g.add_task("a", cost=0.01)
    with pytest.raises(taskflow.TaskflowError, match=r"the Dask dashboard needs bokeh: pip install"):
        run(g, "heft", workers=1, dashboard=True)


def test_a_finished_run_keeps_nothing_of_its_runner_alive(client):
    """A report outlives its run; the runner (its futures, its graph's payloads) must not: a report
    that held it kept every run's gathered results, and a suite of runs ran out of memory."""
    import gc
    import weakref

    from taskflow.runtime.client import runner

    made = []
    real_init = runner._Runner.__init__

    def init(self, *a, **k):
        made.append(weakref.ref(self))
        real_init(self, *a, **k)

    runner._Runner.__init__ = init
    try:
        rep = run(rg.layered(4, 3), "heft", client=client, quiet=True)
    finally:
        runner._Runner.__init__ = real_init
    gc.collect()
    assert made and all(r() is None for r in made)
    assert rep.profile is not None and rep.measured_makespan > 0  # the report itself is whole


def _nap(*_):
    time.sleep(0.2)
    return np.ones(1000)


def test_a_finished_run_releases_its_results_on_the_cluster_at_once(client):
    """The run's futures go when it returns, not when Python's cycle collector next runs: a wait
    that timed out kept the run's frames (and so every future) in a reference cycle, and the
    results stayed in the workers' memory."""
    import gc

    g = taskflow.TaskGraph("naps")
    a = g.add_task("a", fn=_nap, cost=0.2)
    b = g.add_task("b", fn=_nap, args=(a,), cost=0.2)
    g.add_task("c", fn=_nap, args=(b,), cost=0.2)  # 0.6 s: the 0.25 s waits time out
    before = set(client.futures)
    gc.collect()
    gc.disable()
    try:
        t0 = time.monotonic()
        rep = run(g, "heft", client=client, quiet=True)
        took = time.monotonic() - t0
        deadline = time.time() + 5.0  # the client drops a released future on its event loop
        while (held := set(client.futures) - before) and time.time() < deadline:
            time.sleep(0.05)
    finally:
        gc.enable()
    # the run's own wall time, not the report's makespan: Dask shifts each worker's task times by
    # its estimate of the clock offset, which a loaded machine puts tenths of a second off
    assert len(rep.results) == 3 and took >= 0.6
    assert held == set(), f"{len(held)} result(s) of a finished run still held"


def _minus(a, b):
    return a - b


def test_every_way_of_passing_results_reaches_the_task_on_dask(client):
    """Results passed alone, each once, take the short payload (the function only); results passed
    twice, mixed with constants, nested or as keywords keep the whole call: all give the in-process
    results on Dask."""
    from taskflow.runtime.worker.calls import _call_positional, _execute, execute, task_call

    g = taskflow.TaskGraph("args")
    a = g.add_task("a", fn=int, args=("7",))
    b = g.add_task("b", fn=int, args=("3",))
    cases = {
        "in-order": (a, b),  # 7 - 3
        "reversed": (b, a),  # 3 - 7
        "twice": (a, a),  # 0
        "constant": (a, 10),  # -3
    }
    for name, args in cases.items():
        g.add_task(name, fn=_minus, args=args)
    g.add_task("nested", fn=sum, args=([a, b, 5],))
    g.add_task("keyword", fn=_minus, args=(a,), kwargs={"b": b})
    expect = execute(g)
    assert expect["reversed"] == -4 and expect["nested"] == 15 and expect["keyword"] == 4
    rep = run(g, "heft", client=client, quiet=True)
    assert rep.results == expect
    ar = g.arrays
    kinds = {
        t: task_call(*g.calls()[ar.index[t]], [ar.ids[p] for p in ar.preds(ar.index[t]).tolist()])[0] for t in cases
    }
    # a task's dependencies are listed in the order its arguments name them
    assert kinds["in-order"] is _call_positional and kinds["reversed"] is _call_positional
    assert kinds["twice"] is _execute and kinds["constant"] is _execute


def _block(n):
    return np.ones(n)


def _late(seconds):
    time.sleep(seconds)
    return seconds


def _total(*xs):
    return sum(xs)


def _join(block, seconds):
    return float(block.sum()) + seconds


@pytest.mark.parametrize("prefetch", [True, False])
def test_a_planned_output_moves_to_its_consumers_worker_as_soon_as_it_exists(client, prefetch):
    """A big output goes to the worker of its planned consumer while the consumer's other input is
    still being computed (as the plan's model assumes), not once the consumer is ready; small
    outputs and ``prefetch`` off keep Dask's way."""
    from taskflow.runtime.scheduler.plugin import PREFETCH_BYTES

    def switch(on, dask_scheduler=None):
        dask_scheduler.plugins["taskflow"].prefetch = on

    g = taskflow.TaskGraph("prefetch")
    block = g.add_task(
        "block", fn=_block, args=(PREFETCH_BYTES,), cost=0.01, output_size=8 * PREFETCH_BYTES, meta={"worker": "0"}
    )
    # 2.2 s: Dask's memory manager, every 2 s, would drop the early replica (then fetched again)
    late = g.add_task("late", fn=_late, args=(2.2,), cost=2.2, meta={"worker": "1"})
    g.add_task("join", fn=_join, args=(block, late), cost=0.01, meta={"worker": "1"})
    run(rg.layered(2, 1), "heft", client=client, quiet=True)  # the plugin is installed
    client.run_on_scheduler(switch, prefetch)
    try:
        rep = run(g, "placed", client=client, quiet=True)
    finally:
        client.run_on_scheduler(switch, True)
    assert rep.results["join"] == PREFETCH_BYTES + 2.2
    amm = client.run_on_scheduler(
        lambda dask_scheduler=None: sorted(type(p).__name__ for p in dask_scheduler.extensions["amm"].policies)
    )
    assert "ReduceReplicas" not in amm and "KeepPlannedReplicas" in amm
    where = {r.task: r.worker for r in rep.trace.runs}
    assert where["block"] != where["late"] == where["join"]
    late_done = next(r.finish for r in rep.trace.runs if r.task == "late")
    moved = [t for t in rep.trace.transfers if t.task == "block"]
    assert len(moved) == 1 and moved[0].bytes >= 8 * PREFETCH_BYTES
    if prefetch:  # under way while "late" still sleeps, two seconds before it ends
        assert moved[0].start < late_done - 1.5
    else:
        assert moved[0].start >= late_done


def _skew_clock(seconds):
    """Move this worker's estimate of the scheduler's clock, as a late heartbeat answer does."""
    from distributed import get_worker

    get_worker().scheduler_delay += seconds
    return seconds


def test_run_times_are_on_the_workers_clocks_whatever_dasks_clock_estimate_does(client):
    """Dask adds each worker's heartbeat-based estimate of the scheduler's clock offset to every
    time it reports; the estimate jumps with each heartbeat (by 165 ms in one test run, making a
    0.2 s task look 0.03 s long). The report takes it off again: a chain on one worker has no gap
    where the estimate jumped by 100 s."""
    from distributed import get_task_stream

    g = taskflow.TaskGraph("skew")
    a = g.add_task("a", fn=_skew_clock, args=(100.0,), cost=0.01)
    g.add_task("b", fn=_late, args=(0.05,), cost=0.05)
    g.add_task("c", fn=_join, args=(np.ones(3), a), cost=0.01)  # a's result, elsewhere or not
    for _ in range(3):  # a heartbeat answered between a and b resets the estimate: try again
        with get_task_stream(client=client) as ts:
            rep = run(g, "heft", client=client, quiet=True)
        stream = {r["key"].split("~")[0].split("-", 1)[1]: r for r in ts.data if "~" in str(r["key"])}
        skewed = [x for x in stream["c"]["startstops"] if x["action"] == "compute"][-1]["start"] - [
            x for x in stream["a"]["startstops"] if x["action"] == "compute"
        ][-1]["stop"]
        if skewed > 50:
            break
    assert skewed > 50, "Dask's reported times never showed the skew; the test could not check anything"
    runs = {r.task: r for r in rep.trace.runs}
    assert runs["c"].start - runs["a"].finish < 1.0
    assert rep.measured_makespan < 5.0 and rep.results["c"] == 103.0
    client.run(lambda dask_worker=None: setattr(dask_worker, "scheduler_delay", 0.0))


def test_dask_sees_each_task_by_its_kind(client):
    """Keys are led by the task's kind, which Dask takes as their prefix: under Dask's own
    scheduling it learns how long a kind takes (it planned every task with its 0.5 s default when
    each task id was a prefix of its own), and its dashboard groups the tasks by kind."""
    from dask.utils import key_split

    from taskflow.runtime.client.dask_graph import keys_for

    g = taskflow.TaskGraph("kinds")
    hs = [g.add_task(f"work_{k}", fn=_late, args=(0.2,), cost=0.2) for k in range(4)]
    g.add_task("sum", fn=_total, args=tuple(hs), cost=0.01)
    keys = keys_for(g, "0a1b2c3d", 0)
    assert {t: key_split(k) for t, k in keys.items()} == {**{f"work_{k}": "work" for k in range(4)}, "sum": "sum"}
    assert len(set(keys.values())) == len(keys) and keys != keys_for(g, "0a1b2c3d", 1)
    rep = run(g, "work-stealing", client=client, quiet=True)
    assert rep.results["sum"] == pytest.approx(0.8)
    learned = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.task_prefixes["work"].duration_average)
    assert 0.15 < learned < 1.0


def _chains(k: int = 8) -> taskflow.TaskGraph:
    """``k`` roots, root ``i`` heading a chain of ``i`` more tasks: HEFT starts the roots in the
    reverse of their names (the longest chain first)."""
    g = taskflow.TaskGraph("chains")
    for i in range(k):
        prev = f"r{i}"
        g.add_task(prev, cost=0.05, output_size=1000)
        for j in range(i):
            g.add_task(f"c{i}_{j}", cost=0.05, output_size=1000)
            g.add_edge(prev, f"c{i}_{j}")
            prev = f"c{i}_{j}"
    return g


class _SentOrder(SchedulerPlugin):
    """Records, in order, each task Dask's scheduler decides to send to a worker (its transitions to
    ``processing``, in the order Dask makes the messages, before the plugin reorders a batch)."""

    name = "test-sent-order"

    def __init__(self):
        self.sent = []

    def start(self, scheduler):
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "processing":
            self.sent.append((key, self.scheduler.tasks[key].processing_on.name))


def _task_of_key(key: str) -> str:
    return key.split("-", 1)[1].split("~")[0]  # "<kind>-<task id>~<run>.<submission>"


def test_dask_sends_each_worker_its_roots_in_the_plan_order(client):
    """A worker that is given several ready tasks at once starts the first to arrive, so the roots
    must be sent in the plan's order (Dask orders a graph's first transitions by the priorities it
    arrives with; the plugin's own come too late for that)."""
    g = _chains()
    model = Cluster([Worker("0"), Worker("1")], bandwidth=1e9)
    client.register_plugin(_SentOrder())
    try:
        rep = run(g, "heft", client=client, cluster=model, quiet=True)
        sent = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins[_SentOrder.name].sent)
    finally:
        client.unregister_scheduler_plugin(_SentOrder.name)
    planned = {t: (str(w), s) for t, w, s in zip(rep.plan.tasks, rep.plan.workers, rep.plan.start)}
    roots = [f"r{i}" for i in range(8)]
    for w in ("0", "1"):
        want = sorted((t for t in roots if planned[t][0] == w), key=lambda t: planned[t][1])
        got = [t for t in (_task_of_key(k) for k, _ in sent) if t in want]
        assert len(want) >= 3 and got == want, (w, got, want)


def test_each_worker_runs_its_roots_in_the_plan_order_however_the_graph_came(client, monkeypatch):
    """Without the plan's priorities on the graph (as for ``taskflow.compute`` and ``taskflow.use``,
    planned only once the graph is in the scheduler), the plugin still sends each worker its planned
    tasks in priority order, so the first root a worker starts is its plan's first."""
    import contextlib

    import taskflow.runtime.client.runner as runner

    monkeypatch.setattr(runner, "submit_order", lambda plan, key_of: contextlib.nullcontext())
    g = _chains()
    model = Cluster([Worker("0"), Worker("1")], bandwidth=1e9)
    rep = run(g, "heft", client=client, cluster=model, quiet=True)
    planned = {t: (str(w), s) for t, w, s in zip(rep.plan.tasks, rep.plan.workers, rep.plan.start)}
    ran = {r.task: (str(r.worker), r.start) for r in rep.trace.runs}
    roots = [f"r{i}" for i in range(8)]
    for w in ("0", "1"):
        want = sorted((t for t in roots if planned[t][0] == w), key=lambda t: planned[t][1])
        got = sorted((t for t in roots if ran[t][0] == w), key=lambda t: ran[t][1])
        assert len(want) >= 3 and got == want, (w, got, want)


def test_plan_first_orders_planned_compute_tasks_only():
    from taskflow.runtime.scheduler.patching import plan_first

    msgs = [
        {"op": "compute-task", "key": "a", "priority": (-1, 0)},
        {"op": "free-keys", "keys": ["z"]},
        {"op": "compute-task", "key": "dask-own", "priority": (-9, 0)},
        {"op": "compute-task", "key": "b", "priority": (-5, 0)},
        {"op": "compute-task", "key": "c", "priority": (-3, 0)},
    ]
    out = plan_first(msgs, {"a", "b", "c"})
    assert [m.get("key") for m in out] == ["b", None, "dask-own", "c", "a"]
    one = [{"op": "compute-task", "key": "a", "priority": (-1, 0)}]
    assert plan_first(one, {"a"}) == [{"op": "compute-task", "key": "a", "priority": (-1, 0)}]


def test_only_planned_keys_are_sent_in_the_plan_s_order():
    """The keys of a run left to Dask's own scheduling (no plan) are sent as Dask sends them,
    and nothing is looked at while no run has a plan."""
    from types import SimpleNamespace

    from taskflow.runtime.scheduler.patching import PlannedKeys, send_planned_in_order

    planned = SimpleNamespace(plan={"a": "w0", "b": "w0"})
    left = SimpleNamespace(plan={})
    plugin = SimpleNamespace(runs={"r1": planned, "r2": left}, key_run={"a": "r1", "b": "r1", "x": "r2", "y": "r2"})
    keys = PlannedKeys(plugin)
    assert "a" in keys and "b" in keys and "x" not in keys and "nobody" not in keys
    sent = []
    sched = SimpleNamespace(send_all=lambda c, w: sent.append(w))
    send_planned_in_order(sched, plugin)

    def msgs():
        return {
            "w0": [
                {"op": "compute-task", "key": k, "priority": (p, 0)}
                for k, p in (("a", -1), ("x", -2), ("b", -5), ("y", -9))
            ]
        }

    sched.send_all({}, msgs())
    assert [m["key"] for m in sent[-1]["w0"]] == ["b", "x", "a", "y"]  # a and b swapped; x, y as sent
    planned.plan = {}
    sched.send_all({}, msgs())
    assert [m["key"] for m in sent[-1]["w0"]] == ["a", "x", "b", "y"]  # no plan: all as Dask sent them


def test_a_run_longer_than_its_timeout_raises_run_timeout_and_the_cluster_goes_on(client):
    g = rg.emulated_chain(10, 0.5, "long-chain", "c")
    t0 = time.time()
    with pytest.raises(taskflow.RunTimeout, match="run did not finish within 1 s") as e:
        run(g, "heft", client=client, cluster=Cluster([Worker("0"), Worker("1")]), quiet=True, timeout=1)
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, taskflow.TaskflowError)
    assert time.time() - t0 < 15
    rep = run(rg.layered(width=2, depth=1), "heft", client=client, quiet=True)  # the cluster is still usable
    assert rep.results["total"] == rg.expected_total(2, 1)
