"""Peer run: the anrg-saga package's HEFT on a graph in our native JSON. Run with an interpreter
that has ``anrg-saga`` installed (it is not a dependency of ours):

    python -m venv /tmp/saga && /tmp/saga/bin/pip install anrg-saga
    /tmp/saga/bin/python benchmarks/peer_saga_heft.py graph.json --speeds 1,2,3,4 --bandwidth 1

Prints one JSON object: {"seconds": ..., "makespan": ...}. Same model as ours: duration =
cost / speed, transfer = size / bandwidth, none on the same node.
"""

import argparse
import json
import logging
import time

from saga import Network, TaskGraph
from saga.schedulers.heft import HeftScheduler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("--speeds", required=True)
    ap.add_argument("--bandwidth", type=float, default=1.0)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    doc = json.load(open(args.graph))
    speeds = [float(s) for s in args.speeds.split(",")]
    nodes = [(f"n{i}", s) for i, s in enumerate(speeds)]
    links = [(a[0], b[0], args.bandwidth) for a in nodes for b in nodes if a[0] < b[0]]
    t0 = time.perf_counter()
    tg = TaskGraph.create(
        [(t["id"], t["cost"]) for t in doc["tasks"]], [(e["from"], e["to"], e["size"]) for e in doc["edges"]]
    )
    net = Network.create(nodes, links)
    schedule = HeftScheduler().schedule(net, tg)
    seconds = time.perf_counter() - t0
    makespan = (
        max(t.end for tasks in schedule.mapping.values() for t in tasks)
        if hasattr(schedule, "mapping")
        else max(t.end for tasks in schedule.values() for t in tasks)
    )
    print(json.dumps({"seconds": seconds, "makespan": makespan}))


if __name__ == "__main__":
    main()
