"""A million-task graph from a file, as a user meets it: written in our own format (native JSON),
as a WfCommons trace (WfFormat) and as a Pegasus DAX; each read back with ``load_graph`` (bytes/s),
then ``taskflow info``, ``taskflow schedule`` and ``taskflow simulate`` of the native file on
``--workers`` workers, each as a fresh process, timed, with its peak resident memory.

    python benchmarks/bench_scale_files.py                      # 1,000,000 tasks, 1,000 workers
    python benchmarks/bench_scale_files.py --tasks 100000 --workers 100 --formats native

The graph is the one a user tried (``bench_scale.one_parent``): 100 layers of 10,000 tasks, each
task one parent in the layer before, costs uniform in [1, 10] s, 1 MB outputs on half the edges.
Files go to a temporary folder (``--keep DIR`` keeps them there).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from taskflow import Cluster, TaskGraph
from taskflow.formats import load_graph, save_graph, set_max_bytes

sys.path.insert(0, os.path.dirname(__file__))
from bench_scale import one_parent  # noqa: E402


def write_dax(graph: TaskGraph, path: Path) -> None:
    """``graph`` as Pegasus DAX 2.1: a job per task, an output file per edge with bytes, the edges as
    ``<child><parent/></child>``."""
    a = graph.arrays
    ids, cost = graph.ids, a.cost.tolist()
    src, dst, size = a.src.tolist(), a.dst.tolist(), a.size.tolist()
    outs = [[] for _ in ids]
    ins = [[] for _ in ids]
    parents = [[] for _ in ids]
    for e, (s, d, b) in enumerate(zip(src, dst, size)):
        outs[s].append((f"f{e}", b))
        ins[d].append((f"f{e}", b))
        parents[d].append(ids[s])
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<adag name="layers" version="2.1">\n')
        for i, t in enumerate(ids):
            f.write(f'<job id="{t}" name="work" runtime="{cost[i]!r}">')
            for name, b in ins[i]:
                f.write(f'<uses file="{name}" link="input" size="{b:.0f}"/>')
            for name, b in outs[i]:
                f.write(f'<uses file="{name}" link="output" size="{b:.0f}"/>')
            f.write("</job>\n")
        for i, t in enumerate(ids):
            if parents[i]:
                f.write(f'<child ref="{t}">' + "".join(f'<parent ref="{p}"/>' for p in parents[i]) + "</child>\n")
        f.write("</adag>\n")


def timed_command(args: list, env: dict) -> tuple:
    """``(seconds, the child's peak MiB, its stages (or last stderr line), status)`` of ``taskflow ARGS``, a
    fresh process (its peak is its own high-water mark, ``VmHWM``: ``ru_maxrss`` survives the exec of
    a child forked from this large process)."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import atexit, sys\n"
            "atexit.register(lambda: print('PEAK', next(int(x.split()[1]) for x in open('/proc/self/status') "
            "if x.startswith('VmHWM')), file=sys.stderr))\n"
            "from taskflow.app.cli import main\n"
            "sys.argv = ['taskflow'] + sys.argv[1:]\nsys.exit(main())",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    secs = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    peak = next((int(x.split()[1]) / 1024 for x in lines if x.startswith("PEAK ")), float("nan"))
    stages = "; ".join(x.strip() for x in lines if x.startswith("  ") and " in " in x)
    last = next((x for x in reversed(lines) if not x.startswith("PEAK ")), "")
    return secs, peak, stages or last, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--formats", default="native,wfformat,dax")
    ap.add_argument("--commands", default="info,schedule,simulate")
    ap.add_argument("--schedulers", default="heft-append,heft", help="for schedule and simulate")
    ap.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    args = ap.parse_args()
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="taskflow-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    set_max_bytes("4GiB")  # the DAX of a million tasks is larger than the default
    t0 = time.perf_counter()
    g = one_parent(args.tasks)
    print(f"built {len(g):,} tasks, {g.arrays.src.size:,} edges in {time.perf_counter() - t0:.1f} s", flush=True)
    paths = {}
    for fmt in args.formats.split(","):
        path = folder / {"native": "graph.json", "wfformat": "graph.wf.json", "dax": "graph.dax"}[fmt]
        t0 = time.perf_counter()
        if fmt == "dax":
            write_dax(g, path)
        else:
            save_graph(g, path, format=fmt)
        wrote = time.perf_counter() - t0
        nbytes = path.stat().st_size
        t0 = time.perf_counter()
        back = load_graph(str(path))
        secs = time.perf_counter() - t0
        assert len(back) == len(g) and back.arrays.src.size == g.arrays.src.size, fmt
        paths[fmt] = path
        print(
            f"{fmt:9s} {nbytes / 1e6:8.1f} MB  written in {wrote:5.1f} s  read in {secs:6.1f} s  "
            f"{nbytes / secs / 1e6:6.1f} MB/s  {len(g) / secs:9,.0f} tasks/s",
            flush=True,
        )
    native = paths.get("native")
    if native is None:
        return
    cluster = folder / "cluster.json"
    from taskflow.formats import save_cluster

    save_cluster(Cluster.homogeneous(args.workers, bandwidth=1e8), cluster)
    env = dict(os.environ)
    runs = [("info", ["info", str(native)])]
    for sched in args.schedulers.split(","):
        runs.append(
            (
                f"schedule --scheduler {sched}",
                [
                    "schedule",
                    str(native),
                    "--cluster",
                    str(cluster),
                    "--scheduler",
                    sched,
                    "-o",
                    str(folder / "plan.json"),
                ],
            )
        )
        runs.append(
            (
                f"simulate --scheduler {sched}",
                ["simulate", str(native), "--cluster", str(cluster), "--scheduler", sched],
            )
        )
    wanted = args.commands.split(",")
    for label, argv in runs:
        if label.split()[0] not in wanted:
            continue
        secs, peak, last, rc = timed_command(argv, env)
        print(f"taskflow {label:34s} {secs:6.1f} s  peak {peak:7.0f} MiB  status {rc}  {last[:200]}", flush=True)
    if not args.keep:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


if __name__ == "__main__":
    main()
