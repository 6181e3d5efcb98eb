"""Checks of the numbers a task graph is built from: each bad value is a GraphError naming the task
or edge and the field."""

from __future__ import annotations

import math
import re as _re

import numpy as np

from .errors import GraphError, UsageError

__all__ = [
    "number",
    "cores",
    "cores_column",
    "parse_bytes",
    "SIZE_UNITS",
    "exact_costs",
    "checked_column",
    "parse_rate",
    "MAX_CORES",
    "split_amount",
    "plot_format",
    "PLOT_FORMATS",
    "seed",
    "MAX_SEED",
    "decimal",
    "format_bytes",
]

_INF = math.inf

#: The most cores a task may ask for or a worker may have.
MAX_CORES = 1 << 20
#: The largest seed: every generator seeded takes it (numpy's, torch's, Python's).
MAX_SEED = 2**32 - 1


_DECIMAL = _re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = _re.compile(r"[+-]?[0-9]+")


def decimal(text: str, kind=float):
    """A number written in a text file or on the command line, read as the formats write them:
    ASCII digits, a sign, a point and an exponent (``int`` takes digits only). Python's own
    ``float`` and ``int`` take more that is no number in a file: ``1_000``, ``infinity``, other
    scripts' digits, surrounding spaces.

    Parameters
    ----------
    text : str
    kind : type
        ``float`` or ``int``.

    Raises
    ------
    ValueError
    """
    pattern = _INTEGER if kind is int else _DECIMAL
    if not isinstance(text, str) or pattern.fullmatch(text) is None:
        raise ValueError(f"not a decimal number: {text!r:.40}")
    return kind(text)


def seed(value, where: str = "seed") -> int:
    """``value`` as a seed: an integer in ``[0, MAX_SEED]``.

    Parameters
    ----------
    value : object
    where : str
        Named in the error.

    Raises
    ------
    UsageError
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value <= MAX_SEED:
        raise UsageError(f"{where} must be an integer from 0 to {MAX_SEED}, got {_short(value)}")
    return int(value)


def number(value, field: str, where: str) -> float:
    """``value`` as a finite float >= 0.

    Parameters
    ----------
    value : object
    field, where : str
        Named in the error: the field and the task or edge.

    Raises
    ------
    GraphError
        Not a number (text and booleans are not numbers), negative, NaN, infinite or too large for
        a float.
    """
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise GraphError(f"{where}: {field} must be a number, got {_short(value)}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise GraphError(f"{where}: {field} must be a number, got {_short(value)}") from None
    except OverflowError:
        raise GraphError(f"{where}: {field} is too large (more than {np.finfo(float).max:.3g})") from None
    if not (0.0 <= v < _INF):  # also false for NaN
        raise GraphError(f"{where}: {field} must be finite and >= 0, got {_short(value)}")
    return v


def _short(value) -> str:
    """``repr(value)``, cut to 60 characters (a 400-digit number says what it is)."""
    r = repr(value)
    return r if len(r) <= 60 else f"{r[:40]}...({len(r)} characters)"


def cores(value, where: str) -> int:
    """``value`` as a core count (an integer >= 1; an integral float is accepted).

    Parameters
    ----------
    value : object
    where : str

    Raises
    ------
    GraphError
        Not an integer from 1 to :data:`MAX_CORES`.
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= MAX_CORES:
        raise GraphError(f"{where}: cores must be an integer from 1 to {MAX_CORES}, got {_short(value)}")
    return int(value)


def cores_column(values, ids) -> list:
    """A column of core counts, each checked as :func:`cores` does (plain ints in range are
    taken at once).

    Parameters
    ----------
    values : sequence
    ids : sequence
        Per value: the task id, for errors.

    Raises
    ------
    GraphError
        Names the first bad entry.
    """
    values = list(values)
    if values and set(map(type, values)) <= {int} and 1 <= min(values) and max(values) <= MAX_CORES:
        return values
    return [cores(c, f"task {t!r}") for t, c in zip(ids, values)]


def exact_costs(costs, where: str) -> dict | None:
    """Checked exact per-worker costs, or None when there are none.

    Parameters
    ----------
    costs : dict or None
        Worker id -> seconds.
    where : str

    Raises
    ------
    GraphError
        Not a mapping, or a bad number.
    """
    if costs is None:
        return None
    if not isinstance(costs, dict):
        raise GraphError(f"{where}: costs must be a mapping worker id -> seconds, got {costs!r}")
    if not costs:
        return None
    return {w: number(c, f"costs[{w!r}]", where) for w, c in costs.items()}


