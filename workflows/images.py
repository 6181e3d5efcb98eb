"""Image datasets on disk, in the layout torchvision's ``ImageFolder`` reads, and the loading stages
of a training graph over them.

A dataset is a folder ``root/<split>/<class>/<file>`` (``split`` is ``train`` and ``val``; a class
is a folder name, its index the folder's place in sorted order; files are PNG or JPEG). Two
builders write one (:mod:`workflows.image_writers`, their names here too): :func:`write_digits`
(scikit-learn's handwritten digits) and :func:`write_synthetic` (a seeded set for throughput).

The loading stages are plain functions of numpy arrays (no torch here), called as tasks:
:func:`read_files` (bytes from disk) -> :func:`decode` (Pillow) -> :func:`augment` (seeded random
crop with padding and horizontal flip, each draw from ``(seed, epoch, sample)``) -> :func:`collate`
(``float32`` ``N x C x H x W`` normalised to [-1, 1], ``int64`` labels). :func:`epoch_batches`
says which samples each rank reads in each iteration of an epoch. A file that cannot be decoded is
an error naming it.
"""

from __future__ import annotations

import io
import math
import os
from dataclasses import dataclass

import numpy as np

from taskflow.errors import WorkflowError

from .image_writers import write_digits, write_synthetic

__all__ = [
    "ImageFolder",
    "open_dataset",
    "write_digits",
    "write_synthetic",
    "read_files",
    "decode",
    "augment",
    "collate",
    "load_batch",
    "load_samples",
    "epoch_batches",
    "batch_counts",
    "EXTENSIONS",
    "MAX_PIXELS",
]

#: the file endings read as images
EXTENSIONS = (".png", ".jpg", ".jpeg")
#: the most pixels an image may have (8192 x 8192): larger is refused from its header, before it
#: is decoded (Pillow's own guard against decompression bombs is at 89 million)
MAX_PIXELS = 1 << 26


@dataclass(frozen=True)
class ImageFolder:
    """The files of one split of a dataset: ``paths[i]`` of class ``labels[i]`` (``classes[k]`` is
    class ``k``'s folder name).

    Parameters
    ----------
    root : path
        A folder of class folders (or a dataset root with ``train``/``val`` inside: pass
        ``split``).
    split : str, optional
        The sub-folder to read (``train``, ``val``).
    size : int, optional
        Each image resized to ``size`` x ``size`` pixels as it is decoded (larger images than the
        model needs, as photographs are).

    Raises
    ------
    WorkflowError
        The folder is missing or unreadable, or holds no class folder with an image in it.
    """

    root: str
    split: str | None = None
    size: int | None = None

    def __post_init__(self):
        if not isinstance(self.root, (str, os.PathLike)):
            raise WorkflowError(f"data must be a folder's path, got {type(self.root).__name__}")
        z = self.size
        if z is not None and (isinstance(z, bool) or not isinstance(z, (int, np.integer)) or not 1 <= z <= 8192):
            raise WorkflowError(f"size must be an integer from 1 to 8192 (pixels a side), got {z!r}")
        folder = os.path.join(os.fspath(self.root), self.split) if self.split else os.fspath(self.root)
        object.__setattr__(self, "folder", folder)
        try:
            names = sorted(e.name for e in os.scandir(folder) if e.is_dir())
        except FileNotFoundError:
            raise WorkflowError(f"dataset folder {folder!r} does not exist") from None
        except (PermissionError, NotADirectoryError, OSError) as e:
            raise WorkflowError(f"dataset folder {folder!r} cannot be read: {e.strerror or e}") from None
        paths, labels, classes = [], [], []
        for name in names:
            try:
                files = sorted(
                    f.name
                    for f in os.scandir(os.path.join(folder, name))
                    if f.is_file() and f.name.lower().endswith(EXTENSIONS)
                )
            except OSError as e:
                raise WorkflowError(
                    f"dataset folder {os.path.join(folder, name)!r} cannot be read: {e.strerror or e}"
                ) from None
            if not files:
                continue
            k = len(classes)
            classes.append(name)
            paths += [os.path.join(folder, name, f) for f in files]
            labels += [k] * len(files)
        if not paths:
            raise WorkflowError(
                f"dataset folder {folder!r} holds no image: expected class folders of "
                f"{'/'.join(e[1:].upper() for e in EXTENSIONS)} files, as ImageFolder reads"
            )
        object.__setattr__(self, "paths", tuple(paths))
        object.__setattr__(self, "labels", np.asarray(labels, dtype=np.int64))
        object.__setattr__(self, "classes", tuple(classes))

    def __len__(self) -> int:
        return len(self.paths)

    def shape(self) -> tuple:
        """``(channels, height, width)`` of the first image, as :func:`collate` returns it."""
        img = decode(read_files([self.paths[0]]), [self.paths[0]], self.size)[0]
        return img.shape[2], img.shape[0], img.shape[1]

    def load(self, samples, epoch: int = 0, seed: int = 0, pad: int = 0, flip: bool = False):
        """``(images, labels)`` of ``samples``: the four loading stages in one call.

        Parameters
        ----------
        samples : sequence of int
        epoch, seed, pad : int
        flip : bool
        """
        samples = np.asarray(samples, dtype=np.int64)
        return load_samples(
            [self.paths[i] for i in samples], samples, self.labels[samples], epoch, seed, pad, flip, self.size
        )

    def digest(self, h) -> None:
        """Feed ``h`` (a hashlib object) each file's path within the split, class and size: what
        identifies the data for a checkpoint (the same count of other images is other data).

        Parameters
        ----------
        h : hashlib object
        """
        for p, y in zip(self.paths, self.labels):
            try:
                size = os.stat(p).st_size
            except OSError:
                size = -1
            h.update(f"{os.path.relpath(p, self.folder)}\0{int(y)}\0{size}\n".encode("utf-8", "surrogateescape"))


