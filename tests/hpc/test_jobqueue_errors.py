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
    sbatch.write_text("#!/bin/sh\necho 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2\n"
                      "exit 1\n")
    sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    from taskflow.runtime.jobqueue import start_jobqueue

    t0 = time.monotonic()
    with pytest.raises(TaskflowError) as e:
        start_jobqueue("slurm", 2, memory="1GB", interface="lo", wait=60)
    assert str(e.value) == ("SLURM refused the worker jobs: sbatch: error: Batch job submission failed: "
                            "Invalid partition name specified")
    assert time.monotonic() - t0 < 30  # not the 60 s wait for workers
    assert "Traceback" not in capfd.readouterr().err
