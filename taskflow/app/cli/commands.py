"""The subcommands that read, plan, check and simulate graphs (:mod:`.running` has those that run
on Dask and the rest): each reads the arguments (parsed by :mod:`.parser`, with the shared grammar
of :mod:`.options`), does the work, prints, and writes its outputs atomically."""

from __future__ import annotations

import json
import sys
import time

from ...analysis import graph_summary
from ...costs import CostModel
from ...errors import UsageError
from ...trace import Trace
from ...formats import format_for, atomic_write, dump_json, graph_text, load_schedule
from .options import check_outputs
from .values import cluster_from_args, read_graph, read_graphs, scheduler_names

__all__ = ["info", "convert", "schedule", "validate", "simulate", "one_line", "printable", "command", "COMMAND_DOC"]

#: What every subcommand's function takes, returns and raises (see :func:`command`).
COMMAND_DOC = """

Parameters
----------
args : argparse.Namespace
    The parsed command line (:func:`~taskflow.app.cli.parser.build_parser`).

Returns
-------
int
    The exit status.

Raises
------
TaskflowError
    Bad input, named in one line.
"""


def command(summary: str):
    """Mark a function as a subcommand: its docstring is ``summary`` and what every subcommand
    takes, returns and raises.

    Parameters
    ----------
    summary : str
    """

    def mark(fn):
        fn.__doc__ = summary + COMMAND_DOC
        return fn

    return mark


def one_line(e) -> str:
    """An error's text on one line: newlines and other control characters escaped, so a value
    from an input (a task id holding a newline) cannot forge a second line.

    Parameters
    ----------
    e : object
    """
    return printable(str(e))


def printable(text: str, keep: str = "") -> str:
    """``text`` with every character that is not printable (but those in ``keep``) escaped as
    Python writes it (``\\x1b``, ``\\n``).

    Parameters
    ----------
    text : str
    keep : str
        Characters left as they are (``"\\n"`` for text of several lines).
    """
    return "".join(ch if ch.isprintable() or ch in keep else ascii(ch)[1:-1] for ch in text)


def _write_plans(path: str, plans: list) -> None:
    """``-o``: one plan (or a list with several) as taskflow-schedule/1 JSON, or as CSV where the
    path ends in ``.csv`` (one table, a ``scheduler`` column telling the plans apart)."""
    if path.lower().endswith(".csv"):
        atomic_write(path, "".join(p.to_csv(header=k == 0) for k, p in enumerate(plans)))
    else:
        atomic_write(path, dump_json(plans[0].to_dict() if len(plans) == 1 else [p.to_dict() for p in plans]))


def _write_chrome_trace(path: str, traces: list) -> None:
    """``--chrome-trace``: the traces' tracks in one file, each led by its scheduler's name when several."""
    events = []
    for tr in traces:
        events += tr.chrome_trace(f"{tr.scheduler}: " if len(traces) > 1 else "")
    atomic_write(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))


# ---------------------------------------------------------------------- graphs
#: tasks from which ``schedule``, ``simulate`` and ``info`` say each stage's time on stderr
STAGE_TASKS = 100_000


class _Stages:
    """One line on stderr per stage of a command on a graph of :data:`STAGE_TASKS` tasks or more:
    what was done and how long it took (a command on a million tasks is never silent for long)."""

    def __init__(self, quiet: bool):
        self.on, self.t = not quiet, time.perf_counter()

    def big(self, graph) -> None:
        """The graph is read: from now on, say each stage only if it is large."""
        self.on = self.on and len(graph) >= STAGE_TASKS
        self.done(f"read {len(graph):,} tasks")

    def done(self, what: str) -> None:
        now = time.perf_counter()
        if self.on:
            print(f"  {what} in {now - self.t:.1f} s", file=sys.stderr, flush=True)
        self.t = now


