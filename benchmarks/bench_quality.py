"""Schedule quality: mean SLR per scheduler on the HEFT paper's random graphs and on real traces.

    python benchmarks/bench_quality.py [--seeds 3] [--markdown out.md]

* Random layered DAGs (workflows.scientific.random_layered, the generator of Topcuoglu et al. 2002):
  v in {100, 1000}, CCR in {0.1, 1, 10}, heterogeneity beta in {0.1, 1}, shape in {0.5, 1, 2},
  out-degree 3, ``--seeds`` seeds; exact per-worker costs (the paper's cost matrix) on 4 and 8
  workers, bandwidth 1 (sizes are time units), no latency.
* The WfCommons traces in ../shared/data/wfinstances on 4 and 8 heterogeneous workers (speeds
  1, 1.5, 2, 3, repeated), 125 MB/s links (1 Gbit/s), 1 ms latency.

SLR = makespan / critical path at each task's fastest duration (lower is better; >= 1).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import schedulers  # noqa: E402
from taskflow import Cluster, CostModel, load_graph  # noqa: E402
from workflows.scientific import random_layered  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def instances(seeds: int):
    for v, ccr, beta, shape, W, seed in itertools.product((100, 1000), (0.1, 1.0, 10.0), (0.1, 1.0),
                                                          (0.5, 1.0, 2.0), (4, 8), range(seeds)):
        cluster = Cluster.homogeneous(W, bandwidth=1.0, prefix="p")
        g = random_layered(v, shape=shape, out_degree=3, ccr=ccr, beta=beta, workers=cluster.ids,
                           seed=seed * 1000 + v + W)
        yield f"random v={v}", f"ccr={ccr:g}", g, cluster
    for path in sorted((SHARED / "wfinstances").glob("*.json")):
        g = load_graph(path)
        for W in (4, 8):
            speeds = [(1.0, 1.5, 2.0, 3.0)[i % 4] for i in range(W)]
            yield "wfcommons", path.stem.split("-")[0], g, Cluster.heterogeneous(speeds, bandwidth=125e6, latency=1e-3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--schedulers", default=",".join(schedulers.available("static")))
    ap.add_argument("--markdown", help="also write the tables to this file")
    args = ap.parse_args()
    names = args.schedulers.split(",")
    schedulers.warm_up()
    slr = defaultdict(lambda: defaultdict(list))  # family -> scheduler -> [slr]
    by_ccr = defaultdict(lambda: defaultdict(list))
    to_lb = defaultdict(list)  # scheduler -> [makespan / lower bound]
    pair = defaultdict(lambda: [0, 0, 0])  # (a, b) -> wins of a, ties, losses
    t0 = time.perf_counter()
    count = 0
    for family, sub, g, cluster in instances(args.seeds):
        model = CostModel(g, cluster)
        mk = {}
        for name in names:
            s = schedulers.get_scheduler(name, seed=0).schedule(g, cluster, model=model)
            s.validate(g, cluster, model=model)
            m = s.metrics(g, cluster, model=model)
            slr[family][name].append(m["slr"])
            if family.startswith("random"):
                by_ccr[sub][name].append(m["slr"])
            mk[name] = m["makespan"]
            to_lb[name].append(m["makespan"] / m["lower_bound"])
        for a, b in (("heft", "cpop"), ("peft", "heft"), ("heft", "blevel")):
            if a in mk and b in mk:
                d = mk[a] - mk[b]
                pair[(a, b)][0 if d < -1e-9 * mk[b] else (1 if abs(d) <= 1e-9 * mk[b] else 2)] += 1
        count += 1
    elapsed = time.perf_counter() - t0
    lines = [f"{count} instances x {len(names)} schedulers in {elapsed:.0f} s", ""]
    fams = list(slr)
    lines.append("| scheduler | " + " | ".join(f"{f} (n={len(slr[f][names[0]])})" for f in fams) + " | all |")
    lines.append("|---" * (len(fams) + 2) + "|")
    overall = {n: sum((slr[f][n] for f in fams), []) for n in names}
    for n in sorted(names, key=lambda n: sum(overall[n]) / len(overall[n])):
        cells = [f"{sum(slr[f][n]) / len(slr[f][n]):.3f}" for f in fams]
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {sum(overall[n]) / len(overall[n]):.3f} |")
    lines += ["", "Mean SLR of the random graphs by CCR:", "",
              "| scheduler | " + " | ".join(by_ccr) + " |", "|---" * (len(by_ccr) + 1) + "|"]
    for n in sorted(names, key=lambda n: sum(overall[n]) / len(overall[n])):
        lines.append(f"| {n} | " + " | ".join(f"{sum(by_ccr[c][n]) / len(by_ccr[c][n]):.3f}" for c in by_ccr) + " |")
    lines += ["", "Mean makespan / lower bound (max of critical path and work bound), all instances:", "",
              "| scheduler | makespan / lower bound |", "|---|---|"]
    for n in sorted(names, key=lambda n: sum(to_lb[n]) / len(to_lb[n])):
        lines.append(f"| {n} | {sum(to_lb[n]) / len(to_lb[n]):.3f} |")
    lines += ["", "Head to head (shorter makespan wins; all instances):", ""]
    for (a, b), (w, t, l) in pair.items():
        lines.append(f"- {a} vs {b}: {w} wins, {t} ties, {l} losses")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")


if __name__ == "__main__":
    main()
