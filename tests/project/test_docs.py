"""Every Python code block in README.md and docs/ runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks():
    for path in DOCS:
        for k, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S)):
            yield pytest.param(code, id=f"{path.relative_to(ROOT)}#{k}")


#: an example that trains a PyTorch model needs the torch extra: where it is not installed the
#: example skips (make test installs it; CI requires it, TASKFLOW_REQUIRE_TORCH)
NEEDS_TORCH = re.compile(r"\btaskflow\.train\b|\bimport torch\b|\bworkflows\.(torch_\w+|images)\b")


@pytest.mark.parametrize("code", list(blocks()))
def test_doc_example_runs(code, tmp_path, monkeypatch):
    import importlib.util
    import os

    from taskflow import scheduling as base

    if (
        NEEDS_TORCH.search(code)
        and importlib.util.find_spec("torch") is None
        and not os.environ.get("TASKFLOW_REQUIRE_TORCH")
    ):
        pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # examples may register schedulers
    import warnings

    with warnings.catch_warnings():
        # a page's plain LocalCluster serves Dask's HTTP routes on port 8787 as Dask does; another
        # test process may hold it (Dask then takes another port and says so: the user's own run)
        warnings.filterwarnings("ignore", "Port 8787 is already in use", UserWarning)
        exec(compile(code, "<doc>", "exec"), {"__name__": "__main__"})
