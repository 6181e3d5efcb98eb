"""WfCommons WfFormat (JSON): read 1.4 and 1.5, write 1.5.

* cost = ``runtimeInSeconds`` (1.5: in ``workflow.execution.tasks``; 1.4: on the task, or the older
  ``runtime``); cores = ``coreCount`` (1.5) or ``cores`` (1.4), default 1.
* one edge per (parent, child) pair named by ``parents`` or ``children``; its size is the bytes of
  the files the parent writes and the child reads. A task's ``output_size`` is the bytes it writes.
* ``meta.category`` keeps the program name (``command.program`` or the 1.4 ``category``).

Reference: https://github.com/wfcommons/wfformat
"""

from __future__ import annotations

import datetime

from ..analysis import critical_path
from ..errors import FormatError
from ..graph import TaskGraph
from ._util import field, graph_from_files, ident, items

__all__ = ["graph_from_wfformat", "graph_to_wfformat", "is_wfformat"]


def is_wfformat(doc) -> bool:
    """Whether ``doc`` is a WfCommons WfFormat document.

    Parameters
    ----------
    doc : object
    """
    return isinstance(doc, dict) and "workflow" in doc and "schemaVersion" in doc


def graph_from_wfformat(doc: dict, source: str = "wfformat") -> TaskGraph:
    """A graph from a WfFormat 1.4 or 1.5 document: a task per task (cost: its measured runtime), an
    edge per parent link carrying the files the parent writes and the child reads.

    Parameters
    ----------
    doc : dict
    source : str

    Raises
    ------
    FormatError
        A missing or bad field (named) or a link to an unknown task.
    """
    version = str(doc.get("schemaVersion"))
    wf = field(doc, "workflow", source, kind=dict)
    if "specification" in wf:
        return _read_15(doc, wf, source)
    if "tasks" in wf:
        return _read_14(doc, wf, source)
    raise FormatError(f"{source}: WfFormat {version}: workflow has neither 'specification' nor 'tasks'")


def _read_15(doc, wf, source) -> TaskGraph:
    spec = field(wf, "specification", source, kind=dict)
    tasks = field(spec, "tasks", f"{source}: specification", kind=list)
    sizes = {}
    for k, f in enumerate(field(spec, "files", f"{source}: specification", default=[], kind=list)):
        where = f"{source}: specification.files[{k}]"
        sizes[ident(field(f, "id", where), where)] = field(f, "sizeInBytes", where, default=0)
    execution = {}
    ex_doc = field(wf, "execution", source, default={}, kind=dict)
    for k, t in enumerate(items(ex_doc, "tasks", f"{source}: execution")):
        where = f"{source}: execution.tasks[{k}]"
        execution[ident(field(t, "id", where), where)] = t
    ids, cost, cores, outputs, inputs, category, links = [], [], [], [], [], [], []
    for k, t in enumerate(tasks):
        where = f"{source}: specification.tasks[{k}]"
        tid = field(t, "id", where, kind=str)
        ex = execution.get(tid)
        if ex is None:
            raise FormatError(f"{source}: task {tid!r} has no execution record with runtimeInSeconds")
        ids.append(tid)
        if not isinstance(ex, dict):
            raise FormatError(f"{source}: execution record of task {tid!r} must be an object")
        cost.append(field(ex, "runtimeInSeconds", f"{source}: execution task {tid!r}"))
        cores.append(ex.get("coreCount", 1) or 1)
        program = (ex.get("command") or {}).get("program") if isinstance(ex.get("command"), dict) else None
        category.append(program)
        try:
            outputs.append({ident(f, where, "a file id"): sizes[f] for f in items(t, "outputFiles", where)})
            inputs.append({ident(f, where, "a file id"): sizes[f] for f in items(t, "inputFiles", where)})
        except KeyError as e:
            raise FormatError(
                f"{source}: task {tid!r} names file {e.args[0]!r} missing from specification.files"
            ) from None
        links.extend((ident(p, where, "a parent"), tid) for p in items(t, "parents", where))
        links.extend((tid, ident(c, where, "a child")) for c in items(t, "children", where))
    return graph_from_files(doc.get("name", "workflow"), ids, cost, cores, outputs, inputs, links, category, source)


