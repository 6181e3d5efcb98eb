"""The shipped notebook (docs/notebooks/first-hour.ipynb) runs in a real Jupyter kernel as
written: functions defined in cells reach the workers, no ``__main__`` guard, the open client is
reused, the progress bar does not warn, and the Gantt chart is drawn."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "notebooks" / "first-hour.ipynb"


def _text(cell) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)


@pytest.mark.slow  # a Jupyter kernel and an embedded cluster, about 20 s: make test-all runs it, as the docs' long pages
def test_the_notebook_runs_as_written_in_a_jupyter_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the 'notebook' extra (make test-all installs it)")
    nbclient = pytest.importorskip("nbclient", reason="the 'notebook' extra (make test-all installs it)")
    pytest.importorskip("ipykernel", reason="the 'notebook' extra (make test-all installs it)")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any("__main__" in c.source for c in code)
    # committed with its outputs, so a reader sees what it does without running it
    assert all(c.outputs for c in code) and "image/png" in code[-1].outputs[-1].get("data", {})
    for c in code:
        c.outputs = []
    shutil.copy(NOTEBOOK, tmp_path)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [_text(c) for c in code]
    assert not any(o.output_type == "error" for c in code for o in c.outputs)
    expected = sum(sum(range(1000 * (i + 1))) for i in range(4))
    assert f"total = {expected}" in outputs[1]  # the notebook's own functions ran on the workers
    assert "placement fidelity 100%" in outputs[1]
    makespans = {line.split()[0]: float(line.split()[1]) for line in outputs[2].splitlines()}
    assert set(makespans) == {"heft", "cpop", "blevel", "work-stealing"} and all(v > 0 for v in makespans.values())
    assert "same result as dask.compute: True" in outputs[3]
    assert "workers of the open client: 2" in outputs[3]
    assert "image/png" in code[-1].outputs[-1].get("data", {})
    assert (tmp_path / "run.png").stat().st_size > 5000
    assert not any("TqdmWarning" in o or "Traceback" in o for o in outputs)
