"""The subcommands that run on Dask (``run``, ``compare``, ``bench``, ``demo``), the network
testbed, and the small ones (``samples``, ``schedulers``); :mod:`.commands` has those that read,
plan, check and simulate graphs."""

from __future__ import annotations

import json
import os
import sys

from ...errors import TaskflowError, TaskflowWarning, UsageError
from ...formats import atomic_write
from .commands import command
from .options import check_outputs, jobqueue_options
from .values import cluster_from_args, parse_speeds, read_graph, scheduler_names

__all__ = ["run", "compare", "bench", "demo", "samples", "testbed", "schedulers", "per_scheduler"]


def per_scheduler(path: str | None, name: str, several: bool) -> str | None:
    """An output path for one of several schedulers' runs: ``run.png`` -> ``run.heft.png``.

    Parameters
    ----------
    path : str or None
    name : str
        The scheduler.
    several : bool
        Whether there are several (else ``path`` unchanged).
    """
    if path is None or not several:
        return path
    import os

    stem, ext = os.path.splitext(path)
    return f"{stem}.{name}{ext}"


# ---------------------------------------------------------------------- on Dask
@command(
    "``taskflow run``: run GRAPH on Dask under each ``--scheduler``; print each run's summary, its "
    "notes and what its sink tasks returned; ``--output``, ``--plot``, ``--chrome-trace`` write it."
)
def run(args) -> int:
    import warnings

    from ...formats import load_cluster
    from ...runtime import run as run_on_dask

    names = scheduler_names(args.scheduler, default="heft")
    several = len(names) > 1
    outputs = [
        (opt, per_scheduler(path, n, several))
        for n in names
        for opt, path in (("--plot", args.plot), ("--chrome-trace", args.chrome_trace))
    ]
    check_outputs([("--output", args.output), ("--profile", args.profile), *outputs], [args.graph, args.cluster])
    graph = read_graph(args.graph, args.format)
    cluster = load_cluster(args.cluster) if args.cluster else None
    speeds = parse_speeds(args.speeds)
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"cluster has no workers: --workers must be >= 1, got {args.workers}")
    if (
        isinstance(speeds, list)
        and not (args.address or args.scheduler_file or args.jobqueue)
        and len(speeds) != (args.workers or 2)
    ):
        raise UsageError(f"--speeds lists {len(speeds)} speeds for --workers {args.workers or 2}")
    jq_options = jobqueue_options(args)
    n_workers = args.workers or 2  # with --jobqueue, batch jobs of one worker each
    reports = []
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TaskflowWarning)  # printed below as notes
            report = run_on_dask(
                graph,
                name,
                cluster=cluster,
                address=args.address,
                scheduler_file=args.scheduler_file,
                workers=n_workers,
                threads_per_worker=args.cores,
                speeds=speeds,
                calibrate=args.calibrate,
                time_scale=args.time_scale,
                size_scale=args.size_scale,
                retries=args.retries,
                quiet=args.quiet,
                timeout=args.timeout,
                seed=args.seed,
                profile=args.profile,
                dashboard=args.dashboard or False,
                jobqueue=args.jobqueue,
                jobqueue_options=jq_options,
            )
        reports.append(report)
        print(
            report.summary()
            + (f", {report.replans} re-plan(s)" if report.replans else "")
            + f"; costs {report.costs}"
            + (f", measurements saved to {args.profile}" if args.profile else "")
        )
        if report.jobs:
            print("batch jobs: " + ", ".join(f"{w} in job {j}" for w, j in sorted(report.jobs.items())))
        for note in report.notes:
            print(f"note: {note}")
        if graph.executable:  # what the user's functions returned (an emulated graph returns only buffers)
            for line in report.result_lines():
                print(f"result: {line}")
        if args.plot:
            from ..plot import gantt_compare

            gantt_compare(report, per_scheduler(args.plot, report.scheduler, several))
        if args.chrome_trace:
            atomic_write(per_scheduler(args.chrome_trace, report.scheduler, several), json.dumps(report.chrome_trace()))
    if args.output:
        docs = [r.to_dict() for r in reports]
        atomic_write(args.output, json.dumps(docs[0] if not several else docs, indent=1, default=str) + "\n")
    return 0