def _read_14(doc, wf, source) -> TaskGraph:
    tasks = field(wf, "tasks", f"{source}: workflow", kind=list)
    ids, cost, cores, outputs, inputs, category, links = [], [], [], [], [], [], []
    by_name = {}
    for k, t in enumerate(tasks):
        where = f"{source}: workflow.tasks[{k}]"
        name = field(t, "name", where, kind=str)
        tid = ident(t.get("id") or name, where)
        by_name[name] = tid
        ids.append(tid)
        rt = t.get("runtimeInSeconds", t.get("runtime"))
        if rt is None:
            raise FormatError(f"{where}: missing field 'runtimeInSeconds'")
        cost.append(rt)
        cores.append(t.get("cores", 1) or 1)
        category.append(t.get("category"))
        o, i = {}, {}
        for j, f in enumerate(items(t, "files", where)):
            fw = f"{where}.files[{j}]"
            fname = ident(field(f, "name", fw), fw, "name")
            size = f.get("sizeInBytes", f.get("size", 0))
            link = field(f, "link", fw)
            (o if link == "output" else i)[fname] = size
        outputs.append(o)
        inputs.append(i)
        links.extend((ident(p, where, "a parent"), tid) for p in items(t, "parents", where))
        links.extend((tid, ident(c, where, "a child")) for c in items(t, "children", where))
    # 1.4 parents may name tasks by name or by id
    links = [(by_name.get(p, p), by_name.get(c, c)) for p, c in links]
    return graph_from_files(doc.get("name", "workflow"), ids, cost, cores, outputs, inputs, links, category, source)


def graph_to_wfformat(graph: TaskGraph) -> dict:
    """WfFormat 1.5. Outputs read by every child whole become one shared file; otherwise each edge
    gets its own file, so edge sizes survive the round trip. Task ids must be strings.

    Parameters
    ----------
    graph : TaskGraph

    Raises
    ------
    FormatError
        Two task ids that are written alike (``1`` and ``"1"``).
    """
    a = graph.arrays
    ids = [str(t) for t in a.ids]
    if len(set(ids)) != len(ids):
        seen: dict = {}
        for t in a.ids:
            if str(t) in seen:
                raise FormatError(
                    f"tasks {seen[str(t)]!r} and {t!r} would both be written as id {str(t)!r} "
                    f"(WfFormat ids are strings)"
                )
            seen[str(t)] = t
    files: dict = {}
    outs = [[] for _ in ids]
    ins = [[] for _ in ids]
    size = a.size.tolist()
    out_size = a.output_size.tolist()
    for i in range(a.n):
        lo, hi = int(a.succ_ptr[i]), int(a.succ_ptr[i + 1])
        eids = a.succ_eid[lo:hi].tolist()
        shared = all(size[e] == out_size[i] for e in eids)
        if shared and (out_size[i] > 0 or eids):
            fid = f"{ids[i]}.out"
            files[fid] = out_size[i]
            outs[i].append(fid)
            for e in eids:
                ins[int(a.dst[e])].append(fid)
        else:
            for e in eids:
                d = int(a.dst[e])
                fid = f"{ids[i]}.to.{ids[d]}"
                files[fid] = size[e]
                outs[i].append(fid)
                ins[d].append(fid)
    spec_tasks = []
    exec_tasks = []
    for i, tid in enumerate(ids):
        md = graph._meta.get(i) or {}
        spec_tasks.append(
            {
                "name": tid,
                "id": tid,
                "parents": [ids[p] for p in a.preds(i).tolist()],
                "children": [ids[c] for c in a.succs(i).tolist()],
                "inputFiles": ins[i],
                "outputFiles": outs[i],
            }
        )
        ex = {"id": tid, "runtimeInSeconds": float(a.cost[i]), "coreCount": int(a.cores[i])}
        if md.get("category"):
            ex["command"] = {"program": str(md["category"])}
        exec_tasks.append(ex)
    cp, _ = critical_path(graph)
    return {
        "name": graph.name,
        "description": "Written by dask-taskflow; makespanInSeconds is the critical path (no execution).",
        "createdAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "schemaVersion": "1.5",
        "workflow": {
            "specification": {
                "tasks": spec_tasks,
                "files": [{"id": f, "sizeInBytes": int(round(s))} for f, s in files.items()],
            },
            "execution": {
                "makespanInSeconds": cp,
                "executedAt": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "tasks": exec_tasks,
            },
        },
    }
