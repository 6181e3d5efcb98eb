"""Job traces and cluster specs on disk.

* **Native JSON** (``taskflow-jobs/1``)::

      {"format": "taskflow-jobs/1", "name": "my-trace",
       "cluster": {"racks": 2, "nodes_per_rack": 4, "workers_per_node": 8,         (optional)
                   "bandwidth": 12.5e9, "uplink": 1.25e9},                          (optional)
       "jobs": [{"id": "j1", "arrival": 0, "workers": 4, "duration": 3600,
                 "model": "resnet8", "iterations": 1000, "batch": 64, "user": "ann", (optional)
                 "priority": 1, "deadline": 7200,                                   (optional)
                 "min_workers": 2, "max_workers": 8}]}             (optional: an elastic job)

  Times are seconds from the trace's start; ``duration`` is the job's seconds on its ``workers``,
  alone.
* **Tiresias' CSV trace** (its simulator's, read as it is): a header naming ``job_id, num_gpu,
  submit_time, iterations, model_name, duration, interval`` (any order; other columns ignored),
  a job per row: ``workers = num_gpu``, ``arrival = submit_time``, ``duration`` seconds.
* **Tiresias' cluster spec CSV**: ``num_switch, num_node_p_switch, num_gpu_p_node, num_cpu_p_node,
  mem_p_node`` and one row: racks of nodes of workers.

A file that is wrong is one line naming the file, the line (or job) and the field.
"""

from __future__ import annotations

import csv
import io
import json
import os

from ..checks import decimal
from ..errors import FormatError
from .model import JobCluster, JobTrace, check_job

__all__ = [
    "load_trace",
    "save_trace",
    "load_job_cluster",
    "trace_to_dict",
    "trace_from_dict",
    "FORMAT",
    "TIRESIAS_COLUMNS",
    "TIRESIAS_CLUSTER_COLUMNS",
]

#: the native format's version tag
FORMAT = "taskflow-jobs/1"
#: the columns of Tiresias' trace CSV
TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval")
#: the columns of Tiresias' cluster spec CSV
TIRESIAS_CLUSTER_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node")
_OPTIONAL = ("model", "iterations", "batch", "user", "priority", "deadline", "min_workers", "max_workers")
_CLUSTER_FIELDS = (
    "racks",
    "nodes_per_rack",
    "workers_per_node",
    "cores_per_node",
    "memory_per_node",
    "bandwidth",
    "uplink",
    "name",
)


def _text(path) -> str:
    from ..formats import read_text

    return read_text(path)


