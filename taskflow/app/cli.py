"""The ``taskflow`` command.

Every user error (bad file, bad graph, unknown scheduler, ...) prints one line ``error: ...`` on
stderr and exits with status 2, writing no output file. ``taskflow validate`` exits 1 when the
schedule is readable but breaks the rules (each problem on its own line).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from .. import __version__
from ..analysis import graph_summary
from ..cluster import DEFAULT_BANDWIDTH, Cluster, Worker
from ..costs import CostModel
from ..errors import TaskflowError, TaskflowWarning
from ..formats import (READ_FORMATS, WRITE_FORMATS, _format_for, atomic_write, dump_json, graph_text,
                      load_cluster, load_graph, load_graphs, load_schedule, with_source)

__all__ = ["build_parser", "main", "check_outputs", "one_line", "np_quiet"]


class _Prefixed(TaskflowError):
    """An error message already prefixed with the file it came from."""


def _load_graph(path: str, fmt: str | None):
    try:
        return load_graph(path, fmt)
    except TaskflowError as e:
        raise _Prefixed(with_source(e, path.split("#")[0])) from None


def _cluster_from_args(args) -> Cluster:
    if args.cluster:
        return load_cluster(args.cluster)
    if args.workers is None:
        raise TaskflowError("give --cluster FILE or --workers N")
    if args.speeds:
        try:
            speeds = [float(s) for s in args.speeds.split(",")]
        except ValueError:
            raise TaskflowError(f"--speeds must be comma-separated numbers, got {args.speeds!r}") from None
        if len(speeds) != args.workers:
            raise TaskflowError(f"--speeds lists {len(speeds)} speeds for --workers {args.workers}")
    else:
        speeds = [1.0] * max(args.workers, 0)
    if args.workers < 1:
        raise TaskflowError(f"cluster has no workers: --workers must be >= 1, got {args.workers}")
    return Cluster([Worker(f"w{i}", s, args.cores) for i, s in enumerate(speeds)],
                   bandwidth=args.bandwidth, latency=args.latency, name=f"{args.workers}-workers")


def check_outputs(outputs, inputs=(), folders=()) -> None:
    """Refuse, before any work, output paths that cannot be written: empty, a folder, under a
    missing folder or a file, in a folder we may not write, or one of the inputs (which the run
    would replace). ``folders`` are output folders (made if missing; their parent must exist).

    Parameters
    ----------
    outputs : iterable of (option, path or None)
    inputs : iterable of path
    folders : iterable of (option, path or None)

    Raises
    ------
    TaskflowError
    """
    import os

    seen = {}
    ins = {os.path.realpath(p.split("#")[0]) for p in inputs if p}
    for opt, path in outputs:
        if path is None:
            continue
        if not path.strip():
            raise TaskflowError(f"{opt}: empty output path")
        real = os.path.realpath(path)
        if os.path.isdir(path):
            raise TaskflowError(f"{opt} {path!r}: is a folder, expected a file path")
        parent = os.path.dirname(real)
        if not os.path.exists(parent):
            raise TaskflowError(f"{opt} {path!r}: folder {os.path.dirname(path) or '.'!r} does not exist")
        if not os.path.isdir(parent):
            raise TaskflowError(f"{opt} {path!r}: {os.path.dirname(path)!r} is a file, not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise TaskflowError(f"{opt} {path!r}: cannot write in folder {os.path.dirname(path) or '.'!r}")
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise TaskflowError(f"{opt} {path!r}: the file is not writable")
        if real in ins:
            raise TaskflowError(f"{opt} {path!r}: is an input of this command; write to another file")
        if real in seen:
            raise TaskflowError(f"{opt} and {seen[real]} name the same file {path!r}")
        seen[real] = opt
    for opt, path in folders:
        if path is None:
            continue
        if not path.strip():
            raise TaskflowError(f"{opt}: empty folder path")
        if os.path.exists(path) and not os.path.isdir(path):
            raise TaskflowError(f"{opt} {path!r}: is a file, expected a folder")
        target = os.path.abspath(path)
        while not os.path.exists(target):  # missing folders are made: the nearest existing one must allow it
            target = os.path.dirname(target)
        if not os.path.isdir(target):
            raise TaskflowError(f"{opt} {path!r}: {target!r} is a file, not a folder")
        if not os.access(target, os.W_OK | os.X_OK):
            raise TaskflowError(f"{opt} {path!r}: cannot write in {target!r}")


# ---------------------------------------------------------------------- commands
def _cmd_info(args) -> int:
    try:
        graphs = load_graphs(args.graph, args.format)
    except TaskflowError as e:
        raise _Prefixed(with_source(e, args.graph.split("#")[0])) from None
    summaries = [graph_summary(g) for g in graphs]
    if args.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=1))
        return 0
    for s in summaries:
        print(f"{s['name']}: {s['tasks']} tasks, {s['edges']} edges, total cost {s['total_cost']:g} s, "
              f"critical path {s['critical_path']:g} s ({s['critical_path_tasks']} tasks), "
              f"{s['total_bytes']:g} bytes on edges, parallelism {s['parallelism'] or 0:.2f}")
    return 0


def _cmd_convert(args) -> int:
    check_outputs([("-o", args.output)], [args.graph])
    graph = _load_graph(args.graph, args.format)
    fmt = _format_for(args.output, args.to)
    atomic_write(args.output, graph_text(graph, fmt))
    print(f"wrote {args.output} ({fmt}, {len(graph)} tasks, {graph.num_edges} edges)")
    return 0


def _cmd_schedule(args) -> int:
    import schedulers

    from ..simulator import plan as make_plan

    check_outputs([("-o", args.output)], [args.graph, args.cluster])
    graph = _graph_or_function(args.graph, args.format)
    cluster = _cluster_from_args(args)
    names = schedulers.available("static") if args.scheduler == "all" else [args.scheduler]
    options = {}
    if args.budget is not None:
        from schedulers.heft_search import parse_budget

        try:
            options = parse_budget(args.budget)
        except ValueError as e:
            raise TaskflowError(f"--budget: {e}") from None
    # unknown names fail here; a budget goes to the searching policies
    instances = [schedulers.get_scheduler(n, seed=args.seed, **(options if "search" in n or n == "optimal" else {}))
                 for n in names]
    model = CostModel(graph, cluster)
    schedulers.warm_up()  # compiled kernels load once, outside the timings
    rows = []
    results = []
    for sch in instances:
        t0 = time.perf_counter()
        plan = make_plan(graph, cluster, sch, model=model)
        elapsed = time.perf_counter() - t0
        plan.validate(graph, cluster, model=model)  # trust no scheduler
        m = plan.metrics(graph, cluster, model=model)
        rows.append((sch.name, m, elapsed))
        results.append(plan)
        if not args.quiet:
            print(f"{sch.name}: makespan {m['makespan']:g}  (lower bound {m['lower_bound']:g}, "
                  f"SLR {m['slr']:.3f}, scheduled in {elapsed * 1e3:.1f} ms)")
            if "gap" in plan.extra:  # a scheduler that proves a bound (optimal) says what it proved
                print(f"  {plan.extra['status']}: no schedule is shorter than {plan.extra['lower_bound']:g} "
                      f"(gap {100 * plan.extra['gap']:.2f}%)")
            print(plan.table(cluster))
    if len(rows) > 1:
        print()
        print(f"{'scheduler':<14} {'makespan':>12} {'SLR':>7} {'speedup':>8} {'efficiency':>10} {'time ms':>9}")
        for name, m, el in sorted(rows, key=lambda r: (r[1]['makespan'], r[0])):
            print(f"{name:<14} {m['makespan']:>12.6g} {m['slr']:>7.3f} {m['speedup']:>8.3f} "
                  f"{m['efficiency']:>10.3f} {el * 1e3:>9.2f}")
    if args.output:
        if len(results) == 1:
            atomic_write(args.output, dump_json(results[0].to_dict()))
        else:
            atomic_write(args.output, dump_json([r.to_dict() for r in results]))
    return 0


def _cmd_validate(args) -> int:
    from ..errors import ScheduleError
    from ..trace import expand_graph

    graph = _load_graph(args.graph, args.format)
    cluster = load_cluster(args.cluster)
    schedule = load_schedule(args.schedule)
    # durations and the producer each run used come from the graph and the cluster; a trace's own
    # record of them (what a perturbed simulation used) only with --trace, and checked
    durations = schedule.extra.get("durations") if args.trace else None
    served_by = (schedule.extra.get("served_by") or {}) if args.trace else {}
    runs = [(t if t in graph else str(t).rsplit("#", 1)[0], t) for t in schedule.tasks]
    if any(base not in graph for base, _ in runs):
        bad = next(rid for base, rid in runs if base not in graph)
        raise TaskflowError(f"{args.schedule}: run {bad!r} names no task of the graph")
    problems = _served_by_problems(served_by, runs)
    if not problems:
        if any(t != rid for t, rid in runs) or served_by:
            graph = expand_graph(graph, runs, served_by)
        try:
            problems = schedule.problems(graph, cluster, durations=durations)
        except ScheduleError as e:
            problems = e.problems
    if problems:
        for p in problems:
            print(f"invalid: {one_line(p)}", file=sys.stderr)
        return 1
    m = schedule.metrics(graph, cluster)
    print(f"valid: {len(schedule)} tasks on {len(cluster)} workers, makespan {m['makespan']:g} "
          f"(lower bound {m['lower_bound']:g}, SLR {m['slr']:.3f})")
    return 0


def _served_by_problems(served_by, runs) -> list:
    """``served_by`` ({consumer run: {producer task: producer run}}) may only choose, for an input,
    among the runs of that very producer, and name runs the schedule has."""
    if not isinstance(served_by, dict):
        return [f"served_by must map run ids to {{producer: run}}, got {type(served_by).__name__}"]
    run_task = {rid: t for t, rid in runs}
    out = []
    for consumer, row in served_by.items():
        if consumer not in run_task or not isinstance(row, dict):
            out.append(f"served_by names {consumer!r}, which is no run of the schedule (or maps it to no object)")
            continue
        for producer, rid in row.items():
            if run_task.get(rid) != producer:
                out.append(f"served_by[{consumer!r}] has input {producer!r} come from {rid!r}, which is not a run of "
                           f"{producer!r}")
    return out


def _worker_id(cluster, text: str, option: str):
    for wid in cluster.ids:
        if str(wid) == text:
            return wid
    raise TaskflowError(f"{option}: unknown worker {text!r} (workers: {', '.join(map(str, cluster.ids))})")


def _parse_at(spec: str, option: str):
    head, sep, at = spec.rpartition("@")
    try:
        t = float(at)
    except ValueError:
        t = None
    if not sep or not head or t is None or not t >= 0:
        raise TaskflowError(f"{option} {spec!r}: expected {'W:FACTOR@T' if 'straggler' in option else 'W@T'}"
                            " with a time T >= 0")
    return head, t


def _cmd_simulate(args) -> int:
    from ..simulator import simulate

    check_outputs([("-o", args.output), ("--chrome-trace", args.chrome_trace)], [args.graph, args.cluster])
    graph = _graph_or_function(args.graph, args.format)
    cluster = _cluster_from_args(args)
    fail = {}
    for spec in args.fail or []:
        w, t = _parse_at(spec, "--fail")
        fail[_worker_id(cluster, w, "--fail")] = t
    stragglers = {}
    for spec in args.straggler or []:
        head, t = _parse_at(spec, "--straggler")
        w, sep, factor = head.rpartition(":")
        try:
            f = float(factor)
        except ValueError:
            f = None
        if not sep or f is None or not f > 0:
            raise TaskflowError(f"--straggler {spec!r}: expected W:FACTOR@T with FACTOR > 0")
        stragglers[_worker_id(cluster, w, "--straggler")] = (f, t)
    plan = load_schedule(args.plan) if args.plan else None
    if plan is not None:
        plan.validate(graph, cluster)  # a plan file is input: check it before running it
    import schedulers
    schedulers.warm_up()
    trace = simulate(graph, cluster, args.scheduler or (None if plan is not None else "heft"),
                     network=args.network, plan=plan, noise=args.noise, stragglers=stragglers, fail=fail,
                     information=args.information, seed=args.seed, scheduler_interval=args.interval,
                     decision_latency=args.decision_latency)
    trace.validate(graph, cluster)
    m = trace.metrics(graph, cluster)
    print(f"{trace.scheduler} on {trace.network}: makespan {trace.makespan:g} s (lower bound {m['lower_bound']:g}, "
          f"SLR {m['slr']:.3f}); {len(trace.runs)} runs, {len(trace.transfers)} transfers "
          f"({sum(t.bytes for t in trace.transfers):g} bytes)")
    if trace.recomputed or trace.lost:
        print(f"lost {len(trace.lost)} running task(s); recomputed: {', '.join(sorted(map(str, trace.recomputed))) or 'none'}")
    if args.output:
        atomic_write(args.output, dump_json(trace.to_dict()))
    if args.chrome_trace:
        atomic_write(args.chrome_trace, json.dumps({"traceEvents": trace.chrome_trace(), "displayTimeUnit": "ms"}))
    return 0


def _graph_or_function(spec: str, fmt):
    """A graph file, or ``module:function`` returning a TaskGraph (for graphs with callables)."""
    import importlib
    import os

    if ":" in spec and not os.path.exists(spec.split("#")[0]):
        mod, _, fn = spec.partition(":")
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # as `python -m` does: the user's module in the current folder
        try:
            obj = getattr(importlib.import_module(mod), fn)
        except (ImportError, AttributeError, SyntaxError) as e:
            raise TaskflowError(f"{spec}: cannot load ({type(e).__name__}: {e})") from None
        except Exception as e:  # noqa: BLE001 - the user's module raised while loading: say so, once
            raise TaskflowError(f"{spec}: importing it raised {type(e).__name__}: {e}") from None
        from ..graph import TaskGraph
        try:
            graph = obj() if callable(obj) and not isinstance(obj, TaskGraph) else obj
        except TaskflowError as e:
            raise TaskflowError(f"{spec}: {e}") from None
        except Exception as e:  # noqa: BLE001 - the user's function raised: name it
            raise TaskflowError(f"{spec}: building the graph raised {type(e).__name__}: {e}") from None
        if not isinstance(graph, TaskGraph):
            raise TaskflowError(f"{spec}: returned {type(graph).__name__}, expected a TaskGraph")
        return graph.validate()
    return _load_graph(spec, fmt)


def _cmd_run(args) -> int:
    from ..runtime import run

    check_outputs([("--report", args.report), ("--gantt", args.gantt), ("--profile", args.profile)],
                  [args.graph, args.cluster])
    graph = _graph_or_function(args.graph, args.format)
    model = load_cluster(args.cluster) if args.cluster else None
    speeds = None
    if args.speeds:
        speeds = {}
        for item in args.speeds.split(","):
            name, sep, value = item.partition("=")
            try:
                speeds[name] = float(value)
            except ValueError:
                raise TaskflowError(f"--speeds expects NAME=SPEED,..., got {item!r}") from None
    if args.workers is not None and args.workers < 1:
        raise TaskflowError(f"cluster has no workers: --workers must be >= 1, got {args.workers}")
    jq_options = None
    if args.jobqueue:
        if args.address or args.scheduler_file:
            raise TaskflowError("--jobqueue starts its own cluster: leave out --address and --scheduler-file")
        if args.jobs is None or args.jobs < 1:
            raise TaskflowError("--jobqueue needs --jobs N (N >= 1): the number of batch jobs, one worker each")
        jq_options = {"cores": args.cores, "memory": args.memory, "walltime": args.walltime, "queue": args.queue,
                      "interface": args.interface, "wait": args.job_wait}
    elif args.jobs is not None:
        raise TaskflowError("--jobs goes with --jobqueue slurm|pbs")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TaskflowWarning)  # printed below as notes
        report = run(graph, args.scheduler, cluster=model, address=args.address, scheduler_file=args.scheduler_file,
                     workers=args.workers or 2, threads_per_worker=args.threads, speeds=speeds,
                     calibrate=args.calibrate, time_scale=args.time_scale, size_scale=args.size_scale,
                     retries=args.retries, quiet=args.quiet, timeout=args.timeout, profile=args.profile,
                     dashboard=args.dashboard or False, jobqueue=args.jobqueue, jobqueue_options=jq_options)
    print(f"{report.scheduler}: predicted makespan {report.predicted_makespan:.3f} s, measured "
          f"{report.measured_makespan:.3f} s (error {report.prediction_error:.1%}), placement fidelity "
          f"{report.placement_fidelity:.0%}, {len(report.trace.runs)} tasks, {len(report.trace.transfers)} transfers"
          + (f", {report.replans} re-plan(s)" if report.replans else "")
          + f"; costs {report.costs}" + (f", measurements saved to {args.profile}" if args.profile else ""))
    if report.jobs:
        print("batch jobs: " + ", ".join(f"{w} in job {j}" for w, j in sorted(report.jobs.items())))
    if graph.executable:  # what the user's functions returned (an emulated graph returns only buffers)
        for line in report.result_lines():
            print(f"result: {line}")
    for note in report.notes:
        print(f"note: {note}")
    if args.report:
        report.save(args.report)
    if args.gantt:
        from .plot import gantt_compare

        gantt_compare(report, args.gantt)
    return 0


def _cmd_bench(args) -> int:
    from .bench import run_suite

    names = args.schedulers.split(",") if args.schedulers else None
    check_outputs((), folders=[("--out", args.out)])
    run_suite(args.suite, args.out, names, args.jobs, real=args.real)
    print(f"wrote {args.out}/results.csv, {'real.csv, ' if args.real else ''}summary.md, normalised.png, "
          f"gantt.png, report.html")
    return 0


def _cmd_demo(args) -> int:
    from .demo import main as demo

    check_outputs((), folders=[("--out", args.out)])
    return demo(args.out, bench=not args.no_bench, dashboard=args.dashboard or False)


def _cmd_compare(args) -> int:
    from .compare import compare, table_text

    check_outputs((), folders=[("--out", args.out)])
    graphs = []
    for spec in args.graphs:
        g = _graph_or_function(spec, args.format)
        graphs.append((g.name if ":" in spec and not spec.endswith(".json") else spec.split("/")[-1], g))
    cluster = _cluster_from_args(args)
    names = args.schedulers.split(",") if args.schedulers else None
    rows = compare(graphs, cluster, names, network=args.network, seed=args.seed, real=args.real, out=args.out,
                   progress=not args.quiet, dashboard=args.dashboard or False)
    print(table_text(rows))
    if args.out:
        print(f"wrote {args.out}/compare.csv, compare.md, compare.png")
    return 0


def _cmd_samples(args) -> int:
    from workflows.samples import SAMPLES, write_samples

    check_outputs((), folders=[("--out", args.out)])
    written = write_samples(args.out)
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
    return out


def _cmd_testbed(args) -> int:
    import os
    import signal
    import subprocess
    import tempfile

    from . import testbed as tbm

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
    import shutil

    if shutil.which(command[0], path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])) \
            is None:
        raise TaskflowError(f"cannot run {command[0]!r} in the testbed: no such command")
    matrix = None
    if args.matrix:
        from ..formats import read_json

        matrix = read_json(args.matrix)
    tb = tbm.Testbed(workers=args.workers, topology=args.topology, bandwidth=args.bandwidth,
                     inter_rack=args.inter_rack, slow_worker=args.slow_worker, slow_bandwidth=args.slow_bandwidth,
                     matrix=matrix, nthreads=args.threads, cpus=_parse_cpus(args.cpus))
    why = tbm.available() or (tbm.cpu_limits_available() if args.cpus else None)
    if why:
        raise TaskflowError(why)

    def terminated(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        with tempfile.TemporaryDirectory(prefix="taskflow-testbed-") as tmp, tb:
            from ..formats import save_cluster

            model = os.path.join(tmp, "cluster.json")
            save_cluster(tb.model(), model)
            print(tb.describe(), file=sys.stderr)
            print(f"  DASK_SCHEDULER_ADDRESS={tb.address}; the shaped rates as a cluster model: "
                  f"TASKFLOW_TESTBED_CLUSTER={model}", file=sys.stderr, flush=True)
            proc = tb.popen(command, env={"TASKFLOW_TESTBED_CLUSTER": model})
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


def _cmd_schedulers(args) -> int:
    from ..policy import available, scheduler_class

    for name in available():
        try:
            cls = scheduler_class(name)
        except TaskflowError as e:  # a broken plugin: say so, list the rest
            print(f"{name:<16} {'broken':<8} {e}")
            continue
        print(f"{name:<16} {cls.kind:<8} {cls.summary}")
    return 0


# ---------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    """The ``taskflow`` command's argument parser (one subparser per subcommand)."""
    p = argparse.ArgumentParser(prog="taskflow", description="Task-graph scheduling on Dask: "
                                "inspect, convert, schedule and validate workflow DAGs.")
    p.add_argument("--version", action="version", version=f"taskflow {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cluster_args(sp):
        sp.add_argument("--cluster", help="cluster file (taskflow-cluster/1)")
        sp.add_argument("--workers", type=int, help="N identical workers w0..wN-1 instead of --cluster")
        sp.add_argument("--speeds", help="comma-separated speeds of the --workers (default all 1.0)")
        sp.add_argument("--cores", type=int, default=1, help="cores per worker with --workers (default 1)")
        sp.add_argument("--bandwidth", type=float, default=DEFAULT_BANDWIDTH,
                        help="bytes/s between workers with --workers (default 1e9)")
        sp.add_argument("--latency", type=float, default=0.0, help="seconds per transfer with --workers (default 0)")

    def dashboard_arg(sp):
        sp.add_argument("--dashboard", nargs="?", const=True, metavar="HOST:PORT",
                        help="serve the embedded cluster's Dask dashboard (default 127.0.0.1:8787) and print its link")

    def graph_arg(sp):
        sp.add_argument("graph", metavar="GRAPH", help="graph file (native, WfFormat, DAX, STG, Estee zip[#K])")
        sp.add_argument("--format", choices=READ_FORMATS, help="force the input format (default: detect)")

    sp = sub.add_parser("info", help="counts, total cost and critical path of a graph")
    graph_arg(sp)
    sp.add_argument("--json", action="store_true", help="print a JSON object (a list for an Estee set)")
    sp.set_defaults(func=_cmd_info)

    sp = sub.add_parser("convert", help="convert a graph to native JSON, WfFormat 1.5 or DOT")
    graph_arg(sp)
    sp.add_argument("-o", "--output", required=True, help="output file (.dot/.gv means DOT)")
    sp.add_argument("--to", choices=WRITE_FORMATS, help="output format (default: by suffix, else native)")
    sp.set_defaults(func=_cmd_convert)

    sp = sub.add_parser("schedule", help="plan a graph on a cluster with a scheduler")
    graph_arg(sp)
    cluster_args(sp)
    sp.add_argument("--scheduler", required=True, help="a name from 'taskflow schedulers', or 'all'")
    sp.add_argument("--seed", type=int, default=0, help="seed for randomised schedulers (default 0)")
    sp.add_argument("--budget", help="heft-search: evaluations (e.g. 64) or seconds (e.g. 2s); default 16. "
                    "optimal: CP-SAT deterministic time (e.g. 30) or seconds (e.g. 30s); default 2")
    sp.add_argument("-o", "--output", help="write the schedule (taskflow-schedule/1; a list with 'all')")
    sp.add_argument("-q", "--quiet", action="store_true", help="do not print the plans")
    sp.set_defaults(func=_cmd_schedule)

    sp = sub.add_parser("simulate", help="simulate a graph on a cluster (network models, noise, faults)")
    graph_arg(sp)
    cluster_args(sp)
    sp.add_argument("--scheduler", help="a name from 'taskflow schedulers' (default heft; with --plan, "
                    "the one that re-plans after a failure)")
    sp.add_argument("--network", choices=("simple", "maxmin"), default="maxmin", help="network model (default maxmin)")
    sp.add_argument("--plan", help="simulate this schedule file instead of planning")
    sp.add_argument("--noise", type=float, default=0.0, help="per-task duration noise: x exp(N(0, S)) (default 0)")
    sp.add_argument("--straggler", action="append", metavar="W:FACTOR@T",
                    help="worker W runs FACTOR times slower from time T (repeatable)")
    sp.add_argument("--fail", action="append", metavar="W@T", help="worker W is lost at time T (repeatable)")
    sp.add_argument("--information", choices=("exact", "mean", "blind", "user"), default="exact",
                    help="what the scheduler knows of costs (default exact)")
    sp.add_argument("--interval", type=float, default=0.0, help="minimum seconds between scheduler invocations")
    sp.add_argument("--decision-latency", type=float, default=0.0, help="seconds until a decision takes effect")
    sp.add_argument("--seed", type=int, default=0, help="seed for noise and randomised schedulers (default 0)")
    sp.add_argument("-o", "--output", help="write the trace (taskflow-schedule/1 with transfers and durations)")
    sp.add_argument("--chrome-trace", help="write a Chrome trace (open in Perfetto)")
    sp.set_defaults(func=_cmd_simulate)

    sp = sub.add_parser("run", help="run a graph on Dask workers (emulated when it has no callables)")
    sp.add_argument("graph", metavar="GRAPH", help="graph file, or module:function returning a TaskGraph")
    sp.add_argument("--format", choices=READ_FORMATS, help="force the input format (default: detect)")
    sp.add_argument("--scheduler", default="heft", help="a static scheduler, or work-stealing (Dask's own)")
    sp.add_argument("--workers", type=int, help="workers of the embedded LocalCluster (default 2)")
    sp.add_argument("--threads", type=int, default=1, help="threads per embedded worker (default 1)")
    sp.add_argument("--address", help="scheduler address of an existing cluster, e.g. tcp://host:8786")
    sp.add_argument("--scheduler-file", help="scheduler file of an existing cluster")
    sp.add_argument("--cluster", help="cluster model file; worker ids are Dask worker names")
    sp.add_argument("--speeds", help="declared speeds by worker name: NAME=SPEED,...")
    sp.add_argument("--calibrate", action="store_true", help="measure worker speeds and bandwidth first")
    sp.add_argument("--time-scale", type=float, default=1.0, help="multiply emulated durations (default 1)")
    sp.add_argument("--size-scale", type=float, default=1.0, help="multiply emulated output sizes (default 1)")
    sp.add_argument("--retries", type=int, default=0, help="retries of a task that raises (default 0)")
    sp.add_argument("--timeout", type=float, help="give up after this many seconds")
    sp.add_argument("--profile", help="cost profile (JSON): plan with it if it exists, then add this run's "
                    "measurements to it (learn on the first run, plan with it on the next)")
    sp.add_argument("--report", help="write the run report (JSON)")
    sp.add_argument("--gantt", help="write predicted and measured Gantt charts (PNG)")
    dashboard_arg(sp)
    jq = sp.add_argument_group("batch systems (dask-jobqueue)")
    jq.add_argument("--jobqueue", choices=("slurm", "pbs"), help="start the workers as batch jobs, one worker each")
    jq.add_argument("--jobs", type=int, help="how many jobs (workers)")
    jq.add_argument("--cores", type=int, default=1, help="cores per job, its worker's threads (default 1)")
    jq.add_argument("--memory", default="2GB", help="memory per job (default 2GB)")
    jq.add_argument("--walltime", default="01:00:00", help="walltime per job (default 01:00:00)")
    jq.add_argument("--queue", help="the queue or partition (default: the batch system's default)")
    jq.add_argument("--interface", help="network interface of the scheduler and workers, e.g. ib0")
    jq.add_argument("--job-wait", type=float, default=120.0,
                    help="seconds to wait for every job's worker before failing (default 120)")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar (and no dashboard link unless --dashboard)")
    sp.set_defaults(func=_cmd_run)

    sp = sub.add_parser("bench", help="scheduler comparison suite in the simulator (resumable)")
    sp.add_argument("--suite", choices=("quick", "standard", "full"), default="quick")
    sp.add_argument("--schedulers", help="comma-separated names (default: 9 schedulers)")
    sp.add_argument("--out", default="taskflow-out/bench", help="output folder (default taskflow-out/bench)")
    sp.add_argument("--jobs", type=int, help="parallel processes (default: all cores)")
    sp.add_argument("--real", action="store_true", help="also run a subset (4 workflows x heft, cpop, blevel, work-stealing) on a local Dask "
                         "cluster in emulation; rows in real.csv, a section in summary.md")
    sp.set_defaults(func=_cmd_bench)

    sp = sub.add_parser("demo", help="the main job: training on a LocalCluster, then the quick suite")
    sp.add_argument("--out", default="taskflow-out")
    sp.add_argument("--no-bench", action="store_true", help="skip the quick suite")
    dashboard_arg(sp)
    sp.set_defaults(func=_cmd_demo)

    sp = sub.add_parser("validate", help="check a schedule against its graph and cluster")
    graph_arg(sp)
    sp.add_argument("--cluster", required=True, help="cluster file")
    sp.add_argument("--schedule", required=True, help="schedule file (taskflow-schedule/1)")
    sp.add_argument("--trace", action="store_true",
                    help="a simulated trace: use the durations and served_by it records (checked), not the model's")
    sp.set_defaults(func=_cmd_validate)

    sp = sub.add_parser("compare", help="every scheduler on your own graphs: simulated, and on Dask with --real")
    sp.add_argument("graphs", metavar="GRAPH", nargs="+",
                    help="graph files (any readable format) or module:function returning a TaskGraph")
    sp.add_argument("--format", choices=READ_FORMATS, help="force the input format")
    cluster_args(sp)
    sp.add_argument("--schedulers", help="comma-separated names (default: every registered policy)")
    sp.add_argument("--network", choices=("maxmin", "simple"), default="maxmin")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--real", action="store_true",
                    help="also run the static policies and Dask's work stealing on an embedded LocalCluster")
    sp.add_argument("--out", help="folder for compare.csv, compare.md and compare.png")
    sp.add_argument("-q", "--quiet", action="store_true")
    dashboard_arg(sp)
    sp.set_defaults(func=_cmd_compare)

    sp = sub.add_parser("samples", help="write sample workflows and a cluster file to start from")
    sp.add_argument("--out", default=".", help="folder (default: the current one)")
    sp.set_defaults(func=_cmd_samples)

    sp = sub.add_parser("testbed", help="Dask workers on shaped network links (network namespaces, tc; needs root)",
                        description="Start a Dask scheduler and workers in network namespaces joined by shaped "
                        "links, run COMMAND beside them (DASK_SCHEDULER_ADDRESS set), then remove everything.")
    sp.add_argument("--workers", type=int, default=4, help="workers w0..wN-1 (default 4)")
    sp.add_argument("--topology", default="uniform", help="uniform, two-racks, slow-link or matrix (default uniform)")
    sp.add_argument("--bandwidth", default="1gbit", help="each worker's link, e.g. 200mbit (default 1gbit)")
    sp.add_argument("--inter-rack", help="two-racks: the link between the racks (default a tenth of --bandwidth)")
    sp.add_argument("--slow-worker", help="slow-link: the worker on the slow link (default the last)")
    sp.add_argument("--slow-bandwidth", help="slow-link: its rate (default a tenth of --bandwidth)")
    sp.add_argument("--matrix", help="matrix: JSON file {a: {b: rate}} by worker name")
    sp.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    sp.add_argument("--cpus", help="CPU limits by worker, e.g. w2=0.5,w3=0.25 (cores; cgroup CPU quota): "
                    "really slower workers")
    sp.add_argument("--clean", action="store_true", help="remove what testbeds of dead processes left, and exit")
    sp.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                    help="what to run in the client namespace")
    sp.set_defaults(func=_cmd_testbed)

    sp = sub.add_parser("schedulers", help="list the registered schedulers")
    sp.set_defaults(func=_cmd_schedulers)
    return p


def main(argv=None) -> int:
    """Run the ``taskflow`` command; bad input prints one ``error:`` line and returns 2.

    Parameters
    ----------
    argv : list of str, optional
        Default: ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status.
    """
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings(), np_quiet():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow notes: errors say it
            return args.func(args)
    except TaskflowError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except RecursionError:
        print("error: the input is nested too deeply to read", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: out of memory (the input is too large for this machine)", file=sys.stderr)
        return 2
    except OSError as e:
        where = f" {e.filename!r}" if getattr(e, "filename", None) else ""
        print(f"error: cannot use{where}: {one_line(e.strerror or e)}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: still one line, never a traceback
        print(f"error: internal error {type(e).__name__}: {one_line(e)} (a bug in taskflow {__version__}; "
              f"please report it with the command)", file=sys.stderr)
        return 2


def one_line(e) -> str:
    """An error's text on one line: newlines and other control characters escaped, so a value
    from an input (a task id holding a newline) cannot forge a second line.

    Parameters
    ----------
    e : object
    """
    text = str(e)
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in text)


def np_quiet():
    """numpy errors raised or ignored, never printed: the checks say what is wrong."""
    import numpy as np

    return np.errstate(over="ignore", invalid="ignore", divide="ignore")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
