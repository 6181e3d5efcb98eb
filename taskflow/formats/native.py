"""Native JSON documents: ``taskflow-graph/1``, ``taskflow-cluster/1``, ``taskflow-schedule/1``.

Graph::

    {"format": "taskflow-graph/1", "name": ..., "tasks": [{"id", "cost", "costs"?, "output_size"?,
     "cores"?, "meta"?}], "edges": [{"from", "to", "size"?}]}

An edge without ``size`` carries its producer's ``output_size``.
"""

from __future__ import annotations

import operator

import numpy as np

from ..cluster import Cluster, Worker
from ..errors import ClusterError, FormatError
from ..graph import TaskGraph
from ..schedule import Schedule
from ._util import field

__all__ = [
    "cluster_from_dict",
    "cluster_to_dict",
    "graph_from_dict",
    "graph_to_dict",
    "schedule_from_dict",
    "schedule_to_dict",
]

GRAPH_FORMAT = "taskflow-graph/1"
CLUSTER_FORMAT = "taskflow-cluster/1"
SCHEDULE_FORMAT = "taskflow-schedule/1"

_ID = (str, int)
_ID_OF, _COST_OF = operator.itemgetter("id"), operator.itemgetter("cost")
_FROM, _TO, _SIZE = operator.itemgetter("from"), operator.itemgetter("to"), operator.methodcaller("get", "size")


def _check_format(doc, expected: str, source: str):
    if not isinstance(doc, dict):
        raise FormatError(f'{source}: expected a JSON object with "format": {expected!r}')
    fmt = doc.get("format")
    if fmt != expected:
        raise FormatError(f"{source}: field 'format' is {fmt!r}, expected {expected!r}")


# ---------------------------------------------------------------------- graph
def graph_from_dict(doc: dict, source: str = "graph") -> TaskGraph:
    """A graph from a native graph document (see docs/formats.md).

    Parameters
    ----------
    doc : dict
    source : str
        The file's name, for errors.

    Raises
    ------
    FormatError, GraphError
        A missing or bad field (named).
    """
    _check_format(doc, GRAPH_FORMAT, source)
    tasks = field(doc, "tasks", source, kind=list)
    edges = field(doc, "edges", source, default=[], kind=list)
    n = len(tasks)
    out = [0] * n
    cores = [1] * n
    costs = {}
    meta = {}
    try:  # the columns at C speed; where something is wrong, the loop after names it
        if set(map(type, tasks)) - {dict}:
            raise TypeError
        ids, cost = list(map(_ID_OF, tasks)), list(map(_COST_OF, tasks))
        if set(map(type, ids)) - {str, int}:
            raise TypeError
        fuller = np.flatnonzero(np.fromiter(map(len, tasks), np.int64, n) > 2).tolist()
    except (KeyError, TypeError):
        ids, cost, fuller = [None] * n, [None] * n, range(n)
    for i in fuller:
        t = tasks[i]
        if ids[i] is not None:  # (the columns were read)
            _task_extras(t, ids[i], i, out, cores, costs, meta)
            continue
        if not isinstance(t, dict):
            raise FormatError(f"{source}: tasks[{i}]: expected an object")
        try:
            tid = t["id"]
            cost[i] = t["cost"]
        except KeyError as e:
            raise FormatError(f"{source}: tasks[{i}]: missing field {e.args[0]!r}") from None
        if not isinstance(tid, _ID) or isinstance(tid, bool):
            raise FormatError(f"{source}: tasks[{i}]: field 'id' must be a string or integer")
        ids[i] = tid
        _task_extras(t, tid, i, out, cores, costs, meta)
    m = len(edges)
    try:
        if set(map(type, edges)) - {dict}:
            raise TypeError
        src, dst, size = list(map(_FROM, edges)), list(map(_TO, edges)), list(map(_SIZE, edges))
        edges = ()
    except (KeyError, TypeError):
        src, dst, size = [None] * m, [None] * m, [None] * m
    for k, e in enumerate(edges):
        try:
            src[k] = e["from"]
            dst[k] = e["to"]
        except KeyError as err:
            raise FormatError(f"{source}: edges[{k}]: missing field {err.args[0]!r}") from None
        except TypeError:
            raise FormatError(f"{source}: edges[{k}]: expected an object") from None
        size[k] = e.get("size")
    if None in size:
        # edges without a size carry the producer's output_size
        pos = {t: i for i, t in enumerate(ids)}
        size = [out[pos[s]] if z is None and s in pos else (0 if z is None else z) for s, z in zip(src, size)]
    return TaskGraph.from_columns(
        doc.get("name", "graph"), ids, cost, out, cores, src, dst, size, costs=costs, meta=meta
    )


def _task_extras(t: dict, tid, i: int, out: list, cores: list, costs: dict, meta: dict) -> None:
    """A task's fields past its id and cost, into the columns."""
    if len(t) > 2:
        out[i] = t.get("output_size", 0)
        cores[i] = t.get("cores", 1)
        if "costs" in t:
            costs[tid] = t["costs"]
        if "meta" in t:
            meta[tid] = t["meta"]


def graph_to_dict(graph: TaskGraph) -> dict:
    """The native document of ``graph`` (callables are not written).

    Parameters
    ----------
    graph : TaskGraph
    """
    tasks = []
    a_cost, a_out, a_cores = graph._cost, graph._output_size, graph._cores
    for i, tid in enumerate(graph._ids):
        t = {"id": tid, "cost": a_cost[i]}
        c = graph._costs.get(i)
        if c:
            t["costs"] = dict(c)
        if a_out[i]:
            t["output_size"] = a_out[i]
        if a_cores[i] != 1:
            t["cores"] = a_cores[i]
        md = graph._meta.get(i)
        if md:
            t["meta"] = dict(md)
        tasks.append(t)
    ids = graph._ids
    edges = [{"from": ids[s], "to": ids[d], "size": z} for s, d, z in zip(graph._src, graph._dst, graph._size)]
    return {"format": GRAPH_FORMAT, "name": graph.name, "tasks": tasks, "edges": edges}


