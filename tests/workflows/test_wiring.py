"""Both training payloads are wired by the one :class:`workflows._wiring.Wiring`: a costs-only
TrainingSpec and a real TorchTraining job of the same variant reduce the same buckets in the same
iterations through the same tasks."""

from __future__ import annotations

import functools
import importlib.util
import re

import pytest

if importlib.util.find_spec("torch") is None:
    pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')", allow_module_level=True)

from workflows import training  # noqa: E402
from workflows.image_writers import write_synthetic  # noqa: E402
from workflows.torch_models import mlp  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402

_REDUCTION = re.compile(r"it\d+\.(b\d+\.|barrier)")  # the allreduces' tasks, the gathers, the barrier


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return write_synthetic(tmp_path_factory.mktemp("data") / "synthetic", samples=120, classes=3, size=8)


def _reduction(g) -> dict:
    """The reduction's tasks: id -> (category, priority, its inputs), each rank's bucket named alike."""
    out = {}
    for i in g.ids:
        if _REDUCTION.match(i):
            meta = g.task(i).meta
            inputs = sorted(p.replace("param-bucket", "bucket") for p in g.predecessors(i))
            out[i] = (meta["category"], meta.get("priority"), inputs)
    return out


@pytest.mark.parametrize("allreduce", ["ring", "tree", "ps"])
@pytest.mark.parametrize(
    "mode, compression",  # (local SGD averages parameters, uncompressed)
    [
        ("sync", None),
        ("sync", "fp16"),
        ("sync", "topk"),
        ("local", None),
        ("stale", None),
        ("stale", "fp16"),
        ("stale", "topk"),
    ],
)
def test_a_costs_only_and_a_pytorch_training_of_one_variant_reduce_alike(images, mode, allreduce, compression):
    job = TorchTraining(
        functools.partial(mlp, 3 * 8 * 8, hidden=(1024, 256), classes=3),
        images,
        workers=3,
        batch=24,
        iterations=4,
        allreduce=allreduce,
        compression=compression,
        priority="layer-order",
        mode=mode,
        sync_every=2 if mode == "local" else 1,
        staleness=1 if mode == "stale" else 0,
        bucket_mb=0.001,
    )
    buckets = len(job.ctx.buckets)
    assert buckets > 1
    spec = training.TrainingSpec(
        model="resnet50",
        workers=3,
        iterations=4,
        allreduce=allreduce,
        compression=compression,
        priority="layer-order",
        buckets=buckets,
        mode=mode,
        sync_every=2 if mode == "local" else 1,
        staleness=1 if mode == "stale" else 0,
        tile=False,
    )
    real, costs = _reduction(job.graph(0, executable=False)), _reduction(training.training_graph(spec))
    synced = {int(i[2 : i.index(".")]) for i in real}
    assert synced == ({1, 3} if mode == "local" else {0, 1, 2, 3})
    if compression == "topk":  # the real job sums sparse buckets: every rank gathers every rank's
        assert {c for c, _, _ in real.values()} == {"topk-gather"}
        assert {int(i[2 : i.index(".")]) for i in costs} == synced
    else:
        assert real == costs
