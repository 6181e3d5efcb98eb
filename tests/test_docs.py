"""Every Python code block in README.md and docs/ runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks():
    for path in DOCS:
        for k, code in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S)):
            yield pytest.param(code, id=f"{path.relative_to(ROOT)}#{k}")


@pytest.mark.parametrize("code", list(blocks()))
def test_doc_example_runs(code, tmp_path, monkeypatch):
    from taskflow import policy as base
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # examples may register schedulers
    exec(compile(code, "<doc>", "exec"), {"__name__": "__main__"})
