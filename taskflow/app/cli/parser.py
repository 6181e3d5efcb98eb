"""The ``taskflow`` command's argument parser: one subparser per subcommand, built from the
shared options of :mod:`.options` so that one thing has one spelling everywhere."""

from __future__ import annotations

import argparse

from ... import __version__
from ...formats import WRITE_FORMATS
from . import advising, commands, jobs, running, training
from .options import (
    COUNT,
    NONNEGATIVE,
    RETRIES,
    SCALE,
    add_chrome_trace,
    add_cluster,
    add_cores,
    add_dashboard,
    add_existing,
    add_jobqueue,
    add_graph,
    add_graphs,
    add_network,
    add_option,
    add_output,
    add_plot,
    add_quiet,
    add_scheduler,
    add_seed,
    add_speeds,
    old_spellings,
)

__all__ = ["build_parser", "Parser", "option_names", "unknown_options"]


class Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``error: <command>: <what>`` (exit status 2),
    like every other error of the command; ``-h`` still prints the usage."""

    def error(self, message):
        """Print ``message`` on one line and exit with status 2.

        Parameters
        ----------
        message : str
        """
        import difflib
        import re

        bad = re.match(r"argument (\S+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if bad:  # argparse lists the choices; say which one was meant
            choices = re.findall(r"'([^']*)'", bad.group(3))
            near = difflib.get_close_matches(bad.group(2), choices, n=1, cutoff=0.5)
            if near:
                message += f"; did you mean {near[0]!r}?"
        self.exit(2, f"error: {self.prog}: {message}\n")

    def parse_args(self, args=None, namespace=None):
        """Parse ``args``; an unknown option is refused naming the subcommand it was given to and,
        where one is close, the option meant (``--schedulr``: did you mean ``--scheduler``?)."""
        parsed, extras = self.parse_known_args(args, namespace)
        sub = self._subcommand(parsed)
        if extras:
            (sub or self).error(unknown_options(sub or self, extras))
        for action in (sub or self)._actions:  # an empty value is no value: never "the default", never "all"
            value = getattr(parsed, action.dest, None)
            values = value if isinstance(value, list) else [value]
            if action.nargs != 0 and any(isinstance(v, str) and not v.strip() for v in values):
                name = "/".join(action.option_strings) or action.metavar or action.dest.upper()
                (sub or self).error(f"argument {name}: empty value {value!r:.40}; give one, or leave the option out")
        return parsed

    def _subcommand(self, parsed):
        """The subparser ``parsed`` went to, if any."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):  # by its function: a subcommand may reuse the dest
                func = getattr(parsed, "func", None)
                return next(
                    (sp for sp in action.choices.values() if func is not None and sp.get_default("func") is func), None
                )
        return None

    def _get_values(self, action, arg_strings):
        # argparse drops a '--' given as an option's value (``--workers=--``) and passes an empty
        # list on, where one value was expected
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            raise argparse.ArgumentError(action, "expected a value, got '--'")
        return super()._get_values(action, arg_strings)


def option_names(parser, hidden: bool = False) -> list:
    """The option strings ``parser`` takes (with ``hidden``, also the unlisted earlier spellings).

    Parameters
    ----------
    parser : argparse.ArgumentParser
    hidden : bool
    """
    return [o for a in parser._actions for o in a.option_strings if hidden or a.help is not argparse.SUPPRESS]


def unknown_options(parser, extras) -> str:
    """One line for arguments ``parser`` does not take, with the nearest option it does take.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    extras : list of str
        What it did not recognise.
    """
    import difflib

    hints = []
    for extra in extras:
        if not extra.startswith("-"):
            continue
        name = extra.split("=", 1)[0]
        near = difflib.get_close_matches(name, option_names(parser), n=1, cutoff=0.6)
        if near:
            hints.append(f"{name}: did you mean {near[0]}?")
    text = " ".join(extras)
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"unrecognized arguments: {text}" + (
        f" ({'; '.join(hints)})"
        if hints
        else f" (see taskflow {parser.prog.split()[-1]} -h)"
        if " " in parser.prog
        else ""
    )


DESCRIPTION = (
    "Plan, simulate and run task-graph workflows: read and convert graphs, plan them with "
    "schedulers, check plans, simulate them, run them on Dask workers and compare schedulers. "
    "A GRAPH is a file (native, WfFormat, DAX, STG, Estee) or module:function returning a TaskGraph."
)


