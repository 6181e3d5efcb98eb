"""The command line's shared grammar: one definition of each option that several commands take
(:data:`SHARED`, added with :func:`add_option`, and the ``add_*`` helpers for groups of them);
:mod:`.values` reads the values they name.

The same thing is spelled the same way in every command:

- ``GRAPH``: a graph file (native, WfFormat, DAX, STG, Estee zip[#K]) or ``module:function``
  returning a :class:`~taskflow.TaskGraph` (:func:`read_graph`);
- ``--scheduler``: one name, or a comma list (``heft,cpop``; ``all`` where static plans are
  made), :func:`scheduler_names`;
- ``--speeds``: one speed per worker in order (``1,1,2``) or by worker name (``w0=1,w2=2``),
  :func:`parse_speeds`;
- ``--workers``: how many workers (of an embedded cluster, a model, batch jobs or training ranks);
  ``--cores``: cores (threads) per worker; ``--seed``; ``--timeout``: seconds;
- ``-o`` / ``--output``: what the command writes (a file, or a folder for the commands that write
  several); ``--plot``: a picture (PNG, SVG or PDF; a Gantt chart where the command has a plan or a
  run); ``--chrome-trace``: a trace for Perfetto;
- ``-q`` / ``--quiet``: only the summary lines, no per-task tables or progress; ``-v`` /
  ``--verbose``: full tracebacks (a task that raised, a bug).

Spellings of earlier releases (``--gantt``, ``--report``, ``--out``, ``--policy``, ``--jobs``,
``--schedulers``) are still read, unlisted (:data:`OLD_SPELLINGS`).
"""

from __future__ import annotations

import argparse
import math

from ...checks import MAX_SEED, decimal, parse_bytes
from ...cluster import DEFAULT_BANDWIDTH
from ...errors import UsageError
from ...files import check_outputs
from ...formats import READ_FORMATS

__all__ = [
    "number",
    "add_option",
    "add_existing",
    "add_jobqueue",
    "jobqueue_options",
    "add_graph",
    "add_graphs",
    "add_cluster",
    "add_scheduler",
    "add_quiet",
    "add_seed",
    "add_dashboard",
    "add_network",
    "add_cores",
    "add_speeds",
    "add_plot",
    "add_output",
    "add_chrome_trace",
    "old_spellings",
    "check_outputs",
    "SHARED",
    "SEED",
    "COUNT",
    "RETRIES",
    "SECONDS",
    "NONNEGATIVE",
    "SCALE",
    "NOISE",
    "OLD_SPELLINGS",
]

GRAPH_HELP = "graph file (native, WfFormat, DAX, STG, Estee zip[#K]) or module:function returning a TaskGraph"
QUIET_HELP = "print only the summary lines: no per-task tables, no progress"
#: option spellings of earlier releases, still read (hidden from --help), and what they are now
OLD_SPELLINGS = {
    "--gantt": "--plot",
    "--report": "--output",
    "--out": "--output",
    "--policy": "--scheduler",
    "--schedulers": "--scheduler",
    "--jobs": "--workers or --processes",
    "--threads": "--cores",
}
SPEEDS_HELP = "worker speeds: one per worker in order (1,1,2) or by worker name (w0=1,w2=2); default all 1"


# ---------------------------------------------------------------------- options
class _Bounded:
    """An argparse ``type`` made by :func:`number`."""

    def __init__(self, kind, low, above, high):
        self.kind, self.low, self.above, self.high = kind, low, above, high
        self.__name__ = kind.__name__  # argparse names a type by it

    def __call__(self, text):
        kind, low, above, high = self.kind, self.low, self.above, self.high
        try:
            # as a file writes numbers (not 1_000, nor another script's digits); inf and nan are
            # numbers the bounds below refuse by name
            nonfinite = kind is float and text.lower().lstrip("+-") in ("inf", "infinity", "nan")
            value = float(text) if nonfinite else decimal(text, kind)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None

        def shown(x):
            return str(int(x)) if kind is int and float(x).is_integer() else f"{x:g}"

        bounds = [
            f">= {shown(low)}" if low is not None else None,
            f"> {shown(above)}" if above is not None else None,
            f"<= {shown(high)}" if high is not None else None,
        ]
        if (
            (kind is float and not math.isfinite(value))
            or (low is not None and value < low)
            or (above is not None and value <= above)
            or (high is not None and value > high)
        ):
            wanted = " and ".join(b for b in bounds if b)
            what = "an integer" if kind is int else "a finite number"
            raise argparse.ArgumentTypeError(f"must be {what} {wanted}, got {text!r}".replace("  ", " "))
        return value


