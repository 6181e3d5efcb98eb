"""One way for generators to add tasks, fast for cost-model graphs and exact for executable ones.

A generator calls ``b.task(id, cost, size, meta, deps=..., fn=..., args=...)`` and gets a handle to
pass on. Without callables the builder only appends to columns (handles are integers) and
:meth:`GraphBuilder.graph` makes the :class:`~taskflow.TaskGraph` in bulk, so a graph of millions
of tasks builds in seconds. With ``executable=True`` every task goes through
:meth:`TaskGraph.add_task`: the task handles in ``args`` are its data dependencies, and ``deps``
adds the ones that pass no argument.
"""

from __future__ import annotations

import contextlib
import gc

import numpy as np

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph
from taskflow.tasks import handles_in


@contextlib.contextmanager
def paused_gc():
    """Pause the cyclic garbage collector while millions of small dicts are made: they hold no
    cycles, and its full passes over a growing heap would otherwise dominate a large build."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class GraphBuilder:
    """Columns of tasks and edges (see the module docstring)."""

    def __init__(self, name: str, executable: bool = False):
        self.name = name
        self.executable = bool(executable)
        self._g = TaskGraph(name) if executable else None
        self.ids: list = []
        self.cost: list = []
        self.size: list = []
        self.meta: list = []
        self.src: list = []
        self.dst: list = []
        self.esize: list = []
        self._chunks: list = []  # edges added by tile(), as arrays, after the listed ones
        self._sizes: dict = {}  # executable: (src, dst) -> the bytes a dep declares for an argument's edge

    def task(self, id, cost, size, meta, deps=(), fn=None, args=(), kwargs=None):
        """Add a task; ``deps`` are handles or ``(handle, bytes)`` pairs (default: the producer's
        output size); ``fn(*args, **kwargs)`` is what it runs (executable). Returns the task's
        handle."""
        if self._g is not None:
            h = self._g.add_task(id, fn=fn, args=args, kwargs=kwargs, cost=cost, output_size=size, meta=meta)
            found: list = []
            handles_in(args, found)
            handles_in(kwargs or {}, found)
            in_args = {a.id for a in found}
            for d in deps:
                d, z = d if isinstance(d, tuple) else (d, None)
                if d.id not in in_args:
                    self._g.add_edge(d, h, size=z)
                elif z is not None:  # the argument's edge carries what the dep says, as without callables
                    self._sizes[d.id, id] = z
            return h
        i = len(self.ids)
        self.ids.append(id)
        self.cost.append(cost)
        self.size.append(size)
        self.meta.append(meta)
        for d in deps:
            if type(d) is tuple:
                d, z = d
                self.src.append(d)
                self.esize.append(self.size[d] if z is None else z)
            else:
                self.src.append(d)
                self.esize.append(self.size[d])
            self.dst.append(i)
        return i

    def edge(self, src, dst, size=None) -> None:
        """An ordering or data edge between two existing tasks."""
        if self._g is not None:
            self._g.add_edge(src, dst, size=size)
            return
        self.src.append(src)
        self.dst.append(dst)
        self.esize.append(self.size[src] if size is None else size)

    def mark(self) -> tuple:
        """The current (task count, edge count): where a block of tasks starts."""
        return len(self.ids), len(self.src) + sum(len(c[0]) for c in self._chunks)

    def tile(self, start: tuple, times: int, rename, remeta, floor: int = 0) -> None:
        """Repeat the block of tasks and edges added since ``start`` (a :meth:`mark`) ``times`` more
        times, each copy shifted by the block's length: copy ``k`` (1-based) has the ids
        ``rename(block_ids, k)`` and the metas ``remeta(block_metas, k)`` (lists in block order), and
        an edge ``u -> v`` of the block becomes ``u + k x len -> v + k x len``. Right only for a
        periodic generator, whose next block would have been exactly that (the tests compare against
        an explicit build). Edges of the block must come from tasks at index ``floor`` or later."""
        if self._g is not None:
            raise WorkflowError("tile() is for cost-model graphs (executable=False)")
        lo, elo = start
        hi, ehi = len(self.ids), len(self.src)
        size = hi - lo
        if times < 1 or size == 0:
            return
        if self._chunks:
            raise WorkflowError("tile() repeats the last block once per graph")
        ids, cost, osize, meta = self.ids[lo:hi], self.cost[lo:hi], self.size[lo:hi], self.meta[lo:hi]
        src = np.asarray(self.src[elo:ehi], dtype=np.int64)
        dst = np.asarray(self.dst[elo:ehi], dtype=np.int64)
        esize = np.asarray(self.esize[elo:ehi], dtype=np.float64)
        if src.size and int(src.min()) < floor:
            raise WorkflowError("tile(): the block depends on tasks before the periodic part; build more explicitly")
        for k in range(1, times + 1):
            self.ids.extend(rename(ids, k))
            self.meta.extend(remeta(meta, k))
        self.cost.extend(cost * times)
        self.size.extend(osize * times)
        shifts = np.arange(1, times + 1, dtype=np.int64)[:, None] * size
        self._chunks.append(((src[None, :] + shifts).ravel(), (dst[None, :] + shifts).ravel(), np.tile(esize, times)))

    def __len__(self) -> int:
        return len(self._g) if self._g is not None else len(self.ids)

    def graph(self) -> TaskGraph:
        if self._g is not None:
            return self._g.with_costs(sizes=self._sizes) if self._sizes else self._g
        src, dst, size = self.src, self.dst, self.esize
        if self._chunks:
            src = np.concatenate([np.asarray(src, dtype=np.int64)] + [c[0] for c in self._chunks])
            dst = np.concatenate([np.asarray(dst, dtype=np.int64)] + [c[1] for c in self._chunks])
            size = np.concatenate([np.asarray(size, dtype=np.float64)] + [c[2] for c in self._chunks])
        return TaskGraph.from_arrays(self.name, self.ids, self.cost, self.size, src, dst, size, meta=self.meta)
