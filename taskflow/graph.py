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
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Iterator

import numpy as np

from . import checks
from .arrays import GraphArrays, csr, topological_order
from .errors import CycleError, GraphError

__all__ = ["TaskGraph", "TaskHandle", "GraphArrays", "Task", "task_kind"]

_INF = math.inf
_SHIFT = 1 << 32


class TaskHandle:
    """A reference to a task of a graph; pass it in another task's ``args`` to depend on it."""

    __slots__ = ("graph", "id")

    def __init__(self, graph: "TaskGraph", id: Hashable):
        self.graph = graph
        self.id = id

    def __repr__(self) -> str:
        return f"TaskHandle({self.id!r})"

    def __eq__(self, other):
        return isinstance(other, TaskHandle) and other.graph is self.graph and other.id == self.id

    def __hash__(self):
        return hash((id(self.graph), self.id))


@dataclass(frozen=True)
class Task:
    """A read-only view of one task."""

    id: Hashable
    cost: float
    costs: dict | None
    output_size: float
    cores: int
    fn: Any = None
    args: tuple = ()
    kwargs: dict | None = None
    meta: dict | None = None


def _handles_in(obj, out: list) -> None:
    """Collect the TaskHandles found in ``obj`` (nested lists, tuples, sets and dict values)."""
    if isinstance(obj, TaskHandle):
        out.append(obj)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for x in obj:
            _handles_in(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _handles_in(x, out)


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
    def add_task(self, id: Hashable, fn=None, args=(), kwargs=None, cost=1.0, costs=None,
                 output_size=0, cores=1, meta=None) -> TaskHandle:
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
        if isinstance(id, TaskHandle):
            raise GraphError(f"task id must be a str or int, got a TaskHandle ({id.id!r})")
        if isinstance(id, bool) or not isinstance(id, (str, int)):
            raise GraphError(f"task id must be a str or int (what every file format can hold), got {id!r}"[:200])
        if id in self._index:
            raise GraphError(f"duplicate task id {id!r}")
        where = f"task {id!r}"
        if fn is not None and not callable(fn):
            raise GraphError(f"{where}: fn must be callable, got {fn!r}"[:200])
        if fn is None and (args or kwargs):
            raise GraphError(f"{where}: args given without fn")
        if meta is not None and not isinstance(meta, dict):
            raise GraphError(f"{where}: meta must be a mapping, got {type(meta).__name__}")
        c = checks.number(cost, "cost", where)
        size = checks.number(output_size, "output_size", where)
        nc = checks.cores(cores, where) if cores != 1 else 1
        exact = checks.exact_costs(costs, where)
        deps: list = []
        if args:
            _handles_in(args, deps)
        if kwargs:
            _handles_in(kwargs, deps)
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
        if type(src) is TaskHandle:
            src = src.id
        if type(dst) is TaskHandle:
            dst = dst.id
        index = self._index
        s = index.get(src)
        d = index.get(dst)
        if s is None or d is None:
            missing = src if s is None else dst
            raise GraphError(f"edge {src!r} -> {dst!r}: unknown task {missing!r}")
        if s == d:
            raise CycleError([src, src])
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
                return self.add_task(f"{label}-{next(self._counter)}", fn=f, args=args,
                                     kwargs=kwargs, **task_options)
            call.__wrapped__ = f
            call.__name__ = label
            return call
        return wrap(fn) if fn is not None else wrap

    @classmethod
    def from_columns(cls, name, ids, cost, output_size=None, cores=None, src=(), dst=(), size=(),
                     costs=None, meta=None) -> "TaskGraph":
        """Build a graph from columns at once (what the file loaders use); checks like add_*.

        ``src``/``dst`` hold task ids; ``costs`` and ``meta`` map a task id to its dict.
        """
        g = cls(name)
        n = len(ids)
        index = {}
        for i, t in enumerate(ids):
            if isinstance(t, bool) or not isinstance(t, (str, int)):
                raise GraphError(f"task id must be a str or int, got {t!r}"[:200])
            if t in index:
                raise GraphError(f"duplicate task id {t!r}")
            index[t] = i
        g._ids = list(ids)
        g._index = index
        g._cost = checks.checked_column(cost, "cost", g._ids, "task")
        g._output_size = [0.0] * n if output_size is None else checks.checked_column(output_size, "output_size", g._ids, "task")
        if cores is None:
            g._cores = [1] * n
        else:
            g._cores = [checks.cores(c, f"task {t!r}") for t, c in zip(g._ids, cores)]
        for t, c in (costs or {}).items():
            exact = checks.exact_costs(c, f"task {t!r}")
            if exact:
                g._costs[index[t]] = exact
        for t, md in (meta or {}).items():
            if md is not None and not isinstance(md, dict):
                raise GraphError(f"task {t!r}: meta must be an object, got {type(md).__name__}")
            if md:
                g._meta[index[t]] = dict(md)
        if len(src) != len(dst) or len(src) != len(size):
            raise GraphError("edge columns src, dst and size differ in length")
        try:
            s_idx = [index[s] for s in src]
            d_idx = [index[d] for d in dst]
        except (KeyError, TypeError):
            for s, d in zip(src, dst):
                for x in (s, d):
                    if isinstance(x, bool) or not isinstance(x, (str, int)):
                        raise GraphError(f"edge {s!r} -> {d!r}: task ids must be str or int"[:200]) from None
                if s not in index or d not in index:
                    raise GraphError(f"edge {s!r} -> {d!r}: unknown task {s if s not in index else d!r}") from None
            raise
        g._size = checks.checked_column(size, "size", zip(src, dst), "edge")
        sa = np.asarray(s_idx, dtype=np.int64)
        da = np.asarray(d_idx, dtype=np.int64)
        loops = np.flatnonzero(sa == da)
        if loops.size:
            t = g._ids[int(sa[loops[0]])]
            raise CycleError([t, t])
        keys = sa * _SHIFT + da
        if len(np.unique(keys)) != len(keys):
            seen = set()
            for s, d, k in zip(src, dst, keys.tolist()):
                if k in seen:
                    raise GraphError(f"duplicate edge {s!r} -> {d!r}")
                seen.add(k)
        g._src, g._dst = s_idx, d_idx
        g._edges = None  # built when first needed
        return g

    @classmethod
    def from_arrays(cls, name, ids, cost, output_size, src, dst, size, meta=None, cores=None) -> "TaskGraph":
        """Build a graph from columns whose edges name tasks by *index* (what the generators use).

        ``src``/``dst`` are integer positions in ``ids``; ``meta`` is a list of dicts (or None) in
        task order. Checked like ``add_task``/``add_edge`` (numbers, duplicates, self-loops), but in
        bulk, so millions of tasks take seconds.
        """
        ids = list(ids)
        n = len(ids)
        index = dict(zip(ids, range(n)))
        if len(index) != n:
            seen = set()
            for t in ids:
                if t in seen:
                    raise GraphError(f"duplicate task id {t!r}")
                seen.add(t)
        sa = np.asarray(src, dtype=np.int64).reshape(-1)
        da = np.asarray(dst, dtype=np.int64).reshape(-1)
        if not (len(sa) == len(da) == len(size)):
            raise GraphError("edge columns src, dst and size differ in length")
        bad = np.flatnonzero((sa < 0) | (sa >= n) | (da < 0) | (da >= n))
        if bad.size:
            e = int(bad[0])
            raise GraphError(f"edge {e}: task index {int(sa[e])} -> {int(da[e])} out of range 0..{n - 1}")
        g = cls(name)
        g._ids, g._index = ids, index
        g._cost = checks.checked_column(cost, "cost", ids, "task")
        g._output_size = checks.checked_column(output_size, "output_size", ids, "task")
        g._cores = [1] * n if cores is None else [checks.cores(c, f"task {t!r}") for t, c in zip(ids, cores)]
        if meta is not None:
            g._meta = dict(enumerate(meta)) if all(meta) else {i: md for i, md in enumerate(meta) if md}
        loops = np.flatnonzero(sa == da)
        if loops.size:
            t = ids[int(sa[loops[0]])]
            raise CycleError([t, t])
        keys = sa * _SHIFT + da
        srt = np.sort(keys)
        dup = np.flatnonzero(srt[1:] == srt[:-1])
        if dup.size:
            k = int(srt[dup[0]])
            raise GraphError(f"duplicate edge {ids[k // _SHIFT]!r} -> {ids[k % _SHIFT]!r}")
        g._src, g._dst = sa.tolist(), da.tolist()
        g._size = checks.checked_column(size, "size", ((ids[s], ids[d]) for s, d in zip(g._src, g._dst)), "edge")
        g._edges = None
        g._columns = {"src": sa, "dst": da, "size": np.asarray(size, dtype=np.float64).reshape(-1),
                      "cost": np.asarray(cost, dtype=np.float64).reshape(-1),
                      "output_size": np.asarray(output_size, dtype=np.float64).reshape(-1)}
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
        return Task(self._ids[i], self._cost[i], self._costs.get(i), self._output_size[i],
                    self._cores[i], fn, args, kwargs, self._meta.get(i))

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
            raise GraphError(f"graph {self.name!r}: the task costs add up past the largest float "
                             f"({np.finfo(float).max:.3g} s); times could not be represented")
        if not math.isfinite(size):
            raise GraphError(f"graph {self.name!r}: the bytes of outputs and edges add up past the largest float")
        return self

    def _freeze(self) -> GraphArrays:
        n, m = len(self._ids), len(self._src)
        col = self._columns or {}
        src = col.get("src", self._src)
        src = np.array(src, dtype=np.int64).reshape(m)
        dst = np.array(col.get("dst", self._dst), dtype=np.int64).reshape(m)
        pred_ptr, pred_idx, pred_eid = csr(dst, src, n)
        succ_ptr, succ_idx, succ_eid = csr(src, dst, n)
        topo = topological_order(n, src, dst, succ_ptr, succ_idx, self._ids)
        arrays = GraphArrays(
            n=n, m=m, ids=list(self._ids), index=dict(self._index),
            cost=np.array(col.get("cost", self._cost), dtype=np.float64).reshape(n),
            output_size=np.array(col.get("output_size", self._output_size), dtype=np.float64).reshape(n),
            cores=np.asarray(self._cores, dtype=np.int64).reshape(n),
            src=src, dst=dst, size=np.array(col.get("size", self._size), dtype=np.float64).reshape(m),
            pred_ptr=pred_ptr, pred_idx=pred_idx, pred_eid=pred_eid,
            succ_ptr=succ_ptr, succ_idx=succ_idx, succ_eid=succ_eid,
            topo=topo, costs=dict(self._costs))
        for arr in (arrays.cost, arrays.output_size, arrays.cores, src, dst, arrays.size,
                    pred_ptr, pred_idx, pred_eid, succ_ptr, succ_idx, succ_eid, topo):
            arr.flags.writeable = False
        return arrays

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
        g = TaskGraph(self.name if name is None else name)
        g._ids = list(self._ids)
        g._index = dict(self._index)
        g._cost = list(self._cost)
        g._output_size = list(self._output_size)
        g._cores = list(self._cores)
        g._costs = {i: dict(c) for i, c in self._costs.items()}
        g._calls = dict(self._calls)
        g._meta = {i: dict(md) for i, md in self._meta.items()}
        g._src, g._dst, g._size = list(self._src), list(self._dst), list(self._size)
        g._edges = None if self._edges is None else dict(self._edges)
        return g

    def subgraph(self, ids: Iterable, name: str | None = None) -> "TaskGraph":
        """The tasks ``ids`` and the edges among them (same costs, callables, meta)."""
        keep = sorted({self._lookup(t) for t in ids})
        new_of = {old: new for new, old in enumerate(keep)}
        g = TaskGraph(self.name if name is None else name)
        g._ids = [self._ids[i] for i in keep]
        g._index = {t: i for i, t in enumerate(g._ids)}
        g._cost = [self._cost[i] for i in keep]
        g._output_size = [self._output_size[i] for i in keep]
        g._cores = [self._cores[i] for i in keep]
        g._costs = {new_of[i]: dict(c) for i, c in self._costs.items() if i in new_of}
        g._calls = {new_of[i]: c for i, c in self._calls.items() if i in new_of}
        g._meta = {new_of[i]: dict(md) for i, md in self._meta.items() if i in new_of}
        for s, d, z in zip(self._src, self._dst, self._size):
            if s in new_of and d in new_of:
                g._edges[new_of[s] * _SHIFT + new_of[d]] = len(g._src)  # g._edges starts as {}
                g._src.append(new_of[s])
                g._dst.append(new_of[d])
                g._size.append(z)
        return g

    def restrict_costs(self, workers) -> "TaskGraph":
        """The graph with exact costs kept only for ``workers`` (compared as strings), e.g. the
        survivors of a failure; self when no task has exact costs."""
        if not self._costs:
            return self
        keep = {str(w) for w in workers}
        return self.with_costs(costs={self._ids[i]: {w: v for w, v in c.items() if str(w) in keep}
                                      for i, c in self._costs.items()})

    def with_costs(self, cost: dict | None = None, costs: dict | None = None) -> "TaskGraph":
        """A copy with some costs replaced: ``cost={id: s}``, ``costs={id: {worker: s} or None}``."""
        g = self.copy()
        for t, c in (cost or {}).items():
            g._cost[g._lookup(t)] = checks.number(c, "cost", f"task {t!r}")
        for t, c in (costs or {}).items():
            i = g._lookup(t)
            exact = checks.exact_costs(c, f"task {t!r}")
            if exact:
                g._costs[i] = exact
            else:
                g._costs.pop(i, None)
        return g


def task_kind(graph: TaskGraph, t) -> str:
    """A task's kind: its category, else its id up to the first digit, ``-``, ``_`` or ``#``
    (``mProject`` for ``mProject_ID0000001``; the whole id when that leaves nothing). Costs are
    learned per kind, and a run's Dask keys lead with it (Dask's task prefix).

    Parameters
    ----------
    graph : TaskGraph
    t : hashable
        A task id of ``graph``.
    """
    md = graph.metas().get(graph.arrays.index[t]) or {}
    if md.get("category"):
        return str(md["category"])
    s = str(t)
    for k, ch in enumerate(s):
        if ch in "-_#" or ch.isdigit():
            return s[:k] or s
    return s
