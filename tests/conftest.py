import os
from pathlib import Path

import pytest
from hypothesis import settings

from taskflow import Cluster, TaskGraph, load_cluster, load_graph

# Property tests draw the same examples on every run (a failure in CI is one anyone can rerun);
# TASKFLOW_HYPOTHESIS=explore draws new ones each run, to look for more.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("TASKFLOW_HYPOTHESIS", "repeatable"))

ROOT = Path(__file__).resolve().parents[1]
#: a test's own LocalCluster serves no HTTP on Dask's port 8787 (two test processes would both ask
#: for it, and Dask warns); pass as ``scheduler_kwargs``
NO_HTTP = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
SHARED = ROOT.parent / "shared" / "data"
EXAMPLES = ROOT / "examples"
#: the real workflow files tests read, shipped in the checkout (tests/data, the package's samples)
LOCAL = (ROOT / "tests" / "data", ROOT / "workflows" / "data" / "samples")


def shared(*parts) -> Path:
    """A file of ``../shared/data`` (``shared("stg", "robot.stg")``), read from the copy shipped in
    the checkout where there is one, so that ``make test`` needs nothing beside the checkout.

    A file found only in ``../shared/data`` needs that folder: a test asking for it where it is
    missing is skipped (CI keeps ``../shared`` beside the checkout)."""
    for folder in LOCAL:
        p = folder / parts[-1]
        if p.exists():
            return p
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"needs ../shared/data/{'/'.join(parts)}, which is not beside this checkout")
    return p


GRAPH_FILES = (
    ("wfinstances", "*.json"),
    ("dax", "*.xml"),
    ("stg", "*.stg"),
    ("estee", "*.zip"),
    ("native", "*.graph.json"),
)


def shared_graph_files():
    """Every graph file of ``../shared/data`` (an Estee set as one entry): the copies shipped in the
    checkout, and, where ``../shared/data`` is beside it, any file there with no copy here (marked
    ``shared_data``: deselected, and counted once in the summary, when the folder is missing)."""
    here = {p.name: p for folder in LOCAL for p in folder.iterdir() if p.is_file()}
    names = {
        "wfinstances": [
            "helloworld-chain-5-chameleon.json",
            "srasearch-chameleon-10a-001.json",
            "montage-chameleon-2mass-01d-001.json",
            "epigenomics-chameleon-hep-2seq-50k-001.json",
        ],
        "dax": ["HEFT_paper.xml", "CyberShake_30.xml", "Epigenomics_24.xml", "Montage_25.xml"],
        "stg": ["robot.stg"],
        "estee": ["elementary.zip"],
        "native": ["heft_paper.graph.json"],
    }
    out = [here[n] for sub in names for n in names[sub] if n in here]
    if SHARED.exists():
        for sub, pattern in GRAPH_FILES:
            out.extend(
                pytest.param(p, marks=pytest.mark.shared_data, id=p.name)
                for p in sorted((SHARED / sub).glob(pattern))
                if p.name not in here
            )
    return out


def pytest_collection_modifyitems(config, items):
    """Tests that need ``../shared/data`` are deselected where it is missing and said so once."""
    if SHARED.exists():
        return
    keep, need = [], []
    for item in items:
        (need if item.get_closest_marker("shared_data") else keep).append(item)
    if need:
        config.hook.pytest_deselected(items=need)
        items[:] = keep
        config._taskflow_need_shared = len(need)


def pytest_terminal_summary(terminalreporter, config):
    n = getattr(config, "_taskflow_need_shared", 0)
    if n:
        terminalreporter.write_line(
            f"{n} tests need ../shared/data, which is not beside this checkout: not run (CI runs them)"
        )


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


@pytest.fixture(scope="module")
def client():
    """A client of a LocalCluster of two one-thread worker processes, shared by a module's tests."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        yield c


@pytest.fixture
def no_cluster(monkeypatch):
    """Fails the test if a Dask cluster starts in this process: "refused before anything starts"
    proved directly, not by a time bound that a loaded machine breaks."""
    from distributed import LocalCluster

    def started(*args, **kwargs):
        raise AssertionError("a Dask cluster was started")

    monkeypatch.setattr(LocalCluster, "__init__", started)
