"""Checks of a task graph's ids and edges as it is built (:class:`taskflow.graph.TaskGraph`): each bad
id, duplicate, unknown task or self-loop is a GraphError naming it; the numbers are
:mod:`taskflow.checks`'.
"""

from __future__ import annotations

import numpy as np

from .errors import CycleError, GraphError
from .tasks import TaskHandle

__all__ = ["task_index", "edge_index", "new_task", "edge_ends", "position", "edge_positions", "meta_column"]


def task_index(ids: list, typed: bool = True) -> dict:
    """``{task id: position}`` of a column of ids, checked: no id twice and, with ``typed``, each a
    str or int.

    Parameters
    ----------
    ids : list
    typed : bool

    Raises
    ------
    GraphError
        A duplicate id, or (``typed``) one of another type (named).
    """
    if typed and not set(map(type, ids)) <= {str, int}:  # (exact types at C speed first)
        for t in ids:
            if isinstance(t, bool) or not isinstance(t, (str, int)):
                raise GraphError(f"task id must be a str or int, got {t!r}"[:200])
    index = dict(zip(ids, range(len(ids))))
    if len(index) != len(ids):
        seen = set()
        for t in ids:
            if t in seen:
                raise GraphError(f"duplicate task id {t!r}")
            seen.add(t)
    return index


def edge_index(ids: list, src, dst) -> tuple:
    """Edge columns of task positions as int64 arrays, checked: equal lengths, in range, no
    self-loop, no edge twice.

    Parameters
    ----------
    ids : list
        The task ids (to name a bad edge).
    src, dst : sequence of int

    Raises
    ------
    GraphError
        A position out of range or an edge given twice (named).
    CycleError
        A self-loop.
    """
    n = len(ids)
    sa = np.asarray(src, dtype=np.int64).reshape(-1)
    da = np.asarray(dst, dtype=np.int64).reshape(-1)
    if len(sa) != len(da):
        raise GraphError("edge columns src, dst and size differ in length")
    bad = np.flatnonzero((sa < 0) | (sa >= n) | (da < 0) | (da >= n))
    if bad.size:
        e = int(bad[0])
        raise GraphError(f"edge {e}: task index {int(sa[e])} -> {int(da[e])} out of range 0..{n - 1}")
    loops = np.flatnonzero(sa == da)
    if loops.size:
        t = ids[int(sa[loops[0]])]
        raise CycleError([t, t])
    keys = sa * (1 << 32) + da
    srt = np.sort(keys)
    dup = np.flatnonzero(srt[1:] == srt[:-1])
    if dup.size:
        k = int(srt[dup[0]])
        raise GraphError(f"duplicate edge {ids[k >> 32]!r} -> {ids[k & 0xFFFFFFFF]!r}")
    return sa, da


def new_task(index: dict, id, fn, args, kwargs, meta) -> str:
    """Check a task about to join a graph whose ids are ``index``'s; return how errors name it.

    Parameters
    ----------
    index : dict
    id, fn, args, kwargs, meta
        As :meth:`taskflow.graph.TaskGraph.add_task` takes them.

    Raises
    ------
    GraphError
        An id that is not a str or int (a handle named as such), a duplicate id, fn not callable,
        args without fn, a meta that is not a mapping.
    """
    if isinstance(id, TaskHandle):
        raise GraphError(f"task id must be a str or int, got a TaskHandle ({id.id!r})")
    if isinstance(id, bool) or not isinstance(id, (str, int)):
        raise GraphError(f"task id must be a str or int (what every file format can hold), got {id!r}"[:200])
    if id in index:
        raise GraphError(f"duplicate task id {id!r}")
    where = f"task {id!r}"
    if fn is not None and not callable(fn):
        raise GraphError(f"{where}: fn must be callable, got {fn!r}"[:200])
    if fn is None and (args or kwargs):
        raise GraphError(f"{where}: args given without fn")
    if meta is not None and not isinstance(meta, dict):
        raise GraphError(f"{where}: meta must be a mapping, got {type(meta).__name__}")
    return where


def edge_ends(index: dict, src, dst) -> tuple:
    """The places in ``index`` of an edge's two tasks, ``(src, dst)``.

    Parameters
    ----------
    index : dict
    src, dst
        Task ids.

    Raises
    ------
    GraphError
        An id that is not one (a list, a dict), an unknown task; a self-loop (:class:`CycleError`).
    """
    try:
        s, d = index.get(src), index.get(dst)
    except TypeError:  # a list or a dict is no id
        raise GraphError(f"edge {src!r} -> {dst!r}: task ids must be str or int"[:200]) from None
    if s is None or d is None:
        missing = src if s is None else dst
        raise GraphError(f"edge {src!r} -> {dst!r}: unknown task {missing!r}")
    if s == d:
        raise CycleError([src, src])
    return s, d


def position(index: dict, task, field: str) -> int:
    """``task``'s place in ``index`` ({id: position}).

    Parameters
    ----------
    index : dict
    task
    field : str
        Named in the error.

    Raises
    ------
    GraphError
        An unknown task.
    """
    try:
        return index[task]
    except (KeyError, TypeError):
        raise GraphError(f"{field}: unknown task {task!r}"[:200]) from None


def edge_positions(index: dict, src, dst) -> tuple:
    """The places in ``index`` ({id: position}) of the edges' ends named by id, ``(src, dst)``.

    Parameters
    ----------
    index : dict
    src, dst : sequence
        Per edge, its tasks' ids.

    Raises
    ------
    GraphError
        An id that is not a str or int, or an unknown task (the edge named).
    """
    try:
        return list(map(index.__getitem__, src)), list(map(index.__getitem__, dst))
    except (KeyError, TypeError):
        for s, d in zip(src, dst):
            for x in (s, d):
                if isinstance(x, bool) or not isinstance(x, (str, int)):
                    raise GraphError(f"edge {s!r} -> {d!r}: task ids must be str or int"[:200]) from None
            if s not in index or d not in index:
                raise GraphError(f"edge {s!r} -> {d!r}: unknown task {s if s not in index else d!r}") from None
        raise


def meta_column(meta: dict | None, index: dict) -> list | None:
    """A meta dict (or None) per task in ``index``'s order, from ``{id: meta}``; None for none.

    Parameters
    ----------
    meta : dict, optional
    index : dict

    Raises
    ------
    GraphError
        A meta that is not an object, an unknown task.
    """
    if not meta:
        return None
    metas = [None] * len(index)
    for t, md in meta.items():
        if md is not None and not isinstance(md, dict):
            raise GraphError(f"task {t!r}: meta must be an object, got {type(md).__name__}")
        metas[position(index, t, "meta")] = dict(md) if md else None
    return metas
