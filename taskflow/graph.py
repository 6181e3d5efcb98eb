"""The task graph: tasks with costs, edges with sizes, and an integer array view for algorithms.

A :class:`TaskGraph` is built by hand (``add_task`` / ``add_edge``), by a workflow generator, or by a
file loader. Tasks carry a cost in seconds on a worker of speed 1.0, optional exact per-worker
durations (the unrelated-machines model of the HEFT paper), the size of their output in bytes and
the number of cores they occupy. Optionally a task has a Python callable and arguments, so the
graph can be executed for real; a :class:`TaskHandle` passed in the arguments of another task is a
dependency whose result is passed in.

Algorithms never walk Python objects: :attr:`TaskGraph.arrays` is a frozen
:class:`GraphArrays` with integer ids, CSR predecessor/successor lists, numpy cost vectors and a
topological order. It is computed once, when first asked for, and doing so validates the graph
(cycles are named).
"""

from __future__ import annotations

import itertools
import math
from types import MappingProxyType
from typing import Hashable, Iterable, Iterator

import numpy as np

from . import checks, graphchecks
from .arrays import GraphArrays
from .errors import GraphError
from .tasks import Task, TaskHandle, handles_in

__all__ = ["TaskGraph", "TaskHandle", "GraphArrays", "Task"]

_INF = math.inf
_SHIFT = 1 << 32


