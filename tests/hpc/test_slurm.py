"""Dask workers as SLURM jobs (dask-jobqueue) on a real one-node SLURM: `make test-hpc` starts it
with tests/hpc/slurm_up.sh; elsewhere these tests skip and say why."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import taskflow
from taskflow import TaskflowError
from workflows.samples import path as sample

ROOT = Path(__file__).resolve().parents[2]

#: two workers in SLURM jobs of 1 GB, reached over loopback, as the commands take them
ON_SLURM = ("--jobqueue", "slurm", "--workers", "2", "--memory", "1GB", "--interface", "lo")


def _slurm_state() -> str | None:
    """None when a SLURM node is up and dask-jobqueue is installed, else why not."""
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        return "dask-jobqueue is not installed (make test-hpc installs it)"
    if shutil.which("sinfo") is None:
        return "SLURM is not installed (make test-hpc installs and starts it: tests/hpc/slurm_up.sh up)"
    try:
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return "sinfo does not answer: slurmctld is not running (tests/hpc/slurm_up.sh up)"
    state = p.stdout.split()[0] if p.returncode == 0 and p.stdout.split() else ""
    if not state.startswith(("idle", "mixed", "allocated")):
        return f"no SLURM node is up ({state or p.stderr.strip()[:80] or 'no answer'}; tests/hpc/slurm_up.sh up)"
    return None


WHY = _slurm_state()
pytestmark = [pytest.mark.hpc, pytest.mark.skipif(WHY is not None, reason=f"no SLURM here: {WHY}")]
OPTIONS = {"cores": 1, "memory": "1GB", "walltime": "00:10:00", "interface": "lo", "wait": 60}


def _queue() -> list:
    p = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, timeout=30)
    return [line.split() for line in p.stdout.splitlines() if line.strip()]


def _drained(timeout=30.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not _queue():
            return True
        time.sleep(0.5)
    return False


def test_an_emulated_workflow_runs_under_heft_on_two_slurm_jobs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # dask-jobqueue's job logs land here
    g = taskflow.load_graph(sample("montage"))
    rep = taskflow.run(
        g, "heft", workers=2, jobqueue="slurm", jobqueue_options=OPTIONS, time_scale=0.01, quiet=True, timeout=300
    )
    assert rep.placement_fidelity == 1.0
    assert {r.task for r in rep.trace.runs} == set(g.ids)
    jobs = rep.jobs
    assert len(jobs) == 2 and len(set(jobs.values())) == 2 and all(j.isdigit() for j in jobs.values())
    assert all("job" in w for w in rep.to_dict()["workers"])
    assert _drained(), _queue()  # the jobs end with the run


def test_a_cancelled_job_is_survived_by_re_planning_on_the_other(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from taskflow.runtime.launch.jobqueue import job_ids, start_jobqueue

    g = taskflow.load_graph(sample("montage"))
    client, cluster = start_jobqueue("slurm", 2, **OPTIONS)
    try:
        jobs = job_ids(client)
        assert len(jobs) == 2
        victim = sorted(jobs.values())[0]
        out = {}

        def go():
            try:
                out["report"] = taskflow.run(g, "heft", client=client, time_scale=0.06, quiet=True, timeout=300)
            except BaseException as e:  # noqa: BLE001 - handed to the test thread
                out["error"] = e

        t = threading.Thread(target=go)
        t.start()
        time.sleep(3.0)
        subprocess.run(["scancel", victim], check=True, timeout=30)
        t.join(timeout=300)
        assert not t.is_alive(), "the run hung after scancel"
        assert "error" not in out, out.get("error")
        rep = out["report"]
        assert {r.task for r in rep.trace.runs} == set(g.ids)  # every task reported
        assert rep.replans >= 1
        survivor = [a for a, j in jobs.items() if j != victim]
        assert {r.worker for r in rep.trace.runs if r.finish > rep.measured_makespan * 0.9} <= {
            w.id for w in rep.cluster.workers if w.address in survivor
        }
    finally:
        client.close()
        cluster.close()
    assert _drained(), _queue()


def test_jobs_that_never_start_fail_the_run_after_the_stated_wait(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cores = int(subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True).stdout.split()[0])
    g = taskflow.load_graph(sample("montage"))
    t0 = time.monotonic()
    with pytest.raises(TaskflowError) as e:  # one job more than the node has cores
        taskflow.run(
            g, "heft", workers=cores + 1, jobqueue="slurm", jobqueue_options={**OPTIONS, "wait": 15}, quiet=True
        )
    took = time.monotonic() - t0
    msg = str(e.value)
    assert f"only {cores} of {cores + 1} SLURM jobs ran a worker within 15 s" in msg
    assert "PENDING (Resources)" in msg and "every job is cancelled" in msg
    assert 15 <= took < 60
    assert _drained(), _queue()


def test_the_cli_runs_on_slurm_and_names_the_jobs(tmp_path):
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "taskflow",
            "run",
            str(sample("montage")),
            *ON_SLURM,
            "--time-scale",
            "0.01",
            "-q",
            "-o",
            "run.json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert "placement fidelity 100%" in p.stdout
    line = [x for x in p.stdout.splitlines() if x.startswith("batch jobs: ")]
    assert line and line[0].count(" in job ") == 2
    bad = subprocess.run(
        [sys.executable, "-m", "taskflow", "run", str(sample("montage")), "--jobqueue", "slurm"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "--jobqueue needs --workers N" in bad.stderr


def test_jobs_run_admits_real_training_jobs_on_workers_started_as_slurm_jobs(tmp_path):
    import json
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')")
    trace = tmp_path / "two.json"
    trace.write_text(
        json.dumps(
            {
                "format": "taskflow-jobs/1",
                "name": "two",
                "jobs": [
                    {"id": "a", "arrival": 0.0, "workers": 2, "duration": 2.0, "model": "mlp", "iterations": 8},
                    {"id": "b", "arrival": 0.5, "workers": 1, "duration": 1.0, "model": "mlp", "iterations": 4},
                ],
            }
        )
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "taskflow",
            "jobs",
            "run",
            str(trace),
            "--data",
            "digits",
            "--make-data",
            "digits",
            *ON_SLURM,
            "--scheduler",
            "fifo",
            "--no-predict",
            "-q",
            "-o",
            "runs.json",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    (run,) = json.loads((tmp_path / "runs.json").read_text())["runs"]
    jobs = {j["id"]: j for j in run["jobs"]}
    assert set(jobs) == {"a", "b"} and all(j["finish"] > j["start"] >= j["arrival"] for j in jobs.values())
    assert jobs["b"]["start"] >= jobs["a"]["finish"] - 1e-6  # a holds both workers; b waits for it
    assert _drained(), _queue()
    bad = subprocess.run(
        [sys.executable, "-m", "taskflow", "jobs", "simulate", str(trace), "--workers", "2", "--jobqueue", "slurm"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert bad.returncode == 2 and "--jobqueue goes with run" in bad.stderr