def _info(sp) -> None:
    """``taskflow info``'s arguments."""
    add_graph(sp)
    sp.add_argument("--json", action="store_true", help="print a JSON object (a list for an Estee set)")
    add_quiet(sp)


def _convert(sp) -> None:
    """``taskflow convert``'s arguments."""
    add_graph(sp)
    sp.add_argument("-o", "--output", required=True, metavar="FILE", help="output file (.dot/.gv means DOT)")
    sp.add_argument("--to", choices=WRITE_FORMATS, help="output format (default: by suffix, else native)")
    add_quiet(sp)


def _schedule(sp) -> None:
    """``taskflow schedule``'s arguments."""
    add_graph(sp)
    add_cluster(sp)
    add_scheduler(sp, default="heft", static_all=True)
    add_seed(sp)
    add_option(
        sp,
        "--budget",
        help="heft-search: evaluations (e.g. 64) or seconds (e.g. 2s); default 16. "
        "optimal: CP-SAT deterministic time (e.g. 30) or seconds (e.g. 30s); default 2",
    )
    add_output(sp, "write the plan (taskflow-schedule/1 JSON, a list with several; CSV where the name ends in .csv)")
    add_plot(sp, "a Gantt chart of the plan (a panel per scheduler)", old=("--gantt",))
    add_chrome_trace(sp, "the plan")
    add_quiet(sp)


def _simulate(sp) -> None:
    """``taskflow simulate``'s arguments."""
    add_graph(sp)
    add_cluster(sp)
    add_scheduler(sp, default="heft")
    add_network(sp)
    sp.add_argument(
        "--plan",
        help="simulate this schedule file instead of planning (--scheduler then names the "
        "scheduler that re-plans after a failure)",
    )
    add_option(sp, "--noise", help="per-task duration noise: x exp(N(0, S)), S from 0 to 10 (default 0)")
    sp.add_argument(
        "--straggler",
        action="append",
        metavar="W:FACTOR@T",
        help="worker W runs FACTOR times slower from time T (repeatable)",
    )
    sp.add_argument("--fail", action="append", metavar="W@T", help="worker W is lost at time T (repeatable)")
    sp.add_argument(
        "--information",
        choices=("exact", "mean", "blind", "user"),
        default="exact",
        help="what the scheduler knows of costs (default exact)",
    )
    sp.add_argument("--interval", type=NONNEGATIVE, default=0.0, help="minimum seconds between scheduler invocations")
    sp.add_argument("--decision-latency", type=NONNEGATIVE, default=0.0, help="seconds until a decision takes effect")
    add_seed(sp)
    add_output(
        sp, "write the trace (taskflow-schedule/1 JSON with transfers and durations; CSV where the name ends in .csv)"
    )
    add_plot(sp, "a Gantt chart of the simulated run, transfers marked", old=("--gantt",))
    add_chrome_trace(sp, "the simulated run")
    add_quiet(sp)


def _run(sp) -> None:
    """``taskflow run``'s arguments."""
    add_graph(sp)
    add_scheduler(sp, default="heft")
    add_option(
        sp,
        "--workers",
        help="workers of the embedded LocalCluster (default 2), or batch jobs with --jobqueue (one worker each)",
    )
    old_spellings(sp, ("--jobs",), "workers", type=COUNT)
    add_cores(sp, "of the embedded cluster, or of each batch job")
    old_spellings(sp, ("--threads",), "cores", type=COUNT)
    add_existing(sp)
    add_option(sp, "--cluster", help="cluster model file; worker ids are Dask worker names")
    add_speeds(sp)
    sp.add_argument("--calibrate", action="store_true", help="measure worker speeds and bandwidth first")
    add_option(sp, "--time-scale", default=1.0, help="multiply emulated durations (default 1)")
    sp.add_argument("--size-scale", type=SCALE, default=1.0, help="multiply emulated output sizes (default 1)")
    sp.add_argument("--retries", type=RETRIES, default=0, help="retries of a task that raises (default 0)")
    add_option(sp, "--timeout")
    add_seed(sp)
    add_option(
        sp,
        "--profile",
        help="cost profile (JSON): plan with it if it exists, then add this run's "
        "measurements to it (learn on the first run, plan with it on the next)",
    )
    add_output(sp, "write the run report (JSON; a list with several schedulers)", old=("--report",))
    add_plot(
        sp,
        "a Gantt chart of the plan above the measured run (with several schedulers, NAME.SCHEDULER.png each)",
        old=("--gantt",),
    )
    add_chrome_trace(sp, "the measured run and the plan (with several schedulers, NAME.SCHEDULER.json each)")
    add_dashboard(sp)
    add_jobqueue(sp)
    add_quiet(sp)


