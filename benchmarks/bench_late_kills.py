"""A worker SIGKILLed in the last second of a run, again and again: ``taskflow run --address`` must
end every time (a result, or one line and exit 1), never hang.

    python benchmarks/bench_late_kills.py [--runs 24] [--seed 7]

Each run: a fresh ``dask scheduler`` and three ``dask worker`` processes on 127.0.0.1 (no nanny, so
a killed worker stays dead), the HEFT paper's graph emulated at ``--time-scale 0.05`` (about 5 s
with the command's start), and one worker killed at a random moment of its last 1.8 seconds. Prints
one line per run (when the kill came, the victim, the exit status, the seconds) and the count of
hangs (no end within 90 s).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from taskflow.app.loopback import Loopback  # noqa: E402

GRAPH = os.path.join(os.path.dirname(__file__), "..", "examples", "heft_paper.graph.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=24)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    hangs = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            lb = Loopback(os.path.join(tmp, f"lb{k}"), workers=("wa", "wb", "wc"))
            os.makedirs(lb.folder, exist_ok=True)
            lb.start()
            try:
                t0 = time.monotonic()
                p = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "taskflow",
                        "run",
                        GRAPH,
                        "--address",
                        lb.address,
                        "--time-scale",
                        "0.05",
                        "-q",
                        "--scheduler",
                        "heft",
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                delay = rng.uniform(3.8, 5.6)
                time.sleep(delay)
                victim = rng.choice(lb.names)
                if p.poll() is None:
                    lb.kill_worker(victim)
                try:
                    _, err = p.communicate(timeout=90)
                    status = p.returncode
                except subprocess.TimeoutExpired:
                    p.kill()
                    _, err = p.communicate()
                    status, hangs = "HUNG", hangs + 1
                print(
                    f"run {k + 1:2d}: killed {victim} at {delay:.2f} s; exit {status} after "
                    f"{time.monotonic() - t0:.1f} s {err.strip()[-120:]}",
                    flush=True,
                )
            finally:
                lb.stop()
    print(f"{args.runs} runs, {hangs} hung")
    return 1 if hangs else 0


if __name__ == "__main__":
    sys.exit(main())