class _SearchProgress:
    """heft-search's ``progress``: a bar on stderr (the share of ``--budget`` spent) once a search
    has taken 2 s; none with -q or where stderr is no terminal."""

    def __init__(self, shown: bool):
        self.shown, self.bar = shown, None

    def __call__(self, share: float) -> None:
        if not self.shown:
            return
        if self.bar is None:
            from ...runtime.client.waiting import progress_bar

            self.bar = progress_bar(100, "heft-search", unit="%")
        self.bar.n = int(share * 100)
        self.bar.update(0)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@command("``taskflow info``: counts, total cost and critical path of each graph of GRAPH.")
def info(args) -> int:
    summaries = [graph_summary(g) for g in read_graphs(args.graph, args.format)]
    if args.json:
        print(json.dumps(summaries[0] if len(summaries) == 1 else summaries, indent=1))
        return 0
    for s in summaries:
        print(
            f"{s['name']}: {s['tasks']} tasks, {s['edges']} edges, total cost {s['total_cost']:g} s, "
            f"critical path {s['critical_path']:g} s ({s['critical_path_tasks']} tasks), "
            f"{s['total_bytes']:g} bytes on edges, parallelism {s['parallelism'] or 0:.2f}"
        )
    return 0


@command("``taskflow convert``: GRAPH written in another format (``-o``, ``--to``).")
def convert(args) -> int:
    check_outputs([("--output", args.output)], [args.graph])
    graph = read_graph(args.graph, args.format)
    fmt = format_for(args.output, args.to)
    atomic_write(args.output, graph_text(graph, fmt))
    print(f"wrote {args.output} ({fmt}, {len(graph)} tasks, {graph.num_edges} edges)")
    return 0


# ---------------------------------------------------------------------- plans and simulations
@command(
    "``taskflow schedule``: plan GRAPH with each ``--scheduler``, validate and print each plan; "
    "``-o``, ``--plot``, ``--chrome-trace`` write them."
)
def schedule(args) -> int:
    import schedulers

    from ...simulator import plan as make_plan

    check_outputs(
        [("--output", args.output), ("--plot", args.plot), ("--chrome-trace", args.chrome_trace)],
        [args.graph, args.cluster],
    )
    stages = _Stages(args.quiet)
    graph = read_graph(args.graph, args.format)
    stages.big(graph)
    cluster = cluster_from_args(args)
    names = scheduler_names(args.scheduler, static_all=True)
    options = {}
    if args.budget is not None:
        from schedulers.heft_search import parse_budget

        try:
            options = parse_budget(args.budget)
        except ValueError as e:
            raise UsageError(f"--budget: {e}") from None
    # a budget goes to the searching schedulers
    searching = [n for n in names if "search" in n or n == "optimal"]
    if args.budget is not None and not searching:
        raise UsageError("--budget goes with --scheduler heft-search or optimal")
    bar = _SearchProgress(not args.quiet)
    instances = [
        schedulers.get_scheduler(
            n,
            seed=args.seed,
            **({**options, **({"progress": bar} if n == "heft-search" else {})} if n in searching else {}),
        )
        for n in names
    ]
    cost_model = CostModel(graph, cluster)
    schedulers.warm_up(len(graph), len(cluster))  # compiled kernels, where needed, load outside the timings
    rows, plans = [], []
    for scheduler in instances:
        t0 = time.perf_counter()
        plan = make_plan(graph, cluster, scheduler, cost_model=cost_model)
        elapsed = time.perf_counter() - t0
        bar.close()
        stages.done(f"planned by {scheduler.name}")
        plan.validate(graph, cluster, cost_model=cost_model)  # trust no scheduler
        m = plan.metrics(graph, cluster, cost_model=cost_model)
        stages.done("validated and measured")
        rows.append((scheduler.name, m, elapsed))
        plans.append(plan)
        if len(instances) == 1 or not args.quiet:
            print(
                f"{scheduler.name}: makespan {m['makespan']:g}  (lower bound {m['lower_bound']:g}, "
                f"SLR {m['slr']:.3f}, scheduled in {elapsed * 1e3:.1f} ms)"
            )
            if "gap" in plan.extra:  # a scheduler that proves a bound (optimal) says what it proved
                print(
                    f"  {plan.extra['status']}: no schedule is shorter than {plan.extra['lower_bound']:g} "
                    f"(gap {100 * plan.extra['gap']:.2f}%)"
                )
        if not args.quiet:
            _print_table(plan, cluster)
    if len(rows) > 1:
        if not args.quiet:
            print()
        print(
            f"{'scheduler':<15} {'makespan':>10} {'x bound':>8} {'SLR':>7} {'speedup':>8} {'efficiency':>10} "
            f"{'time ms':>8}"
        )
        for name, m, el in sorted(rows, key=lambda r: (r[1]["makespan"], r[0])):
            print(
                f"{name:<15} {m['makespan']:>10.4g} {m['bound_ratio']:>8.3f} {m['slr']:>7.3f} {m['speedup']:>8.3f} "
                f"{m['efficiency']:>10.3f} {el * 1e3:>8.2f}"
            )
    if args.output:
        _write_plans(args.output, plans)
    if args.plot:
        from ..plot import gantt

        gantt(plans, args.plot, workers=cluster.ids, graph=graph)
    if args.chrome_trace:
        from ...trace import Run, Trace

        _write_chrome_trace(
            args.chrome_trace,
            [
                Trace([Run(a.task, a.task, a.worker, a.start, a.finish) for a in p], [], scheduler=p.scheduler)
                for p in plans
            ],
        )
    return 0