def open_dataset(data, size: int | None = None) -> tuple:
    """``(train, val)`` of a dataset: its ``train`` and ``val`` splits where ``data`` has a
    ``train`` folder (``val`` None when it has none), else ``data`` itself as the training split.

    Parameters
    ----------
    data : path
    size : int, optional
        Resize each image to ``size`` x ``size`` as it is decoded.

    Raises
    ------
    WorkflowError
        ``data`` is not a path, or a split cannot serve (:class:`ImageFolder`).
    """
    if not isinstance(data, (str, os.PathLike)):
        raise WorkflowError(f"data must be a folder's path, got {type(data).__name__}")
    root = os.fspath(data)
    if not os.path.isdir(os.path.join(root, "train")):
        train, val = ImageFolder(root, None, size), None
    else:
        train = ImageFolder(root, "train", size)
        val = ImageFolder(root, "val", size) if os.path.isdir(os.path.join(root, "val")) else None
    if len(train.classes) < 2:
        raise WorkflowError(
            f"dataset folder {train.folder!r} holds one class ({train.classes[0]!r}): a classifier "
            f"needs two or more class folders with images"
        )
    if val is not None and val.classes != train.classes:
        only_train = sorted(set(train.classes) - set(val.classes))
        only_val = sorted(set(val.classes) - set(train.classes))
        said = "; ".join(
            x
            for x in (
                f"only in train/: {', '.join(only_train)}" if only_train else "",
                f"only in val/: {', '.join(only_val)}" if only_val else "",
            )
            if x
        )
        raise WorkflowError(
            f"dataset {root!r}: train/ and val/ must hold images of the same classes, or the "
            f"labels would not match ({said or 'in another order'}; an empty class folder counts "
            f"as missing)"
        )
    return train, val