def _compare(sp) -> None:
    """``taskflow compare``'s arguments."""
    add_graphs(sp)
    add_cluster(sp)
    add_scheduler(sp, help="default: every scheduler")
    add_network(sp)
    add_seed(sp)
    add_option(sp, "--real", help="also run the static schedulers and Dask's work stealing on Dask workers")
    add_existing(sp, "with --real: ")
    add_option(sp, "--profile", help="with --real: cost profile (JSON) to plan with and add each run's measurements to")
    add_option(
        sp,
        "--time-scale",
        help="with --real: multiply emulated durations and sizes (default: so that the "
        "best simulated plan takes about 2 s)",
    )
    add_option(
        sp,
        "--repeat",
        default=1,
        help="each scheduler N times, seeds --seed, --seed + 1, ...: the table and "
        "the figure give the median and range of the repeats, compare.csv every one (default 1)",
    )
    add_output(sp, "folder for compare.csv, compare.md and compare.png", folder=True, old=("--out",))
    add_dashboard(sp)
    add_quiet(sp)


def _bench(sp) -> None:
    """``taskflow bench``'s arguments."""
    sp.add_argument(
        "--suite",
        choices=("quick", "standard", "full", "dask"),
        default="quick",
        help="which suite: quick (minutes), standard, full (default quick); dask: ordinary Dask code "
        "(array, dataframe, bag, delayed) under taskflow.use against Dask's own scheduling",
    )
    sp.add_argument(
        "--clusters",
        help="with --suite dask: homogeneous, heterogeneous (the last worker held to a quarter core; "
        "needs root), two-racks (workers on the network testbed in two racks joined by a 10x slower "
        "link; needs root), comma-separated (default homogeneous)",
    )
    sp.add_argument("--workloads", help="with --suite dask: the workloads to run, comma-separated (default all)")
    add_option(sp, "--repeat", help="with --suite dask: runs of each side after the first (default 5)")
    sp.add_argument(
        "--firsts",
        type=COUNT,
        help="with --suite dask: first runs of each side, each on a "
        "fresh cluster; their median is reported (default 1)",
    )
    add_scheduler(sp, help="default: the suite's")
    add_output(sp, "output folder", folder=True, default="taskflow-out/bench", old=("--out",))
    sp.add_argument("-j", "--processes", type=COUNT, help="parallel processes (default: all cores)")
    old_spellings(sp, ("--jobs",), "processes", type=COUNT)
    add_option(
        sp,
        "--real",
        help="also run a subset (4 workflows x heft, cpop, blevel, work-stealing) on a local "
        "Dask cluster in emulation; rows in real.csv, a section in summary.md",
    )
    add_quiet(sp)


def _demo(sp) -> None:
    """``taskflow demo``'s arguments."""
    add_output(sp, "output folder", folder=True, default="taskflow-out", old=("--out",))
    sp.add_argument("--no-bench", action="store_true", help="skip the quick suite")
    add_dashboard(sp)
    add_quiet(sp)


def _validate(sp) -> None:
    """``taskflow validate``'s arguments."""
    add_graph(sp)
    add_cluster(sp)
    sp.add_argument("--schedule", required=True, help="schedule file (taskflow-schedule/1)")
    sp.add_argument(
        "--trace",
        action="store_true",
        help="a simulated trace: use the durations and served_by it records (checked), not the model's",
    )
    add_quiet(sp)


def _samples(sp) -> None:
    """``taskflow samples``'s arguments."""
    add_output(sp, "folder", folder=True, default=".", old=("--out",))
    sp.add_argument("--force", action="store_true", help="replace sample files of the same names already there")
    add_quiet(sp)


