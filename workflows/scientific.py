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

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

__all__ = [
    "random_layered",
    "fork_join",
    "out_tree",
    "in_tree",
    "fft",
    "gaussian_elimination",
    "genome_like",
    "wfcommons_recipe",
]


def random_layered(
    v: int = 100,
    shape: float = 1.0,
    out_degree: int = 2,
    ccr: float = 1.0,
    beta: float = 0.0,
    workers=None,
    mean_cost: float = 20.0,
    bandwidth: float = 1.0,
    seed: int = 0,
    name: str | None = None,
) -> TaskGraph:
    """A random layered DAG with the HEFT paper's parameters (see the module docstring).

    Parameters
    ----------
    v : int
        Tasks.
    shape, out_degree, ccr, beta, mean_cost, bandwidth
        As in the module docstring.
    workers : list, optional
        Worker ids for exact per-worker costs (heterogeneity ``beta``).
    seed : int
    name : str, optional

    Raises
    ------
    WorkflowError
        ``v`` below 1.

    Examples
    --------
    >>> g = random_layered(50, shape=1.0, out_degree=2, ccr=1.0, seed=1)
    >>> len(g), g.validate() is g
    (50, True)
    """
    if v < 1:
        raise WorkflowError(f"v must be >= 1, got {v}")
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
    return TaskGraph.from_columns(
        label,
        ids,
        w_mean,
        None,
        None,
        [ids[s] for s in src.tolist()],
        [ids[d] for d in dst.tolist()],
        (comm * bandwidth).tolist(),
        costs=costs,
    )


# ---------------------------------------------------------------------- regular application graphs
def _graph(name, ids, cost, size, edges):
    return TaskGraph.from_columns(
        name,
        ids,
        [cost] * len(ids),
        [size] * len(ids),
        None,
        [s for s, _ in edges],
        [d for _, d in edges],
        [size] * len(edges),
    )


def fork_join(width: int = 8, stages: int = 1, cost: float = 1.0, size: float = 0.0) -> TaskGraph:
    """``stages`` x (fork -> ``width`` parallel tasks -> join), each join feeding the next fork.

    Tasks: ``stages (width + 2)``; edges: ``2 stages width + stages - 1``.

    Parameters
    ----------
    width, stages : int
    cost, size : float
        Every task's cost and every edge's bytes.

    >>> g = fork_join(4, 2)
    >>> len(g), g.num_edges
    (12, 17)
    """
    ids, edges = [], []
    for s in range(stages):
        fork, join = f"fork{s}", f"join{s}"
        ids.append(fork)
        if s:
            edges.append((f"join{s - 1}", fork))
        for i in range(width):
            t = f"s{s}_t{i}"
            ids.append(t)
            edges += [(fork, t), (t, join)]
        ids.append(join)
    return _graph(f"fork-join-{width}x{stages}", ids, cost, size, edges)


def out_tree(depth: int = 3, fanout: int = 2, cost: float = 1.0, size: float = 0.0) -> TaskGraph:
    """A complete tree from one root, ``fanout`` children per task, ``depth`` levels below the root.

    Tasks: ``(fanout^(depth+1) - 1) / (fanout - 1)`` (``depth + 1`` for fanout 1); edges: tasks - 1.

    Parameters
    ----------
    depth, fanout : int
    cost, size : float
        Every task's cost and every edge's bytes.

    >>> g = out_tree(3, 2)
    >>> len(g), g.num_edges, len(g.sinks())
    (15, 14, 8)
    """
    ids, edges = ["n0"], []
    level = ["n0"]
    for _ in range(depth):
        nxt = []
        for p in level:
            for _ in range(fanout):
                c = f"n{len(ids)}"
                ids.append(c)
                edges.append((p, c))
                nxt.append(c)
        level = nxt
    return _graph(f"out-tree-{depth}x{fanout}", ids, cost, size, edges)


