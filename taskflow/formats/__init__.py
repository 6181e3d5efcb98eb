"""Reading and writing graphs, clusters and schedules; the format is detected from the content.

=============  ======  =====  ===============================================
format         read    write  detected by
=============  ======  =====  ===============================================
``native``     yes     yes    JSON with ``"format": "taskflow-graph/1"``
``wfformat``   yes     yes    JSON with ``schemaVersion`` and ``workflow`` (1.4, 1.5; writes 1.5)
``dax``        yes     no     XML whose root is ``<adag>`` (Pegasus DAX 2.1)
``stg``        yes     no     text whose first number stands alone (Kasahara STG)
``estee``      yes     no     a zip (Estee graph set; ``set.zip#K`` picks graph K)
``dot``        no      yes    (output only, by the ``.dot`` / ``.gv`` suffix)
=============  ======  =====  ===============================================

Loading a file never runs code: no pickle, no eval; XML goes through defusedxml.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..cluster import Cluster
from ..errors import FormatError, TaskflowError
from ..graph import TaskGraph
from ..schedule import Schedule
from . import dax, estee, native, stg, wfformat
from ._util import (
    atomic_write,
    dump_json,
    input_limit,
    max_file_bytes,
    parse_json,
    save_figure,
    set_max_bytes,
    too_large,
)


def to_networkx(graph):
    """See :func:`taskflow.formats.nxdot.to_networkx` (networkx is imported on first use).

    Parameters
    ----------
    graph : TaskGraph
    """
    from .nxdot import to_networkx as f

    return f(graph)


def from_networkx(g, name: str | None = None):
    """See :func:`taskflow.formats.nxdot.from_networkx` (networkx is imported on first use).

    Parameters
    ----------
    g : networkx.DiGraph
    name : str, optional
    """
    from .nxdot import from_networkx as f

    return f(g, name) if name is not None else f(g)


def to_dot(graph) -> str:
    """See :func:`taskflow.formats.nxdot.to_dot`.

    Parameters
    ----------
    graph : TaskGraph
    """
    from .nxdot import to_dot as f

    return f(graph)


__all__ = [
    "load_graph",
    "load_graphs",
    "save_graph",
    "load_cluster",
    "save_cluster",
    "load_schedule",
    "save_schedule",
    "detect_format",
    "graph_from_dict",
    "graph_to_dict",
    "to_networkx",
    "from_networkx",
    "to_dot",
    "READ_FORMATS",
    "WRITE_FORMATS",
    "graph_text",
    "with_source",
    "read_json",
    "read_text",
    "format_for",
    "set_max_bytes",
    "max_file_bytes",
    "input_limit",
    "save_figure",
]

READ_FORMATS = ("native", "wfformat", "dax", "stg", "estee")
WRITE_FORMATS = ("native", "wfformat", "dot")

graph_from_dict = native.graph_from_dict
graph_to_dict = native.graph_to_dict


def _split(path) -> tuple:
    """``set.zip#K`` -> (``set.zip``, ``K``) unless a file is literally named so."""
    p = os.fspath(path)
    if "#" in p and not os.path.exists(p):
        base, key = p.rsplit("#", 1)
        return base, key
    return p, None


def _read_bytes(path: str) -> bytes:
    """A regular file's bytes, at most :func:`._util.max_file_bytes` (a FIFO or a device is refused
    before a read could block: :func:`taskflow.files.open_regular`)."""
    from ..files import open_regular

    try:
        with open_regular(path, "input", FormatError) as f:
            st = os.fstat(f.fileno())
            limit = max_file_bytes()
            if st.st_size > limit:
                raise too_large(path, st.st_size)
            data = f.read(limit + 1)
            if len(data) > limit:
                raise too_large(path, len(data))
            return data
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror})") from None


def read_text(path) -> str:
    """A text file's content, read within the input limits (a regular file of at most
    ``max_file_bytes()``, UTF-8).

    Parameters
    ----------
    path : str or os.PathLike

    Raises
    ------
    FormatError
        Missing, unreadable, past the limit or not UTF-8 (the file is named).
    """
    p = os.fspath(path)
    return _decode(_read_bytes(p), p)