def read_files(paths) -> list:
    """Task body ``read``: the bytes of each file.

    Parameters
    ----------
    paths : list of str

    Raises
    ------
    WorkflowError
        A file cannot be read (named).
    """
    from taskflow.files import open_regular
    from taskflow.formats import max_file_bytes

    limit = max_file_bytes()
    out = []
    for p in paths:
        try:
            with open_regular(p, "image", WorkflowError) as f:
                size = os.fstat(f.fileno()).st_size
                if size > limit:
                    raise WorkflowError(
                        f"image {p!r} is {size:,} bytes, over the input limit of {limit:,} "
                        f"(--max-bytes or TASKFLOW_MAX_BYTES raises it)"
                    )
                out.append(f.read(limit + 1))
        except OSError as e:
            raise WorkflowError(f"image {p!r} cannot be read: {e.strerror or e}") from None
        if len(out[-1]) > limit:
            raise WorkflowError(f"image {p!r} is over the input limit of {limit:,} bytes")
    return out


def decode(raw, paths, size: int | None = None) -> list:
    """Task body ``decode``: each file's bytes as a ``uint8`` array ``H x W x C`` (Pillow), resized
    to ``size`` x ``size`` pixels where ``size`` is given (bilinear, with Pillow's antialiasing).

    Parameters
    ----------
    raw : list of bytes
    paths : list of str
        The files, to name one that is not an image.
    size : int, optional

    Raises
    ------
    WorkflowError
        A file is not a readable image, or its size or channels differ from the first one's.
    """
    from PIL import Image, UnidentifiedImageError

    import warnings

    out = []
    for data, p in zip(raw, paths):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", Image.DecompressionBombWarning)
                with Image.open(io.BytesIO(data)) as im:
                    w, h = im.size
                    if w * h > MAX_PIXELS:  # from the header, before a pixel is decoded
                        raise WorkflowError(
                            f"image {p!r} is {w:,}x{h:,} pixels, over the limit of "
                            f"{MAX_PIXELS:,} pixels an image may have"
                        )
                    im.load()
                    if im.mode in ("P", "PA", "1"):  # palette indices and bits are not intensities
                        im = im.convert("RGB" if im.mode != "1" else "L")
                    if size and im.size != (size, size):
                        im = im.resize((size, size), Image.BILINEAR)
                    arr = np.asarray(im)
        except WorkflowError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
            raise WorkflowError(f"image {p!r} is too large to decode (a decompression bomb?): {e}") from None
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError, MemoryError) as e:
            raise WorkflowError(f"image {p!r} cannot be decoded: {e}") from None
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.dtype != np.uint8 or arr.ndim != 3:
            raise WorkflowError(f"image {p!r}: expected 8-bit gray or RGB pixels, got {arr.dtype} of shape {arr.shape}")
        if out and arr.shape != out[0].shape:
            raise WorkflowError(
                f"image {p!r} is {arr.shape[1]}x{arr.shape[0]}x{arr.shape[2]}, the others "
                f"{out[0].shape[1]}x{out[0].shape[0]}x{out[0].shape[2]}: every image must be alike"
            )
        out.append(arr)
    return out


def augment(images, samples, epoch: int, seed: int, pad: int = 0, flip: bool = False) -> list:
    """Task body ``augment``: a random crop of each image padded by ``pad`` pixels (zeros), and a
    horizontal flip with probability 1/2 where ``flip``; the draws of sample ``i`` come from
    ``(seed, epoch, i)`` alone, so any process that loads it sees the same image.

    Parameters
    ----------
    images : list of numpy.ndarray
    samples : list of int
        Each image's index in its split.
    epoch, seed, pad : int
    flip : bool
    """
    if not pad and not flip:
        return images
    out = []
    for img, i in zip(images, samples):
        rng = np.random.default_rng([seed, epoch, int(i)])
        dy, dx = rng.integers(0, 2 * pad + 1, size=2)
        if pad:
            h, w = img.shape[:2]
            img = np.pad(img, ((pad, pad), (pad, pad), (0, 0)))[dy : dy + h, dx : dx + w]
        if flip and rng.random() < 0.5:
            img = img[:, ::-1]
        out.append(np.ascontiguousarray(img))
    return out


