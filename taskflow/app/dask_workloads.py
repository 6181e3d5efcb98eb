"""Ordinary Dask workloads, written as a Dask user writes them (dask.array, dask.dataframe,
dask.bag, dask.delayed), for the real-workload suite (``taskflow bench --suite dask``).

Each :class:`Workload` builds its collections afresh (same seed, same result every time) and
compares two results (one side's against the other's). Nothing here knows about taskflow's
schedulers: the suite runs the very same code under Dask's own scheduling and under
``taskflow.use``.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import UsageError

__all__ = ["Workload", "WORKLOADS", "workload"]


@dataclass(frozen=True)
class Workload:
    """One workload: ``build(folder)`` returns the collections to compute (``folder`` is a
    scratch directory the workload may read files from, made by ``prepare(folder)`` once)."""

    name: str
    kind: str
    what: str
    build: Callable
    prepare: Callable | None = None

    def same(self, a, b) -> bool:
        """Whether two results of this workload agree (floating-point sums to 1e-9).

        Parameters
        ----------
        a, b : tuple
            What ``dask.compute`` returned for the collections.
        """
        return _same(a, b)


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "equals") and hasattr(a, "sort_index"):  # pandas
        try:
            import pandas as pd

            pd.testing.assert_frame_equal(_frame(a).sort_index(), _frame(b).sort_index(), rtol=1e-9)
            return True
        except AssertionError:
            return False
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-9, atol=1e-12))


def _frame(x):
    return x.to_frame() if hasattr(x, "to_frame") else x


# ---------------------------------------------------------------------------- dask.array
def _matmul(folder):
    import dask.array as da

    x = da.random.RandomState(0).random_sample((3000, 3000), chunks=750)
    return [(x @ x.T).sum()]


def _rechunk(folder):
    import dask.array as da

    x = da.random.RandomState(1).random_sample((4000, 4000), chunks=(4000, 250))
    y = x.rechunk((250, 4000))
    return [(y - y.mean(axis=1, keepdims=True)).std()]


def _svd(folder):
    import dask.array as da

    x = da.random.RandomState(2).random_sample((200000, 40), chunks=(6250, 40))
    _, s, _ = da.linalg.svd(x)
    return [s]


# ---------------------------------------------------------------------------- dask.dataframe
ROWS = 300_000
PARTS = 16


def _part(i: int, keys: int = 1000):
    import pandas as pd

    rng = np.random.default_rng(100 + i)
    return pd.DataFrame({"key": rng.integers(0, keys, ROWS), "x": rng.random(ROWS), "y": rng.normal(size=ROWS)})


def _other(i: int):
    import pandas as pd

    rng = np.random.default_rng(900 + i)
    return pd.DataFrame({"key": np.arange(i * 125, (i + 1) * 125), "w": rng.random(125)})


def _frame_of(fn, parts):
    import dask.dataframe as dd

    return dd.from_map(fn, list(range(parts)))


def _groupby(folder):
    df = _frame_of(_part, PARTS)
    return [df.groupby("key").agg({"x": "mean", "y": "sum"})]


def _shuffle(folder):
    df = _frame_of(_part, PARTS)
    moved = df.shuffle("key", npartitions=PARTS, shuffle_method="tasks")
    return [moved.map_partitions(lambda p: p.groupby("key").x.max()).sum()]


def _merge(folder):
    left = _frame_of(_part, PARTS)
    right = _frame_of(_other, 8)
    joined = left.merge(right, on="key", shuffle_method="tasks")
    return [(joined.x * joined.w).sum(), joined.key.count()]


# ---------------------------------------------------------------------------- dask.bag
WORDS = (
    "data task graph worker scheduler network rack link byte chunk array frame bag delayed plan "
    "scheduler cost model cluster train loss batch layer gradient shard epoch"
).split()


def _lines(i: int) -> list:
    rng = np.random.default_rng(500 + i)
    return [" ".join(WORDS[j] for j in rng.zipf(1.3, 30) % len(WORDS)) for _ in range(4000)]


def _text(folder):
    import dask.bag as db

    lines = db.from_sequence(range(24), npartitions=24).map(_lines).flatten()
    words = lines.map(str.split).flatten().map(str.lower)
    return [words.frequencies().topk(8, key=1), lines.map(len).sum()]


# ---------------------------------------------------------------------------- dask.delayed
def _training(folder):
    """The executable data-parallel training of ``workflows.training`` as dask.delayed calls."""
    import dask
    from taskflow.runtime.worker.calls import map_leaves
    from taskflow.tasks import TaskHandle
    from workflows.training import data_parallel

    shards = os.path.join(folder, "shards")
    os.makedirs(shards, exist_ok=True)
    g = data_parallel(
        "resnet50",
        workers=4,
        iterations=4,
        executable=True,
        dataset_dir=shards,
        hidden=(512, 512),
        batch=4 * 512,
        seed=3,
    )
    made = {}
    for t in g.topological_order():
        fn, args, kwargs = g.call(t)

        def wire(x):
            return made[x.id] if isinstance(x, TaskHandle) else x

        made[t] = dask.delayed(fn, pure=True)(
            *map_leaves(args, wire), dask_key_name=f"{_kind(t)}-{t}", **map_leaves(kwargs or {}, wire)
        )
    return [made[t] for t in g.sinks()]


def _kind(t) -> str:
    s = str(t)
    for k, ch in enumerate(s):
        if ch.isdigit() or ch in "._-":
            return s[:k] or "task"
    return s


FILES = 64
SIDE = 320


def _write_images(folder):
    rng = np.random.default_rng(7)
    for k in range(FILES):
        img = (rng.random((SIDE, SIDE, 3)) * 255).astype(np.uint8)
        with open(os.path.join(folder, f"img{k:03d}.raw.z"), "wb") as f:
            f.write(zlib.compress(img.tobytes(), 6))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _decode(data: bytes) -> np.ndarray:
    return np.frombuffer(zlib.decompress(data), dtype=np.uint8).reshape(SIDE, SIDE, 3)


def _augment(img: np.ndarray, k: int) -> np.ndarray:
    x = img.astype(np.float32) / 255.0
    x = x[:, ::-1] if k % 2 else x
    return (x - x.mean(axis=(0, 1))) / (x.std(axis=(0, 1)) + 1e-6)


def _batch(*imgs) -> np.ndarray:
    return np.stack(imgs)


def _features(batch: np.ndarray) -> np.ndarray:
    return np.tensordot(batch, batch, axes=([0, 1, 2], [0, 1, 2]))


def _loading(folder):
    """Read, decode and augment image files from disk, batch them, reduce the batches."""
    import dask

    paths = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".raw.z"))
    imgs = [
        dask.delayed(_augment, pure=True)(dask.delayed(_decode, pure=True)(dask.delayed(_read, pure=True)(p)), k)
        for k, p in enumerate(paths)
    ]
    batches = [
        dask.delayed(_features, pure=True)(dask.delayed(_batch, pure=True)(*imgs[i : i + 8]))
        for i in range(0, len(imgs), 8)
    ]
    return [dask.delayed(sum, pure=True)(batches)]


WORKLOADS = [
    Workload("array-matmul", "dask.array", "(x @ x.T).sum() of a 3000 x 3000 array in 750-chunks", _matmul),
    Workload("array-rechunk", "dask.array", "column chunks rechunked to row chunks, then a std", _rechunk),
    Workload("array-svd", "dask.array", "tall-and-skinny SVD (tsqr) of 200000 x 40", _svd),
    Workload("df-groupby", "dask.dataframe", "groupby-aggregate of 16 x 300,000 rows", _groupby),
    Workload("df-shuffle", "dask.dataframe", "a task-based shuffle on the key, then per-partition maxima", _shuffle),
    Workload("df-merge", "dask.dataframe", "a merge of two frames on the key (task shuffle)", _merge),
    Workload("bag-text", "dask.bag", "word frequencies of 96,000 generated lines", _text),
    Workload("delayed-training", "dask.delayed", "the executable data-parallel MLP training of workflows/", _training),
    Workload(
        "delayed-loading",
        "dask.delayed",
        "64 compressed image files read, decoded, augmented, batched",
        _loading,
        _write_images,
    ),
]


def workload(name: str) -> Workload:
    """The workload called ``name``.

    Parameters
    ----------
    name : str

    Raises
    ------
    TaskflowError
        No such workload (the known ones named).
    """
    for w in WORKLOADS:
        if w.name == name:
            return w
    raise UsageError(f"unknown workload {name!r}; known: {', '.join(w.name for w in WORKLOADS)}")
