"""Every shell command in README.md and docs/ runs as written in a fresh folder (only the package:
no data beside the checkout), and every public name the docs use exists.

`make demo` and `make test` are the two commands around everything else (CI runs `make test`;
`tests/taskflow/app/test_cli.py` runs the demo's job), so they are the only lines not run here."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
NOT_RUN = ("make demo", "make test")


def _blocks(path: Path) -> list:
    return re.findall(r"^ *```(?:sh|bash)\n(.*?)^ *```", path.read_text(), re.S | re.M)


def _script(path: Path) -> str:
    import textwrap

    lines = []
    for block in _blocks(path):
        for line in textwrap.dedent(block).splitlines():
            if line.strip().startswith(NOT_RUN):
                continue
            lines.append(line)
    return "\n".join(lines)


DOCS_WITH_COMMANDS = [p for p in DOCS if _script(p).strip()]


def _page(path: Path):
    """A page as a test case, marked with what it needs (make test leaves those to make test-all)."""
    text = path.read_text()
    marks = [pytest.mark.testbed] if "<!-- needs: testbed" in text else []
    marks += [pytest.mark.hpc] if "<!-- needs: slurm" in text else []
    marks += [pytest.mark.slow] if "<!-- needs: time" in text else []
    return pytest.param(path, marks=marks, id=str(path.relative_to(ROOT)))


@pytest.mark.parametrize("path", [_page(p) for p in DOCS_WITH_COMMANDS])
def test_every_shell_command_of_a_page_runs_as_written(path, tmp_path):
    if "<!-- needs: testbed" in path.read_text():
        from taskflow.testbed import available

        if available():
            pytest.skip(f"{path.name} needs the network testbed: {available()}")
    if (
        "<!-- needs: torch" in path.read_text()
        and importlib.util.find_spec("torch") is None
        and not os.environ.get("TASKFLOW_REQUIRE_TORCH")
    ):
        pytest.skip(f"{path.name} trains with PyTorch: needs the torch extra (pip install 'dask-taskflow[torch]')")
    if "<!-- needs: slurm" in path.read_text():
        from tests.hpc.test_slurm import WHY

        if WHY:
            pytest.skip(f"{path.name} needs a running SLURM (make test-hpc): {WHY}")
    script = "set -euo pipefail\n" + _script(path)
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:  # whatever a page started in the background goes with it
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert proc.returncode == 0, (
        f"{path.name}:\n{script}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
    )
    # Dask's servers log their own tracebacks when a page stops them; none may come from our code
    assert "internal error" not in proc.stderr and "/taskflow/" not in proc.stderr, proc.stderr[-3000:]


def test_no_page_points_at_data_outside_the_package():
    for path in DOCS:
        assert "../shared" not in path.read_text(), f"{path.name} uses data beside the checkout"


_NAME = re.compile(r"\b(taskflow|schedulers|workflows)\.([A-Za-z_][A-Za-z0-9_]*)")
_FROM = re.compile(r"from (taskflow|schedulers|workflows)(\.[\w.]+)? import (\([^)]*\)|[^\n]*)")


def _documented_names():
    out = set()
    for path in DOCS:
        text = path.read_text()
        for pkg, name in _NAME.findall(text):
            out.add((pkg, name))
        for pkg, sub, names in _FROM.findall(text):
            names = names.strip("()").split("#")[0]
            for item in names.split(","):
                name = item.split(" as ")[0].strip()
                if name.isidentifier():
                    out.add((pkg + (sub or ""), name))
    return sorted(out)


@pytest.mark.parametrize("module,name", _documented_names())
def test_every_name_the_docs_use_exists(module, name):
    if name in ("py", "md", "json", "txt", "png", "csv", "html", "zip", "xml"):
        pytest.skip("a file name")
    if (module, name) == ("taskflow", "schedulers"):
        assert importlib.import_module("taskflow.scheduling").ENTRY_POINT_GROUP == "taskflow.schedulers"
        return  # the entry-point group's name
    if (module, name) == ("taskflow", "job_schedulers"):
        assert importlib.import_module("taskflow.jobscheduling").JOB_ENTRY_POINTS == "taskflow.job_schedulers"
        return  # the job schedulers' entry-point group
    mod = importlib.import_module(module)
    if hasattr(mod, name):
        return
    try:  # a submodule
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError:
        pytest.fail(f"the docs use {module}.{name}, which does not exist")
