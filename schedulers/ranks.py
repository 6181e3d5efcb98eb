"""Rank computations shared by the list schedulers: upward / downward rank, b-level, t-level, the
critical path and PEFT's optimistic cost table.

All use the *mean* cost model of the HEFT paper: a task's mean duration over the workers that can
run it, and an edge's mean transfer time over ordered pairs of distinct workers
(``mean latency + size x mean(1 / bandwidth)``; 0 on a one-worker cluster).

* ``upward_rank(i) = w(i) + max_j (c(i, j) + upward_rank(j))`` (HEFT's rank_u, Kwok & Ahmad's b-level)
* ``downward_rank(i) = max_p (downward_rank(p) + w(p) + c(p, i))`` (rank_d, the t-level)
* ``b_level`` is the upward rank without communication (Estee's b-level; the "static level")
* ``oct[i, k] = max_j min_w (oct[j, w] + d(j, w) + c(i, j) [w != k])`` (Arabnejad & Barbosa 2014)

Each runs in O(V + E) (the cost table in O((V + E) W)) over the topological order.
"""

from __future__ import annotations

import numpy as np
from taskflow.jit import kernel

from taskflow.costs import CostModel

__all__ = [
    "mean_costs",
    "upward_rank",
    "downward_rank",
    "b_level",
    "t_level",
    "critical_path_tasks",
    "optimistic_cost_table",
    "upward_rank_kernel",
    "downward_rank_kernel",
]


def mean_costs(cost_model: CostModel):
    """(mean duration per task, mean transfer time per edge in successor-CSR order, the same in
    predecessor-CSR order).

    Parameters
    ----------
    cost_model : CostModel
    """
    a = cost_model.arrays
    w = cost_model.mean_duration()
    c = cost_model.mean_transfer(a.size)
    return w, c[a.succ_eid], c[a.pred_eid]


@kernel(cache=True)
def upward_rank_kernel(w, succ_ptr, succ_idx, succ_comm, topo):
    """Upward ranks over CSR successors: ``w[i] + max(comm + rank of successor)``, in reverse
    topological order (the loop behind :func:`upward_rank`).

    Parameters
    ----------
    w : ndarray
        Mean duration per task.
    succ_ptr, succ_idx, succ_comm : ndarray
        Successors in CSR form and the mean transfer time of each edge.
    topo : ndarray
        A topological order.
    """
    n = w.shape[0]
    r = np.zeros(n)
    for k in range(n - 1, -1, -1):
        i = topo[k]
        best = 0.0
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            v = succ_comm[e] + r[succ_idx[e]]
            if v > best:
                best = v
        r[i] = w[i] + best
    return r


@kernel(cache=True)
def downward_rank_kernel(w, pred_ptr, pred_idx, pred_comm, topo):
    """Downward ranks over CSR predecessors: ``max(rank + w + comm)`` over the predecessors, in
    topological order (the loop behind :func:`downward_rank`).

    Parameters
    ----------
    w : ndarray
        Mean duration per task.
    pred_ptr, pred_idx, pred_comm : ndarray
        Predecessors in CSR form and the mean transfer time of each edge.
    topo : ndarray
        A topological order.
    """
    n = w.shape[0]
    r = np.zeros(n)
    for k in range(n):
        i = topo[k]
        best = 0.0
        for e in range(pred_ptr[i], pred_ptr[i + 1]):
            p = pred_idx[e]
            v = r[p] + w[p] + pred_comm[e]
            if v > best:
                best = v
        r[i] = best
    return r


@kernel(cache=True)
def _oct(d, succ_ptr, succ_idx, succ_comm, topo):
    n, W = d.shape
    table = np.zeros((n, W))
    for k in range(n - 1, -1, -1):
        i = topo[k]
        for e in range(succ_ptr[i], succ_ptr[i + 1]):
            j = succ_idx[e]
            c = succ_comm[e]
            low = np.inf
            for w in range(W):
                x = table[j, w] + d[j, w]
                if x < low:
                    low = x
            for w in range(W):
                v = table[j, w] + d[j, w]
                if low + c < v:
                    v = low + c
                if v > table[i, w]:
                    table[i, w] = v
    return table


