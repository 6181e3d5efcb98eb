"""Small helpers shared by the format modules: field access with clear errors, atomic writes."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile

import numpy as np

from ..errors import FormatError
from ..graph import TaskGraph

_MISSING = object()

#: Inputs past these limits are refused with a FormatError (docs/formats.md lists them). The
#: largest file read is a safeguard a user raises (:func:`set_max_bytes`, ``--max-bytes``, the
#: environment variable :data:`MAX_BYTES_ENV`); the default holds a graph of a few million tasks in
#: our own format (a million tasks with their edges is about 150 MB).
DEFAULT_MAX_BYTES = 512 * 1024**2
MAX_BYTES_ENV = "TASKFLOW_MAX_BYTES"
MAX_JSON_DEPTH = 64
#: JSON values (objects, arrays and list items) a document may hold per byte of the limit: bounds
#: the memory parsing takes (a value is at least two bytes of text; these allow one per 32)
JSON_ITEMS_PER_BYTE = 1 / 32
#: XML elements (counted as ``<``) a DAX file may hold per byte of the limit, for the same reason
XML_ELEMENTS_PER_BYTE = 1 / 64

_max_bytes: int | None = None


def set_max_bytes(limit) -> None:
    """Raise (or lower) the largest input file read, for this process: bytes or a size such as
    ``2GiB`` (None: back to :data:`MAX_BYTES_ENV`, else :data:`DEFAULT_MAX_BYTES`). The JSON
    values and XML elements a file may hold scale with it.

    Parameters
    ----------
    limit : int, str or None

    Raises
    ------
    UsageError
        Not a size.
    """
    from ..checks import parse_bytes

    global _max_bytes
    _max_bytes = None if limit is None else parse_bytes(limit)


@contextlib.contextmanager
def input_limit(limit):
    """:func:`set_max_bytes` while the ``with`` block runs, as it was after (None: unchanged).

    Parameters
    ----------
    limit : int, str or None
    """
    global _max_bytes
    before = _max_bytes
    if limit is not None:
        set_max_bytes(limit)
    try:
        yield
    finally:
        _max_bytes = before


def max_file_bytes() -> int:
    """The largest input file read, in bytes (:func:`set_max_bytes`)."""
    if _max_bytes is not None:
        return _max_bytes
    env = os.environ.get(MAX_BYTES_ENV)
    if env:
        from ..checks import parse_bytes
        from ..errors import UsageError

        try:
            return parse_bytes(env)
        except UsageError as e:
            raise UsageError(f"{MAX_BYTES_ENV}: {e}") from None
    return DEFAULT_MAX_BYTES


def max_json_items() -> int:
    """JSON values a document may hold (:data:`JSON_ITEMS_PER_BYTE` of the byte limit)."""
    return max(1, int(max_file_bytes() * JSON_ITEMS_PER_BYTE))


def max_xml_elements() -> int:
    """XML elements a DAX file may hold (:data:`XML_ELEMENTS_PER_BYTE` of the byte limit)."""
    return max(1, int(max_file_bytes() * XML_ELEMENTS_PER_BYTE))


def too_large(source: str, size: int) -> FormatError:
    """The error for a file past the byte limit, saying how to raise it."""
    return FormatError(
        f"{source}: {size:,} bytes, more than the limit of {max_file_bytes():,} (raise it with "
        f"--max-bytes or {MAX_BYTES_ENV}, e.g. {MAX_BYTES_ENV}=2GiB)"
    )


def field(obj, key, where: str, default=_MISSING, kind=None):
    """``obj[key]`` with a FormatError naming ``where`` and the field when it is missing or wrong."""
    if not isinstance(obj, dict):
        raise FormatError(f"{where}: expected an object, got {type(obj).__name__}")
    if key not in obj:
        if default is _MISSING:
            raise FormatError(f"{where}: missing field {key!r}")
        return default
    v = obj[key]
    if kind is not None and not isinstance(v, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise FormatError(f"{where}: field {key!r} must be {names}, got {type(v).__name__}")
    return v


def ident(value, where: str, what: str = "id"):
    """``value`` if it can be an id (a str, or an int that is not a bool), else a FormatError."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise FormatError(f"{where}: {what} must be a string or an integer, got {type(value).__name__}")
    return value


def items(obj, key, where: str) -> list:
    """``obj[key]`` as a list (missing: empty), or a FormatError naming the field."""
    v = field(obj, key, where, default=[])
    if not isinstance(v, list):
        raise FormatError(f"{where}: field {key!r} must be a list, got {type(v).__name__}")
    return v


