"""The subcommands that run on Dask (``run``, ``compare``, ``bench``, ``demo``), the network
testbed, and the small ones (``samples``, ``schedulers``); :mod:`.commands` has those that read,
plan, check and simulate graphs."""

from __future__ import annotations

import json
import os
import sys

from ...errors import TaskflowError, TaskflowWarning
from ...formats import atomic_write
from .commands import command
from .options import check_outputs, cluster_from_args, parse_speeds, read_graph, scheduler_names

__all__ = ["run", "compare", "bench", "demo", "samples", "testbed", "schedulers", "per_policy"]


def per_policy(path: str | None, name: str, several: bool) -> str | None:
    """An output path for one of several policies' runs: ``run.png`` -> ``run.heft.png``.

    Parameters
    ----------
    path : str or None
    name : str
        The policy.
    several : bool
        Whether there are several (else ``path`` unchanged).
    """
    if path is None or not several:
        return path
    import os

    stem, ext = os.path.splitext(path)
    return f"{stem}.{name}{ext}"


# ---------------------------------------------------------------------- on Dask
@command("``taskflow run``: run GRAPH on Dask under each ``--scheduler``; print each run's summary, its "
         "notes and what its sink tasks returned; ``--report``, ``--gantt``, ``--chrome-trace`` write it.")
def run(args) -> int:
    import warnings

    from ...formats import load_cluster
    from ...runtime import run as run_on_dask

    names = scheduler_names(args.scheduler, default="heft")
    several = len(names) > 1
    outputs = [(opt, per_policy(path, n, several)) for n in names
               for opt, path in (("--gantt", args.gantt), ("--chrome-trace", args.chrome_trace))]
    check_outputs([("--report", args.report), ("--profile", args.profile), *outputs], [args.graph, args.cluster])
    graph = read_graph(args.graph, args.format)
    cluster = load_cluster(args.cluster) if args.cluster else None
    speeds = parse_speeds(args.speeds)
    if args.workers is not None and args.workers < 1:
        raise TaskflowError(f"cluster has no workers: --workers must be >= 1, got {args.workers}")
    if isinstance(speeds, list) and not (args.address or args.scheduler_file or args.jobqueue) \
            and len(speeds) != (args.workers or 2):
        raise TaskflowError(f"--speeds lists {len(speeds)} speeds for --workers {args.workers or 2}")
    jq_options = None
    if args.jobqueue:
        if args.address or args.scheduler_file:
            raise TaskflowError("--jobqueue starts its own cluster: leave out --address and --scheduler-file")
        if args.jobs is None or args.jobs < 1:
            raise TaskflowError("--jobqueue needs --jobs N (N >= 1): the number of batch jobs, one worker each")
        if args.workers is not None and args.workers != args.jobs:
            raise TaskflowError(f"--jobqueue runs one worker per job: --workers {args.workers} and --jobs {args.jobs} "
                                f"disagree (give --jobs alone)")
        jq_options = {"cores": args.cores, "memory": args.memory, "walltime": args.walltime, "queue": args.queue,
                      "interface": args.interface, "wait": args.job_wait}
    elif args.jobs is not None:
        raise TaskflowError("--jobs goes with --jobqueue slurm|pbs")
    n_workers = args.jobs if args.jobqueue else (args.workers or 2)  # batch jobs of one worker each
    reports = []
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TaskflowWarning)  # printed below as notes
            report = run_on_dask(graph, name, cluster=cluster, address=args.address,
                                 scheduler_file=args.scheduler_file, workers=n_workers,
                                 threads_per_worker=args.cores, speeds=speeds, calibrate=args.calibrate,
                                 time_scale=args.time_scale, size_scale=args.size_scale, retries=args.retries,
                                 quiet=args.quiet, timeout=args.timeout, seed=args.seed, profile=args.profile,
                                 dashboard=args.dashboard or False, jobqueue=args.jobqueue,
                                 jobqueue_options=jq_options)
        reports.append(report)
        print(f"{report.scheduler}: predicted makespan {report.predicted_makespan:.3f} s, measured "
              f"{report.measured_makespan:.3f} s (error {report.prediction_error:.1%}), placement fidelity "
              f"{report.placement_fidelity:.0%}, {len(report.trace.runs)} tasks, {len(report.trace.transfers)} "
              f"transfers" + (f", {report.replans} re-plan(s)" if report.replans else "")
              + f"; costs {report.costs}" + (f", measurements saved to {args.profile}" if args.profile else ""))
        if report.jobs:
            print("batch jobs: " + ", ".join(f"{w} in job {j}" for w, j in sorted(report.jobs.items())))
        for note in report.notes:
            print(f"note: {note}")
        if graph.executable:  # what the user's functions returned (an emulated graph returns only buffers)
            for line in report.result_lines():
                print(f"result: {line}")
        if args.gantt:
            from ..plot import gantt_compare

            gantt_compare(report, per_policy(args.gantt, report.scheduler, several))
        if args.chrome_trace:
            atomic_write(per_policy(args.chrome_trace, report.scheduler, several),
                         json.dumps(report.chrome_trace()))
    if args.report:
        docs = [r.to_dict() for r in reports]
        atomic_write(args.report, json.dumps(docs[0] if not several else docs, indent=1, default=str) + "\n")
    return 0


