"""The builders of image datasets on disk (:mod:`workflows.images`' layout), and nothing downloads:

* :func:`write_digits`: scikit-learn's handwritten digits (1,797 gray 8x8 images of 10 classes, the
  UCI "Optical Recognition of Handwritten Digits" set, CC BY 4.0, shipped inside scikit-learn),
  split 80/20 by a seeded permutation, written as PNG.
* :func:`write_synthetic`: a seeded 10-class set of RGB images (default 32x32) for throughput:
  each class a smooth random colour pattern, each image that pattern shifted, scaled and noised.

A dataset is written beside its folder and moved there whole: a half-written one is never left.
"""

from __future__ import annotations

import os

import numpy as np

from taskflow.errors import WorkflowError

__all__ = ["write_digits", "write_synthetic"]


def _write_split(root, split: str, images, labels, names, fmt: str = "png") -> None:
    from PIL import Image

    for i, (img, y) in enumerate(zip(images, labels)):
        d = os.path.join(root, split, names[int(y)])
        os.makedirs(d, exist_ok=True)
        if fmt == "jpeg":
            Image.fromarray(img).save(os.path.join(d, f"{i:05d}.jpg"), quality=90)
        else:
            Image.fromarray(img).save(os.path.join(d, f"{i:05d}.png"))


def _write_dataset(root, images, labels, names, val_fraction: float, seed: int, fmt: str = "png") -> str:
    """Write ``images`` (uint8, H x W or H x W x C) split by a seeded permutation; atomic: a
    half-written dataset is never left under ``root``."""
    import shutil
    import tempfile

    if not 0.0 < val_fraction < 1.0:
        raise WorkflowError(f"val_fraction must be between 0 and 1, got {val_fraction!r}")
    root = os.fspath(root)
    if os.path.exists(os.path.join(root, "train")):
        raise WorkflowError(f"{root!r} already holds a dataset (a train folder): remove it or choose another folder")
    order = np.random.default_rng(seed).permutation(len(labels))
    n_val = max(1, int(round(len(labels) * val_fraction)))
    parent = os.path.dirname(os.path.abspath(root))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".dataset-", dir=parent)
    try:
        _write_split(tmp, "val", images[order[:n_val]], labels[order[:n_val]], names, fmt)
        _write_split(tmp, "train", images[order[n_val:]], labels[order[n_val:]], names, fmt)
        os.makedirs(root, exist_ok=True)
        for split in ("train", "val"):
            os.replace(os.path.join(tmp, split), os.path.join(root, split))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def write_digits(root, val_fraction: float = 0.2, seed: int = 0) -> str:
    """Write scikit-learn's handwritten digits (1,797 gray 8x8 images) as PNG class folders.

    Parameters
    ----------
    root : path
        Gets ``train/<digit>/*.png`` and ``val/<digit>/*.png``.
    val_fraction : float
        The share held out (seeded permutation).
    seed : int

    Returns
    -------
    str
        ``root``.

    Raises
    ------
    WorkflowError
        scikit-learn is missing, or ``root`` already holds a dataset.
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise WorkflowError("write_digits needs scikit-learn (pip install 'dask-taskflow[torch]')") from None
    d = load_digits()
    images = np.clip(np.round(d.images * (255.0 / 16.0)), 0, 255).astype(np.uint8)
    return _write_dataset(root, images, d.target.astype(np.int64), [str(k) for k in range(10)], val_fraction, seed)


def write_synthetic(
    root,
    samples: int = 5000,
    classes: int = 10,
    size: int = 32,
    val_fraction: float = 0.1,
    seed: int = 0,
    fmt: str = "png",
) -> str:
    """Write a seeded synthetic RGB image set (for throughput): each class a smooth random colour
    pattern; each image it rolled by up to a quarter of its side, scaled in contrast and noised.

    Parameters
    ----------
    root : path
    samples, classes, size : int
        Images in all, classes, side in pixels.
    val_fraction : float
    seed : int
    fmt : {"png", "jpeg"}
        The files' format (JPEG at quality 90, as photographs are kept).

    Returns
    -------
    str
        ``root``.

    Raises
    ------
    WorkflowError
        Too few samples, classes or pixels; ``root`` already holds a dataset.
    """
    if fmt not in ("png", "jpeg"):
        raise WorkflowError(f"fmt must be 'png' or 'jpeg', got {fmt!r}")
    if samples < 2 or classes < 1 or size < 4:
        raise WorkflowError(
            f"write_synthetic needs samples >= 2, classes >= 1, size >= 4; got {samples}, {classes}, {size}"
        )
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0.0, 255.0, size=(classes, 4, 4, 3))
    reps = -(-size // 4)
    protos = np.repeat(np.repeat(coarse, reps, axis=1), reps, axis=2)[:, :size, :size]
    labels = rng.integers(0, classes, size=samples)
    shifts = rng.integers(-size // 4, size // 4 + 1, size=(samples, 2))
    scale = rng.uniform(0.7, 1.1, size=samples)
    images = np.empty((samples, size, size, 3), dtype=np.uint8)
    for i in range(samples):
        img = np.roll(protos[labels[i]], tuple(shifts[i]), axis=(0, 1)) * scale[i]
        img += rng.normal(0.0, 24.0, size=img.shape)
        images[i] = np.clip(img, 0, 255).astype(np.uint8)
    return _write_dataset(root, images, labels, [f"class{k}" for k in range(classes)], val_fraction, seed, fmt)
