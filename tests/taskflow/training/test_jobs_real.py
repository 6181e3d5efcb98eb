"""Real training jobs arriving on one Dask cluster under a job scheduler (taskflow.training.jobrun):
the rules every run keeps, preemption at an epoch boundary that leaves the parameters of an
uninterrupted run, a failing job named, the profile the simulator is fed."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import os

import pytest

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("sklearn") is None:
    if os.environ.get("TASKFLOW_REQUIRE_TORCH"):  # CI installs the extra: these tests must run there
        raise RuntimeError("TASKFLOW_REQUIRE_TORCH is set but torch or scikit-learn is not installed")
    pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')", allow_module_level=True)

from distributed import Client, LocalCluster  # noqa: E402

import taskflow  # noqa: E402
from taskflow.errors import TaskflowError  # noqa: E402
from taskflow.jobs import Interference, JobTrace, simulate_jobs  # noqa: E402
from taskflow.jobscheduling import Job, get_job_scheduler  # noqa: E402
from taskflow.training.jobprofile import one_machine, predicted_trace, profile_jobs  # noqa: E402
from taskflow.training.jobrun import run_jobs  # noqa: E402
from workflows import torch_models  # noqa: E402
from workflows.images import write_digits  # noqa: E402

from tests.conftest import NO_HTTP  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::taskflow.TaskflowWarning")  # each run plans with guessed costs

MODELS = {
    "cnn": functools.partial(torch_models.small_cnn, in_channels=1, classes=10, side=8),
    "mlp": functools.partial(torch_models.mlp, features=64, hidden=(64,), classes=10),
}
JOBS = [
    Job("a", 0.0, 2, 10.0, model="cnn", iterations=24),
    Job("b", 0.5, 2, 5.0, model="mlp", iterations=12),
    Job("c", 1.0, 4, 5.0, model="cnn", iterations=8),
]


@pytest.fixture(scope="module")
def four():
    with (
        LocalCluster(
            n_workers=4, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return write_digits(tmp_path_factory.mktemp("data") / "digits")


def rel_err(state, ref) -> float:
    return max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(state["params"], ref["params"]))


def test_fifo_admits_real_jobs_in_arrival_order_and_keeps_every_rule(four, digits):
    said = []
    run = run_jobs(JOBS, "fifo", MODELS, digits, client=four, timeout=300, on_event=said.append)
    assert run.violations() == [] and run.metrics()["preemptions"] == 0
    rec = {r.job.id: r for r in run.records}
    # a and b fit side by side; c (all four workers) waits for both
    assert rec["c"].start >= max(rec["a"].finish, rec["b"].finish) - 1e-6
    assert rec["b"].start < rec["a"].finish
    assert [type(e).__name__ for e in said].count("Finished") == 3
    assert set(run.histories) == {"a", "b", "c"} and all(len(h.epochs) >= 1 for h in run.histories.values())


def test_a_preempted_job_resumes_on_its_checkpoint_with_an_uninterrupted_runs_parameters(four, digits):
    # a and b still run when c arrives (at 1 s, on all four workers): past 1 worker-second they give way
    jobs = [dataclasses.replace(JOBS[0], iterations=96), dataclasses.replace(JOBS[1], iterations=48), JOBS[2]]
    las = get_job_scheduler("las", thresholds=(1.0,), round=0.5)
    run = run_jobs(jobs, las, MODELS, digits, client=four, timeout=300)
    assert run.violations() == []
    # a job preempted in its last epoch ends it (and finishes) before it stops: count the restarted ones
    resumed = [r for r in run.records if len(r.runs) >= 2]
    assert {r.job.id for r in resumed} >= {"a"} and all(r.preemptions >= len(r.runs) - 1 for r in run.records)
    names = sorted(str(w["name"]) for w in four.scheduler_info()["workers"].values())
    for r in resumed:
        j = r.job
        alone = taskflow.train(
            MODELS[j.model],
            digits,
            epochs=-(-j.iterations // 4),
            iterations=4,
            workers=j.workers,
            batch=32,
            client=four,
            on_workers=names[4 - j.workers :],
            quiet=True,
        )
        for got, want in zip(run.histories[j.id].states, alone.states, strict=True):
            assert rel_err(got, want) < 1e-6


def test_a_job_that_fails_is_named_and_the_run_ends(four, digits):
    def broken():
        raise RuntimeError("no such layer")

    with pytest.raises(TaskflowError, match="'x'"):
        run_jobs(
            [Job("x", 0.0, 1, 1.0, model="bad", iterations=4)],
            "fifo",
            {"bad": broken},
            digits,
            client=four,
            timeout=120,
        )


@pytest.mark.parametrize(
    "job, message",
    [
        (Job("u", 0.0, 1, 1.0, model="vgg", iterations=4), "job 'u': model 'vgg'"),
        (Job("i", 0.0, 1, 1.0, model="cnn"), "job 'i': a real run needs its iterations"),
        (Job("w", 0.0, 9, 1.0, model="cnn", iterations=4), "job 'w' asks for 9 workers; the cluster has 4"),
    ],
)
def test_a_job_the_run_cannot_train_is_one_line_before_any_starts(four, digits, job, message):
    with pytest.raises(TaskflowError, match=message):
        run_jobs([job], "fifo", MODELS, digits, client=four)


def test_the_profile_predicts_durations_and_slowdowns_for_the_simulator(four, digits):
    prof = profile_jobs(JOBS[:2], MODELS, digits, client=four, epochs=3)
    assert all(v > 0 for v in prof.epoch.values()) and len(prof.epoch) == 2
    assert 0 < min(prof.interference.pairs.values()) <= 1.0 and len(prof.interference.pairs) >= 2
    # the workers run here: the cores each kind kept busy alone, and what the machine gives them
    table = prof.interference
    assert set(table.cores) == {j.model for j in predicted_trace(JobTrace(JOBS[:2]), prof).jobs}
    assert all(0 < c <= os.cpu_count() + 0.5 for c in table.cores.values()), table.cores
    assert 0 < table.capacity <= os.cpu_count() + 0.5
    trace = predicted_trace(JobTrace(JOBS[:2]), prof)
    a = trace.jobs[0]
    assert a.duration == pytest.approx(prof.start[("cnn", 2, 32)] + 6 * prof.epoch[("cnn", 2, 32)])
    sim = simulate_jobs(trace, one_machine(4), "fifo", interference=prof.interference)
    assert sim.violations() == [] and sim.metrics()["jobs"] == 2


@pytest.mark.slow  # a prediction from the command line runs in make test too (the repeats' test)
def test_taskflow_jobs_run_runs_a_trace_and_predicts_it(tmp_path, capsys, digits):
    import json

    from taskflow.app.cli import main

    trace = tmp_path / "real.json"
    trace.write_text(
        json.dumps(
            {
                "format": "taskflow-jobs/1",
                "name": "two",
                "jobs": [
                    {"id": "p", "arrival": 0, "workers": 1, "duration": 1, "model": "mlp", "iterations": 8},
                    {"id": "q", "arrival": 0.2, "workers": 2, "duration": 1, "model": "small-cnn", "iterations": 8},
                ],
            }
        )
    )
    out = tmp_path / "runs.json"
    assert (
        main(
            [
                "jobs",
                "run",
                str(trace),
                "--data",
                str(digits),
                "--workers",
                "3",
                "--scheduler",
                "fifo",
                "-o",
                str(out),
                "--timeout",
                "300",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "real avg JCT" in text and "median err." in text
    doc = json.loads(out.read_text())
    assert doc["runs"][0]["scheduler"] == "fifo" and len(doc["simulated"][0]["jobs"]) == 2
    # what the simulator was fed: each kind's start and epoch, the interference table it read
    kinds = {k["kind"]: k for k in doc["profile"]["kinds"]}
    assert set(kinds) == {"mlp/1w/b32", "small-cnn/2w/b32"} and all(k["epoch"] > 0 for k in kinds.values())
    assert Interference.from_dict(doc["profile"]["interference"]).pairs
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.json", "runs.json"]
    capsys.readouterr()
    assert main(["jobs", "run", str(trace), "--data", str(digits), "--cluster", "c.json"]) == 2
    assert "c.json" in capsys.readouterr().err  # a cluster file that is not there, named


def test_taskflow_jobs_run_repeats_each_scheduler_in_turned_orders_and_measures_the_kinds_beside(
    tmp_path, capsys, digits
):
    """Each round turns the schedulers' order by one; after each round the kinds of job are measured
    alone again, and the simulator is fed each kind's median over the passes."""
    import json

    from taskflow.app.cli import main

    trace = tmp_path / "one.json"
    trace.write_text(
        json.dumps(
            {
                "format": "taskflow-jobs/1",
                "name": "one",
                "jobs": [{"id": "p", "arrival": 0, "workers": 1, "duration": 1, "model": "mlp", "iterations": 4}],
            }
        )
    )
    out = tmp_path / "runs.json"
    assert (
        main(
            [
                "jobs",
                "run",
                str(trace),
                "--data",
                str(digits),
                "--workers",
                "2",
                "--scheduler",
                "fifo,sjf",
                "--repeat",
                "2",
                "-o",
                str(out),
                "-q",
                "--timeout",
                "300",
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    runs = doc["runs"]
    assert [r["scheduler"] for r in runs] == ["fifo", "sjf", "sjf", "fifo"]  # the second round turned by one
    assert all(r["metrics"]["jobs"] == 1 for r in runs)
    (kind,) = doc["profile"]["kinds"]  # the first profile, then a pass after each round: the median fed
    assert len(kind["epochs"]) == 3 and kind["epoch"] == sorted(kind["epochs"])[1]
    (job,) = doc["simulated"][0]["jobs"]
    assert job["jct"] == pytest.approx(kind["start"] + kind["epoch"])  # its one epoch of 4 iterations
    assert Interference.from_dict(doc["profile"]["interference"]).pairs  # the pair of it beside itself
    assert "real avg JCT" in capsys.readouterr().out
    assert main(["jobs", "run", str(trace), "--data", str(digits), "--cluster", "c.json"]) == 2
    assert "c.json" in capsys.readouterr().err  # a cluster file that is not there, named


RACKS = {"0": "r0", "1": "r0", "2": "r1", "3": "r1"}
PAIR = [Job("a", 0.0, 2, 1.0, model="mlp", iterations=4), Job("b", 0.1, 2, 1.0, model="mlp", iterations=4)]


@pytest.mark.parametrize("how, across", [("consolidated", False), ("spread", True)])
def test_real_jobs_are_placed_on_the_workers_racks(four, digits, how, across):
    run = run_jobs(
        PAIR, get_job_scheduler("fifo", placement=how), MODELS, digits, client=four, timeout=300, racks=RACKS
    )
    assert run.violations() == [] and run.metrics()["jobs"] == 2
    names = sorted(RACKS)
    for r in run.records:
        ((_, _, ws),) = r.runs
        assert (len({RACKS[names[w]] for w in ws}) == 2) is across, (how, r.job.id, ws)


def test_a_job_given_workers_runs_its_tasks_on_them_and_no_other(four, digits):
    def transitions(dask_worker):
        return dask_worker.state.transition_counter

    by_name = {a: str(w["name"]) for a, w in four.scheduler_info()["workers"].items()}
    before = {by_name[a]: n for a, n in four.run(transitions).items()}
    taskflow.train(
        MODELS["mlp"],
        digits,
        epochs=1,
        iterations=2,
        workers=2,
        batch=32,
        client=four,
        on_workers=["3", "1"],
        quiet=True,
    )
    after = {by_name[a]: n for a, n in four.run(transitions).items()}
    assert [n for n in sorted(after) if after[n] != before[n]] == ["1", "3"]


@pytest.mark.parametrize(
    "racks, message",
    [
        ({"0": 0, "1": 0, "2": 1}, "worker '3' of the Dask cluster has no rack"),
        ({**RACKS, "9": 1}, "the racks name worker '9'"),
    ],
)
def test_racks_that_do_not_match_the_cluster_are_one_line(four, digits, racks, message):
    with pytest.raises(TaskflowError, match=message):
        run_jobs(PAIR, "fifo", MODELS, digits, client=four, timeout=60, racks=racks)


def test_jobs_run_inside_the_testbed_takes_its_racks(four, digits, tmp_path, capsys, monkeypatch):
    import json

    import dask

    from taskflow.app.cli import main
    from taskflow.cluster import Cluster, Worker
    from taskflow.formats import save_cluster

    trace = tmp_path / "pair.json"
    trace.write_text(
        json.dumps(
            {
                "format": "taskflow-jobs/1",
                "name": "pair",
                "jobs": [
                    {"id": j.id, "arrival": j.arrival, "workers": 2, "duration": 1, "model": "mlp", "iterations": 4}
                    for j in PAIR
                ],
            }
        )
    )
    racked = tmp_path / "cluster.json"
    save_cluster(Cluster([Worker(n, 1.0, 1) for n in sorted(RACKS)], racks=RACKS, uplink=2.5e6), racked)
    monkeypatch.setenv("TASKFLOW_TESTBED_CLUSTER", str(racked))  # as `taskflow testbed -- ...` sets them
    out = tmp_path / "runs.json"
    with dask.config.set({"scheduler-address": four.scheduler.address}):
        assert (
            main(
                [
                    "jobs",
                    "run",
                    str(trace),
                    "--data",
                    str(digits),
                    "--scheduler",
                    "fifo",
                    "--placement",
                    "spread",
                    "--no-predict",
                    "-o",
                    str(out),
                    "--timeout",
                    "300",
                ]
            )
            == 0
        )
    assert "4 Dask workers in 2 racks (20 Mbit/s uplinks)" in capsys.readouterr().out
    for job in json.loads(out.read_text())["runs"][0]["jobs"]:
        assert {RACKS[sorted(RACKS)[w]] for w in job["runs"][0][2]} == {"r0", "r1"}
    plain = tmp_path / "plain.json"
    save_cluster(Cluster([Worker(n, 1.0, 1) for n in sorted(RACKS)]), plain)
    assert (
        main(
            [
                "jobs",
                "run",
                str(trace),
                "--data",
                str(digits),
                "--address",
                four.scheduler.address,
                "--cluster",
                str(plain),
            ]
        )
        == 2
    )
    assert "names no racks" in capsys.readouterr().err


def test_gandiva_grows_and_shrinks_a_real_elastic_job_which_ends_with_an_uninterrupted_runs_parameters(four, digits):
    jobs = [
        Job("e", 0.0, 2, 3.0, model="mlp", iterations=96, min_workers=2, max_workers=4),
        Job("f", 1.5, 2, 1.0, model="mlp", iterations=8),
    ]
    run = run_jobs(jobs, get_job_scheduler("gandiva", round=0.5), MODELS, digits, client=four, timeout=300)
    assert run.violations() == []
    e = next(r for r in run.records if r.job.id == "e")
    sizes = [len(ws) for _, _, ws in e.runs]
    assert 4 in sizes and sizes[0] == 2, sizes  # grown onto the idle workers, then shrunk for f (or done)
    assert run.histories["e"].resumed_from is not None
    names = sorted(str(w["name"]) for w in four.scheduler_info()["workers"].values())
    alone = taskflow.train(
        MODELS["mlp"],
        digits,
        epochs=24,
        iterations=4,
        workers=2,
        batch=32,
        client=four,
        on_workers=names[:2],
        quiet=True,
    )
    # the batch over all ranks is the same whatever their number: the same parameters, to rounding
    for got in run.histories["e"].states:
        assert rel_err(got, alone.states[0]) < 1e-5


def test_elastic_resumes_only_synchronous_data_parallelism(digits):
    with pytest.raises(TaskflowError, match="elastic resumes synchronous data parallelism only"):
        taskflow.train(MODELS["mlp"], digits, epochs=1, workers=2, mode="local", elastic=True)


def test_with_crossover_a_real_job_takes_turns_on_a_running_jobs_workers(four, digits):
    jobs = [Job("a", 0.0, 4, 5.0, model="cnn", iterations=64), Job("b", 0.5, 4, 1.0, model="mlp", iterations=16)]
    run = run_jobs(jobs, get_job_scheduler("fifo", crossover=0.5), MODELS, digits, client=four, timeout=300)
    assert run.violations() == [] and run.shared == [("a", "b")]
    a, b = run.records
    ((a0, a1, wa),) = a.runs
    ((b0, b1, wb),) = b.runs
    assert wa == wb and a0 < b0 < a1  # b ran on a's workers while a ran
    names = sorted(str(w["name"]) for w in four.scheduler_info()["workers"].values())
    alone = taskflow.train(
        MODELS["mlp"], digits, epochs=4, iterations=4, workers=4, batch=32, client=four, on_workers=names, quiet=True
    )
    for got, want in zip(run.histories["b"].states, alone.states, strict=True):
        assert rel_err(got, want) < 1e-6


@contextlib.contextmanager
def two_workers_losing_one(lose):
    """A cluster of its own, two worker processes; ``lose(cluster, client, address)`` is done to
    worker 1 once it runs a task (in a thread: a job is training); yields the client and an event
    set when it was done."""
    import threading
    import time

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        addr = {str(w["name"]): a for a, w in c.scheduler_info()["workers"].items()}["1"]
        done = threading.Event()

        def when_training():
            end = time.monotonic() + 120
            while time.monotonic() < end and not c.processing(workers=[addr]).get(addr):
                time.sleep(0.01)
            lose(lc, c, addr)
            done.set()

        t = threading.Thread(target=when_training, daemon=True)
        t.start()
        yield c, done
        t.join(10)


def killed(lc, c, addr):  # the worker's process ends; its nanny starts it again, under its name
    import signal

    os.kill(c.run(os.getpid, workers=[addr])[addr], signal.SIGKILL)


@pytest.mark.slow  # a cluster of its own whose worker is killed (make test: the Workers' own test)
def test_a_job_whose_worker_dies_waits_and_resumes_on_the_worker_back_with_an_uninterrupted_runs_parameters(digits):
    from taskflow.app.cli.jobs import worker_line
    from taskflow.jobscheduling import WorkerAdded, WorkerLost

    said = []
    with two_workers_losing_one(killed) as (c, done):
        job = Job("a", 0.0, 2, 5.0, model="mlp", iterations=48)
        run = run_jobs([job], "fifo", MODELS, digits, client=c, timeout=300, on_event=said.append)
        alone = taskflow.train(
            MODELS["mlp"],
            digits,
            epochs=12,
            iterations=4,
            workers=2,
            batch=32,
            client=c,
            on_workers=["0", "1"],
            quiet=True,
        )
    assert done.is_set() and run.violations() == []
    lost = [e for e in said if isinstance(e, WorkerLost)]
    assert [(e.worker, e.job_id) for e in lost] == [(1, "a")]
    assert any(isinstance(e, WorkerAdded) and e.worker == 1 and e.time >= lost[0].time for e in said)
    assert worker_line(lost[0], ["0", "1"]).endswith("worker '1' was lost: job 'a' stops and waits again")
    (rec,) = run.records
    assert len(rec.runs) == 2 and rec.preemptions == 1 and rec.runs[1][0] >= lost[0].time
    for got, want in zip(run.histories["a"].states, alone.states, strict=True):
        assert rel_err(got, want) < 1e-6


@pytest.mark.slow  # a cluster of its own that loses a worker for good
def test_a_job_left_waiting_for_a_lost_worker_ends_the_run_with_one_line_after_the_rejoin_wait(digits, monkeypatch):
    import time

    from taskflow.errors import WorkersLost
    from taskflow.training import jobrun

    monkeypatch.setattr(jobrun, "REJOIN_SECONDS", 1.0)
    t0 = time.monotonic()
    with two_workers_losing_one(lambda lc, c, addr: lc.scale(1)) as (c, _):  # worker 1 retired for good
        with pytest.raises(WorkersLost, match=r"job 'a' waits for 2 workers: worker '1' was lost and no worker joined"):
            run_jobs(
                [Job("a", 0.0, 2, 5.0, model="mlp", iterations=400)], "fifo", MODELS, digits, client=c, timeout=300
            )
    assert time.monotonic() - t0 < 120
