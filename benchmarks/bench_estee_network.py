"""Estee's network-model finding, reproduced: on Estee's elementary graphs, 8 workers x 4 cores, at
32 MiB/s and 2 GiB/s, how much longer is the makespan under the max-min fair network than under the
simple (contention-free) one? Median of maxmin / simple per bandwidth and scheduler.

    python benchmarks/bench_estee_network.py [--set ../shared/data/estee/elementary.zip]

Beránek et al. (J. Supercomputing 2022) report that the network model changes makespans by up to
an order of magnitude at low bandwidth and matters little at high bandwidth.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import schedulers  # noqa: E402
from taskflow import Cluster, load_graphs, simulate  # noqa: E402

MiB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--set", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "estee" / "elementary.zip")
    )
    ap.add_argument("--schedulers", default="blevel,heft,work-stealing,blevel-dynamic")
    args = ap.parse_args()
    schedulers.warm_up()
    graphs = load_graphs(args.set)
    names = args.schedulers.split(",")
    print(f"{len(graphs)} graphs from {Path(args.set).name}; 8 workers x 4 cores; latency 0")
    print(f"{'bandwidth':>10} {'scheduler':<15} {'median':>7} {'max':>7}  (makespan maxmin / simple)")
    rows = {}
    for label, bw in (("32 MiB/s", 32 * MiB), ("2 GiB/s", 2048 * MiB)):
        cluster = Cluster.homogeneous(8, cores=4, bandwidth=bw)
        for name in names:
            ratios = []
            for g in graphs:
                simple = simulate(g, cluster, name, network="simple")
                maxmin = simulate(g, cluster, name, network="maxmin")
                maxmin.validate(g, cluster)
                ratios.append(maxmin.makespan / simple.makespan)
            rows[(label, name)] = ratios
            print(f"{label:>10} {name:<15} {statistics.median(ratios):7.3f} {max(ratios):7.3f}")
    print("\nper graph at 32 MiB/s (maxmin / simple):")
    print(f"{'graph':<18}" + "".join(f"{n:>16}" for n in names))
    for k, g in enumerate(graphs):
        print(f"{g.name:<18}" + "".join(f"{rows[('32 MiB/s', n)][k]:16.2f}" for n in names))


if __name__ == "__main__":
    main()
