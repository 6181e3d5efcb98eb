"""Fuzzing every loader with hypothesis: whatever the bytes, a loader returns a checked object or
raises a TaskflowError (one clear message), never anything else. ``make test`` runs a short sample;
``make test-all`` (the ``slow`` marker) runs many more examples."""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskflow import TaskflowError, load_cluster, load_graph, load_schedule

from tests.conftest import EXAMPLES, shared

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["t1", "p1", "w0", "n0", "taskflow-graph/1", "taskflow-cluster/1", "taskflow-schedule/1", "1.5"]),
)
_json = st.recursive(
    _scalars,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "format",
                    "tasks",
                    "edges",
                    "id",
                    "cost",
                    "size",
                    "src",
                    "dst",
                    "workers",
                    "speed",
                    "cores",
                    "bandwidth",
                    "latency",
                    "assignments",
                    "task",
                    "worker",
                    "start",
                    "finish",
                    "meta",
                    "costs",
                    "output_size",
                    "workflow",
                    "specification",
                    "execution",
                    "files",
                    "parents",
                    "children",
                    "runtimeInSeconds",
                    "sizeInBytes",
                    "name",
                    "schemaVersion",
                ]
            ),
            kids,
            max_size=5,
        )
    ),
    max_leaves=25,
)

_SEEDS = {
    "graph": (EXAMPLES / "heft_paper.graph.json").read_text(),
    "cluster": (EXAMPLES / "heft_paper.cluster.json").read_text(),
}


def _load(kind: str, data: bytes, suffix: str, fmt=None):
    fd, path = tempfile.mkstemp(suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        loader = {"graph": lambda p: load_graph(p, fmt), "cluster": load_cluster, "schedule": load_schedule}[kind]
        try:
            loader(path)
        except TaskflowError as e:
            assert str(e).strip(), "an error without a message"
    finally:
        os.unlink(path)


def _splice(seed: str, doc) -> bytes:
    """The seed document with one of its top-level fields replaced by a generated value."""
    base = json.loads(seed)
    key = sorted(base)[hash(json.dumps(doc, default=str)) % len(base)]
    base[key] = doc
    return json.dumps(base, allow_nan=True).encode()


def _zip(members: dict) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def fuzz_json_graphs(doc):
    _load("graph", json.dumps(doc, allow_nan=True).encode(), ".json")
    _load("graph", _splice(_SEEDS["graph"], doc), ".json")
    _load(
        "graph",
        json.dumps({"schemaVersion": "1.5", "name": "w", "workflow": doc}, allow_nan=True).encode(),
        ".json",
        "wfformat",
    )


def fuzz_clusters_and_schedules(doc):
    _load("cluster", _splice(_SEEDS["cluster"], doc), ".json")
    _load(
        "schedule", json.dumps({"format": "taskflow-schedule/1", "assignments": doc}, allow_nan=True).encode(), ".json"
    )


def fuzz_bytes(data):
    for fmt, suffix in ((None, ".json"), ("dax", ".xml"), ("stg", ".stg"), ("estee", ".zip")):
        _load("graph", data, suffix, fmt)
    _load("graph", _zip({"graphs.json": data}), ".zip", "estee")


_SAMPLE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_MANY = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SAMPLE
@given(_json)
def test_fuzz_json_graph_loaders_sample(doc):
    fuzz_json_graphs(doc)


@_SAMPLE
@given(_json)
def test_fuzz_cluster_and_schedule_loaders_sample(doc):
    fuzz_clusters_and_schedules(doc)


@_SAMPLE
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_fuzz_every_loader_with_bytes_sample(data):
    fuzz_bytes(data)


@pytest.mark.slow
@_MANY
@given(_json)
def test_fuzz_json_graph_loaders_many(doc):
    fuzz_json_graphs(doc)


@pytest.mark.slow
@_MANY
@given(_json)
def test_fuzz_cluster_and_schedule_loaders_many(doc):
    fuzz_clusters_and_schedules(doc)


@pytest.mark.slow
@_MANY
@given(st.binary(max_size=2000) | st.text(max_size=2000).map(str.encode))
def test_fuzz_every_loader_with_bytes_many(data):
    fuzz_bytes(data)


def test_the_fuzz_seeds_load():
    """The documents the fuzzers splice into are valid to begin with."""
    assert len(load_graph(EXAMPLES / "heft_paper.graph.json")) == 10
    assert len(load_cluster(EXAMPLES / "heft_paper.cluster.json")) == 3
    assert len(load_graph(shared("stg", "robot.stg"))) == 90
