"""Model benchmark: load + validate a 100,000-task / 300,000-edge native file (target <= 3 s) and
build the same graph through the Python API (target <= 2 s).

    python benchmarks/bench_model.py [--tasks 100000] [--edges 300000]

Prints wall times and peak traced memory; networkx building the same DiGraph is the peer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from taskflow import TaskGraph, load_graph, save_graph  # noqa: E402


def random_dag(n: int, m: int, seed: int = 0):
    """``m`` distinct edges i -> j with i < j (so acyclic), j - i mostly short (layered-like)."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 1, size=int(m * 1.2))
    dst = np.minimum(src + 1 + rng.geometric(0.01, size=src.size), n - 1)
    keep = src < dst
    keys = np.unique(src[keep] * n + dst[keep])[:m]
    rng.shuffle(keys)
    return (
        (keys // n).astype(np.int64),
        (keys % n).astype(np.int64),
        rng.uniform(0.5, 10, n),
        rng.integers(0, 1 << 20, keys.size),
    )


def timed(label, fn, target=None):
    """Time ``fn`` (best of one untraced run), then run it again under tracemalloc for peak memory
    (tracing slows allocation several-fold, so it never shares a run with the clock)."""
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    del out
    tracemalloc.start()
    out = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    verdict = "" if target is None else ("  (target <= %.1f s: %s)" % (target, "met" if dt <= target else "MISSED"))
    print(f"{label:<48} {dt:7.3f} s   peak {peak / 2**20:7.1f} MiB{verdict}")
    return out, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=300_000)
    args = ap.parse_args()
    src, dst, cost, size = random_dag(args.tasks, args.edges)
    ids = [f"t{i}" for i in range(args.tasks)]
    print(f"graph: {args.tasks} tasks, {len(src)} edges")

    # The way a generator builds a graph: each task, then the edges from its parents.
    order = np.argsort(dst, kind="stable")
    in_ptr = np.searchsorted(dst[order], np.arange(args.tasks + 1))
    by_dst_src, by_dst_size = src[order].tolist(), size[order].tolist()
    ptr = in_ptr.tolist()

    def build_api():
        g = TaskGraph("bench")
        add_task, add_edge = g.add_task, g.add_edge
        for j, (t, c) in enumerate(zip(ids, cost.tolist())):
            add_task(t, cost=c, output_size=1024)
            for k in range(ptr[j], ptr[j + 1]):
                add_edge(ids[by_dst_src[k]], t, by_dst_size[k])
        g.validate()
        return g

    g, _ = timed("build via add_task/add_edge + validate", build_api, 2.0)

    def build_api_shuffled():
        g = TaskGraph("bench")
        for t, c in zip(ids, cost.tolist()):
            g.add_task(t, cost=c, output_size=1024)
        for s, d, z in zip(src.tolist(), dst.tolist(), size.tolist()):  # edges in random order
            g.add_edge(ids[s], ids[d], z)
        return g.validate()

    timed("  same, all tasks first, edges in random order", build_api_shuffled)

    def build_nx():
        import networkx as nx

        G = nx.DiGraph()
        for i, c in zip(ids, cost.tolist()):
            G.add_node(i, cost=c)
        G.add_edges_from((ids[s], ids[d], {"size": z}) for s, d, z in zip(src.tolist(), dst.tolist(), size.tolist()))
        list(nx.topological_sort(G))
        return G

    timed("peer: networkx DiGraph build + topological sort", build_nx)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.json")
        save_graph(g, path)
        print(f"native file: {os.path.getsize(path) / 2**20:.1f} MiB")
        g2, _ = timed("load_graph (parse + build + validate)", lambda: load_graph(path), 3.0)

        def parse_only():
            with open(path) as f:
                return json.load(f)

        timed("  of which json.load alone", parse_only)
    assert len(g2) == len(g) and g2.num_edges == g.num_edges


if __name__ == "__main__":
    main()
