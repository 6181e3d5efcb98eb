"""Every link between the README and the pages of docs/ leads somewhere: the file exists and, where
the link names a section, the page has a heading of that name (as GitHub makes anchors of
headings). A page split or a heading renamed breaks no link silently."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # no headings inside code
    return {anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links():
    out = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            out.append((page, target))
    return out


@pytest.mark.parametrize("page,target", links(), ids=lambda x: str(x.relative_to(ROOT)) if isinstance(x, Path) else x)
def test_every_link_between_pages_leads_somewhere(page, target):
    path, _, section = target.partition("#")
    dest = (page.parent / path).resolve() if path else page
    assert dest.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist"
    if section and dest.suffix == ".md":
        assert section in anchors(dest), f"{page.relative_to(ROOT)} links to {target}: {dest.name} has no such heading"


def test_the_anchor_rule_is_githubs():
    assert (
        anchor("Scheduler speed (`python benchmarks/bench_schedulers.py --peer-python /tmp/saga/bin/python`)")
        == "scheduler-speed-python-benchmarksbench_schedulerspy---peer-python-tmpsagabinpython"
    )
    assert anchor("Real Dask workloads") == "real-dask-workloads"