@command("``taskflow compare``: every policy on each GRAPH, simulated, and with ``--real`` on Dask.")
def compare(args) -> int:
    from ..compare import compare as compare_policies
    from ..compare import table_text

    check_outputs([("--profile", args.profile)], args.graphs, folders=[("--out", args.out)])
    if (args.address or args.scheduler_file or args.profile or args.time_scale) and not args.real:
        raise TaskflowError("--address, --scheduler-file, --profile and --time-scale go with --real")
    graphs = []
    for spec in args.graphs:
        g = read_graph(spec, args.format)
        graphs.append((g.name if ":" in spec and not spec.endswith(".json") else spec.split("/")[-1], g))
    cluster = cluster_from_args(args)
    names = scheduler_names(args.scheduler) or None
    rows = compare_policies(graphs, cluster, names, network=args.network, seed=args.seed, real=args.real,
                            out=args.out, progress=not args.quiet, dashboard=args.dashboard or False,
                            address=args.address, scheduler_file=args.scheduler_file, profile=args.profile,
                            time_scale=args.time_scale)
    print(table_text(rows))
    if args.out:
        print(f"wrote {args.out}/compare.csv, compare.md, compare.png")
    return 0


@command("``taskflow bench``: run (or resume) a scheduler-comparison suite.")
def bench(args) -> int:
    from ..bench import run_suite

    names = scheduler_names(args.scheduler) or None
    check_outputs((), folders=[("--out", args.out)])
    if args.suite == "dask":
        return _bench_dask(args, names)
    run_suite(args.suite, args.out, names, args.jobs, real=args.real, progress=not args.quiet)
    print(f"wrote {args.out}/results.csv, {'real.csv, ' if args.real else ''}summary.md, normalised.png, "
          f"gantt.png, report.html")
    return 0


def _bench_dask(args, names) -> int:
    """``taskflow bench --suite dask``: the real-workload suite; a table on stdout, dask.csv and
    dask.md in ``--out``."""
    import csv
    import io

    from ..dask_suite import DEFAULT_POLICY, format_rows, run_suite as run_dask_suite, summarise

    if names is not None and len(names) != 1:
        raise TaskflowError("--suite dask compares one policy with Dask's own scheduling: give one --scheduler")
    policy = names[0] if names else DEFAULT_POLICY
    clusters = [c.strip() for c in args.clusters.split(",") if c.strip()]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()] if args.workloads else None
    rows = run_dask_suite(clusters, workloads, args.repeat, policy=policy, progress=not args.quiet,
                          firsts=args.firsts)
    table = format_rows(rows) + ("\n\n" + summarise(rows) if rows else "")
    print(table)
    os.makedirs(args.out, exist_ok=True)
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    atomic_write(os.path.join(args.out, "dask.csv"), buf.getvalue())
    atomic_write(os.path.join(args.out, "dask.md"), "```\n" + table + "\n```\n")
    print(f"wrote {args.out}/dask.csv, dask.md")
    return 0