def read_json(path):
    """A JSON file's document, read within the input limits (a regular file of at most
    ``max_file_bytes()``, UTF-8, nested at most ``MAX_JSON_DEPTH`` deep).

    Parameters
    ----------
    path : str or os.PathLike

    Raises
    ------
    FormatError
        Missing, unreadable, past a limit or malformed (the file is named).
    """
    p = os.fspath(path)
    return parse_json(read_text(p), p)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FormatError(f"{source}: not UTF-8 text (byte {e.start})") from None


_UNKNOWN = (
    "unknown format (expected taskflow JSON, WfFormat JSON, Pegasus DAX XML, Kasahara STG or an Estee graph-set zip)"
)


def _sniff(data: bytes, source: str, forced: str | None = None):
    """(format, parsed payload) of a file's bytes."""
    if forced is not None and forced not in READ_FORMATS + ("cluster", "schedule"):
        raise FormatError(f"unknown format {forced!r}; readable formats: {', '.join(READ_FORMATS)}")
    if forced == "estee" or (forced is None and data[:4] == b"PK\x03\x04"):
        return "estee", estee.read_set(data, source)
    text = _decode(data, source)
    head = text.lstrip()[:1]
    if forced == "dax" or (forced is None and head == "<"):
        return "dax", dax.parse_xml(data, source)
    if forced == "stg" or (forced is None and head.isascii() and head.isdigit() and stg.looks_like_stg(text)):
        return "stg", text
    if forced is None and head not in ("{", "["):
        if head == "#" and stg.looks_like_stg(text):
            return "stg", text
        raise FormatError(f"{source}: {_UNKNOWN}")
    doc = parse_json(text, source)
    if forced in ("native", "cluster", "schedule"):
        return forced, doc
    if forced == "wfformat" or wfformat.is_wfformat(doc):
        return "wfformat", doc
    if isinstance(doc, dict):
        fmt = doc.get("format")
        if fmt == native.GRAPH_FORMAT:
            return "native", doc
        if fmt == native.CLUSTER_FORMAT:
            return "cluster", doc
        if fmt == native.SCHEDULE_FORMAT:
            return "schedule", doc
        if fmt is not None:
            raise FormatError(f"{source}: unknown format {fmt!r} in field 'format'")
        if "graph" in doc and "graph_name" in doc:
            return "estee", estee.table_rows(doc, source)
    raise FormatError(f"{source}: {_UNKNOWN}")


def detect_format(path) -> str:
    """The format of a file, from its content (see :data:`READ_FORMATS`).

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    str
        ``native``, ``wfformat``, ``dax``, ``stg``, ``estee``, or ``cluster`` / ``schedule`` for those
        native documents.

    Raises
    ------
    FormatError
        Unreadable, too large, or no known format.
    """
    base, _ = _split(path)
    return _sniff(_read_bytes(base), base)[0]


def _graph_of(kind: str, payload, source: str, key=None) -> TaskGraph:
    return _parse_graph(kind, payload, source, key).validate()


def _parse_graph(kind: str, payload, source: str, key=None) -> TaskGraph:
    if kind == "native":
        return native.graph_from_dict(payload, source)
    if kind == "wfformat":
        return wfformat.graph_from_wfformat(payload, source)
    if kind == "dax":
        return dax.graph_from_dax(payload, source)
    if kind == "stg":
        return stg.graph_from_stg(payload, source, name=Path(source).stem)
    if kind == "estee":
        if key is None:
            if len(payload) == 1:
                return estee.graph_from_tasks(*payload[0], source)
            raise FormatError(f"{source}: an Estee set of {len(payload)} graphs; pick one as {source}#K")
        return estee.graph_from_tasks(*estee.select(payload, key, source), source)
    raise FormatError(f"{source}: is a {kind} document, not a task graph")


def load_graph(path, format: str | None = None) -> TaskGraph:
    """Read a task graph from ``path`` (format detected from content unless ``format`` is given).

    Parameters
    ----------
    path : str or os.PathLike
        A file; ``FILE#K`` picks graph ``K`` (index or name) of an Estee set.
    format : str, optional
        One of :data:`READ_FORMATS`, instead of detecting it.

    Raises
    ------
    FormatError, GraphError
        With a message naming the file and the problem.
    """
    base, key = _split(path)
    kind, payload = _sniff(_read_bytes(base), base, format)
    return _graph_of(kind, payload, base, key)