def upward_rank(cost_model: CostModel) -> np.ndarray:
    """HEFT's upward rank (rank_u): a task's mean duration plus the longest mean-cost path to an exit,
    communication included.

    Parameters
    ----------
    cost_model : CostModel

    Returns
    -------
    numpy.ndarray
        Per task index.
    """
    a = cost_model.arrays
    w, sc, _ = mean_costs(cost_model)
    return upward_rank_kernel(w, a.succ_ptr, a.succ_idx, sc, a.topo)


def downward_rank(cost_model: CostModel) -> np.ndarray:
    """The downward rank (rank_d, the t-level with communication): the longest mean-cost path from
    an entry to the task, excluding the task itself.

    Parameters
    ----------
    cost_model : CostModel

    Returns
    -------
    numpy.ndarray
        Per task index.
    """
    a = cost_model.arrays
    w, _, pc = mean_costs(cost_model)
    return downward_rank_kernel(w, a.pred_ptr, a.pred_idx, pc, a.topo)


def b_level(cost_model: CostModel) -> np.ndarray:
    """Longest path to an exit by mean durations alone (no communication).

    Parameters
    ----------
    cost_model : CostModel
    """
    a = cost_model.arrays
    return upward_rank_kernel(cost_model.mean_duration(), a.succ_ptr, a.succ_idx, np.zeros(a.m), a.topo)


def t_level(cost_model: CostModel) -> np.ndarray:
    """Longest path from an entry by mean durations alone, excluding the task itself.

    Parameters
    ----------
    cost_model : CostModel
    """
    a = cost_model.arrays
    return downward_rank_kernel(cost_model.mean_duration(), a.pred_ptr, a.pred_idx, np.zeros(a.m), a.topo)


def critical_path_tasks(cost_model: CostModel, rank_u=None, rank_d=None, rtol: float = 1e-9) -> list:
    """Task indices on CPOP's critical path: from the entry of highest ``rank_u + rank_d``, follow
    a successor whose priority equals the path length, until an exit (Topcuoglu et al. 2002).

    Parameters
    ----------
    cost_model : CostModel
    rank_u, rank_d : numpy.ndarray, optional
        Already computed ranks.
    rtol : float
        Relative tolerance when comparing a successor's priority with the path length.
    """
    a = cost_model.arrays
    if a.n == 0:
        return []
    ru = upward_rank(cost_model) if rank_u is None else rank_u
    rd = downward_rank(cost_model) if rank_d is None else rank_d
    prio = ru + rd
    entries = np.flatnonzero(np.diff(a.pred_ptr) == 0)
    v = int(entries[np.argmax(prio[entries])])
    length = prio[v]
    tol = rtol * max(1.0, abs(length))
    path = [v]
    while a.succ_ptr[v + 1] > a.succ_ptr[v]:
        succ = a.succs(v)
        on = succ[np.abs(prio[succ] - length) <= tol]
        if on.size == 0:  # float noise: take the successor closest to the path length
            on = succ[[int(np.argmin(np.abs(prio[succ] - length)))]]
        v = int(on.min())
        path.append(v)
    return path


def optimistic_cost_table(cost_model: CostModel) -> np.ndarray:
    """PEFT's optimistic cost table: ``oct[i, k]``, the longest of the shortest paths from task ``i``
    on worker ``k`` to an exit (Arabnejad and Barbosa 2014).

    Parameters
    ----------
    cost_model : CostModel

    Returns
    -------
    numpy.ndarray
        Tasks x workers.
    """
    a = cost_model.arrays
    _, sc, _ = mean_costs(cost_model)
    return _oct(np.ascontiguousarray(cost_model.durations), a.succ_ptr, a.succ_idx, sc, a.topo)
