"""A researcher's own data for real training: a map-style ``torch.utils.data.Dataset`` where an image
folder would go.

``data`` may be a folder (:mod:`workflows.images`), a map-style Dataset (``len(ds)`` and
``ds[i] -> (input, label)``: the training split, no held-out one), or a pair ``(train, val)`` of
Datasets (``val`` may be None). Such a Dataset's interface allows two loading stages, so a rank's
batch is two tasks (one, ``load``, in a fused graph):

* ``fetch``: ``ds[i]`` for each of the rank's samples, each call seeded from ``(seed, epoch, i)``
  (torch's, numpy's and Python's generators; restored after), so a Dataset with random transforms
  gives any process that loads sample ``i`` the same input, and the parameters equal the
  single-process loop's;
* ``collate``: the inputs stacked (a tensor's dtype kept, as torch's ``default_collate`` keeps it),
  the labels as ``int64``.

The Dataset reaches each rank once per epoch, in a task of its own (``e{e}.data.w{r}``): it must
pickle (cloudpickle), as the model's factory must. Its own ``classes`` attribute, where it has one,
checks the model's outputs against the number of classes. A Dataset does its own augmentation:
``pad`` and ``flip`` are the image folders'.
"""

from __future__ import annotations

import os
import random

import numpy as np

from taskflow.errors import WorkflowError

from .images import open_dataset

__all__ = ["DatasetSplit", "open_data", "fetch", "collate_items", "load_items", "is_dataset"]


def is_dataset(obj) -> bool:
    """Whether ``obj`` is a map-style dataset (``__getitem__`` and ``__len__``, not a path, text or
    array).

    Parameters
    ----------
    obj : object
    """
    if isinstance(obj, (str, bytes, os.PathLike, tuple, list, dict, np.ndarray)):
        return False
    return callable(getattr(obj, "__getitem__", None)) and callable(getattr(obj, "__len__", None))


class DatasetSplit:
    """One split of a map-style Dataset, loaded as :mod:`workflows.images`' folders are.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
        Map-style: ``len(dataset)`` and ``dataset[i] -> (input, label)``.
    split : str
        ``train`` or ``val``, to name it in errors.

    Raises
    ------
    WorkflowError
        Not a map-style dataset (an iterable one has no ``len`` or index), empty, not picklable,
        or its first sample is not an ``(input, label)`` pair.
    """

    def __init__(self, dataset, split: str = "train"):
        import cloudpickle

        name = type(dataset).__name__
        if not is_dataset(dataset):
            raise WorkflowError(
                f"data ({split}) must be a folder's path or a map-style torch Dataset (len(ds) and "
                f"ds[i] -> (input, label)), got {name}"
            )
        try:
            n = len(dataset)
        except Exception as e:  # noqa: BLE001 - the user's __len__
            raise WorkflowError(
                f"the {name} dataset ({split}) has no length: {type(e).__name__}: {e} (an "
                f"iterable-style Dataset cannot be cut into batches by index)"
            ) from None
        if not isinstance(n, int) or n < 1:
            raise WorkflowError(f"the {name} dataset ({split}) is empty (len {n!r})")
        try:
            self.nbytes = len(cloudpickle.dumps(dataset))
        except Exception as e:  # noqa: BLE001 - whatever pickling says of the user's object
            raise WorkflowError(
                f"the {name} dataset ({split}) cannot be sent to the workers (pickled): {type(e).__name__}: {e}"
            ) from None
        self.dataset, self.split, self.n = dataset, split, n
        self.folder = f"{name} ({split})"  # what errors name, as they name an image folder's path
        classes = getattr(dataset, "classes", None)
        self.classes = tuple(classes) if isinstance(classes, (list, tuple)) and classes else None
        first = fetch(dataset, [0], 0, 0)[0]
        self._shape = tuple(first[0].shape)

    def __len__(self) -> int:
        return self.n

    def shape(self) -> tuple:
        """The shape of one sample's input (``(channels, height, width)`` for images)."""
        return self._shape

    def load(self, samples, epoch: int = 0, seed: int = 0, pad: int = 0, flip: bool = False):
        """``(inputs, labels)`` of ``samples``, as the graph's tasks load them.

        Parameters
        ----------
        samples : sequence of int
        epoch, seed, pad : int
            ``pad`` and ``flip`` must be off (a Dataset augments itself).
        flip : bool
        """
        return load_items(self.dataset, samples, epoch, seed)

    def digest(self, h) -> None:
        """Feed ``h`` (a hashlib object) what identifies the data for a checkpoint: the Dataset's
        type, length and its first and last samples' bytes.

        Parameters
        ----------
        h : hashlib object
        """
        h.update(f"{type(self.dataset).__module__}.{type(self.dataset).__qualname__}\0{self.n}\n".encode())
        for x, y in fetch(self.dataset, sorted({0, self.n - 1}), 0, 0):
            h.update(np.ascontiguousarray(x).tobytes())
            h.update(str(int(y)).encode())