class TaskGraph:
    """A DAG of tasks with costs (seconds at speed 1.0) and edges with sizes (bytes).

    Parameters
    ----------
    name : str
        A label carried into files and reports.

    Examples
    --------
    >>> g = TaskGraph("example")
    >>> a = g.add_task("a", fn=lambda: 1, cost=2.0, output_size=8)
    >>> b = g.add_task("b", fn=lambda x: x + 1, args=(a,), cost=1.0)
    >>> len(g), g.num_edges, g.edge_size("a", "b")
    (2, 1, 8.0)
    """

    def __init__(self, name: str = "graph"):
        self.name = name
        self._ids: list = []
        self._index: dict = {}
        self._cost: list = []
        self._output_size: list = []
        self._cores: list = []
        self._costs: dict = {}  # task index -> {worker id: seconds}
        self._calls: dict = {}  # task index -> (fn, args, kwargs)
        self._meta: dict = {}  # task index -> dict of extra fields
        self._src: list = []
        self._dst: list = []
        self._size: list = []
        self._edges: dict | None = {}  # src * 2**32 + dst -> edge number; None until first needed
        self._arrays: GraphArrays | None = None
        self._columns: dict | None = None  # numpy copies of the columns from a bulk build, until a change
        self._counter = itertools.count()

    # ------------------------------------------------------------------ building
    def add_task(
        self, id: Hashable, fn=None, args=(), kwargs=None, cost=1.0, costs=None, output_size=0, cores=1, meta=None
    ) -> TaskHandle:
        """Add a task and return its handle.

        Parameters
        ----------
        id : str or int
            Unique task id.
        fn : callable, optional
            What the task computes when the graph is executed for real.
        args, kwargs
            Arguments of ``fn``; every :class:`TaskHandle` in them (also inside lists, tuples and
            dicts) becomes a dependency whose result is passed in.
        cost : float
            Seconds on a worker of speed 1.0.
        costs : dict, optional
            Exact seconds per worker id; overrides ``cost / speed`` on the workers it names.
        output_size : float
            Bytes of the task's result; the default size of its outgoing edges.
        cores : int
            Cores the task occupies while it runs.

        Raises
        ------
        GraphError
            Duplicate id, an id that is not a str or int, a negative / NaN / infinite number, fn
            not callable, args without fn, a handle of another graph. A failed call changes
            nothing.
        """
        where = graphchecks.new_task(self._index, id, fn, args, kwargs, meta)
        c = checks.number(cost, "cost", where)
        size = checks.number(output_size, "output_size", where)
        nc = checks.cores(cores, where) if cores != 1 else 1
        exact = checks.exact_costs(costs, where)
        deps: list = []
        if args:
            handles_in(args, deps)
        if kwargs:
            handles_in(kwargs, deps)
        dep_idx = []
        for h in deps:
            if h.graph is not self:
                raise GraphError(f"{where}: argument {h!r} is a task of another graph")
            dep_idx.append(self._index[h.id])
        i = len(self._ids)
        self._index[id] = i
        self._ids.append(id)
        self._cost.append(c)
        self._output_size.append(size)
        self._cores.append(nc)
        if exact:
            self._costs[i] = exact
        if fn is not None:
            self._calls[i] = (fn, tuple(args), dict(kwargs) if kwargs else {})
        if meta:
            self._meta[i] = dict(meta)
        edges = self._edge_map() if dep_idx else None
        for p in dep_idx:
            key = p * _SHIFT + i
            if key not in edges:
                edges[key] = len(self._src)
                self._src.append(p)
                self._dst.append(i)
                self._size.append(self._output_size[p])
        self._arrays = self._columns = None
        return TaskHandle(self, id)

    def add_edge(self, src, dst, size=None) -> None:
        """Add a dependency ``src -> dst`` that passes no argument. An edge that closes a cycle is
        accepted here and found by :meth:`validate` (which every loader, scheduler and run calls):
        checking at each edge would cost a graph search per edge.

        ``size`` (bytes) defaults to the producer's ``output_size``.

        Raises
        ------
        GraphError
            An unknown task, a self-loop, a duplicate edge, a bad size.
        """
        src = src.id if type(src) is TaskHandle else src
        dst = dst.id if type(dst) is TaskHandle else dst
        s, d = graphchecks.edge_ends(self._index, src, dst)
        key = s * _SHIFT + d
        edges = self._edge_map()
        if key in edges:
            raise GraphError(f"duplicate edge {src!r} -> {dst!r}")
        if size is None:
            sz = self._output_size[s]
        else:
            try:
                sz = float(size)
            except (TypeError, ValueError):
                sz = -1.0
            if not (0.0 <= sz < _INF):
                checks.number(size, "size", f"edge {src!r} -> {dst!r}")  # raises with the message
        edges[key] = len(self._src)
        self._src.append(s)
        self._dst.append(d)
        self._size.append(sz)
        self._arrays = self._columns = None

    def delayed(self, fn=None, *, name=None, **task_options):
        """Decorator: calling the function adds a task (auto id ``name-N``) and returns its handle.

        >>> g = TaskGraph()
        >>> @g.delayed(cost=2.0)
        ... def inc(x):
        ...     return x + 1
        >>> h = inc(inc(1))
        >>> h.id, g.num_edges
        ('inc-1', 1)
        """

        def wrap(f):
            label = name or getattr(f, "__name__", "task")

            def call(*args, **kwargs):
                return self.add_task(f"{label}-{next(self._counter)}", fn=f, args=args, kwargs=kwargs, **task_options)

            call.__wrapped__ = f
            call.__name__ = label
            return call

        return wrap(fn) if fn is not None else wrap

    @classmethod
    def from_columns(
        cls, name, ids, cost, output_size=None, cores=None, src=(), dst=(), size=(), costs=None, meta=None
    ) -> "TaskGraph":
        """Build a graph from columns at once (what the file loaders use); checks like add_*.

        Parameters
        ----------
        name : str
        ids : list
            Task ids (str or int).
        cost, output_size, cores : sequence, optional
            Per task (output sizes default to 0, cores to 1).
        src, dst, size : sequence
            Per edge: the task ids it joins, its bytes.
        costs, meta : dict, optional
            Task id -> its exact per-worker costs, its meta dict.

        Raises
        ------
        GraphError
            A bad id, number, edge or dict (named); a self-loop (:class:`CycleError`).
        """
        ids = list(ids)
        index = graphchecks.task_index(ids)
        if len(src) != len(dst) or len(src) != len(size):
            raise GraphError("edge columns src, dst and size differ in length")
        s_idx, d_idx = graphchecks.edge_positions(index, src, dst)
        g = cls.from_arrays(
            name,
            ids,
            cost,
            [0.0] * len(ids) if output_size is None else output_size,
            s_idx,
            d_idx,
            size,
            meta=graphchecks.meta_column(meta, index),
            cores=cores,
            index=index,
        )
        for t, c in (costs or {}).items():
            exact = checks.exact_costs(c, f"task {t!r}")
            if exact:
                g._costs[graphchecks.position(index, t, "costs")] = exact
        return g

    @classmethod
    def from_arrays(
        cls, name, ids, cost, output_size, src, dst, size, meta=None, cores=None, index=None
    ) -> "TaskGraph":
        """Build a graph from columns whose edges name tasks by *index* (what the generators use).

        Checked like ``add_task``/``add_edge`` (numbers, duplicates, self-loops), but in bulk, so
        millions of tasks take seconds.

        Parameters
        ----------
        name : str
        ids : list
        cost, output_size : sequence
            Per task.
        src, dst : sequence of int
            Per edge: positions in ``ids``.
        size : sequence
            Per edge: bytes.
        meta : list, optional
            A dict (or None) per task, in task order.
        cores : sequence, optional
            Per task (default 1).
        index : dict, optional
            ``{id: position}`` of ``ids``, where the caller has checked it already.

        Raises
        ------
        GraphError
            A bad number, a duplicate id or edge, an index out of range (named); a self-loop
            (:class:`CycleError`).
        """
        ids = list(ids)
        n = len(ids)
        index = graphchecks.task_index(ids, typed=False) if index is None else index
        if len(src) != len(size):
            raise GraphError("edge columns src, dst and size differ in length")
        sa, da = graphchecks.edge_index(ids, src, dst)
        g = cls(name)
        g._ids, g._index = ids, index
        g._cost = checks.checked_column(cost, "cost", ids, "task")
        g._output_size = checks.checked_column(output_size, "output_size", ids, "task")
        g._cores = [1] * n if cores is None else checks.cores_column(cores, ids)
        if meta is not None:
            g._meta = dict(enumerate(meta)) if all(meta) else {i: md for i, md in enumerate(meta) if md}
        g._src, g._dst = sa.tolist(), da.tolist()
        g._size = checks.checked_column(size, "size", ((ids[s], ids[d]) for s, d in zip(g._src, g._dst)), "edge")
        g._edges = None
        g._columns = {
            "src": sa,
            "dst": da,
            "size": np.asarray(g._size, dtype=np.float64),
            "cost": np.asarray(g._cost, dtype=np.float64),
            "output_size": np.asarray(g._output_size, dtype=np.float64),
        }
        return g

    def _edge_map(self) -> dict:
        """``src * 2**32 + dst -> edge number``, built on first use (bulk constructors skip it)."""
        if self._edges is None:
            keys = np.asarray(self._src, dtype=np.int64) * _SHIFT + np.asarray(self._dst, dtype=np.int64)
            self._edges = dict(zip(keys.tolist(), range(len(self._src))))
        return self._edges

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, id) -> bool:
        return id in self._index

    def __iter__(self) -> Iterator:
        return iter(self._ids)

    def __repr__(self) -> str:
        return f"<TaskGraph {self.name!r}: {len(self)} tasks, {self.num_edges} edges>"

    @property
    def ids(self) -> list:
        """Task ids in insertion order (a new list)."""
        return list(self._ids)

    @property
    def num_edges(self) -> int:
        """The number of edges."""
        return len(self._src)

    def task(self, id) -> Task:
        """A read-only view of one task.

        Parameters
        ----------
        id : hashable or TaskHandle

        Raises
        ------
        GraphError
            No such task.
        """
        i = self._lookup(id)
        fn, args, kwargs = self._calls.get(i, (None, (), None))
        return Task(
            self._ids[i],
            self._cost[i],
            self._costs.get(i),
            self._output_size[i],
            self._cores[i],
            fn,
            args,
            kwargs,
            self._meta.get(i),
        )

    def tasks(self) -> Iterator[Task]:
        """Every task's read-only view, in insertion order."""
        for t in self._ids:
            yield self.task(t)

    def edges(self) -> Iterator[tuple]:
        """Yield ``(src_id, dst_id, size)`` for every edge, in insertion order."""
        ids = self._ids
        for s, d, z in zip(self._src, self._dst, self._size):
            yield ids[s], ids[d], z

    def has_edge(self, src, dst) -> bool:
        """Whether the edge ``src -> dst`` exists.

        Parameters
        ----------
        src, dst : hashable or TaskHandle

        Raises
        ------
        GraphError
            A task does not exist.
        """
        return self._lookup(src) * _SHIFT + self._lookup(dst) in self._edge_map()

    def edge_size(self, src, dst) -> float:
        """Bytes carried by the edge ``src -> dst``.

        Parameters
        ----------
        src, dst : hashable or TaskHandle

        Raises
        ------
        GraphError
            No such edge or task.
        """
        e = self._edge_map().get(self._lookup(src) * _SHIFT + self._lookup(dst))
        if e is None:
            raise GraphError(f"no edge {src!r} -> {dst!r}")
        return self._size[e]

    def predecessors(self, id) -> list:
        """Ids of the tasks ``id`` depends on.

        Parameters
        ----------
        id : hashable or TaskHandle
        """
        a = self.arrays
        return [a.ids[p] for p in a.preds(self._lookup(id)).tolist()]

    def successors(self, id) -> list:
        """Ids of the tasks that depend on ``id``.

        Parameters
        ----------
        id : hashable or TaskHandle
        """
        a = self.arrays
        return [a.ids[p] for p in a.succs(self._lookup(id)).tolist()]

    @property
    def total_cost(self) -> float:
        """The sum of the tasks' costs (seconds at speed 1.0)."""
        return float(math.fsum(self._cost))

    @property
    def has_exact_costs(self) -> bool:
        """Whether some task has exact per-worker costs."""
        return bool(self._costs)

    @property
    def executable(self) -> bool:
        """True when every task has a callable."""
        return len(self._calls) == len(self._ids) and len(self._ids) > 0

    def metas(self):
        """``{task index: meta dict}`` for the tasks that have one (indices as in :attr:`arrays`);
        a read-only view, for algorithms that read many tasks' meta at once."""
        return MappingProxyType(self._meta)

    def calls(self):
        """``{task index: (fn, args, kwargs)}`` for the tasks that have a callable (indices as in
        :attr:`arrays`); a read-only view."""
        return MappingProxyType(self._calls)

    def call(self, id) -> tuple | None:
        """``(fn, args, kwargs)`` of a task, or None when it has no callable."""
        return self._calls.get(self._lookup(id))

    def _lookup(self, id) -> int:
        if isinstance(id, TaskHandle):
            id = id.id
        try:
            return self._index[id]
        except (KeyError, TypeError):
            raise GraphError(f"unknown task {id!r}") from None

    # ------------------------------------------------------------------ algorithms
    @property
    def arrays(self) -> GraphArrays:
        """The frozen integer view (validates the graph and names a cycle if there is one)."""
        if self._arrays is None:
            self._arrays = self._freeze()
        return self._arrays

    def validate(self) -> "TaskGraph":
        """Check the graph: acyclic (numbers were checked on entry), and its costs and its edges'
        bytes each add up to a finite float (every path length, total and makespan is such a
        sum); returns self.

        Raises
        ------
        GraphError
            A cycle, or totals past the largest float.
        """
        a = self.arrays
        with np.errstate(over="ignore"):
            cost = float(a.cost.sum()) + sum(max(c.values()) for c in a.costs.values())
            size = float(a.size.sum()) + float(a.output_size.sum())
        if not math.isfinite(cost):
            raise GraphError(
                f"graph {self.name!r}: the task costs add up past the largest float "
                f"({np.finfo(float).max:.3g} s); times could not be represented"
            )
        if not math.isfinite(size):
            raise GraphError(f"graph {self.name!r}: the bytes of outputs and edges add up past the largest float")
        return self

    def _freeze(self) -> GraphArrays:
        col = self._columns or {}
        return GraphArrays.build(
            self._ids,
            self._index,
            col.get("cost", self._cost),
            col.get("output_size", self._output_size),
            self._cores,
            col.get("src", self._src),
            col.get("dst", self._dst),
            col.get("size", self._size),
            self._costs,
        )

    def topological_order(self) -> list:
        """Task ids in a topological order (Kahn's algorithm, FIFO by index: deterministic)."""
        a = self.arrays
        return [a.ids[i] for i in a.topo.tolist()]

    def sources(self) -> list:
        """Ids of the tasks without predecessors."""
        a = self.arrays
        return [a.ids[i] for i in np.flatnonzero(np.diff(a.pred_ptr) == 0).tolist()]

    def sinks(self) -> list:
        """Ids of the tasks without successors."""
        a = self.arrays
        return [a.ids[i] for i in np.flatnonzero(np.diff(a.succ_ptr) == 0).tolist()]

    # ------------------------------------------------------------------ derived graphs
    def copy(self, name: str | None = None) -> "TaskGraph":
        """An independent copy (callables and their arguments are shared, not copied).

        Parameters
        ----------
        name : str, optional
            The copy's name (default: this graph's).
        """
        return self._take(range(len(self._ids)), name)

    def subgraph(self, ids: Iterable, name: str | None = None) -> "TaskGraph":
        """The tasks ``ids`` and the edges among them (same costs, callables, meta).

        Parameters
        ----------
        ids : iterable
        name : str, optional
            Default: this graph's.

        Raises
        ------
        GraphError
            An id is not a task of this graph.
        """
        return self._take(sorted({self._lookup(t) for t in ids}), name)

    def _take(self, keep, name: str | None) -> "TaskGraph":
        """A new graph of the tasks at positions ``keep`` (ascending) and the edges among them."""
        keep = list(keep)
        new_of = dict(zip(keep, range(len(keep))))
        g = TaskGraph(self.name if name is None else name)
        g._ids = [self._ids[i] for i in keep]
        g._index = dict(zip(g._ids, range(len(keep))))
        g._cost = [self._cost[i] for i in keep]
        g._output_size = [self._output_size[i] for i in keep]
        g._cores = [self._cores[i] for i in keep]
        g._costs = {new_of[i]: dict(c) for i, c in self._costs.items() if i in new_of}
        g._calls = {new_of[i]: c for i, c in self._calls.items() if i in new_of}
        g._meta = {new_of[i]: dict(md) for i, md in self._meta.items() if i in new_of}
        renum = np.full(len(self._ids), -1, dtype=np.int64)
        renum[np.asarray(keep, dtype=np.int64)] = np.arange(len(keep))
        src = renum[np.asarray(self._src, dtype=np.int64)]
        dst = renum[np.asarray(self._dst, dtype=np.int64)]
        kept = np.flatnonzero((src >= 0) & (dst >= 0))
        g._src, g._dst = src[kept].tolist(), dst[kept].tolist()
        g._size = [self._size[e] for e in kept.tolist()]
        g._edges = None  # built when first needed
        return g

    def restrict_costs(self, workers) -> "TaskGraph":
        """The graph with exact costs kept only for ``workers`` (compared as strings), e.g. the
        survivors of a failure; self when no task has exact costs."""
        if not self._costs:
            return self
        keep = {str(w) for w in workers}
        return self.with_costs(
            costs={self._ids[i]: {w: v for w, v in c.items() if str(w) in keep} for i, c in self._costs.items()}
        )

    def with_costs(self, cost: dict | None = None, costs: dict | None = None, sizes: dict | None = None) -> "TaskGraph":
        """A copy with some costs replaced: ``cost={id: s}``, ``costs={id: {worker: s} or None}``,
        ``sizes={(src, dst): bytes}`` (edges; one not in the graph is an error)."""
        g = self.copy()
        edges = g._edge_map() if sizes else {}
        for (a, b), v in (sizes or {}).items():
            e = edges.get(g._lookup(a) * _SHIFT + g._lookup(b))
            if e is None:
                raise GraphError(f"no edge {a!r} -> {b!r}")
            g._size[e] = checks.number(v, "size", f"edge {a!r} -> {b!r}")
        for t, c in (cost or {}).items():
            g._cost[g._lookup(t)] = checks.number(c, "cost", f"task {t!r}")
        for t, c in (costs or {}).items():
            i = g._lookup(t)
            exact = checks.exact_costs(c, f"task {t!r}")
            if exact:
                g._costs[i] = exact
            else:
                g._costs.pop(i, None)
        g._arrays = g._columns = None
        return g