def number(kind=float, low: float | None = None, above: float | None = None, high: float | None = None):
    """An argparse ``type``: a finite number of ``kind`` (``int`` or ``float``) at least ``low``,
    above ``above`` and at most ``high``, else argparse's one-line error naming the option.

    Parameters
    ----------
    kind : type
    low, above, high : float, optional
    """
    return _Bounded(kind, low, above, high)


#: argparse types of the commands' counts and durations
SEED = number(int, low=0, high=MAX_SEED)
COUNT = number(int, low=1, high=10_000)
RETRIES = number(int, low=0, high=1000)
SECONDS = number(float, above=0.0, high=1e7)
NONNEGATIVE = number(float, low=0.0, high=1e7)
SCALE = number(float, above=0.0, high=1e6)
#: the spread of log durations (the simulator's MAX_NOISE: beyond it durations overflow)
NOISE = number(float, low=0.0, high=10.0)

#: every option that several commands take, defined once: flag -> its argparse keywords. A command
#: adds one with :func:`add_option`, saying what it means there and its default where they differ.
SHARED = {
    "--address": {"help": "scheduler address of an existing cluster, e.g. tcp://host:8786"},
    "--scheduler-file": {"help": "scheduler file of an existing cluster"},
    "--workers": {"type": COUNT, "help": "how many workers"},
    "--timeout": {"type": SECONDS, "help": "give up after this many seconds"},
    "--repeat": {"type": COUNT, "metavar": "N", "help": "runs of each"},
    "--profile": {"metavar": "FILE", "help": "a cost profile (JSON): the task costs real runs measured"},
    "--time-scale": {"type": SCALE, "help": "multiply emulated durations"},
    "--batch": {"type": COUNT, "help": "samples per iteration over all ranks"},
    "--real": {"action": "store_true", "help": "on Dask workers too"},
    "--noise": {"type": NOISE, "default": 0.0, "help": "per-task duration noise: x exp(N(0, S)), S from 0 to 10"},
    "--make-data": {"choices": ("digits", "synthetic"), "help": "first write the dataset if it is missing"},
    "--budget": {"help": "how much a search may spend"},
    "--format": {"choices": READ_FORMATS, "help": "force the input format (default: detect)"},
    "--cluster": {"metavar": "FILE", "help": "cluster file (taskflow-cluster/1)"},
    "--bandwidth": {"help": "a link's rate: bytes/s, or a rate such as 200mbit or 1gbit"},
}


def add_option(sp, flag: str, help: str | None = None, **changes) -> None:
    """The shared option ``flag`` (:data:`SHARED`): its one type and syntax, with this command's
    help and default.

    Parameters
    ----------
    sp : argparse.ArgumentParser or argument group
    flag : str
        A key of :data:`SHARED`.
    help : str, optional
        What it means in this command (default: the common meaning).
    **changes
        ``default``, ``metavar`` or ``required`` for this command; nothing that changes its syntax.

    Raises
    ------
    UsageError
        A flag that is not shared, or a change of its syntax (a bug in a command's parser).
    """
    if flag not in SHARED or set(changes) - {"default", "metavar", "required"}:
        raise UsageError(f"add_option: {flag!r} with {sorted(changes)}: not a shared option, or a change of its syntax")
    sp.add_argument(flag, **{**SHARED[flag], **changes, **({"help": help} if help is not None else {})})


