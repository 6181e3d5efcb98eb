"""Estee graph sets: a ``.zip`` holding pandas JSON with columns ``graph_name``, ``graph_id``,
``graph``; each graph is a list of tasks ``{"d", "e_d", "cpus", "outputs": [{"s", "e_s"}],
"inputs": [[task, output]]}``. Read only.

cost = ``d`` (the duration the task really takes; the expected ``e_d`` is kept in
``meta.expected_cost``); cores = ``cpus``; sizes are MiB, converted to bytes; task ``i`` gets id
``tI``; several outputs of one parent read by one child make one edge of their summed size.
``set.zip#K`` selects graph K (index or name).
Reference: Beránek et al., "Analysis of workflow schedulers in simulated distributed environments",
J. Supercomputing 2022; https://github.com/It4innovations/estee
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib

import numpy as np

from ..errors import FormatError
from ..graph import TaskGraph
from ._util import parse_json

__all__ = ["dumps_set", "graph_from_tasks", "read_set", "select", "table_rows"]

MIB = 1 << 20


#: How deep zips inside zips are read (pandas writes one inside the set's own).
MAX_ZIP_DEPTH = 2
#: an Estee zip's member may inflate to this share of the file limit at most: a zip inflates a
#: thousandfold, and its graphs are small
ZIP_SHARE = 4


def read_set(data: bytes, source: str, depth: int = 0) -> list:
    """``[(name, tasks)]`` of every graph in the zip (the first member holds the table).

    Parameters
    ----------
    data : bytes
        The zip file's content.
    source : str

    Raises
    ------
    FormatError
        Not a zip, empty, encrypted, an unknown compression, corrupt, a member larger than
        ``max_file_bytes() // ZIP_SHARE`` (checked as it is read, whatever the zip declares), zips nested deeper
        than :data:`MAX_ZIP_DEPTH`, or a malformed table.
    """
    from ._util import max_file_bytes, too_large

    if depth > MAX_ZIP_DEPTH:
        raise FormatError(f"{source}: zips nested more than {MAX_ZIP_DEPTH} deep")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = [m for m in z.infolist() if not m.is_dir()]
            if not members:
                raise FormatError(f"{source}: empty zip")
            first = members[0]
            limit = max_file_bytes() // ZIP_SHARE
            if first.file_size > limit:
                raise too_large(f"{source}!{first.filename} (uncompressed)", first.file_size)
            with z.open(first) as f:
                raw = f.read(limit + 1)
            if len(raw) > limit:
                raise too_large(f"{source}!{first.filename} (uncompressed)", len(raw))
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as e:
        raise FormatError(f"{source}: bad zip file ({e})") from None
    except RuntimeError as e:  # an encrypted member
        raise FormatError(f"{source}: cannot read the zip ({e})") from None
    except NotImplementedError as e:  # a compression method zipfile does not know
        raise FormatError(f"{source}: cannot read the zip ({e})") from None
    if raw[:4] == b"PK\x03\x04":  # pandas' compression="zip" inside the set's zip
        return read_set(raw, source, depth + 1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(f"{source}!{first.filename}: not UTF-8 text (byte {e.start})") from None
    return table_rows(parse_json(text, f"{source}!{first.filename}"), source)


def table_rows(table, source) -> list:
    """The rows of an Estee graph-set table, in either of pandas' JSON orientations (``columns``,
    ``records``), each checked.

    Parameters
    ----------
    table : dict or list
    source : str
        Names the file in errors.

    Raises
    ------
    FormatError
        A table of neither orientation, or a row without a graph.
    """
    if isinstance(table, dict) and "graph" in table:  # orient="columns"
        graphs, names = table["graph"], table.get("graph_name", {})
        if not isinstance(graphs, dict) or not isinstance(names, dict):
            raise FormatError(f"{source}: columns 'graph' and 'graph_name' must be objects")
        rows = [(str(names.get(k, k)), graphs[k]) for k in graphs]
    elif isinstance(table, list):  # orient="records"
        if not all(isinstance(r, dict) and "graph" in r for r in table):
            raise FormatError(f"{source}: every record of an Estee graph set needs a 'graph'")
        rows = [(str(r.get("graph_name", k)), r["graph"]) for k, r in enumerate(table)]
    else:
        raise FormatError(f"{source}: not an Estee graph set (no 'graph' column)")
    out = []
    for name, g in rows:
        if isinstance(g, str):
            g = parse_json(g, f"{source}#{name}")
        if not isinstance(g, list):
            raise FormatError(f"{source}#{name}: graph must be a list of tasks")
        out.append((name, g))
    return out


def graph_from_tasks(name: str, tasks: list, source: str) -> TaskGraph:
    """A graph from one Estee graph's task records.

    Parameters
    ----------
    name : str
    tasks : list of dict
        Estee's records (``d`` duration, ``e`` expected duration, ``cpus``, ``outputs``, ``inputs``).
    source : str

    Raises
    ------
    FormatError
        A bad record (named).
    """
    n = len(tasks)
    ids = [f"t{i}" for i in range(n)]
    cost, cores, out_size, meta = [], [], [], {}
    out_sizes = []
    for i, t in enumerate(tasks):
        where = f"{source}#{name}: task {i}"
        if not isinstance(t, dict) or "d" not in t:
            raise FormatError(f"{where}: missing field 'd'")
        cost.append(t["d"])
        cores.append(t.get("cpus", 1))
        outputs, inputs = t.get("outputs", []), t.get("inputs", [])
        if (
            not isinstance(outputs, list)
            or not isinstance(inputs, list)
            or not all(isinstance(o, dict) for o in outputs)
        ):
            raise FormatError(f"{where}: 'outputs' must be a list of objects and 'inputs' a list")
        sizes = []
        for k, o in enumerate(outputs):
            z = o.get("s", 0)
            if isinstance(z, bool) or not isinstance(z, (int, float)):
                raise FormatError(f"{where}: output {k}: size 's' must be a number, got {z!r}"[:200])
            try:
                sizes.append(float(z) * MIB)
            except OverflowError:
                raise FormatError(f"{where}: output {k}: size 's' is too large") from None
        out_sizes.append(sizes)
        with np.errstate(over="ignore"):
            out_size.append(float(np.sum(sizes)) if sizes else 0.0)
        if "e_d" in t:
            meta[ids[i]] = {"expected_cost": t["e_d"]}
    edge = {}
    for i, t in enumerate(tasks):
        for inp in t.get("inputs", []):
            try:
                p, k = int(inp[0]), int(inp[1])
                if p < 0 or k < 0:
                    raise IndexError
                s = out_sizes[p][k]
            except (IndexError, TypeError, ValueError):
                raise FormatError(f"{source}#{name}: task {i}: input {inp!r} names no output of a task") from None
            edge[(p, i)] = edge.get((p, i), 0) + s
    src = [ids[p] for p, _ in edge]
    dst = [ids[c] for _, c in edge]
    return TaskGraph.from_columns(name, ids, cost, out_size, cores, src, dst, list(edge.values()), meta=meta)


def select(rows: list, key: str, source: str) -> tuple:
    """One graph of a set, by index or name.

    Parameters
    ----------
    rows : list of (name, tasks)
    key : str
        An index or a graph name.
    source : str

    Raises
    ------
    FormatError
        No such graph; the known ones are listed.
    """
    names = [r[0] for r in rows]
    if key.isascii() and key.isdigit() and int(key) < len(rows):
        return rows[int(key)]
    if key in names:
        return rows[names.index(key)]
    raise FormatError(f"{source}: no graph {key!r} in the set (0..{len(rows) - 1} or one of: {', '.join(names)})")


def dumps_set(graphs: list) -> bytes:
    """An Estee-style zip of our graphs (for tests and exchange).

    Parameters
    ----------
    graphs : list of TaskGraph

    Returns
    -------
    bytes
    """
    cols = {"graph_name": {}, "graph_id": {}, "graph": {}}
    for k, (name, tasks) in enumerate(graphs):
        cols["graph_name"][str(k)] = name
        cols["graph_id"][str(k)] = str(k)
        cols["graph"][str(k)] = json.dumps(tasks)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("graphs.json", json.dumps(cols))
    return buf.getvalue()