def in_tree(depth: int = 3, fanin: int = 2, cost: float = 1.0, size: float = 0.0) -> TaskGraph:
    """The out-tree with every edge reversed: leaves reduce level by level into one root.

    Parameters
    ----------
    depth, fanin : int
    cost, size : float
        Every task's cost and every edge's bytes.

    >>> g = in_tree(2, 3)
    >>> len(g), g.num_edges, g.sinks()
    (13, 12, ['n0'])
    """
    t = out_tree(depth, fanin, cost, size)
    return _graph(f"in-tree-{depth}x{fanin}", t.ids, cost, size, [(d, s) for s, d, _ in t.edges()])


def fft(points: int = 8, cost: float = 1.0, size: float = 0.0) -> TaskGraph:
    """The FFT task graph of Topcuoglu et al. (2002): ``2m - 1`` recursive-call tasks (a binary tree)
    and ``m log2 m`` butterfly tasks in ``log2 m`` levels, for ``m = points`` (a power of two).

    Edges: ``2m - 2`` in the tree plus ``2 m log2 m`` into the butterflies.

    Parameters
    ----------
    points : int
    cost : float
        Every task's cost.
    size : float
        Every edge's bytes.

    Raises
    ------
    WorkflowError
        ``points`` is not a power of two >= 2.

    >>> g = fft(4)
    >>> len(g), g.num_edges
    (15, 22)
    """
    m = int(points)
    if m < 2 or m & (m - 1):
        raise WorkflowError(f"points must be a power of two >= 2, got {points}")
    logm = m.bit_length() - 1
    ids, edges = [], []
    tree = ["r0"]
    ids.append("r0")
    level = ["r0"]
    while len(level) < m:
        nxt = []
        for p in level:
            for _ in range(2):
                c = f"r{len(tree)}"
                tree.append(c)
                ids.append(c)
                edges.append((p, c))
                nxt.append(c)
        level = nxt
    prev = level  # m leaves
    for s in range(logm):
        span = 1 << s
        cur = [f"b{s}_{i}" for i in range(m)]
        ids.extend(cur)
        for i in range(m):
            edges += [(prev[i], cur[i]), (prev[i ^ span], cur[i])]
        prev = cur
    return _graph(f"fft-{m}", ids, cost, size, edges)


def gaussian_elimination(m: int = 5, cost: float = 1.0, size: float = 0.0) -> TaskGraph:
    """Gaussian elimination on an ``m x m`` matrix (Topcuoglu et al. 2002): for each step ``k`` a
    pivot task then ``m - k`` update tasks. Tasks: ``(m^2 + m - 2) / 2``.

    Parameters
    ----------
    m : int
    cost, size : float
        Every task's cost and every edge's bytes.

    Raises
    ------
    WorkflowError
        ``m`` below 2.

    >>> g = gaussian_elimination(5)
    >>> len(g)
    14
    """
    if m < 2:
        raise WorkflowError(f"m must be >= 2, got {m}")
    ids, edges = [], []
    for k in range(1, m):
        piv = f"p{k}"
        ids.append(piv)
        if k > 1:
            edges.append((f"u{k - 1}_{k}", piv))
        for j in range(k + 1, m + 1):
            u = f"u{k}_{j}"
            ids.append(u)
            edges.append((piv, u))
            if k > 1:
                edges.append((f"u{k - 1}_{j}", u))
    return _graph(f"gauss-{m}", ids, cost, size, edges)