def load_graphs(path, format: str | None = None) -> list:
    """Every graph in a file: one for most formats, all of an Estee set (or the ``#K`` one).

    Parameters
    ----------
    path : str or os.PathLike
        A file; ``FILE#K`` picks graph ``K`` (index or name) of an Estee set.
    format : str, optional
        One of :data:`READ_FORMATS`.

    Raises
    ------
    FormatError, GraphError
        With a message naming the file and the problem.
    """
    base, key = _split(path)
    kind, payload = _sniff(_read_bytes(base), base, format)
    if kind == "estee" and key is None:
        return [estee.graph_from_tasks(name, tasks, base).validate() for name, tasks in payload]
    return [_graph_of(kind, payload, base, key)]


def format_for(path: str, format: str | None) -> str:
    """The format to write ``path`` in: ``format`` if given (checked), else by the file's suffix,
    else native.

    Parameters
    ----------
    path : str
    format : str or None

    Raises
    ------
    FormatError
        ``format`` is not a writable format.
    """
    if format:
        if format not in WRITE_FORMATS:
            raise FormatError(f"cannot write format {format!r}; writable formats: {', '.join(WRITE_FORMATS)}")
        return format
    suffix = Path(path).suffix.lower()
    if suffix in (".dot", ".gv"):
        return "dot"
    return "native"


def graph_text(graph: TaskGraph, format: str = "native") -> str:
    """``graph`` as the text of a file in ``format``.

    Parameters
    ----------
    graph : TaskGraph
    format : {"native", "wfformat", "dot"}

    Raises
    ------
    FormatError
        Not a writable format.
    """
    if format == "native":
        return dump_json(native.graph_to_dict(graph))
    if format == "wfformat":
        return dump_json(wfformat.graph_to_wfformat(graph))
    if format == "dot":
        return to_dot(graph)
    raise FormatError(f"cannot write format {format!r}; writable formats: {', '.join(WRITE_FORMATS)}")


def save_graph(graph: TaskGraph, path, format: str | None = None) -> None:
    """Write ``graph`` (native JSON unless ``format`` or a ``.dot`` suffix says otherwise), atomically.

    Parameters
    ----------
    graph : TaskGraph
    path : str or os.PathLike
    format : {"native", "wfformat", "dot"}, optional

    Raises
    ------
    FormatError
        Not a writable format, or the graph cannot be written in it.
    """
    p = os.fspath(path)
    atomic_write(p, graph_text(graph, format_for(p, format)))


def load_cluster(path) -> Cluster:
    """Read a native cluster file.

    Parameters
    ----------
    path : str or os.PathLike

    Raises
    ------
    FormatError, ClusterError
        Not a cluster document, or a bad field (named).
    """
    return _load_document(path, "cluster", native.CLUSTER_FORMAT, native.cluster_from_dict)


def save_cluster(cluster: Cluster, path) -> None:
    """Write ``cluster`` as native JSON, atomically.

    Parameters
    ----------
    cluster : Cluster
    path : str or os.PathLike
    """
    atomic_write(os.fspath(path), dump_json(native.cluster_to_dict(cluster)))


def load_schedule(path) -> Schedule:
    """Read a native schedule file (a plan or a trace).

    Parameters
    ----------
    path : str or os.PathLike

    Raises
    ------
    FormatError
        Not a schedule document, or a bad field (named).
    """
    return _load_document(path, "schedule", native.SCHEDULE_FORMAT, native.schedule_from_dict)


def _load_document(path, kind: str, format_name: str, parse):
    """Read ``path``, check that it is a native document of ``kind``, and ``parse`` it."""
    base = os.fspath(path)
    found, doc = _sniff(_read_bytes(base), base)
    if found != kind:
        raise FormatError(f'{base}: expected a {kind} ("format": "{format_name}"), got {found}')
    return parse(doc, base)


def save_schedule(schedule: Schedule, path) -> None:
    """Write ``schedule`` as native JSON, atomically.

    Parameters
    ----------
    schedule : Schedule
    path : str or os.PathLike
    """
    atomic_write(os.fspath(path), dump_json(schedule.to_dict()))


def with_source(err: TaskflowError, source: str) -> str:
    """An error message that names the file, once.

    Parameters
    ----------
    err : TaskflowError
    source : str
        The file's name.
    """
    msg = str(err)
    return msg if msg.startswith(source) else f"{source}: {msg}"
