"""Loading on workers of its own: the data-loading stage of a training graph moved off the ranks
(:class:`~workflows.torch_training.TorchTraining` with ``loaders``), with a cache of decoded samples.

With ``L`` loaders, rank ``r``'s batch of iteration ``t`` is loaded in ``L`` shards,
``it{t}.w{r}.load{s}``: shard ``s`` holds the samples ``i`` with ``i mod L == s`` and runs on loader
worker ``s`` (``meta["place"]``: the cluster's worker ``ranks + s`` under ``placed``). A shard reads,
decodes (and resizes) and augments its samples and returns them as ``uint8`` pixels, a quarter of
the bytes of the ``float32`` batch; the rank's step (or a ``collate`` task on the rank) puts them
back in the batch's order and collates them exactly as one task would (:func:`merge_shards`), so the
parameters do not change.

Because a sample always goes to the same loader, each loader's cache (:func:`decoded`, ``cache_mb``
per loader process) serves every epoch after the first from memory: the decoded, resized pixels
are kept, the augmentation (seeded by sample and epoch) is drawn anew each epoch. The cache is a
process's own, filled first come until its budget is spent (no eviction: a random order of samples
gains nothing from evicting), and keyed by each file's path, size and modification time, so a file
replaced between epochs is read again.
"""

from __future__ import annotations

import os
import time

import numpy as np

from .images import augment, collate, decode, read_files

__all__ = ["decoded", "load_shard", "merge_shards", "shard_of", "cache_stats", "clear_cache"]

_CACHE: dict = {}  # (path, size, mtime_ns, bytes) -> uint8 pixels, in this process
_HELD = [0]  # bytes the cache holds


def shard_of(samples, loaders: int) -> list:
    """Per loader ``s``, the positions in ``samples`` of the samples ``i`` with ``i mod loaders
    == s``.

    Parameters
    ----------
    samples : sequence of int
    loaders : int
    """
    samples = np.asarray(samples, dtype=np.int64)
    return [np.flatnonzero(samples % loaders == s) for s in range(loaders)]


def decoded(paths, size, cache_mb: float) -> tuple:
    """``(pixels per path, cache hits)``: each file decoded (and resized to ``size``), from this
    process's cache where it holds it; what is decoded is kept while the cache holds less than
    ``cache_mb`` MB.

    Parameters
    ----------
    paths : list of str
    size : int or None
    cache_mb : float
        0: no cache.
    """
    out, keys, missing = [None] * len(paths), [None] * len(paths), []
    for k, p in enumerate(paths):
        if cache_mb > 0:
            try:
                st = os.stat(p)
                keys[k] = (p, size, st.st_mtime_ns, st.st_size)
            except OSError:  # read_files names it
                keys[k] = None
            out[k] = _CACHE.get(keys[k]) if keys[k] is not None else None
        if out[k] is None:
            missing.append(k)
    if missing:
        got = decode(read_files([paths[k] for k in missing]), [paths[k] for k in missing], size)
        for k, arr in zip(missing, got):
            out[k] = arr
            if keys[k] is not None and _HELD[0] + arr.nbytes <= cache_mb * 1e6:
                _CACHE[keys[k]] = arr
                _HELD[0] += arr.nbytes
    return out, len(paths) - len(missing)


def load_shard(
    paths,
    samples,
    labels,
    positions,
    epoch: int,
    seed: int,
    pad: int = 0,
    flip: bool = False,
    size=None,
    cache_mb: float = 0.0,
) -> dict:
    """Task body ``load`` of a shard on a loader: its samples decoded (from the cache where it
    holds them) and augmented, as ``uint8`` pixels.

    Parameters
    ----------
    paths, samples, labels, positions : sequence
        The shard's files, sample indices, labels and places in the rank's batch.
    epoch, seed, pad : int
    flip : bool
    size : int, optional
    cache_mb : float

    Returns
    -------
    dict
        ``{"images", "labels", "positions", "hits", "seconds"}``.
    """
    t0 = time.perf_counter()
    images, hits = decoded(paths, size, cache_mb)
    images = augment(images, samples, epoch, seed, pad, flip)
    return {
        "images": images,
        "labels": np.asarray(labels, dtype=np.int64),
        "positions": np.asarray(positions),
        "hits": hits,
        "seconds": time.perf_counter() - t0,
    }


def merge_shards(n: int, *shards) -> tuple:
    """The rank's batch from its shards, in the batch's order, collated as one task collates it
    (:func:`~workflows.images.collate`: the same ``float32`` values).

    Parameters
    ----------
    n : int
        Samples in the batch.
    *shards : dict
        :func:`load_shard`'s outputs.
    """
    images, labels = [None] * n, np.zeros(n, dtype=np.int64)
    for sh in shards:
        for pos, img, y in zip(sh["positions"], sh["images"], sh["labels"]):
            images[int(pos)], labels[int(pos)] = img, y
    return collate(images, labels)


def cache_stats() -> dict:
    """This process's cache: ``{"samples", "bytes"}``."""
    return {"samples": len(_CACHE), "bytes": _HELD[0]}


def clear_cache() -> None:
    """Empty this process's cache."""
    _CACHE.clear()
    _HELD[0] = 0
