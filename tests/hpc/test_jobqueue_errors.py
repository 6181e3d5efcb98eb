"""A batch system that refuses the worker jobs is one clear error at once, never a logged
traceback and a wait (runs wherever dask-jobqueue is installed; a stand-in sbatch refuses)."""

from __future__ import annotations

import os
import time

import pytest

from taskflow import TaskflowError

pytest.importorskip("dask_jobqueue")


def test_refused_submissions_are_one_error_with_the_batch_systems_words(tmp_path, monkeypatch, capfd):
    fake = tmp_path / "bin"
    fake.mkdir()
    sbatch = fake / "sbatch"
    sbatch.write_text(
        "#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2\nexit 1\n"
    )
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    from taskflow.runtime.launch.jobqueue import start_jobqueue

    t0 = time.monotonic()
    with pytest.raises(TaskflowError) as e:
        start_jobqueue("slurm", 2, memory="1GB", interface="lo", wait=60)
    assert str(e.value) == (
        "SLURM refused the worker jobs: sbatch: error: Batch job submission failed: Invalid partition name specified"
    )
    assert time.monotonic() - t0 < 30  # not the 60 s wait for workers
    assert "Traceback" not in capfd.readouterr().err


def test_a_submission_that_hangs_is_bounded_by_the_job_wait_and_killed(tmp_path, monkeypatch, capfd):
    import psutil

    fake = tmp_path / "bin"
    fake.mkdir()
    sbatch = fake / "sbatch"
    sbatch.write_text("#!/bin/sh\nsleep 600\n")  # a controller that never answers
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    from taskflow.runtime.launch.jobqueue import start_jobqueue

    t0 = time.monotonic()
    with pytest.raises(TaskflowError, match=r"SLURM's sbatch did not answer within 3 s \(--job-wait\)"):
        start_jobqueue("slurm", 1, memory="1GB", interface="lo", wait=3)
    assert time.monotonic() - t0 < 20
    # killed: none is left running (one may stay a zombie a moment, until its event loop reaps it)
    assert not [
        c
        for c in psutil.Process().children(recursive=True)
        if c.name() in ("sbatch", "sleep") and c.status() != psutil.STATUS_ZOMBIE
    ]
    assert "Traceback" not in capfd.readouterr().err


def test_an_interface_this_machine_lacks_is_named_before_anything_starts(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    from taskflow.runtime.launch.jobqueue import start_jobqueue

    with pytest.raises(
        TaskflowError,
        match=r"--interface 'nosuchif0': no such network interface on this machine "
        r"\(it has .*lo",
    ):
        start_jobqueue("slurm", 1, interface="nosuchif0")
