"""Speed calibration stability: identical workers, calibrated again and again on a loaded machine.

    python benchmarks/bench_calibration.py [--calibrations 10] [--workers 2] [--load 1]

A LocalCluster of identical workers (one thread each) is calibrated ``--calibrations`` times
(``cluster_from_dask(calibrate=True)``) while ``--load`` busy processes compete for the cores.
Printed: each calibration's speeds and the ratio of the fastest to the slowest worker; the target
is every ratio within 1.10 (identical workers must come out within 10% of each other).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from distributed import Client  # noqa: E402

from taskflow.runtime import cluster_from_dask  # noqa: E402
from taskflow.runtime.launch.local import local_cluster  # noqa: E402


def busy(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x = (x + 1) % 7


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calibrations", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--load", type=int, default=1, help="busy processes competing for the cores")
    args = ap.parse_args()
    with local_cluster(args.workers, 1) as lc, Client(lc) as c:
        hogs = [mp.Process(target=busy, args=(time.time() + 600,), daemon=True) for _ in range(args.load)]
        for h in hogs:
            h.start()
        ratios = []
        try:
            for k in range(args.calibrations):
                t0 = time.perf_counter()
                model = cluster_from_dask(c, calibrate=True)
                speeds = [w.speed for w in model.workers]
                ratios.append(max(speeds) / min(speeds))
                print(
                    f"calibration {k + 1:2d}: speeds {', '.join(f'{s:.3f}' for s in speeds)}; fastest/slowest "
                    f"{ratios[-1]:.3f} ({time.perf_counter() - t0:.1f} s)"
                )
        finally:
            for h in hogs:
                h.terminate()
    worst = max(ratios)
    print(
        f"{args.workers} identical workers, {args.load} busy process(es): worst fastest/slowest ratio {worst:.3f} over "
        f"{len(ratios)} calibrations (target <= 1.10: {'met' if worst <= 1.10 else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