@command("``taskflow compare``: every scheduler on each GRAPH, simulated, and with ``--real`` on Dask.")
def compare(args) -> int:
    from ..compare import compare as compare_schedulers
    from ..compare import table_text

    check_outputs([("--profile", args.profile)], args.graphs, folders=[("--output", args.output)])
    if (args.address or args.scheduler_file or args.profile or args.time_scale) and not args.real:
        raise UsageError("--address, --scheduler-file, --profile and --time-scale go with --real")
    graphs = []
    for spec in args.graphs:
        g = read_graph(spec, args.format)
        graphs.append((g.name if ":" in spec and not spec.endswith(".json") else spec.split("/")[-1], g))
    cluster = cluster_from_args(args)
    names = scheduler_names(args.scheduler) or None
    rows = compare_schedulers(
        graphs,
        cluster,
        names,
        network=args.network,
        seed=args.seed,
        real=args.real,
        out=args.output,
        progress=not args.quiet,
        dashboard=args.dashboard or False,
        address=args.address,
        scheduler_file=args.scheduler_file,
        profile=args.profile,
        time_scale=args.time_scale,
        repeat=args.repeat,
    )
    print(table_text(rows))
    if args.output:
        print(f"wrote {args.output}/compare.csv, compare.md, compare.png")
    return 0


@command("``taskflow bench``: run (or resume) a scheduler-comparison suite.")
def bench(args) -> int:
    from ..bench import run_suite

    names = scheduler_names(args.scheduler) or None
    check_outputs((), folders=[("--output", args.output)])
    _suite_options(args)
    if args.suite == "dask":
        return _bench_dask(args, names)
    run_suite(args.suite, args.output, names, args.processes, real=args.real, progress=not args.quiet)
    print(
        f"wrote {args.output}/results.csv, {'real.csv, ' if args.real else ''}summary.md, normalised.png, "
        f"gantt.png, report.html"
    )
    return 0