def _rows(path, columns: tuple, what: str) -> list:
    """``(line number, {column: text})`` of a CSV whose header names ``columns``."""
    p = os.fspath(path)
    reader = csv.reader(io.StringIO(_text(p), newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise FormatError(f"{p}: empty file: expected a {what} CSV with the header {','.join(columns)}") from None
    except csv.Error as e:
        raise FormatError(f"{p} line 1: not CSV ({e})") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise FormatError(
            f"{p} line 1: a {what} CSV needs the column(s) {', '.join(missing)} (header: {','.join(header)[:120]})"
        )
    at = {c: header.index(c) for c in columns}
    out = []
    try:
        for row in reader:
            if not row or all(not x.strip() for x in row):
                continue
            if len(row) < len(header):
                raise FormatError(f"{p} line {reader.line_num}: {len(row)} fields, the header names {len(header)}")
            out.append((reader.line_num, {c: row[i].strip() for c, i in at.items()}))
    except csv.Error as e:
        raise FormatError(f"{p} line {reader.line_num}: not CSV ({e})") from None
    return out


def _num(text: str, where: str, field: str, kind=float):
    try:
        return decimal(text, kind)
    except ValueError:
        raise FormatError(
            f"{where}: {field} must be {'a whole number' if kind is int else 'a number'}, got {text!r:.40}"
        ) from None


def _tiresias_trace(path) -> JobTrace:
    p = os.fspath(path)
    jobs = []
    for line, r in _rows(p, TIRESIAS_COLUMNS, "Tiresias trace"):
        where = f"{p} line {line}, job {r['job_id']!r}"
        jobs.append(
            check_job(
                where,
                r["job_id"],
                _num(r["submit_time"], where, "submit_time"),
                _num(r["num_gpu"], where, "num_gpu", int),
                _num(r["duration"], where, "duration"),
                model=r["model_name"] or None,
                iterations=_num(r["iterations"], where, "iterations", int) if r["iterations"] else None,
            )
        )
    if not jobs:
        raise FormatError(f"{p}: a trace of no job")
    return JobTrace(jobs, None, os.path.basename(p))


def load_job_cluster(path) -> JobCluster:
    """A cluster from Tiresias' cluster spec CSV (``.csv``) or a native JSON object
    (``{"racks", "nodes_per_rack", "workers_per_node", ...}``).

    Parameters
    ----------
    path : path

    Raises
    ------
    FormatError
    """
    p = os.fspath(path)
    if p.lower().endswith(".csv"):
        rows = _rows(p, TIRESIAS_CLUSTER_COLUMNS, "Tiresias cluster spec")
        if len(rows) != 1:
            raise FormatError(f"{p}: a cluster spec has one row of numbers, got {len(rows)}")
        line, r = rows[0]
        where = f"{p} line {line}"
        return JobCluster(
            _num(r["num_switch"], where, "num_switch", int),
            _num(r["num_node_p_switch"], where, "num_node_p_switch", int),
            _num(r["num_gpu_p_node"], where, "num_gpu_p_node", int),
            _num(r["num_cpu_p_node"], where, "num_cpu_p_node", int),
            _num(r["mem_p_node"], where, "mem_p_node"),
            name=os.path.basename(p),
        )
    from ..formats import read_json

    return _cluster(read_json(p), p)


def _cluster(doc, where: str) -> JobCluster:
    if not isinstance(doc, dict):
        raise FormatError(f"{where}: a cluster is an object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - set(_CLUSTER_FIELDS))
    if unknown:
        raise FormatError(f"{where}: unknown cluster field {unknown[0]!r} (fields: {', '.join(_CLUSTER_FIELDS)})")
    for k, v in doc.items():
        if k != "name" and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise FormatError(f"{where}: cluster field {k!r} must be a number, got {v!r}")
    return JobCluster(**doc)


def trace_from_dict(doc, source: str = "trace") -> JobTrace:
    """A trace from the native format's document.

    Parameters
    ----------
    doc : dict
    source : str
        How errors name it.

    Raises
    ------
    FormatError
    """
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise FormatError(f'{source}: not a job trace (expected an object with "format": "{FORMAT}")')
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise FormatError(f"{source}: field 'jobs' must be a list of one or more jobs")
    out = []
    for k, j in enumerate(jobs):
        where = f"{source} job {k + 1}" + (f" ({j.get('id')!r})" if isinstance(j, dict) and "id" in j else "")
        if not isinstance(j, dict):
            raise FormatError(f"{where}: a job is an object, got {type(j).__name__}")
        unknown = sorted(set(j) - {"id", "arrival", "workers", "duration", *_OPTIONAL})
        if unknown:
            raise FormatError(f"{where}: unknown field {unknown[0]!r}")
        for f in ("id", "arrival", "workers", "duration"):
            if f not in j:
                raise FormatError(f"{where}: missing field {f!r}")
        out.append(
            check_job(where, j["id"], j["arrival"], j["workers"], j["duration"], **{f: j.get(f) for f in _OPTIONAL})
        )
    cluster = _cluster(doc["cluster"], f"{source} cluster") if doc.get("cluster") is not None else None
    return JobTrace(out, cluster, str(doc.get("name", os.path.basename(source))))


def trace_to_dict(trace: JobTrace) -> dict:
    """The native format's document of ``trace``.

    Parameters
    ----------
    trace : JobTrace
    """
    jobs = []
    for j in trace.jobs:
        d = {"id": j.id, "arrival": j.arrival, "workers": j.workers, "duration": j.duration}
        for f in _OPTIONAL:
            v = getattr(j, f)
            if v is not None and not (f == "priority" and v == 0.0):
                d[f] = v
        jobs.append(d)
    doc = {"format": FORMAT, "name": trace.name, "jobs": jobs}
    if trace.cluster is not None:
        doc["cluster"] = trace.cluster.to_dict()
    return doc


def load_trace(path) -> JobTrace:
    """A job trace: Tiresias' CSV (``.csv``) or the native JSON.

    Parameters
    ----------
    path : path

    Raises
    ------
    FormatError
        Missing, unreadable, or wrong (the line or job and the field named).
    """
    p = os.fspath(path)
    if p.lower().endswith(".csv"):
        return _tiresias_trace(p)
    from ..formats import read_json

    return trace_from_dict(read_json(p), p)


def save_trace(trace: JobTrace, path) -> None:
    """Write ``trace`` in the native format (atomically), or as Tiresias' CSV where ``path`` ends
    in ``.csv``.

    Parameters
    ----------
    trace : JobTrace
    path : path
    """
    from ..formats import atomic_write

    p = os.fspath(path)
    if p.lower().endswith(".csv"):
        buf = io.StringIO(newline="")
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(TIRESIAS_COLUMNS)
        for j in trace.jobs:
            w.writerow([j.id, j.workers, repr(j.arrival), j.iterations or "", j.model or "", repr(j.duration), ""])
        atomic_write(p, buf.getvalue())
        return
    atomic_write(p, json.dumps(trace_to_dict(trace), indent=1) + "\n")