def genome_like(
    chromosomes: int = 22, individuals: int = 10, populations: int = 7, seed: int = 0, name: str | None = None
) -> TaskGraph:
    """A workflow shaped like 1000Genome (the WfCommons / Pegasus population-genetics workflow), at any size.

    Per chromosome: ``individuals`` independent tasks (each parses a slice of the chromosome's
    variant file) fanned in by one ``merge``; one independent ``sifting``; then, per population,
    a ``mutation_overlap`` and a ``frequency`` task, each reading the merge's and the sifting's
    outputs (a fan-out of ``2 x populations``). Tasks: ``chromosomes x (individuals + 2 + 2
    populations)``. Costs (seconds) and sizes (bytes) are the orders of magnitude of the published
    traces, drawn log-normally (sigma 0.3) around individuals 40 s / 10 MB out, merge 60 s / 200
    MB, sifting 5 s / 1 MB, mutation_overlap 15 s and frequency 60 s (1 MB out); they are not
    fitted to a trace. Deterministic for a seed.

    Parameters
    ----------
    chromosomes, individuals, populations : int
    seed : int
    name : str, optional

    Raises
    ------
    WorkflowError
        A count that is not an integer >= 1 (named).

    >>> g = genome_like(2, individuals=3, populations=2)
    >>> len(g), g.num_edges
    (18, 22)
    """
    for label, v in (("chromosomes", chromosomes), ("individuals", individuals), ("populations", populations)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise WorkflowError(f"genome_like: {label} must be an integer >= 1, got {v!r}")
    rng = np.random.default_rng(seed)
    C, n, P = int(chromosomes), int(individuals), int(populations)
    per = n + 2 + 2 * P
    N = C * per
    base = np.empty(per)
    out = np.empty(per)
    base[:n], out[:n] = 40.0, 10e6
    base[n], out[n] = 60.0, 200e6  # merge
    base[n + 1], out[n + 1] = 5.0, 1e6  # sifting
    base[n + 2 :: 2], base[n + 3 :: 2], out[n + 2 :] = 15.0, 60.0, 1e6  # mutation_overlap, frequency
    cost = np.tile(base, C) * rng.lognormal(0.0, 0.3, N)
    size = np.tile(out, C)
    first = np.arange(C) * per
    ind = (first[:, None] + np.arange(n)[None, :]).ravel()
    merge = first + n
    sift = first + n + 1
    tails = (first[:, None] + n + 2 + np.arange(2 * P)[None, :]).ravel()
    src = np.concatenate([ind, np.repeat(merge, 2 * P), np.repeat(sift, 2 * P)])
    dst = np.concatenate([np.repeat(merge, n), tails, tails])
    kinds = ["individuals"] * n + ["merge", "sifting"] + ["mutation_overlap", "frequency"] * P
    ids = [f"{kinds[k]}_{c}_{k}" for c in range(C) for k in range(per)]
    return TaskGraph.from_arrays(name or f"genome-like-{N}", ids, cost, size, src, dst, size[src])


def wfcommons_recipe(
    recipe: str = "montage", num_tasks: int = 100, seed: int = 0, runtime_factor: float = 1.0, name: str | None = None
) -> TaskGraph:
    """A synthetic workflow from a WfCommons WfChef recipe (needs ``pip install wfcommons``).

    WfCommons (wfcommons.org) fits recipes to real execution traces of Montage, Epigenomics,
    Seismology, 1000Genome, BLAST, BWA, Cycles, SoyKB, SRA search and RNA-seq workflows and
    generates instances of any size. The instance is written in WfFormat and read back with
    :mod:`taskflow.formats.wfformat` (runtimes -> costs, files -> edge sizes). Deterministic for a
    seed: Python's and numpy's global random states are seeded for the call and restored after.

    Parameters
    ----------
    recipe : str
        A recipe name (``montage``, ``epigenomics``, ``blast``, ...).
    num_tasks : int
    seed : int
    runtime_factor : float
        Multiplies every runtime.
    name : str, optional

    Raises
    ------
    WorkflowError
        An unknown recipe (the known ones are listed).
    """
    import random
    import tempfile
    from pathlib import Path

    try:
        from wfcommons import WorkflowGenerator
        from wfcommons.wfchef import recipes
    except ImportError:
        raise ImportError("WfCommons recipes need the wfcommons package: pip install wfcommons") from None
    known = {
        n[: -len("Recipe")].lower(): getattr(recipes, n)
        for n in dir(recipes)
        if n.endswith("Recipe") and n != "Recipe" and isinstance(getattr(recipes, n), type)
    }
    key = recipe.lower().replace("-", "").replace("_", "")
    if key not in known:
        raise WorkflowError(f"unknown WfCommons recipe {recipe!r}; known: {', '.join(sorted(known))}")
    from taskflow.formats import load_graph

    saved = random.getstate(), np.random.get_state()
    try:
        random.seed(seed)
        np.random.seed(seed)
        wf = WorkflowGenerator(
            known[key].from_num_tasks(int(num_tasks), runtime_factor=runtime_factor)
        ).build_workflow()
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "instance.json"
            wf.write_json(path)
            g = load_graph(path)
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
    if name:
        g.name = name
    return g
