"""Model and device profiles for the training generators, from ``workflows/data/models.json``
(per-layer forward multiply-accumulates and parameters of ResNet-50, VGG-16, BERT-base, GPT-2
small; device FLOP/s; with sources)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from taskflow.checks import split_amount
from taskflow.errors import WorkflowError

__all__ = ["DEVICES", "model_profile", "device_flops", "sized_model"]

_DATA = Path(__file__).with_name("data") / "models.json"


def _profiles() -> dict:
    with open(_DATA) as f:
        return json.load(f)


#: device name -> FLOP/s
DEVICES = {k: v["flops"] for k, v in _profiles()["devices"].items()}


_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def model_profile(name: str) -> list:
    """``[{"name", "macs", "params"}]`` per layer (group) of a known model, or of a transformer
    of a given size: ``"350m"``, ``"1.3b"``, ``"7b"`` (parameters; see :func:`sized_model`).

    Parameters
    ----------
    name : str

    Raises
    ------
    WorkflowError
        Unknown model name (the known ones are listed).
    """
    models = _profiles()["models"]
    if name not in models:
        m = split_amount(name)
        if m and m[1].lower() in _SCALE and m[1]:
            return sized_model(m[0] * _SCALE[m[1].lower()])
        raise WorkflowError(
            f"unknown model {name if len(name) <= 40 else name[:37] + '...'!r}; known: {', '.join(sorted(models))}, or a size such as "
            f"350m, 1.3b, 7b (parameters)"
        )
    return models[name]["layers"]


def sized_model(params: float, layers: int = 12, tokens: int = 1024) -> list:
    """A decoder-only transformer of ``params`` parameters as ``layers`` equal blocks: each block
    ``params / layers`` parameters and ``params / layers x tokens`` multiply-accumulates per sample
    (a forward pass costs about 2 FLOPs per parameter and token: Kaplan et al., Scaling Laws for
    Neural Language Models, 2020, eq. 2.2; attention's own n^2 d term is left out).

    Parameters
    ----------
    params : float
        Parameters of the whole model (at least ``layers``).
    layers : int
    tokens : int
        Sequence length of a sample.

    Raises
    ------
    WorkflowError
        Fewer parameters than layers, or a count that is not a positive finite number.
    """
    if not (isinstance(params, (int, float)) and math.isfinite(params) and params >= layers >= 1 and tokens >= 1):
        raise WorkflowError(f"a sized model needs at least {layers} parameters, got {params!r}")
    per = float(params) / layers
    return [{"name": f"block{k}", "macs": per * tokens, "params": per} for k in range(layers)]


def device_flops(device) -> float:
    """FLOP/s of a device given by name (see :data:`DEVICES`) or as a number.

    Parameters
    ----------
    device : str or float

    Raises
    ------
    WorkflowError
        Unknown name, or not a positive finite number.
    """
    if isinstance(device, str):
        if device not in DEVICES:
            raise WorkflowError(f"unknown device {device!r}; known: {', '.join(sorted(DEVICES))}")
        return float(DEVICES[device])
    try:
        flops = float(device)
    except (TypeError, ValueError):
        raise WorkflowError(f"device must be a name or FLOP/s, got {device!r}") from None
    if not flops > 0 or flops == float("inf"):
        raise WorkflowError(f"device FLOP/s must be positive and finite, got {device!r}")
    return flops
