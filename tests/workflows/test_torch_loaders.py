"""The data-loading stage on workers of its own: images larger than the model needs, resized as
decoded; batches loaded in shards on loaders and put back in order (the same parameters); each
loader's cache of decoded samples serving later epochs, and a file replaced read again."""

from __future__ import annotations

import functools
import importlib.util
import os

import numpy as np
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::taskflow.TaskflowWarning")

if importlib.util.find_spec("torch") is None:
    if os.environ.get("TASKFLOW_REQUIRE_TORCH"):
        raise RuntimeError("TASKFLOW_REQUIRE_TORCH is set but torch is not installed")
    pytest.skip("needs the torch extra (pip install 'dask-taskflow[torch]')", allow_module_level=True)

import taskflow  # noqa: E402
from taskflow.errors import TaskflowError  # noqa: E402
from workflows.images import ImageFolder, write_synthetic  # noqa: E402
from workflows.torch_loaders import cache_stats, clear_cache, decoded, merge_shards, shard_of  # noqa: E402
from workflows.torch_models import small_cnn  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402

CNN = functools.partial(small_cnn, in_channels=3, side=8, classes=4)


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """JPEGs of 24x24 pixels for a model of 8x8 inputs."""
    return write_synthetic(tmp_path_factory.mktemp("data") / "photos", samples=300, classes=4, size=24, fmt="jpeg")


def rel_err(state, ref) -> float:
    return max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(state["params"], ref["params"]))


def test_images_are_resized_as_decoded_and_a_bad_size_is_named(photos):
    f = ImageFolder(photos, "train", 8)
    assert f.shape() == (3, 8, 8) and ImageFolder(photos, "train").shape() == (3, 24, 24)
    x, y = f.load([0, 1, 2], epoch=0, seed=0, pad=2, flip=True)
    assert x.shape == (3, 3, 8, 8) and x.dtype == np.float32 and -1.0 <= x.min() <= x.max() <= 1.0
    for bad in (0, -3, 2.5, True, 10**6):
        with pytest.raises(TaskflowError, match="size must be an integer"):
            ImageFolder(photos, "train", bad)


def test_shards_cut_a_batch_by_sample_and_merge_back_in_its_order(photos):
    f = ImageFolder(photos, "train", 8)
    samples = np.array([7, 2, 9, 4, 11, 6])
    cuts = shard_of(samples, 2)
    assert [samples[c].tolist() for c in cuts] == [[2, 4, 6], [7, 9, 11]]
    from workflows.torch_loaders import load_shard

    shards = [
        load_shard([f.paths[i] for i in samples[c]], samples[c], f.labels[samples[c]], c, 3, 0, 2, True, 8)
        for c in cuts
    ]
    x, y = merge_shards(len(samples), *shards[::-1])
    x1, y1 = f.load(samples, 3, 0, 2, True)
    assert np.array_equal(x, x1) and np.array_equal(y, y1)  # the very values one task loads


def test_the_cache_serves_what_it_decoded_and_reads_a_replaced_file_again(photos, tmp_path):
    import shutil

    from PIL import Image

    clear_cache()
    d = tmp_path / "c"
    d.mkdir()
    src = ImageFolder(photos, "train").paths[:4]
    paths = [shutil.copy(p, d / os.path.basename(p)) for p in src]
    first, hits = decoded(paths, 8, 1.0)
    assert hits == 0 and cache_stats() == {"samples": 4, "bytes": 4 * 8 * 8 * 3}
    again, hits = decoded(paths, 8, 1.0)
    assert hits == 4 and all(np.array_equal(a, b) for a, b in zip(first, again))
    Image.fromarray(np.zeros((24, 24, 3), np.uint8)).save(paths[1], quality=90)  # replaced: read again
    os.utime(paths[1], ns=(1, 1))
    third, hits = decoded(paths, 8, 1.0)
    assert hits == 3 and third[1].max() < 8 and not np.array_equal(third[1], first[1])
    _, hits = decoded(paths, 16, 1.0)  # another size is another sample
    assert hits == 0
    clear_cache()
    _, hits = decoded(paths, 8, 0.0005)  # a budget of 500 bytes holds two 192-byte samples
    assert cache_stats()["samples"] == 2 and decoded(paths, 8, 0.0005)[1] == 2
    clear_cache()


@pytest.mark.parametrize("fuse", [True, False])
def test_loaders_end_with_the_parameters_of_ranks_loading_their_own(client, photos, fuse):
    kw = dict(workers=2, batch=32, iterations=5, size=8, pad=2, flip=True, fuse=fuse, bucket_mb=0.02)
    own = TorchTraining(CNN, photos, **kw)
    spec = TorchTraining(CNN, photos, loaders=2, cache_mb=1.0, **kw)
    g = spec.graph(0)
    loads = [t for t in g.tasks() if t.meta["category"] == "load"]
    assert len(loads) == 2 * 2 * 5 and {t.meta["place"] for t in loads} == {2, 3}
    a = taskflow.run(own.graph(0), "placed", client=client, quiet=True, keep=own.final_tasks(0))
    b = taskflow.run(g, "placed", client=client, quiet=True, keep=spec.final_tasks(0))
    ref, _ = spec.reference(1)
    for t in spec.final_tasks(0):
        assert rel_err(b.results[t], a.results[t]) == 0.0
        assert rel_err(b.results[t], ref) < 1e-5


def test_train_puts_loaders_on_workers_of_their_own_whose_caches_serve_later_epochs(photos):
    from distributed import Client

    from taskflow.runtime.launch.local import local_cluster
    from workflows import torch_loaders

    with local_cluster(4, 1) as lc, Client(lc) as c:
        h = taskflow.train(
            CNN,
            photos,
            epochs=2,
            workers=2,
            batch=32,
            iterations=4,
            size=8,
            loaders=2,
            cache_mb=4,
            client=c,
            quiet=True,
            device="cpu",
        )
        held = c.run(torch_loaders.cache_stats)
        names = {a: str(w["name"]) for a, w in c.scheduler_info()["workers"].items()}
    by_kind: dict = {}
    for ep in h.traces:
        for r in ep.trace.runs:
            by_kind.setdefault(ep.kinds[r.task][0], set()).add(str(r.worker))
    assert by_kind["load"].isdisjoint(by_kind["forward-backward"]) and len(by_kind["load"]) == 2
    # every sample of the two epochs was decoded once, on the loader its index names
    seen = {int(i) for e in range(2) for ranks in h.job.batches(e) for rk in ranks for i in rk}
    per = {names[a]: s["samples"] for a, s in held.items()}
    assert sum(per.values()) == len(seen) and {n for n, k in per.items() if k} <= by_kind["load"]
    assert all(e["loader_seconds_per_iteration"] > 0 for e in h.epochs)
    assert h.epochs[-1]["breakdown"]["loading"] < h.epochs[-1]["loader_seconds_per_iteration"]


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(loaders=-1), "loaders must be an integer >= 0"),
        (dict(cache_mb=8), "give loaders"),
        (dict(loaders=2, prefetch=1), "loaders run ahead by themselves"),
        (dict(loaders=2, cache_mb=float("nan")), "cache_mb must be a number"),
    ],
)
def test_what_loaders_cannot_take_is_one_line(photos, kw, message, no_cluster):
    with pytest.raises(TaskflowError, match=message) as e:
        taskflow.train(CNN, photos, size=8, quiet=True, **kw)
    assert "\n" not in str(e.value)
