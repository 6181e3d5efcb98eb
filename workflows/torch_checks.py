"""What a user's model must pass before any cluster starts (:func:`check_sample`, and as the model
is first built, :func:`built` and :func:`check_size`): a factory that raises, a model too large for
this machine, one that cannot take the data's samples or gives the wrong number of outputs, a loss
that fails; each said in one line naming the factory and, where there is one, the user's own line;
and the job's own options (:func:`check_options`)."""

from __future__ import annotations

import math

import numpy as np
import torch

from taskflow.errors import WorkflowError

from .allreduce import COMPRESSIONS
from .images import ImageFolder, load_batch

__all__ = ["check_options", "built", "check_size", "check_sample", "user_frame", "MODEL_MEMORY_SHARE"]


def _label(fn) -> str:
    """A factory's name as the user wrote it (``mymodels.net``), a partial's function's."""
    f = getattr(fn, "func", fn)
    return f"{getattr(f, '__module__', None) or '?'}.{getattr(f, '__qualname__', type(f).__name__)}"


def user_frame(tb) -> str:
    """`` (at FILE:LINE)`` of the innermost frame of ``tb`` in the user's code (not torch's, ours
    or Python's own), or ``""``: where a user's model failed, not where the library noticed.

    Parameters
    ----------
    tb : traceback
    """
    import os
    import sysconfig
    import traceback

    own = {
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        os.path.dirname(os.path.abspath(torch.__file__)),
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    }
    found = ""
    for fr in traceback.extract_tb(tb):
        path = os.path.abspath(fr.filename)
        if not fr.filename.startswith("<") and not any(path.startswith(o + os.sep) for o in own):
            found = f" (at {fr.filename}:{fr.lineno})"
    return found


def built(model) -> torch.nn.Module:
    """``model()``, whatever it raised said in one line naming the factory and the user's line.

    Parameters
    ----------
    model : callable

    Raises
    ------
    WorkflowError
    """
    try:
        mod = model()
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's factory: name it, whatever it raised
        raise WorkflowError(
            f"the model factory {_label(model)} raised {type(e).__name__}: {e}{user_frame(e.__traceback__)}"
        ) from None
    if not isinstance(mod, torch.nn.Module):
        raise WorkflowError(f"the model factory {_label(model)} returned {type(mod).__name__}, not a torch.nn.Module")
    return mod


#: the share of this machine's free memory one copy of a model's training state may take
MODEL_MEMORY_SHARE = 0.5


def check_size(model) -> None:
    """Refuse a model whose parameters, gradients and optimizer state (four float32 copies) would
    not fit in half this machine's free memory, counted on torch's ``meta`` device (no memory
    allocated) before the model is built for real. A factory that cannot build on ``meta`` is
    not counted here.

    Parameters
    ----------
    model : callable

    Raises
    ------
    WorkflowError
    """
    import psutil

    try:
        with torch.device("meta"):
            meta = model()
        n = sum(p.numel() for p in meta.parameters())
    except (Exception, SystemExit):  # noqa: BLE001 - built for real next, where its error is said
        return
    need = 16 * n
    free = psutil.virtual_memory().available
    if need > MODEL_MEMORY_SHARE * free:
        raise WorkflowError(
            f"the model of {_label(model)} has {n:,} parameters: with gradients and optimizer "
            f"state about {need / 2**30:.1f} GiB per worker, more than this machine can hold "
            f"({free / 2**30:.1f} GiB free); a smaller model, or smaller images (a model sized "
            f"by the first image's pixels grows with them)"
        )