def _names(option: str, text: str) -> list:
    """A comma list of names; an empty one is refused (it would mean every name)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError(f"{option}: empty list {text!r}; name one or more, comma-separated")
    return names


def _suite_options(args) -> None:
    """An option of one kind of suite given to another is refused, not ignored."""
    dask_only = (
        ("--clusters", args.clusters),
        ("--workloads", args.workloads),
        ("--repeat", args.repeat),
        ("--firsts", args.firsts),
    )
    simulated_only = (("--processes", args.processes), ("--real", args.real or None))
    wrong = [opt for opt, v in (simulated_only if args.suite == "dask" else dask_only) if v is not None]
    if wrong:
        goes = "the simulated suites (quick, standard, full)" if args.suite == "dask" else "--suite dask"
        raise UsageError(
            f"{', '.join(wrong)} {'goes' if len(wrong) == 1 else 'go'} with {goes}, not --suite {args.suite}"
        )


def _bench_dask(args, names) -> int:
    """``taskflow bench --suite dask``: the real-workload suite; a table on stdout, dask.csv and
    dask.md in ``--output``."""
    import csv
    import io

    from ..dask_suite import DEFAULT_SCHEDULER, format_rows, run_suite as run_dask_suite, summarise

    if names is not None and len(names) != 1:
        raise UsageError("--suite dask compares one scheduler with Dask's own scheduling: give one --scheduler")
    scheduler = names[0] if names else DEFAULT_SCHEDULER
    clusters = _names("--clusters", args.clusters or "homogeneous")
    workloads = _names("--workloads", args.workloads) if args.workloads is not None else None
    rows = run_dask_suite(
        clusters, workloads, args.repeat or 5, scheduler=scheduler, progress=not args.quiet, firsts=args.firsts or 1
    )
    table = format_rows(rows) + ("\n\n" + summarise(rows) if rows else "")
    print(table)
    os.makedirs(args.output, exist_ok=True)
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write(os.path.join(args.output, "dask.csv"), buf.getvalue())
    atomic_write(os.path.join(args.output, "dask.md"), "```\n" + table + "\n```\n")
    print(f"wrote {args.output}/dask.csv, dask.md")
    return 0


@command("``taskflow demo``: the main demo (``make demo``).")
def demo(args) -> int:
    from ..demo import main as run_demo

    check_outputs((), folders=[("--output", args.output)])
    return run_demo(args.output, bench=not args.no_bench, dashboard=args.dashboard or False)


# ---------------------------------------------------------------------- the rest
@command("``taskflow samples``: write the shipped sample workflows and a cluster file.")
def samples(args) -> int:
    from workflows.samples import SAMPLES, write_samples

    check_outputs((), folders=[("--output", args.output)])
    written = write_samples(args.output, force=args.force)
    print(f"wrote {len(written)} files into {args.output}/:")
    for name, (file, what) in SAMPLES.items():
        print(f"  {file:<46} {what}")
    print("  montage.json, workflow.xml                     copies of the Montage trace and DAX")
    print("  graph.json                                     the Montage DAX in taskflow's format")
    print("  cluster.json                                   4 workers w0-w3 at speeds 1, 1, 2, 4, 100 MB/s")
    print("  NOTICE.md                                      where each file comes from, and its licence")
    return 0


def _parse_cpus(text) -> dict:
    """``w1=0.5,w3=0.25`` -> ``{"w1": 0.5, "w3": 0.25}`` (``--cpus``)."""
    out = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise UsageError(f"--cpus: {item.strip()!r} is not WORKER=CORES (e.g. w3=0.25)")
        if not 0 < out[name.strip()] <= 1024:  # (nan fails this too)
            raise UsageError(f"--cpus: {item.strip()!r}: cores must be a number > 0 and <= 1024")
    return out


@command("``taskflow testbed``: run ``-- COMMAND`` beside Dask workers on shaped links, then remove everything.")
def testbed(args) -> int:
    import os
    import shutil
    import signal
    import subprocess
    import tempfile

    from ... import testbed as tbm

    if args.clean:
        if tbm.available():
            raise UsageError(tbm.available())
        gone = tbm.clean_stale()
        print(
            f"removed {len(gone)} stale testbed(s){': ' + ', '.join(gone) if gone else ''}; "
            f"testbed namespaces now: {', '.join(tbm.leftovers()) or 'none'}"
        )
        return 0
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "give the command to run inside the testbed after --, e.g. "
            "taskflow testbed --workers 4 -- taskflow run graph.json"
        )
    if (
        shutil.which(command[0], path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
        is None
    ):
        raise UsageError(f"cannot run {command[0]!r} in the testbed: no such command")
    matrix = None
    if args.matrix:
        from ...formats import read_json

        matrix = read_json(args.matrix)
    tb = tbm.Testbed(
        workers=args.workers,
        topology=args.topology,
        bandwidth=args.bandwidth,
        inter_rack=args.inter_rack,
        slow_worker=args.slow_worker,
        slow_bandwidth=args.slow_bandwidth,
        matrix=matrix,
        nthreads=args.cores,
        cpus=_parse_cpus(args.cpus),
        racks=args.racks,
    )
    why = tbm.available() or (tbm.cpu_limits_available() if args.cpus else None)
    if why:
        raise UsageError(why)

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        with tempfile.TemporaryDirectory(prefix="taskflow-testbed-") as tmp, tb:
            from ...formats import save_cluster

            cluster_file = os.path.join(tmp, "cluster.json")
            save_cluster(tb.cluster(), cluster_file)
            print(tb.describe(), file=sys.stderr)
            print(
                f"  DASK_SCHEDULER_ADDRESS={tb.address}; the shaped rates as a cluster model: "
                f"TASKFLOW_TESTBED_CLUSTER={cluster_file}",
                file=sys.stderr,
                flush=True,
            )
            proc = tb.popen(command, env={"TASKFLOW_TESTBED_CLUSTER": cluster_file})
            try:
                return proc.wait()
            except BaseException:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                raise
    finally:
        signal.signal(signal.SIGTERM, previous)


@command("``taskflow schedulers``: list the registered schedulers.")
def schedulers(args) -> int:
    from ...scheduling import available, scheduler_class

    for name in available():
        try:
            cls = scheduler_class(name)
        except TaskflowError as e:  # a broken plugin: say so, list the rest
            print(f"{name:<16} {'broken':<8} {e}")
            continue
        print(f"{name:<16} {cls.kind:<8} {cls.summary}")
    return 0