def collate(images, labels) -> tuple:
    """Task body ``collate``: ``(float32 N x C x H x W in [-1, 1], int64 labels)``.

    Parameters
    ----------
    images : list of numpy.ndarray
    labels : sequence of int
    """
    x = np.stack(images).astype(np.float32).transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x * (2.0 / 255.0) - 1.0), np.asarray(labels, dtype=np.int64)


def load_batch(data, samples, epoch: int = 0, seed: int = 0, pad: int = 0, flip: bool = False):
    """A batch loaded in one call (the sequential references and the DDP baseline load this way):
    ``data.load(...)``, an :class:`ImageFolder`'s four stages or a Dataset's
    (:class:`workflows.torch_data.DatasetSplit`).

    Parameters
    ----------
    data : ImageFolder or DatasetSplit
    samples : sequence of int
    epoch, seed, pad : int
    flip : bool
    """
    return data.load(samples, epoch, seed, pad, flip)


def load_samples(
    paths, samples, labels, epoch: int, seed: int, pad: int = 0, flip: bool = False, size: int | None = None
):
    """Task body ``load``: the four stages in one task (read, decode, augment, collate), for a
    fused graph, whose scheduler keeps a rank's loading on its worker.

    Parameters
    ----------
    paths : list of str
    samples : sequence of int
    labels : sequence of int
    epoch, seed, pad : int
    flip : bool
    size : int, optional
        Resize to ``size`` x ``size`` as decoded.
    """
    return collate(augment(decode(read_files(paths), paths, size), samples, epoch, seed, pad, flip), labels)


def epoch_batches(n: int, batch: int, counts, epoch: int, seed: int, iterations: int | None = None) -> list:
    """Which samples each rank reads in each iteration of ``epoch``: a permutation of ``range(n)``
    seeded by ``(seed, epoch)``, cut into global batches of ``batch`` (the last, partial one
    dropped), each cut among the ranks by ``counts`` (samples per rank, summing to ``batch``).

    Parameters
    ----------
    n, batch : int
    counts : sequence of int
    epoch, seed : int
    iterations : int, optional
        At most this many iterations.

    Returns
    -------
    list of list of numpy.ndarray
        ``[iteration][rank]`` -> sample indices.
    """
    perm = np.random.default_rng([seed, epoch]).permutation(n)
    steps = n // batch if iterations is None else min(n // batch, int(iterations))
    cuts = np.cumsum([0, *counts])
    return [[perm[t * batch + cuts[r] : t * batch + cuts[r + 1]] for r in range(len(counts))] for t in range(steps)]


def batch_counts(batch: int, workers: int, shares=None) -> tuple:
    """Each rank's samples of a global ``batch``: equal parts, or in proportion to ``shares`` (the
    largest remainders rounded up), every rank at least one.

    Parameters
    ----------
    batch, workers : int
    shares : sequence of float, optional
        Each rank's part (positive).

    Raises
    ------
    WorkflowError
        An equal cut that does not divide, shares that are not ``workers`` positive numbers, or
        that give a rank no sample.
    """
    if shares is None:
        if batch % workers:
            raise WorkflowError(
                f"batch {batch} is not divisible by {workers} workers: choose a multiple of "
                f"{workers}, or give shares (each rank's part of the batch)"
            )
        return (batch // workers,) * workers
    try:
        shares = [float(s) for s in shares]
    except (TypeError, ValueError):
        raise WorkflowError(f"shares must be {workers} positive numbers (one per rank), got {shares!r}") from None
    if len(shares) != workers or not all(s > 0 and math.isfinite(s) for s in shares):
        raise WorkflowError(f"shares must be {workers} positive numbers (one per rank), got {shares!r}")
    w = np.asarray(shares) / max(shares)  # scaled first: a sum of huge shares would overflow to inf
    raw = w / w.sum() * batch
    counts = np.floor(raw).astype(int)
    for k in np.argsort(-(raw - counts))[: batch - counts.sum()]:  # largest remainders
        counts[k] += 1
    if (counts < 1).any():
        raise WorkflowError(f"shares {shares!r} give a rank no sample of a batch of {batch}: raise the batch")
    return tuple(int(c) for c in counts)
