"""Model and device profiles for the training generators, from ``workflows/data/models.json``
(per-layer forward multiply-accumulates and parameters of ResNet-50, VGG-16, BERT-base, GPT-2
small; device FLOP/s; with sources)."""

from __future__ import annotations

import json
from pathlib import Path

from taskflow.errors import WorkflowError

__all__ = ["DEVICES", "model_profile", "device_flops"]

_DATA = Path(__file__).with_name("data") / "models.json"


def _profiles() -> dict:
    with open(_DATA) as f:
        return json.load(f)


#: device name -> FLOP/s
DEVICES = {k: v["flops"] for k, v in _profiles()["devices"].items()}


def model_profile(name: str) -> list:
    """``[{"name", "macs", "params"}]`` per layer (group) of a known model.

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
        raise WorkflowError(f"unknown model {name!r}; known: {', '.join(sorted(models))}")
    return models[name]["layers"]


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
