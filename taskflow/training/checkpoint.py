"""Checkpoints of :func:`taskflow.train`: written atomically after every epoch, read back without
running code (tensors, numbers, text), and checked before a run resumes from one: every field of
the type it is read as, the same job (model, data, options: a fingerprint) and tensors of the
model's shapes. A damaged or foreign checkpoint is named, never met as a KeyError later."""

from __future__ import annotations

import io
import os

from ..errors import FormatError, UsageError
from ..files import open_regular
from ..formats import atomic_write

__all__ = ["load_checkpoint", "save_checkpoint", "check_resumable", "fingerprint"]


def fingerprint(spec, by_speed: bool = False) -> dict:
    """What must match for a checkpoint to resume this job (parts of the batch measured from the
    workers' speeds may differ from epoch to epoch: the checkpoint keeps the last).

    Parameters
    ----------
    spec : TorchTraining or TorchPipeline
    by_speed : bool
        The parts of the batch follow the workers' speeds.
    """
    return {
        "model": spec.ctx.token,
        "workers": int(spec.workers),
        "batch": int(spec.batch),
        "counts": "speeds" if by_speed else list(spec.counts),
        "allreduce": spec.allreduce,
        "seed": int(spec.seed),
        "iterations": spec.per_epoch,
        "pad": int(spec.pad),
        "flip": bool(spec.flip),
        **({"size": int(spec.size)} if getattr(spec, "size", None) else {}),
        "train": len(spec.train),
        "data": _data_digest(spec.train, spec.val),
        "mode": spec.mode,
        "sync_every": int(spec.sync_every),
        "staleness": int(spec.staleness),
        "compensation": float(spec.compensation),
        "compression": spec.compression,
        "topk_ratio": float(spec.topk_ratio),
    }


def _data_digest(*splits) -> str:
    """A digest of the data as a checkpoint must find it again (each split's ``digest``: an image
    folder's files, a Dataset's type, length and end samples)."""
    import hashlib

    h = hashlib.sha1()
    for split in splits:
        if split is not None:
            split.digest(h)
    return h.hexdigest()[:16]


def load_checkpoint(path) -> dict:
    """A checkpoint written by :func:`train`: ``{"epoch", "states", "history", "fingerprint"}``.

    Parameters
    ----------
    path : path

    Raises
    ------
    TaskflowError
        The file is not a checkpoint of :func:`train`.
    """
    import torch

    try:  # tensors, numbers, text and containers only: a checkpoint runs no code when read
        with open_regular(path, "checkpoint", FormatError) as f:
            ck = torch.load(f, weights_only=True, map_location="cpu")  # a GPU run's, read anywhere
    except FormatError:
        raise
    except OSError as e:
        raise FormatError(f"checkpoint {os.fspath(path)!r} cannot be read: {e.strerror or e}") from None
    except Exception:  # noqa: BLE001 - whatever torch's unpickler says of a file that is not one
        raise FormatError(
            f"checkpoint {os.fspath(path)!r} is not a taskflow training checkpoint (remove it, or name another file)"
        ) from None
    if not isinstance(ck, dict) or ck.get("format") != "taskflow-train/1":
        raise FormatError(f"checkpoint {os.fspath(path)!r} is not a taskflow training checkpoint")
    _check_fields(ck, os.fspath(path))
    return ck


