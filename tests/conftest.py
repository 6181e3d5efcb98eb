from pathlib import Path

import pytest

from taskflow import Cluster, TaskGraph, load_cluster, load_graph

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
EXAMPLES = ROOT / "examples"


def shared(*parts) -> Path:
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not found at {p} (CI keeps ../shared beside the checkout)")
    return p


def shared_graph_files():
    """Every graph file in ../shared/data (Estee sets as one entry)."""
    if not SHARED.exists():
        return []
    out = []
    for sub, pattern in (("wfinstances", "*.json"), ("dax", "*.xml"), ("stg", "*.stg"),
                         ("estee", "*.zip"), ("native", "*.graph.json")):
        out.extend(sorted((SHARED / sub).glob(pattern)))
    return out


@pytest.fixture
def heft_graph() -> TaskGraph:
    return load_graph(EXAMPLES / "heft_paper.graph.json")


@pytest.fixture
def heft_cluster() -> Cluster:
    return load_cluster(EXAMPLES / "heft_paper.cluster.json")


@pytest.fixture
def diamond() -> TaskGraph:
    """a -> b, a -> c, b -> d, c -> d with distinct costs and sizes."""
    g = TaskGraph("diamond")
    g.add_task("a", cost=2.0, output_size=100)
    g.add_task("b", cost=3.0, output_size=50)
    g.add_task("c", cost=1.0, output_size=10)
    g.add_task("d", cost=2.0)
    g.add_edge("a", "b")
    g.add_edge("a", "c", size=200)
    g.add_edge("b", "d")
    g.add_edge("c", "d")
    return g