def _testbed(sp) -> None:
    """``taskflow testbed``'s arguments."""
    add_option(sp, "--workers", default=4, help="workers w0..wN-1 (default 4)")
    sp.add_argument(
        "--topology", default="uniform", help="uniform, two-racks, racks, slow-link or matrix (default uniform)"
    )
    add_option(sp, "--bandwidth", default="1gbit", help="each worker's link, e.g. 200mbit (default 1gbit)")
    sp.add_argument(
        "--inter-rack",
        help="two-racks: the link between the racks; racks: each rack's uplink and "
        "downlink to the core (default a tenth of --bandwidth)",
    )
    sp.add_argument("--racks", type=COUNT, default=2, help="racks: how many (default 2)")
    sp.add_argument("--slow-worker", help="slow-link: the worker on the slow link (default the last)")
    sp.add_argument("--slow-bandwidth", help="slow-link: its rate (default a tenth of --bandwidth)")
    sp.add_argument("--matrix", help="matrix: JSON file {a: {b: rate}} by worker name")
    add_cores(sp, "(its Dask threads)")
    old_spellings(sp, ("--threads",), "cores", type=COUNT)
    sp.add_argument(
        "--cpus", help="CPU limits by worker, e.g. w2=0.5,w3=0.25 (cores; cgroup CPU quota): really slower workers"
    )
    sp.add_argument("--clean", action="store_true", help="remove what testbeds of dead processes left, and exit")
    add_quiet(sp)
    sp.add_argument(
        "command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="what to run in the client namespace"
    )


def _schedulers(sp) -> None:
    """``taskflow schedulers``'s arguments."""
    add_quiet(sp)


#: every subcommand: its name, its parser's text (help, description), what adds its arguments, what runs it
COMMANDS = (
    ("info", dict(help="counts, total cost and critical path of a graph"), _info, commands.info),
    ("convert", dict(help="convert a graph to native JSON, WfFormat 1.5 or DOT"), _convert, commands.convert),
    ("schedule", dict(help="plan a graph on a cluster with one or more schedulers"), _schedule, commands.schedule),
    (
        "simulate",
        dict(help="simulate a graph on a cluster (network models, noise, faults)"),
        _simulate,
        commands.simulate,
    ),
    ("run", dict(help="run a graph on Dask workers (emulated when it has no callables)"), _run, running.run),
    (
        "compare",
        dict(help="every scheduler on your own graphs: simulated, and on Dask with --real"),
        _compare,
        running.compare,
    ),
    (
        "bench",
        dict(
            help="the scheduler-comparison suites in the simulator (resumable), or real Dask workloads "
            "against Dask's own scheduling (--suite dask)"
        ),
        _bench,
        running.bench,
    ),
    ("demo", dict(help="the main job: training on a LocalCluster, then the quick suite"), _demo, running.demo),
    ("validate", dict(help="check a schedule against its graph and cluster"), _validate, commands.validate),
    ("samples", dict(help="write sample workflows and a cluster file to start from"), _samples, running.samples),
    (
        "testbed",
        dict(
            help="Dask workers on shaped network links (network namespaces, tc; needs root)",
            description="Start a Dask scheduler and workers in network namespaces joined by shaped links, "
            "run COMMAND beside them (DASK_SCHEDULER_ADDRESS set), then remove everything.",
        ),
        _testbed,
        running.testbed,
    ),
    (
        "advise",
        dict(
            help="which cluster to rent: simulate a workflow over a catalog's node types and prices; the "
            "Pareto front of makespan and cost"
        ),
        advising.add_arguments,
        advising.advise,
    ),
    (
        "jobs",
        dict(
            help="a shared cluster: job schedulers (FIFO, SJF, SRTF, Tiresias' LAS and Gittins, Gandiva) "
            "simulated on a trace of training jobs or run for real; or generate a trace"
        ),
        jobs.add_arguments,
        jobs.jobs,
    ),
    (
        "train",
        dict(help="train a PyTorch model on Dask workers, an epoch per task graph (needs the torch extra)"),
        training.add_arguments,
        training.train,
    ),
    ("schedulers", dict(help="list the registered schedulers"), _schedulers, running.schedulers),
)


def build_parser() -> argparse.ArgumentParser:
    """The ``taskflow`` command's argument parser: one subparser per subcommand of :data:`COMMANDS`,
    each built the same way."""
    p = Parser(prog="taskflow", description=DESCRIPTION)
    p.add_argument("--version", action="version", version=f"taskflow {__version__}", help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, text, arguments, func in COMMANDS:
        sp = sub.add_parser(name, **text)
        arguments(sp)
        sp.set_defaults(func=func)
    return p