def _check_fields(ck: dict, path: str) -> None:
    """Every field :func:`train` reads from a checkpoint, of the type it reads (a crafted or damaged
    file is named, not met as a KeyError later)."""

    def bad(what):
        return FormatError(f"checkpoint {path!r}: {what} (remove it, or name another file)")

    epoch = ck.get("epoch")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise bad(f"'epoch' must be an integer >= 0, got {epoch!r:.40}")
    if not isinstance(ck.get("fingerprint"), dict):
        raise bad("'fingerprint' is missing or not a mapping")
    states = ck.get("states")
    if not isinstance(states, list) or not states or not all(isinstance(x, dict) for x in states):
        raise bad("'states' must be a list of each rank's state")
    history = ck.get("history")
    if (
        not isinstance(history, dict)
        or not isinstance(history.get("epochs"), list)
        or not isinstance(history.get("losses"), list)
    ):
        raise bad("'history' must hold the lists 'epochs' and 'losses'")
    if not all(isinstance(e, dict) and isinstance(e.get("wall"), (int, float)) for e in history["epochs"]):
        raise bad("each epoch of 'history' must be a mapping with its 'wall' time")
    if not all(isinstance(x, (list, tuple)) and len(x) == 2 for x in history["losses"]):
        raise bad("'history' losses must be (iteration, loss) pairs")
    counts = ck.get("counts", [])
    if not isinstance(counts, list) or not all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in counts
    ):
        raise bad("'counts' must list each rank's samples")


def check_resumable(ck: dict, spec, checkpoint, by_speed: bool, elastic: bool = False) -> None:
    """A checkpoint of this very job (the same model, data and options) whose states fit its model.

    Parameters
    ----------
    ck : dict
        :func:`load_checkpoint`'s.
    spec : TorchTraining or TorchPipeline
    checkpoint : path
    by_speed : bool
    elastic : bool
        The number of ranks and their parts of the batch may differ (a resize).

    Raises
    ------
    UsageError
        Another job's checkpoint (the fields that differ named).
    FormatError
        States that do not fit the model.
    """
    fp = fingerprint(spec, by_speed)
    free = ("workers", "counts") if elastic else ()
    diff = sorted(k for k in fp if k not in free and ck["fingerprint"].get(k) != fp[k])
    if diff or any(k not in fp for k in ck["fingerprint"]):
        diff = diff or sorted(k for k in ck["fingerprint"] if k not in fp)
        raise UsageError(
            f"checkpoint {os.fspath(checkpoint)!r} was written by another job (it differs in "
            f"{', '.join(diff)}): remove it, name another file, or pass resume=False"
        )
    _check_states(ck["states"], spec, os.fspath(checkpoint))


def _check_states(states, spec, path: str) -> None:
    """The checkpoint's states hold tensors of the model's shapes, one state per rank (or stage)."""
    import torch

    def bad(what):
        return FormatError(f"checkpoint {path!r}: {what} (remove it, or name another file)")

    if len(states) != int(spec.workers):
        raise bad(f"it holds {len(states)} states for {int(spec.workers)} workers")
    shapes = getattr(spec, "state_shapes", lambda: None)()
    for r, st in enumerate(states):
        params = st.get("params")
        if (
            not isinstance(params, list)
            or not all(isinstance(t, torch.Tensor) for t in params)
            or not isinstance(st.get("buffers"), list)
            or not isinstance(st.get("opt"), dict)
        ):
            raise bad(f"state {r} lacks its parameter and buffer tensors or its optimizer state")
        want = None if shapes is None else shapes[r]
        got = [tuple(t.shape) for t in params]
        if want is not None and got != [tuple(x) for x in want]:
            first = next((k for k, (a, b) in enumerate(zip(got, want)) if a != tuple(b)), min(len(got), len(want)))
            raise bad(
                f"state {r}'s parameters are not this model's ({len(got)} tensors against {len(want)}; "
                f"tensor {first}: {got[first] if first < len(got) else None} against "
                f"{tuple(want[first]) if first < len(want) else None})"
            )


def save_checkpoint(path, epoch: int, states, history, fingerprint: dict, counts) -> None:
    """Write a checkpoint after ``epoch`` (atomically: the previous one stays whole until the new
    one is on disk).

    Parameters
    ----------
    path : path
    epoch : int
    states : list of dict
        Each rank's state.
    history : History
    fingerprint : dict
    counts : sequence of int
        Each rank's samples per iteration.
    """
    import torch

    doc = {
        "format": "taskflow-train/1",
        "epoch": epoch,
        "states": states,
        "fingerprint": fingerprint,
        "counts": list(counts),
        "history": history.to_dict(),
    }
    buf = io.BytesIO()
    torch.save(doc, buf)
    atomic_write(path, buf.getvalue())
