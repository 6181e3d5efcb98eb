"""Hypothesis strategies: random DAGs and clusters covering the model's corners."""

import numpy as np
from hypothesis import strategies as st

from taskflow import Cluster, TaskGraph, Worker


@st.composite
def clusters(draw, max_workers=6, max_cores=4):
    n = draw(st.integers(1, max_workers))
    speeds = draw(st.lists(st.sampled_from([0.5, 1.0, 1.5, 2.0, 4.0]), min_size=n, max_size=n))
    cores = draw(st.lists(st.integers(1, max_cores), min_size=n, max_size=n))
    bandwidth = draw(st.sampled_from([1.0, 10.0, 1e3, float("inf")]))
    latency = draw(st.sampled_from([0.0, 0.0, 0.1, 2.0]))
    bws = {}
    if n > 1 and draw(st.booleans()):
        for _ in range(draw(st.integers(1, n))):
            a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            if a != b:
                bws.setdefault(f"w{a}", {})[f"w{b}"] = draw(st.sampled_from([0.5, 5.0, 500.0]))
    racks = uplink = None
    if n > 1 and draw(st.booleans()):  # a two-level network: racks sharing an uplink
        racks = {f"w{i}": r for i, r in enumerate(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)))}
        uplink = draw(st.sampled_from([0.5, 5.0, 1e3]))
    return Cluster(
        [Worker(f"w{i}", s, c) for i, (s, c) in enumerate(zip(speeds, cores))],
        bandwidth=bandwidth,
        bandwidths=bws,
        latency=latency,
        racks=racks,
        uplink=uplink,
    )


@st.composite
def graphs(draw, cluster, max_tasks=80):
    """A random DAG on ``cluster``: zero and non-zero costs and sizes, some exact per-worker costs,
    multi-core tasks that fit the largest worker."""
    n = draw(st.integers(1, max_tasks))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    density = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5]))
    zero_share = draw(st.sampled_from([0.0, 0.3]))
    exact_share = draw(st.sampled_from([0.0, 0.5, 1.0]))
    max_cores = int(cluster.cores.max())
    g = TaskGraph("hyp")
    ids = cluster.ids
    for i in range(n):
        cost = 0.0 if rng.random() < zero_share else float(rng.integers(1, 20))
        costs = None
        if rng.random() < exact_share:
            costs = {w: (0.0 if rng.random() < zero_share else float(rng.integers(1, 30))) for w in ids}
        cores = int(rng.integers(1, max_cores + 1)) if rng.random() < 0.3 else 1
        g.add_task(
            f"t{i}",
            cost=cost,
            costs=costs,
            cores=cores,
            output_size=0.0 if rng.random() < zero_share else float(rng.integers(1, 100)),
        )
    for j in range(1, n):
        for i in range(max(0, j - 10), j):
            if rng.random() < density:
                g.add_edge(f"t{i}", f"t{j}", size=0.0 if rng.random() < zero_share else float(rng.integers(0, 200)))
    return g


@st.composite
def problems(draw, max_tasks=80):
    c = draw(clusters())
    return draw(graphs(c, max_tasks)), c