@command("``taskflow demo``: the main demo (``make demo``).")
def demo(args) -> int:
    from ..demo import main as run_demo

    check_outputs((), folders=[("--out", args.out)])
    return run_demo(args.out, bench=not args.no_bench, dashboard=args.dashboard or False)


# ---------------------------------------------------------------------- the rest
@command("``taskflow samples``: write the shipped sample workflows and a cluster file.")
def samples(args) -> int:
    from workflows.samples import SAMPLES, write_samples

    check_outputs((), folders=[("--out", args.out)])
    written = write_samples(args.out, force=args.force)
    print(f"wrote {len(written)} files into {args.out}/:")
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
            raise TaskflowError(f"--cpus: {item.strip()!r} is not WORKER=CORES (e.g. w3=0.25)")
        if not 0 < out[name.strip()] <= 1024:  # (nan fails this too)
            raise TaskflowError(f"--cpus: {item.strip()!r}: cores must be a number > 0 and <= 1024")
    return out


@command("``taskflow testbed``: run ``-- COMMAND`` beside Dask workers on shaped links, then remove "
         "everything.")
def testbed(args) -> int:
    import os
    import shutil
    import signal
    import subprocess
    import tempfile

    from ... import testbed as tbm

    if args.clean:
        if tbm.available():
            raise TaskflowError(tbm.available())
        gone = tbm.clean_stale()
        print(f"removed {len(gone)} stale testbed(s){': ' + ', '.join(gone) if gone else ''}; "
              f"testbed namespaces now: {', '.join(tbm.leftovers()) or 'none'}")
        return 0
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise TaskflowError("give the command to run inside the testbed after --, e.g. "
                            "taskflow testbed --workers 4 -- taskflow run graph.json")
    if shutil.which(command[0], path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])) \
            is None:
        raise TaskflowError(f"cannot run {command[0]!r} in the testbed: no such command")
    matrix = None
    if args.matrix:
        from ...formats import read_json

        matrix = read_json(args.matrix)
    tb = tbm.Testbed(workers=args.workers, topology=args.topology, bandwidth=args.bandwidth,
                     inter_rack=args.inter_rack, slow_worker=args.slow_worker, slow_bandwidth=args.slow_bandwidth,
                     matrix=matrix, nthreads=args.cores, cpus=_parse_cpus(args.cpus), racks=args.racks)
    why = tbm.available() or (tbm.cpu_limits_available() if args.cpus else None)
    if why:
        raise TaskflowError(why)

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        with tempfile.TemporaryDirectory(prefix="taskflow-testbed-") as tmp, tb:
            from ...formats import save_cluster

            cluster_file = os.path.join(tmp, "cluster.json")
            save_cluster(tb.cluster(), cluster_file)
            print(tb.describe(), file=sys.stderr)
            print(f"  DASK_SCHEDULER_ADDRESS={tb.address}; the shaped rates as a cluster model: "
                  f"TASKFLOW_TESTBED_CLUSTER={cluster_file}", file=sys.stderr, flush=True)
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


@command("``taskflow schedulers``: list the registered policies.")
def schedulers(args) -> int:
    from ...policy import available, scheduler_class

    for name in available():
        try:
            cls = scheduler_class(name)
        except TaskflowError as e:  # a broken plugin: say so, list the rest
            print(f"{name:<16} {'broken':<8} {e}")
            continue
        print(f"{name:<16} {cls.kind:<8} {cls.summary}")
    return 0