def open_data(data, pad: int = 0, flip: bool = False, size: int | None = None) -> tuple:
    """``(train, val)`` splits of ``data``: a folder (:func:`workflows.images.open_dataset`), a
    Dataset (no ``val``), or a pair of Datasets.

    Parameters
    ----------
    data : path, Dataset or (Dataset, Dataset or None)
    pad : int
    flip : bool
    size : int, optional
        The image folders' augmentation and resizing: refused with a Dataset.

    Raises
    ------
    WorkflowError
    """
    if isinstance(data, (str, os.PathLike)):
        return open_dataset(data, size)
    if isinstance(data, (tuple, list)):
        if len(data) != 2 or data[0] is None:
            raise WorkflowError(f"data as a pair must be (train Dataset, val Dataset or None), got {len(data)} items")
        train, val = DatasetSplit(data[0], "train"), None if data[1] is None else DatasetSplit(data[1], "val")
    else:
        train, val = DatasetSplit(data, "train"), None
    if pad or flip or size:
        raise WorkflowError(
            "pad, flip and size augment and resize image folders; a Dataset transforms its samples "
            "itself (its random transforms are seeded per sample and epoch)"
        )
    if val is not None and train.shape() != val.shape():
        raise WorkflowError(f"the train and val datasets' inputs differ in shape: {train.shape()} and {val.shape()}")
    return train, val


def _sample_seed(seed: int, epoch: int, i: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(epoch), int(i)]).generate_state(1)[0])


def fetch(dataset, samples, epoch: int, seed: int) -> list:
    """Task body ``fetch``: ``dataset[i]`` for each of ``samples`` as ``(input array, label)``,
    each call's random draws (torch, numpy, ``random``) seeded from ``(seed, epoch, i)`` and the
    generators restored after.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
    samples : sequence of int
    epoch, seed : int

    Raises
    ------
    WorkflowError
        A sample that fails to load or is not an ``(input, label)`` pair (its index named).
    """
    import torch

    name = type(dataset).__name__
    saved = torch.get_rng_state(), np.random.get_state(), random.getstate()
    out = []
    try:
        for i in samples:
            s = _sample_seed(seed, epoch, i)
            torch.default_generator.manual_seed(s)  # the CPU generator alone: torch.manual_seed costs 60 us
            np.random.seed(s)
            random.seed(s)
            try:
                item = dataset[int(i)]
            except Exception as e:  # noqa: BLE001 - the user's __getitem__: name the sample
                raise WorkflowError(
                    f"sample {int(i)} of the {name} dataset cannot be loaded: {type(e).__name__}: {e}"
                ) from None
            out.append(_pair(item, int(i), name))
    finally:
        torch.set_rng_state(saved[0])
        np.random.set_state(saved[1])
        random.setstate(saved[2])
    return out


def _pair(item, i: int, name: str) -> tuple:
    import torch

    if not isinstance(item, (tuple, list)) or len(item) != 2:
        raise WorkflowError(
            f"sample {i} of the {name} dataset is {type(item).__name__}, expected a pair (input, label)"
        )
    x, y = item
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    x = np.asarray(x)
    if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise WorkflowError(
            f"sample {i} of the {name} dataset: the input must be a tensor or array of numbers, got {x.dtype}"
        )
    if isinstance(y, torch.Tensor):
        y = y.item() if y.numel() == 1 else None
    if isinstance(y, (bool, np.bool_)) or not isinstance(y, (int, np.integer)):
        raise WorkflowError(
            f"sample {i} of the {name} dataset: the label must be an integer class, got {type(y).__name__}"
        )
    return x, int(y)


def collate_items(items) -> tuple:
    """Task body ``collate`` of a Dataset's samples: ``(inputs stacked, int64 labels)``.

    Parameters
    ----------
    items : list of (numpy.ndarray, int)

    Raises
    ------
    WorkflowError
        Samples of different shapes.
    """
    shapes = {x.shape for x, _ in items}
    if len(shapes) > 1:
        raise WorkflowError(
            f"a batch's samples differ in shape ({', '.join(map(str, sorted(shapes)))}): every input must be alike"
        )
    return np.ascontiguousarray(np.stack([x for x, _ in items])), np.asarray([y for _, y in items], dtype=np.int64)


def load_items(dataset, samples, epoch: int, seed: int) -> tuple:
    """Task body ``load`` of a Dataset: :func:`fetch` and :func:`collate_items` in one task.

    Parameters
    ----------
    dataset : torch.utils.data.Dataset
    samples : sequence of int
    epoch, seed : int
    """
    return collate_items(fetch(dataset, samples, epoch, seed))