def check_sample(ctx, data: ImageFolder, classes: bool = True) -> None:
    """Run two training samples through the model before any cluster starts: a model that cannot
    take the data's shape, or whose loss fails, is said with the user's line; with ``classes``
    (the default loss, cross-entropy), the model must give one output per class of ``data`` (where
    it says its classes: a Dataset without ``classes`` does not).

    Parameters
    ----------
    ctx : TorchModel
    data : ImageFolder or DatasetSplit
    classes : bool

    Raises
    ------
    WorkflowError
    """
    x, y = load_batch(data, [0, 1] if len(data) > 1 else [0])
    shape = "x".join(map(str, x.shape[1:]))
    torch.manual_seed(0)
    mod = built(ctx.model)
    try:
        with torch.no_grad():
            out = mod(torch.from_numpy(x))
    except Exception as e:  # noqa: BLE001 - the user's model: name it
        raise WorkflowError(
            f"the model of {_label(ctx.model)} cannot take the data's samples ({shape} {'images' if hasattr(data, 'paths') else 'samples'} from "
            f"{data.folder!r}): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            f"{user_frame(e.__traceback__)}"
        ) from None
    if not isinstance(out, torch.Tensor):
        raise WorkflowError(f"the model of {_label(ctx.model)} returned {type(out).__name__}, not a tensor")
    if classes and data.classes is not None and tuple(out.shape) != (len(y), len(data.classes)):
        raise WorkflowError(
            f"the model of {_label(ctx.model)} gives outputs of shape {tuple(out.shape[1:])} per "
            f"sample; the data has {len(data.classes)} classes (cross-entropy needs one output per "
            f"class)"
        )
    try:
        value = ctx.loss(out, torch.from_numpy(y))
    except Exception as e:  # noqa: BLE001 - the user's loss
        raise WorkflowError(
            f"the loss {_label(ctx.loss)} fails on the model's outputs: {type(e).__name__}: {e}"
            f"{user_frame(e.__traceback__)}"
        ) from None
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise WorkflowError(
            f"the loss {_label(ctx.loss)} must return one number (a scalar tensor), got "
            f"{type(value).__name__}{tuple(getattr(value, 'shape', ()))}"
        )


def _integer(spec, name: str, low: int, optional: bool = False) -> None:
    v = getattr(spec, name)
    if optional and v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise WorkflowError(f"{name} must be an integer >= {low}, got {v!r}")


def _number(spec, name: str) -> None:
    v = getattr(spec, name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
        raise WorkflowError(f"{name} must be a number >= 0, got {v!r}")


def check_options(spec) -> None:
    """A training job's options (:class:`~workflows.torch_training.TorchTraining`), each named
    where it is wrong, and the pairs that do not go together.

    Parameters
    ----------
    spec : TorchTraining

    Raises
    ------
    WorkflowError
    """
    for name in ("workers", "batch", "threads"):
        _integer(spec, name, 1)
    _integer(spec, "iterations", 1, optional=True)
    for name, low in (("sync_every", 1), ("staleness", 0), ("prefetch", 0), ("pad", 0), ("loaders", 0)):
        _integer(spec, name, low)
    for name in ("compensation", "direct_mb", "cache_mb"):
        _number(spec, name)
    for name, allowed in (
        ("allreduce", ("ring", "tree", "ps")),
        ("priority", ("none", "layer-order")),
        ("mode", ("sync", "local", "stale")),
        ("compression", (None, *COMPRESSIONS)),
    ):
        if getattr(spec, name) not in allowed:
            said = ", ".join(repr(a) for a in allowed[:-1]) + f" or {allowed[-1]!r}"
            raise WorkflowError(f"{name} must be {said}, got {getattr(spec, name)!r}")
    if spec.compression is not None and spec.mode == "local":
        raise WorkflowError("local SGD averages parameters: compression applies to gradients (sync or stale)")
    if not (isinstance(spec.topk_ratio, (int, float)) and 0 < spec.topk_ratio <= 1):
        raise WorkflowError(f"topk_ratio must be in (0, 1], got {spec.topk_ratio!r}")
    if not isinstance(spec.fuse, bool):
        raise WorkflowError(f"fuse must be True or False, got {spec.fuse!r}")
    if spec.cache_mb and not spec.loaders:
        raise WorkflowError("cache_mb is the loaders' cache: give loaders (workers that load the batches)")
    if spec.loaders and spec.prefetch:
        raise WorkflowError("loaders run ahead by themselves: prefetch is for loading on the ranks (leave it 0)")