@command(
    "``taskflow validate``: check ``--schedule`` against GRAPH and the cluster; each problem on a "
    "line of its own and status 1, else a summary and 0."
)
def validate(args) -> int:
    from ...errors import ScheduleError
    from ...trace import expand_graph, task_of_run

    graph = read_graph(args.graph, args.format)
    cluster = cluster_from_args(args)
    plan = load_schedule(args.schedule)
    # durations and the producer each run used come from the graph and the cluster; a trace's own
    # record of them (what a perturbed simulation used) only with --trace, and checked
    durations = plan.extra.get("durations") if args.trace else None
    served_by = (plan.extra.get("served_by") or {}) if args.trace else {}
    runs = [(task_of_run(t, graph), t) for t in plan.tasks]
    if any(base not in graph for base, _ in runs):
        bad = next(rid for base, rid in runs if base not in graph)
        raise UsageError(f"{args.schedule}: run {bad!r} names no task of the graph")
    problems = _served_by_problems(served_by, runs)
    if not problems:
        if any(t != rid for t, rid in runs) or served_by:
            graph = expand_graph(graph, runs, served_by)
        try:
            problems = plan.problems(graph, cluster, durations=durations)
        except ScheduleError as e:
            problems = e.problems
    if problems:
        for p in problems:
            print(f"invalid: {one_line(p)}", file=sys.stderr)
        return 1
    m = plan.metrics(graph, cluster)
    print(
        f"valid: {len(plan)} tasks on {len(cluster)} workers, makespan {m['makespan']:g} "
        f"(lower bound {m['lower_bound']:g}, SLR {m['slr']:.3f})"
    )
    return 0


#: tasks above which ``schedule`` and ``simulate`` print no per-worker table (``-o`` writes the plan)
TABLE_TASKS = 2000


def _print_table(plan, cluster) -> None:
    """The per-worker table of ``plan`` (a schedule, or a trace), or one line saying where the plan
    of a large graph goes (a trace's schedule not even made)."""
    if (len(plan.runs) if isinstance(plan, Trace) else len(plan)) <= TABLE_TASKS:
        print((plan.to_schedule() if isinstance(plan, Trace) else plan).table(cluster))
    else:
        print(
            f"(no per-worker table above {TABLE_TASKS:,} tasks: -o FILE writes the plan, --chrome-trace FILE "
            f"a timeline)"
        )


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
                out.append(
                    f"served_by[{consumer!r}] has input {producer!r} come from {rid!r}, which is not a run of "
                    f"{producer!r}"
                )
    return out


