"""The integer-indexed view of a task graph that algorithms use: CSR adjacency, numpy columns and a
topological order (Kahn's algorithm, compiled), with the cycle named when there is one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import CycleError
from .jit import kernel

__all__ = ["GraphArrays", "csr", "topological_order"]


@dataclass(frozen=True, eq=False)
class GraphArrays:
    """Integer-indexed view of a :class:`TaskGraph` for algorithms.

    Task ``i`` is ``ids[i]``; edge ``e`` goes ``src[e] -> dst[e]`` carrying ``size[e]`` bytes.
    ``pred_idx[pred_ptr[i]:pred_ptr[i+1]]`` are the predecessors of ``i`` and ``pred_eid`` the
    matching edge numbers (likewise ``succ_*``). ``topo`` is a topological order; ``costs`` maps a
    task index to its exact per-worker durations, for the tasks that have them.
    """

    n: int
    m: int
    ids: list
    index: dict
    cost: np.ndarray
    output_size: np.ndarray
    cores: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    pred_eid: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    succ_eid: np.ndarray
    topo: np.ndarray
    costs: dict

    @classmethod
    def build(cls, ids, index, cost, output_size, cores, src, dst, size, costs) -> "GraphArrays":
        """The frozen view of a graph's columns (copied; every array read-only).

        Parameters
        ----------
        ids : list
            Task ids; ``index`` maps each to its position.
        index : dict
        cost, output_size, cores : sequence
            Per task.
        src, dst, size : sequence
            Per edge (task positions, bytes).
        costs : dict
            Task position -> exact per-worker durations.

        Raises
        ------
        CycleError
            The edges close a cycle (named).
        """
        n, m = len(ids), len(src)
        src = np.array(src, dtype=np.int64).reshape(m)
        dst = np.array(dst, dtype=np.int64).reshape(m)
        pred_ptr, pred_idx, pred_eid = csr(dst, src, n)
        succ_ptr, succ_idx, succ_eid = csr(src, dst, n)
        topo = topological_order(n, src, dst, succ_ptr, succ_idx, ids)
        arrays = cls(
            n=n,
            m=m,
            ids=list(ids),
            index=dict(index),
            cost=np.array(cost, dtype=np.float64).reshape(n),
            output_size=np.array(output_size, dtype=np.float64).reshape(n),
            cores=np.asarray(cores, dtype=np.int64).reshape(n),
            src=src,
            dst=dst,
            size=np.array(size, dtype=np.float64).reshape(m),
            pred_ptr=pred_ptr,
            pred_idx=pred_idx,
            pred_eid=pred_eid,
            succ_ptr=succ_ptr,
            succ_idx=succ_idx,
            succ_eid=succ_eid,
            topo=topo,
            costs=dict(costs),
        )
        for arr in (
            arrays.cost,
            arrays.output_size,
            arrays.cores,
            src,
            dst,
            arrays.size,
            pred_ptr,
            pred_idx,
            pred_eid,
            succ_ptr,
            succ_idx,
            succ_eid,
            topo,
        ):
            arr.flags.writeable = False
        return arrays

    def preds(self, i: int) -> np.ndarray:
        """Indices of task ``i``'s predecessors."""
        return self.pred_idx[self.pred_ptr[i] : self.pred_ptr[i + 1]]

    def succs(self, i: int) -> np.ndarray:
        """Indices of task ``i``'s successors."""
        return self.succ_idx[self.succ_ptr[i] : self.succ_ptr[i + 1]]


def csr(keys: np.ndarray, vals: np.ndarray, n: int):
    """Compressed rows: ``(ptr, vals sorted by key, the edge numbers in that order)``.

    Parameters
    ----------
    keys, vals : numpy.ndarray
        Per edge: the row (e.g. its destination) and the value (e.g. its source).
    n : int
        Rows.
    """
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, vals[order].astype(np.int64), order.astype(np.int64)


#: Graphs of fewer tasks are ordered on Python lists (faster than numpy's scalars); larger ones by
#: the kernel (:mod:`taskflow.jit`: compiled where it repays loading numba).
SMALL_GRAPH = 2000


@kernel(cache=True)
def _kahn(n, succ_ptr, succ_idx, indeg):
    order = np.empty(n, dtype=np.int64)
    k = 0
    for i in range(n):
        if indeg[i] == 0:
            order[k] = i
            k += 1
    head = 0
    while head < k:  # FIFO: the queue is order[head:k]
        v = order[head]
        head += 1
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            u = succ_idx[e]
            indeg[u] -= 1
            if indeg[u] == 0:
                order[k] = u
                k += 1
    return order, k


def _kahn_py(n, succ_ptr, succ_idx, indeg_arr):
    """``_kahn`` on Python lists (fast for small graphs); updates ``indeg_arr`` like the kernel."""
    indeg = indeg_arr.tolist()
    order = [i for i in range(n) if indeg[i] == 0]
    head = 0
    while head < len(order):
        v = order[head]
        head += 1
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            u = succ_idx[e]
            indeg[u] -= 1
            if indeg[u] == 0:
                order.append(u)
    indeg_arr[:] = indeg
    k = len(order)
    out = np.empty(n, dtype=np.int64)
    out[:k] = order
    return out, k


def topological_order(n: int, src: np.ndarray, dst: np.ndarray, succ_ptr, succ_idx, ids) -> np.ndarray:
    """Kahn's algorithm, FIFO by index (deterministic).

    Parameters
    ----------
    n : int
    src, dst : numpy.ndarray
        The edges.
    succ_ptr, succ_idx : numpy.ndarray
        Successor lists (CSR).
    ids : list
        Task ids, to name a cycle.

    Returns
    -------
    numpy.ndarray
        Task indices in topological order.

    Raises
    ------
    CycleError
        The graph has a cycle; the error names one.
    """
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    if n < SMALL_GRAPH:
        order, k = _kahn_py(n, succ_ptr.tolist(), succ_idx.tolist(), indeg)
    else:
        order, k = _kahn(n, succ_ptr, succ_idx, indeg)
    if k < n:
        raise CycleError(_find_cycle(n, src, dst, indeg.tolist(), ids))
    return order


def _find_cycle(n, src, dst, indeg, ids) -> list:
    # Every task left with indeg > 0 has a predecessor that is also left: walk backwards
    # through such predecessors until a task repeats; that loop is a cycle.
    left = [d > 0 for d in indeg]
    pred_of = {}
    for s, d in zip(src.tolist(), dst.tolist()):
        if left[s] and left[d] and d not in pred_of:
            pred_of[d] = s
    v = next(i for i in range(n) if left[i])
    seen = {}
    walk = []
    while v not in seen:
        seen[v] = len(walk)
        walk.append(v)
        v = pred_of[v]
    loop = walk[seen[v] :]
    loop.reverse()  # we walked backwards
    loop.append(loop[0])
    return [ids[i] for i in loop]
