"""Scientific-workflow DAG generators.

``random_layered`` follows the random graph generator of Topcuoglu, Hariri and Wu (IEEE TPDS 2002,
section 5.1):

* ``v`` tasks in levels; each level's width is drawn uniformly with mean ``shape x sqrt(v)``, so the
  height averages ``sqrt(v) / shape`` (``shape`` > 1: wide and parallel; < 1: long and thin);
* every task of a level but the last sends ``out_degree`` edges (fewer if the next level is
  narrower) to distinct tasks of the next level; a task left without a parent gets one;
* a task's mean cost ``w_i ~ U(0, 2 mean_cost]``; with ``workers`` given, its exact cost on worker
  ``j`` is ``U(w_i (1 - beta / 2), w_i (1 + beta / 2))`` (``beta`` = heterogeneity);
* an edge's transfer time is ``U(0, 2 ccr x mean_cost)`` (so the communication-to-computation
  ratio averages ``ccr``) and its size is that time x ``bandwidth`` bytes.
"""

from __future__ import annotations

import math

import numpy as np

from taskflow.graph import TaskGraph

__all__ = ["random_layered"]


def random_layered(v: int = 100, shape: float = 1.0, out_degree: int = 2, ccr: float = 1.0,
                   beta: float = 0.0, workers=None, mean_cost: float = 20.0, bandwidth: float = 1.0,
                   seed: int = 0, name: str | None = None) -> TaskGraph:
    """A random layered DAG with the HEFT paper's parameters (see the module docstring).

    Examples
    --------
    >>> g = random_layered(50, shape=1.0, out_degree=2, ccr=1.0, seed=1)
    >>> len(g), g.validate() is g
    (50, True)
    """
    if v < 1:
        raise ValueError(f"v must be >= 1, got {v}")
    rng = np.random.default_rng(seed)
    mean_width = max(1.0, shape * math.sqrt(v))
    widths = []
    total = 0
    while total < v:
        w = int(rng.integers(1, max(2, int(round(2 * mean_width))))) if mean_width > 1 else 1
        w = min(w, v - total)
        widths.append(w)
        total += w
    bounds = np.concatenate([[0], np.cumsum(widths)])
    src_parts, dst_parts = [], []
    for lvl in range(len(widths) - 1):
        lo, hi = bounds[lvl], bounds[lvl + 1]
        nlo, nhi = bounds[lvl + 1], bounds[lvl + 2]
        nw = nhi - nlo
        k = min(out_degree, nw)
        # k distinct children per task: argsort of random keys, first k columns
        picks = np.argsort(rng.random((hi - lo, nw)), axis=1)[:, :k] + nlo
        src_parts.append(np.repeat(np.arange(lo, hi), k))
        dst_parts.append(picks.reshape(-1))
        has_parent = np.zeros(nw, dtype=bool)
        has_parent[picks.reshape(-1) - nlo] = True
        orphans = np.flatnonzero(~has_parent) + nlo
        if orphans.size:
            src_parts.append(rng.integers(lo, hi, size=orphans.size))
            dst_parts.append(orphans)
    src = np.concatenate(src_parts) if src_parts else np.zeros(0, np.int64)
    dst = np.concatenate(dst_parts) if dst_parts else np.zeros(0, np.int64)
    w_mean = rng.uniform(0, 2 * mean_cost, size=v)
    w_mean = np.maximum(w_mean, 1e-3 * mean_cost)
    comm = rng.uniform(0, 2 * ccr * mean_cost, size=src.size)
    ids = [f"t{i}" for i in range(v)]
    costs = None
    if workers is not None:
        wids = list(workers)
        lo_f, hi_f = 1 - beta / 2, 1 + beta / 2
        mat = w_mean[:, None] * rng.uniform(lo_f, hi_f, size=(v, len(wids)))
        costs = {ids[i]: dict(zip(wids, row)) for i, row in enumerate(mat.tolist())}
    label = name or f"layered-v{v}-a{shape:g}-d{out_degree}-ccr{ccr:g}-b{beta:g}-s{seed}"
    return TaskGraph.from_columns(label, ids, w_mean, None, None, [ids[s] for s in src.tolist()],
                                  [ids[d] for d in dst.tolist()], (comm * bandwidth).tolist(), costs=costs)