def add_existing(sp, what: str = "") -> None:
    """``--address`` and ``--scheduler-file``: an existing Dask cluster instead of an embedded one.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        When the command uses them (``"with --real: "``), before their help.
    """
    add_option(sp, "--address", help=f"{what}{SHARED['--address']['help']} (default: an embedded LocalCluster)")
    add_option(sp, "--scheduler-file", help=f"{what}{SHARED['--scheduler-file']['help']}")


def add_jobqueue(sp, what: str = "") -> None:
    """``--jobqueue`` and the batch jobs' options (dask-jobqueue): the workers started as batch
    jobs of one worker each (``--workers`` of them), instead of an embedded cluster.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        When the command uses them (``"run: "``), before their help.
    """
    jq = sp.add_argument_group("batch systems (dask-jobqueue)")
    jq.add_argument(
        "--jobqueue",
        choices=("slurm", "pbs"),
        help=f"{what}start the workers as batch jobs, one worker each (--workers of them)",
    )
    jq.add_argument("--memory", default="2GB", help="memory per job (default 2GB)")
    jq.add_argument("--walltime", default="01:00:00", help="walltime per job (default 01:00:00)")
    jq.add_argument("--queue", help="the queue or partition (default: the batch system's default)")
    jq.add_argument("--interface", help="network interface of the scheduler and workers, e.g. ib0")
    jq.add_argument(
        "--job-wait",
        type=SECONDS,
        default=120.0,
        help="seconds to wait for every job's worker before failing (default 120)",
    )


def jobqueue_options(args) -> dict | None:
    """The batch jobs' options :func:`add_jobqueue` read, for :func:`taskflow.run`'s
    ``jobqueue_options``; None without ``--jobqueue``.

    Parameters
    ----------
    args : argparse.Namespace

    Raises
    ------
    UsageError
        ``--jobqueue`` with an existing cluster (``--address``, ``--scheduler-file``), or without
        ``--workers``.
    """
    if not args.jobqueue:
        return None
    if args.address or args.scheduler_file:
        raise UsageError("--jobqueue starts its own cluster: leave out --address and --scheduler-file")
    if args.workers is None:
        raise UsageError("--jobqueue needs --workers N: the number of batch jobs, one worker each")
    return {
        "cores": getattr(args, "cores", None) or 1,
        "memory": args.memory,
        "walltime": args.walltime,
        "queue": args.queue,
        "interface": args.interface,
        "wait": args.job_wait,
    }


def add_graph(sp) -> None:
    """A positional GRAPH (file or module:function) and ``--format``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("graph", metavar="GRAPH", help=GRAPH_HELP)
    add_option(sp, "--format")


def add_graphs(sp) -> None:
    """One or more GRAPH arguments and ``--format``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("graphs", metavar="GRAPH", nargs="+", help=GRAPH_HELP + " (one or more)")
    add_option(sp, "--format")


def add_cores(sp, what: str = "with --workers") -> None:
    """``--cores``: cores (threads) per worker.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        What it is of (the help text).
    """
    sp.add_argument("--cores", type=COUNT, default=1, help=f"cores (threads) per worker {what} (default 1)")


def add_speeds(sp) -> None:
    """``--speeds``, in either form (:func:`parse_speeds`).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("--speeds", help=SPEEDS_HELP)


def add_cluster(sp) -> None:
    """A cluster model: a file, or N workers with speeds, cores and a network.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    add_option(sp, "--cluster")
    add_option(sp, "--workers", help="N workers w0..wN-1 instead of --cluster")
    add_speeds(sp)
    add_cores(sp)
    add_option(
        sp,
        "--bandwidth",
        default=DEFAULT_BANDWIDTH,
        help="between workers with --workers: bytes/s, or a rate such as 200mbit or 1gbit (default 1e9)",
    )
    sp.add_argument("--latency", type=NONNEGATIVE, default=0.0, help="seconds per transfer with --workers (default 0)")