# ---------------------------------------------------------------------- cluster
def cluster_from_dict(doc: dict, source: str = "cluster") -> Cluster:
    """A cluster from a native cluster document.

    Parameters
    ----------
    doc : dict
    source : str

    Raises
    ------
    FormatError, ClusterError
        A missing or bad field (named).
    """
    _check_format(doc, CLUSTER_FORMAT, source)
    workers = []
    for i, w in enumerate(field(doc, "workers", source, kind=list)):
        where = f"{source}: workers[{i}]"
        wid = field(w, "id", where, kind=_ID)
        try:
            workers.append(
                Worker(
                    wid,
                    field(w, "speed", where, default=1.0),
                    field(w, "cores", where, default=1),
                    address=w.get("address"),
                )
            )
        except ClusterError as e:
            raise ClusterError(f"{source}: {e}") from None
    by_name = {str(w.id): w.id for w in workers}
    raw = field(doc, "bandwidths", source, default=None) or {}
    if not isinstance(raw, dict):
        raise FormatError(f"{source}: field 'bandwidths' must be an object {{a: {{b: bytes_per_s}}}}")
    bandwidths = {}
    for a, row in raw.items():
        if not isinstance(row, dict):
            raise FormatError(f"{source}: bandwidths[{a!r}] must be an object {{b: bytes_per_s}}")
        bandwidths[by_name.get(a, a)] = {by_name.get(b, b): v for b, v in row.items()}
    try:
        return Cluster(
            workers,
            bandwidth=field(doc, "bandwidth", source, default=1e9),
            bandwidths=bandwidths,
            latency=field(doc, "latency", source, default=0.0),
            name=doc.get("name", "cluster"),
            task_overhead=field(doc, "task_overhead", source, default=0.0),
            backplane=field(doc, "backplane", source, default=None),
            racks=_racks(doc, source, by_name),
            uplink=field(doc, "uplink", source, default=None),
        )
    except ClusterError as e:
        raise ClusterError(f"{source}: {e}") from None


def _racks(doc: dict, source: str, by_name: dict):
    raw = doc.get("racks")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise FormatError(f"{source}: field 'racks' must be an object {{worker: rack}}")
    return {by_name.get(a, a): r for a, r in raw.items()}


def cluster_to_dict(cluster: Cluster) -> dict:
    """The native document of ``cluster``.

    Parameters
    ----------
    cluster : Cluster
    """
    doc = {
        "format": CLUSTER_FORMAT,
        "name": cluster.name,
        "workers": [
            dict({"id": w.id, "speed": w.speed, "cores": w.cores}, **({"address": w.address} if w.address else {}))
            for w in cluster.workers
        ],
        "bandwidth": cluster.bandwidth,
        "latency": cluster.latency,
    }
    if cluster.task_overhead:
        doc["task_overhead"] = cluster.task_overhead
    if cluster.backplane is not None:
        doc["backplane"] = cluster.backplane
    if cluster.racks is not None:
        doc["racks"] = {str(a): r for a, r in cluster.racks.items()}
        doc["uplink"] = cluster.uplink
    if cluster.bandwidths:
        doc["bandwidths"] = {str(a): {str(b): v for b, v in row.items()} for a, row in cluster.bandwidths.items()}
    return doc


# ---------------------------------------------------------------------- schedule
def schedule_from_dict(doc: dict, source: str = "schedule") -> Schedule:
    """A schedule from a native schedule document.

    Parameters
    ----------
    doc : dict
    source : str

    Raises
    ------
    FormatError
        A missing or bad field (named).
    """
    _check_format(doc, SCHEDULE_FORMAT, source)
    tasks, workers, start, finish = _assignment_columns(
        field(doc, "assignments", source, kind=list), f"{source}: assignments"
    )
    copies = list(zip(*_assignment_columns(doc["copies"], f"{source}: copies"))) if "copies" in doc else None
    extra = {k: v for k, v in doc.items() if k not in ("format", "scheduler", "makespan", "assignments", "copies")}
    return Schedule(tasks, workers, start, finish, scheduler=doc.get("scheduler", ""), extra=extra, copies=copies)


def _assignment_columns(rows, where: str) -> tuple:
    """``(tasks, workers, start, finish)`` of a list of assignment objects (a FormatError naming
    the entry and field otherwise)."""
    if not isinstance(rows, list):
        raise FormatError(f"{where} must be a list, got {type(rows).__name__}")
    tasks, workers, start, finish = [], [], [], []
    for i, r in enumerate(rows):
        at = f"{where}[{i}]"
        tasks.append(field(r, "task", at, kind=_ID))
        workers.append(field(r, "worker", at, kind=_ID))
        for col, key in ((start, "start"), (finish, "finish")):
            v = field(r, key, at)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise FormatError(f"{at}: field {key!r} must be a number, got {v!r}"[:200])
            try:
                col.append(float(v))
            except OverflowError:
                raise FormatError(f"{at}: field {key!r} is too large for a number") from None
    return tasks, workers, start, finish


def schedule_to_dict(schedule: Schedule) -> dict:
    """The native document of ``schedule``.

    Parameters
    ----------
    schedule : Schedule
    """
    return schedule.to_dict()