def checked_column(values, field: str, labels, kind: str) -> list:
    """A column of values as finite floats >= 0, checked at once.

    Parameters
    ----------
    values : sequence
    field : str
    labels : iterable
        Per value: the task id, or the edge's ``(src, dst)``.
    kind : {"task", "edge"}

    Raises
    ------
    GraphError
        Names the first bad entry.
    """
    try:
        # not numbers, though numpy converts them: booleans, text (plain floats and ints, the common
        # case, are told apart by their exact types at C speed)
        ok = set(map(type, values)) <= {float, int} or not any(
            isinstance(v, (bool, np.bool_, str, bytes)) for v in values
        )
        arr = np.asarray(values, dtype=np.float64)
        ok = ok and arr.ndim == 1 and bool(np.all(np.isfinite(arr) & (arr >= 0)))
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        for label, v in zip(labels, values):
            where = f"task {label!r}" if kind == "task" else f"edge {label[0]!r} -> {label[1]!r}"
            number(v, field, where)
        raise GraphError(f"{field}: column of {kind}s is malformed")
    return arr.tolist()


_UNITS = {
    "bit": 1 / 8,
    "kbit": 1e3 / 8,
    "mbit": 1e6 / 8,
    "gbit": 1e9 / 8,
    "bps": 1.0,
    "kbps": 1e3,
    "mbps": 1e6,
    "gbps": 1e9,
}


#: a number then a unit, matched in linear time (no two quantifiers can share a digit) by
#: :func:`split_amount`
_AMOUNT = _re.compile(r"\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*")
#: the longest amount text read (a rate or size is a few characters)
MAX_AMOUNT_CHARS = 64


def split_amount(text: str):
    """``(number, unit)`` of ``200mbit``, ``16 GiB``, ``1.3b``, ``5e-5``; None where the text is not
    one (or is longer than :data:`MAX_AMOUNT_CHARS`: it is refused unread).

    Parameters
    ----------
    text : str

    >>> split_amount("1.5 GiB")
    (1.5, 'GiB')
    >>> split_amount("1" * 100 + "!") is None
    True
    """
    if len(text) > MAX_AMOUNT_CHARS:
        return None
    m = _AMOUNT.fullmatch(text)
    return (float(m.group(1)), m.group(2)) if m else None


#: units of a size in bytes (any case): decimal and binary
SIZE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def format_bytes(n: float) -> str:
    """``n`` bytes in the decimal unit that fits (``512 B``, ``79.4 kB``, ``4.76 MB``), three
    significant digits, as :func:`parse_bytes` reads it back.

    Parameters
    ----------
    n : float
    """
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            v = n / size
            return f"{v:.3g} {unit}" if v < 1000 else f"{v:.0f} {unit}"
    return f"{n:.0f} B"


def parse_bytes(text) -> int:
    """Bytes of a size written ``512MiB``, ``2GB``, ``1.5 GiB`` or a plain number of bytes.

    Parameters
    ----------
    text : str or int

    Raises
    ------
    UsageError
        Not a positive size.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = float(text)
    else:
        m = split_amount(str(text))
        if not m or m[1].lower() not in SIZE_UNITS:
            shown = repr(text) if len(str(text)) <= 40 else repr(str(text)[:37] + "...")
            raise UsageError(f"size {shown}: expected bytes or a size such as 512MiB or 2GB")
        value = m[0] * SIZE_UNITS[m[1].lower()]
    if not 1 <= value < 2**62:
        raise UsageError(f"size {text!r} must be at least one byte")
    return int(value)


def parse_rate(text) -> float:
    """Bytes per second of a rate written as tc writes it: ``200mbit``, ``1gbit``, ``500kbit``
    (bits per second) or ``25mbps`` (bytes per second, tc's meaning); a plain number is bytes/s.

    Parameters
    ----------
    text : str or float

    Raises
    ------
    TaskflowError
        Not a positive rate.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = split_amount(str(text))
        unit = m[1].lower() if m else ""
        if not m or (unit and unit not in _UNITS):
            shown = repr(text) if len(str(text)) <= 40 else repr(str(text)[:37] + "...")
            raise UsageError(f"rate {shown}: expected a number with a unit such as 200mbit, 1gbit, 500kbit or 25mbps")
        value = m[0] * (_UNITS[unit] if unit else 1.0)
    if not value > 0 or value == float("inf"):
        raise UsageError(f"rate {text!r} must be positive and finite")
    return value


#: the image formats a plot may be written in, by the file's suffix
PLOT_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg")


def plot_format(path) -> str:
    """The image format ``path``'s suffix names (no suffix: PNG).

    Parameters
    ----------
    path : path

    Raises
    ------
    TaskflowError
        A suffix that is not one of :data:`PLOT_FORMATS`.
    """
    import os

    fmt = os.path.splitext(os.fspath(path))[1][1:].lower() or "png"
    if fmt not in PLOT_FORMATS:
        raise UsageError(f"plot {os.fspath(path)!r}: .{fmt} is not an image format ({', '.join(PLOT_FORMATS)})")
    return fmt