def add_scheduler(
    sp,
    default: str | None = None,
    static_all: bool = False,
    help: str | None = None,
    which: str = "a name from 'taskflow schedulers'",
) -> None:
    """``--scheduler NAME[,NAME...]`` (earlier spelled ``--schedulers`` or ``--policy``: still read).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    default : str, optional
    static_all : bool
        ``all`` means every static scheduler.
    help : str, optional
        What no name means, where there is no one default.
    which : str
        Which schedulers (``taskflow jobs``: job schedulers).
    """
    extra = ", or 'all' for every static one" if static_all else ""
    sp.add_argument(
        "--scheduler",
        dest="scheduler",
        default=default,
        metavar="NAME[,NAME...]",
        help=f"{which}, or a comma list{extra}"
        + (f" (default {default})" if default else f" ({help})" if help else ""),
    )
    old_spellings(sp, ("--schedulers", "--policy"), "scheduler")


def old_spellings(sp, names, dest: str, **kw) -> None:
    """Earlier spellings of an option: read into ``dest``, not listed by ``--help``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    names : iterable of str
    dest : str
        The field the option they stand for fills.
    **kw
        Their type (``type=COUNT``).
    """
    for name in names:
        sp.add_argument(name, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kw)


def add_output(sp, what: str, folder: bool = False, default: str | None = None, old=()) -> None:
    """``-o`` / ``--output``: what the command writes, a file (or with ``folder``, a folder).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        What is written there (the help text).
    folder : bool
    default : str, optional
    old : iterable of str
        Earlier spellings, still read.
    """
    sp.add_argument(
        "-o",
        "--output",
        default=default,
        metavar="FOLDER" if folder else "FILE",
        help=what + (f" (default {default})" if default else ""),
    )
    old_spellings(sp, old, "output")


def add_network(sp) -> None:
    """``--network``: the simulator's network model.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument(
        "--network",
        choices=("maxmin", "simple"),
        default="maxmin",
        help="the simulator's network model: maxmin (flows share links) or simple (default maxmin)",
    )


def add_quiet(sp) -> None:
    """The options of every command: ``-q`` / ``--quiet`` (only the summary lines), ``-v`` /
    ``--verbose`` (full tracebacks) and ``--max-bytes`` (the largest input file read).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    sp.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="full tracebacks: of a task that raised (its one line names its file and line), of a bug",
    )
    sp.add_argument(
        "--max-bytes",
        metavar="SIZE",
        type=_max_bytes,
        default=None,
        help="the largest input file read, e.g. 2GiB (default 512MiB, or TASKFLOW_MAX_BYTES): a "
        "safeguard against a hostile file, raised for a real one of millions of tasks",
    )


def _max_bytes(text: str) -> int:
    try:
        return parse_bytes(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_seed(sp) -> None:
    """``--seed``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("--seed", type=SEED, default=0, help="seed of every random choice (default 0)")


def add_dashboard(sp) -> None:
    """``--dashboard [HOST:PORT]``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument(
        "--dashboard",
        nargs="?",
        const=True,
        metavar="HOST:PORT",
        help="serve the embedded cluster's Dask dashboard (default 127.0.0.1:8787) and print its link",
    )


def add_plot(sp, what: str, old=()) -> None:
    """``--plot FILE``: a picture (PNG, SVG or PDF by its suffix).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        What it draws (the help text).
    old : iterable of str
        Earlier spellings, still read.
    """
    sp.add_argument("--plot", metavar="FILE", help=f"draw {what} (PNG, SVG or PDF, by the suffix)")
    old_spellings(sp, old, "plot")


def add_chrome_trace(sp, what: str) -> None:
    """``--chrome-trace JSON``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        What it is of (the help text).
    """
    sp.add_argument("--chrome-trace", metavar="JSON", help=f"write {what} as a Chrome trace (open in Perfetto)")