def _worker_id(cluster, text: str, option: str):
    for wid in cluster.ids:
        if str(wid) == text:
            return wid
    raise UsageError(f"{option}: unknown worker {text!r} (workers: {', '.join(map(str, cluster.ids))})")


def _parse_at(spec: str, option: str):
    head, sep, at = spec.rpartition("@")
    try:
        t = float(at)
    except ValueError:
        t = None
    if not sep or not head or t is None or not t >= 0:
        raise UsageError(
            f"{option} {spec!r}: expected {'W:FACTOR@T' if 'straggler' in option else 'W@T'} with a time T >= 0"
        )
    return head, t


@command(
    "``taskflow simulate``: carry GRAPH out in the simulator under each ``--scheduler`` (or a "
    "``--plan``), with noise, stragglers and failures; ``-o``, ``--plot``, ``--chrome-trace`` write "
    "it."
)
def simulate(args) -> int:
    import schedulers

    from ... import simulate as run_simulation  # (adaptive: its own decisions, taskflow.runtime.simulated)

    check_outputs(
        [("--output", args.output), ("--chrome-trace", args.chrome_trace), ("--plot", args.plot)],
        [args.graph, args.cluster],
    )
    stages = _Stages(args.quiet)
    graph = read_graph(args.graph, args.format)
    stages.big(graph)
    cluster = cluster_from_args(args)
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
            raise UsageError(f"--straggler {spec!r}: expected W:FACTOR@T with FACTOR > 0")
        stragglers[_worker_id(cluster, w, "--straggler")] = (f, t)
    plan = load_schedule(args.plan) if args.plan else None
    if plan is not None:
        plan.validate(graph, cluster)  # a plan file is input: check it before running it
    names = scheduler_names(args.scheduler) or [None if plan is not None else "heft"]
    if plan is not None and len(names) > 1:
        raise UsageError("--plan is carried out by one --scheduler (the one that re-plans after a failure)")
    schedulers.warm_up(len(graph), len(cluster))
    traces = []
    for name in names:
        trace = run_simulation(
            graph,
            cluster,
            name,
            network=args.network,
            plan=plan,
            noise=args.noise,
            stragglers=stragglers,
            fail=fail,
            information=args.information,
            seed=args.seed,
            scheduler_interval=args.interval,
            decision_latency=args.decision_latency,
        )
        stages.done(f"simulated under {trace.scheduler}")
        trace.validate(graph, cluster)
        traces.append(trace)
        m = trace.metrics(graph, cluster)
        stages.done("validated and measured")
        print(
            f"{trace.scheduler} on {trace.network}: makespan {trace.makespan:g} s (lower bound "
            f"{m['lower_bound']:g}, SLR {m['slr']:.3f}); {len(trace.runs)} runs, {trace.num_transfers} transfers "
            f"({trace.bytes_moved:g} bytes)"
        )
        if trace.recomputed or trace.lost:
            print(
                f"lost {len(trace.lost)} running task(s); recomputed: "
                f"{', '.join(sorted(map(str, trace.recomputed))) or 'none'}"
            )
        if not args.quiet:
            _print_table(trace, cluster)
    if args.output:
        _write_plans(args.output, [tr.to_schedule() for tr in traces])
    if args.chrome_trace:
        _write_chrome_trace(args.chrome_trace, traces)
    if args.plot:
        from ..plot import gantt

        gantt(
            [tr.to_schedule() for tr in traces],
            args.plot,
            workers=cluster.ids,
            graph=graph,
            transfers=[tr.transfers for tr in traces],
        )
    return 0