def parse_json(text: str, source: str):
    """Parsed JSON, or a FormatError: malformed, nested deeper than :data:`MAX_JSON_DEPTH`, more
    than :func:`max_json_items` values, a number Python cannot hold (an integer of thousands of
    digits), or a key given twice in one object."""
    data = text.encode("utf-8", "replace")  # the byte scans below share it
    depth = _json_depth(text, data)
    if depth > MAX_JSON_DEPTH:
        raise FormatError(f"{source}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
    items = text.count(",") + text.count("[") + text.count("{")
    limit = max_json_items()
    if items > limit:
        items = _JSON_STRING.sub('""', text).count(",") + text.count("[") + text.count("{")  # not in strings
        if items > limit:
            raise FormatError(
                f"{source}: JSON with more than {limit:,} values (raise the limit with --max-bytes or {MAX_BYTES_ENV})"
            )
    # a number written finite that a float cannot hold has an exponent of three digits or three
    # hundred digits: only a text with one is parsed number by number (a check per float costs a
    # third of the parsing)
    exact = _finite_float if _may_overflow(data) else float
    try:
        return json.loads(text, parse_float=exact, object_pairs_hook=_unique_keys)
    except _OutOfRange as e:
        raise FormatError(f"{source}: the number {e} is out of range (a float holds at most 1.8e308)") from None
    except _Duplicate as e:
        raise FormatError(f"{source}: key {e} given twice in one object (which one is meant?)") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{source}: malformed JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer past Python's digit limit
        raise FormatError(f"{source}: unreadable JSON number or structure ({_one_line(e)})") from None


class _OutOfRange(ValueError):
    pass


class _Duplicate(ValueError):
    pass


def _unique_keys(pairs) -> dict:
    """A JSON object as a dict; a key given twice in it is an error, not the last one silently."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(repr(k)[:60])
            seen.add(k)
    return d


def _finite_float(text: str) -> float:
    """A JSON number as a float; one written finite that a float cannot hold (``1e400``) is an
    error, not infinity (``Infinity``, which the writers use for free transfers, stays)."""
    value = float(text)
    if math.isinf(value):
        raise _OutOfRange(text[:40])
    return value


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
#: bytes of a JSON text scanned for large numbers at once (bounds the memory the scan takes)
_DEPTH_BLOCK = 1 << 24
#: digits in a row from which a number may overflow a float (with an exponent of at most 99)
_LONG_DIGITS = 200


def _may_overflow(data: bytes) -> bool:
    """Whether a number in the JSON ``text`` may be too large for a float: ``e`` or ``E`` (a ``+``
    between allowed) then three digits, or :data:`_LONG_DIGITS` digits in a row (strings included:
    a false alarm only costs a slower parse). Counted over the text's bytes in blocks, vectorised."""
    for at in range(0, len(data), _DEPTH_BLOCK):
        raw = np.frombuffer(data, dtype=np.uint8, count=min(_DEPTH_BLOCK + 2 * _LONG_DIGITS, len(data) - at), offset=at)
        if len(raw) < 4:
            continue
        digit = (raw >= ord("0")) & (raw <= ord("9"))
        three = digit[:-2] & digit[1:-1] & digit[2:]  # three digits from here
        e = (raw == ord("e")) | (raw == ord("E"))
        if (e[:-3] & three[1:]).any() or (e[:-4] & (raw[1:-3] == ord("+")) & three[2:]).any():
            return True
        breaks = np.flatnonzero(~digit)
        edges = np.concatenate(([-1], breaks, [len(raw)]))
        if int(np.diff(edges).max()) > _LONG_DIGITS:
            return True
    return False


def _json_depth(text: str, data: bytes | None = None) -> int:
    """The deepest nesting of ``[``/``{`` outside strings (vectorised, no recursion). Without a
    backslash in the text a string is what lies between a quote and the next, so a bracket is in
    one where an odd number of quotes precede it; otherwise strings are blanked by a pattern first."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0
    if "\\" not in text:
        # a bracket is inside a string where an odd number of quotes stand before it
        raw = np.frombuffer(text.encode("utf-8", "replace") if data is None else data, dtype=np.uint8)
        quotes = np.flatnonzero(raw == ord('"'))
        opens = (raw == ord("[")) | (raw == ord("{"))
        brackets = np.flatnonzero(opens | (raw == ord("]")) | (raw == ord("}")))
        brackets = brackets[(np.searchsorted(quotes, brackets) & 1) == 0]
        return int(np.cumsum(np.where(opens[brackets], 1, -1), dtype=np.int64).max(initial=0))
    raw = np.frombuffer(_JSON_STRING.sub('""', text).encode("utf-8", "replace"), dtype=np.uint8)
    step = np.zeros(len(raw), dtype=np.int64)
    step[(raw == ord("[")) | (raw == ord("{"))] = 1
    step[(raw == ord("]")) | (raw == ord("}"))] = -1
    return int(np.cumsum(step).max(initial=0))


def _one_line(e) -> str:
    return str(e).replace("\n", " ").strip()


#: the temporary files :func:`atomic_write` is writing now (a program ended at once by a signal
#: removes them: nothing half-written is left behind)
WRITING: set = set()


def atomic_write(path, data) -> None:
    """Write ``data`` (str or bytes, as UTF-8) to ``path`` through a temporary file in the same
    folder, synced, then renamed over ``path``: a failure (a full disk among them) leaves no
    half-written file behind and names ``path``, never the temporary file; a symbolic link at
    ``path`` is replaced, not written through; a ``path`` that exists and is not a regular file
    (``/dev/null``, a FIFO, a folder) is refused (:mod:`taskflow.files`)."""
    from ..files import not_regular

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    kind = not_regular(path)
    if kind is not None:  # a rename would replace a device node, a FIFO, a folder: never
        raise FormatError(f"{path}: is {kind}; an output must be a regular file (nothing was written)")
    if not isinstance(data, (bytes, bytearray)):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as e:
            bad = data[e.start : e.end]
            raise FormatError(
                f"{path}: cannot write {bad!r} (character {e.start} of the text): not UTF-8, "
                f"e.g. a lone surrogate in a task id; nothing was written"
            ) from None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".taskflow-", dir=directory)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None  # the user's path, not ours
    WRITING.add(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # a full disk says so here, not after the rename
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)  # replaces a link at ``path`` itself: never writes through it
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror, path) from None
        raise
    finally:
        WRITING.discard(tmp)


def save_figure(fig, path, close, dpi: int = 120) -> None:
    """Draw a matplotlib figure into ``path`` in the format its suffix names (PNG, SVG, PDF,
    JPEG), written whole or not at all (:func:`atomic_write`: a full disk leaves no empty file),
    and close it, whatever happened.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    path : str or os.PathLike
    close : callable
        ``matplotlib.pyplot.close`` (the caller's: this layer does not import matplotlib).
    dpi : int
    """
    import io

    from ..checks import plot_format

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=plot_format(path), dpi=dpi)
    finally:
        close(fig)
    atomic_write(path, buf.getvalue())


def dump_json(doc) -> str:
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def graph_from_files(name, ids, cost, cores, outputs, inputs, links, category, source, noun="task") -> TaskGraph:
    """A graph from tasks that read and write files (WfFormat, Pegasus DAX).

    Parameters
    ----------
    name : str
    ids, cost, cores, category : list
        Per task (``cores`` may be None: one each); a category becomes ``meta["category"]``.
    outputs, inputs : list of dict
        Per task ``{file: bytes}`` written and read.
    links : iterable of (parent, child)
        Dependencies (repeats ignored); an edge carries the bytes of the files the parent writes
        and the child reads.
    source : str
        Names the file in errors.
    noun : str
        What the format calls a task, for errors.

    Returns
    -------
    TaskGraph

    Raises
    ------
    FormatError
        A link names an unknown task.
    """
    for i, t in enumerate(ids):
        for files in (outputs[i], inputs[i]):
            for f, z in files.items():
                if isinstance(z, bool) or not isinstance(z, (int, float)):
                    raise FormatError(
                        f"{source}: {noun} {t!r}: file {f!r}: size must be a number of bytes, got {z!r}"[:200]
                    )
                try:
                    files[f] = float(z)
                except OverflowError:
                    raise FormatError(f"{source}: {noun} {t!r}: file {f!r}: size is too large") from None
    out_size = [sum(outputs[i].values()) for i in range(len(ids))]
    pos = {t: i for i, t in enumerate(ids)}
    src, dst, size = [], [], []
    seen = set()
    for p, c in links:
        if (p, c) in seen:
            continue
        seen.add((p, c))
        if p not in pos or c not in pos:
            raise FormatError(f"{source}: edge {p!r} -> {c!r}: unknown {noun} {p if p not in pos else c!r}")
        shared = outputs[pos[p]].keys() & inputs[pos[c]].keys()
        src.append(p)
        dst.append(c)
        size.append(sum(outputs[pos[p]][f] for f in shared))
    meta = {t: {"category": category[i]} for i, t in enumerate(ids) if category[i]}
    return TaskGraph.from_columns(name, ids, cost, out_size, cores, src, dst, size, meta=meta)
