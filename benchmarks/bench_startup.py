"""How long a `taskflow` command takes to start and finish on a small input (target: under 0.5 s
for `--version`, `schedulers`, `info` and `schedule ... -q` on the HEFT paper's graph, `schedule
... -q` on the 25-task Montage), medians of ``--repeat`` fresh processes; `python -c pass`
alongside as the floor.

    python benchmarks/bench_startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
GRAPH = os.path.join(ROOT, "examples", "heft_paper.graph.json")
CLUSTER = os.path.join(ROOT, "examples", "heft_paper.cluster.json")
MONTAGE = os.path.join(ROOT, "workflows", "data", "samples", "Montage_25.xml")
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "taskflow --version": [sys.executable, "-m", "taskflow", "--version"],
    "taskflow schedulers": [sys.executable, "-m", "taskflow", "schedulers"],
    "taskflow info (HEFT example)": [sys.executable, "-m", "taskflow", "info", GRAPH],
    "taskflow schedule -q (HEFT example)": [
        sys.executable,
        "-m",
        "taskflow",
        "schedule",
        GRAPH,
        "--cluster",
        CLUSTER,
        "--scheduler",
        "heft",
        "-q",
    ],
    "taskflow schedule -q (Montage 25)": [
        sys.executable,
        "-m",
        "taskflow",
        "schedule",
        MONTAGE,
        "--workers",
        "4",
        "--scheduler",
        "heft",
        "-q",
    ],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": ROOT}
    for name, argv in COMMANDS.items():
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True, env=env)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        verdict = (
            ""
            if name.startswith("python")
            else ("  (target < 0.5 s: met)" if med < 0.5 else "  (target < 0.5 s: MISSED)")
        )
        print(f"{name:<36} median {med:.3f} s (min {min(times):.3f}, max {max(times):.3f}){verdict}")


if __name__ == "__main__":
    main()
