"""The command line's shared grammar: one definition of each option that several commands take,
and the parsers of their values.

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
import os
import sys

from ...checks import MAX_SEED, decimal, parse_bytes, parse_rate
from ...cluster import DEFAULT_BANDWIDTH, Cluster, Worker
from ...errors import TaskflowError, UsageError
from ...files import check_outputs
from ...formats import READ_FORMATS, load_graph, load_graphs, with_source

__all__ = ["Prefixed", "number", "add_graph", "add_graphs", "add_cluster", "add_scheduler", "add_quiet", "add_seed",
           "add_dashboard", "add_network", "add_cores", "add_speeds", "add_plot", "add_output", "add_chrome_trace", "read_graph",
           "read_graphs", "parse_speeds", "cluster_from_args", "scheduler_names", "check_outputs", "SEED", "COUNT",
           "RETRIES", "SECONDS", "NONNEGATIVE", "SCALE", "NOISE", "OLD_SPELLINGS"]

GRAPH_HELP = "graph file (native, WfFormat, DAX, STG, Estee zip[#K]) or module:function returning a TaskGraph"
QUIET_HELP = "print only the summary lines: no per-task tables, no progress"
#: option spellings of earlier releases, still read (hidden from --help), and what they are now
OLD_SPELLINGS = {"--gantt": "--plot", "--report": "--output", "--out": "--output", "--policy": "--scheduler",
                 "--schedulers": "--scheduler", "--jobs": "--workers or --processes", "--threads": "--cores"}
SPEEDS_HELP = "worker speeds: one per worker in order (1,1,2) or by worker name (w0=1,w2=2); default all 1"


class Prefixed(TaskflowError):
    """An error message already prefixed with the file it came from."""


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
        bounds = [f">= {shown(low)}" if low is not None else None, f"> {shown(above)}" if above is not None else None,
                  f"<= {shown(high)}" if high is not None else None]
        if ((kind is float and not math.isfinite(value)) or (low is not None and value < low)
                or (above is not None and value <= above)
                or (high is not None and value > high)):
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


def add_graph(sp) -> None:
    """A positional GRAPH (file or module:function) and ``--format``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("graph", metavar="GRAPH", help=GRAPH_HELP)
    sp.add_argument("--format", choices=READ_FORMATS, help="force the input format (default: detect)")


def add_graphs(sp) -> None:
    """One or more GRAPH arguments and ``--format``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("graphs", metavar="GRAPH", nargs="+", help=GRAPH_HELP + " (one or more)")
    sp.add_argument("--format", choices=READ_FORMATS, help="force the input format (default: detect)")


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
    sp.add_argument("--cluster", help="cluster file (taskflow-cluster/1)")
    sp.add_argument("--workers", type=COUNT, help="N workers w0..wN-1 instead of --cluster")
    add_speeds(sp)
    add_cores(sp)
    sp.add_argument("--bandwidth", default=DEFAULT_BANDWIDTH,
                    help="between workers with --workers: bytes/s, or a rate such as 200mbit or 1gbit (default 1e9)")
    sp.add_argument("--latency", type=NONNEGATIVE, default=0.0, help="seconds per transfer with --workers (default 0)")


def add_scheduler(sp, default: str | None = None, static_all: bool = False, help: str | None = None) -> None:
    """``--scheduler NAME[,NAME...]`` (earlier spelled ``--schedulers`` or ``--policy``: still read).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    default : str, optional
    static_all : bool
        ``all`` means every static scheduler.
    help : str, optional
        What no name means, where there is no one default.
    """
    extra = ", or 'all' for every static one" if static_all else ""
    sp.add_argument("--scheduler", dest="scheduler", default=default, metavar="NAME[,NAME...]",
                    help=f"a name from 'taskflow schedulers', or a comma list{extra}"
                         + (f" (default {default})" if default else f" ({help})" if help else ""))
    _old(sp, ("--schedulers", "--policy"), "scheduler")


def _old(sp, names, dest: str, **kw) -> None:
    """Earlier spellings of an option: read into ``dest``, not listed by ``--help``."""
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
    sp.add_argument("-o", "--output", default=default, metavar="FOLDER" if folder else "FILE",
                    help=what + (f" (default {default})" if default else ""))
    _old(sp, old, "output")


def add_network(sp) -> None:
    """``--network``: the simulator's network model.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("--network", choices=("maxmin", "simple"), default="maxmin",
                    help="the simulator's network model: maxmin (flows share links) or simple (default maxmin)")


def add_quiet(sp) -> None:
    """The options of every command: ``-q`` / ``--quiet`` (only the summary lines), ``-v`` /
    ``--verbose`` (full tracebacks) and ``--max-bytes`` (the largest input file read).

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    sp.add_argument("-v", "--verbose", action="store_true",
                    help="full tracebacks: of a task that raised (its one line names its file and line), of a bug")
    sp.add_argument("--max-bytes", metavar="SIZE", type=_max_bytes, default=None,
                    help="the largest input file read, e.g. 2GiB (default 512MiB, or TASKFLOW_MAX_BYTES): a "
                         "safeguard against a hostile file, raised for a real one of millions of tasks")


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
    sp.add_argument("--dashboard", nargs="?", const=True, metavar="HOST:PORT",
                    help="serve the embedded cluster's Dask dashboard (default 127.0.0.1:8787) and print its link")


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
    _old(sp, old, "plot")


def add_chrome_trace(sp, what: str) -> None:
    """``--chrome-trace JSON``.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    what : str
        What it is of (the help text).
    """
    sp.add_argument("--chrome-trace", metavar="JSON", help=f"write {what} as a Chrome trace (open in Perfetto)")


# ---------------------------------------------------------------------- values
def read_graph(spec: str, fmt=None):
    """A graph file, or ``module:function`` returning a TaskGraph (the module found in the current
    folder, as ``python -m`` finds it).

    Parameters
    ----------
    spec : str
    fmt : str, optional
        Force this input format.

    Raises
    ------
    TaskflowError
        The file or the function could not give a graph; the message names it.
    """
    return _read(spec, fmt, load_graph)


def read_graphs(spec: str, fmt=None) -> list:
    """Every graph of ``spec``: a file (an Estee set gives several) or ``module:function``.

    Parameters
    ----------
    spec : str
    fmt : str, optional

    Raises
    ------
    TaskflowError
        As :func:`read_graph`.
    """
    return _read(spec, fmt, load_graphs, many=True)


def _read(spec: str, fmt, loader, many: bool = False):
    if ":" in spec and not os.path.exists(spec.split("#")[0]):
        graph = _from_function(spec)
        return [graph] if many else graph
    try:
        return loader(spec, fmt)
    except TaskflowError as e:
        raise Prefixed(with_source(e, spec.split("#")[0])) from None


def _raised(e: BaseException) -> str:
    """What the user's code did, for an error line: ``called sys.exit(5)`` or ``raised X: msg``."""
    if isinstance(e, SystemExit):
        return f"called sys.exit({e.code!r})"
    return f"raised {type(e).__name__}: {e}" if str(e) else f"raised {type(e).__name__}"


def _from_function(spec: str):
    import importlib

    from ...graph import TaskGraph

    mod, _, fn = spec.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` does: the user's module in the current folder
    try:
        obj = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError, SyntaxError) as e:
        raise UsageError(f"{spec}: cannot load ({type(e).__name__}: {e})") from None
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001 - the user's module: say so, once
        raise UsageError(f"{spec}: importing it {_raised(e)}") from None
    try:
        graph = obj() if callable(obj) and not isinstance(obj, TaskGraph) else obj
    except TaskflowError as e:
        raise UsageError(f"{spec}: {e}") from None
    except (Exception, SystemExit, KeyboardInterrupt) as e:  # noqa: BLE001 - the user's function: name it
        raise UsageError(f"{spec}: building the graph {_raised(e)}") from None
    if not isinstance(graph, TaskGraph):
        raise UsageError(f"{spec}: returned {type(graph).__name__}, expected a TaskGraph")
    return graph.validate()


def parse_speeds(text: str | None):
    """``--speeds``: ``"1,1,2"`` -> ``[1.0, 1.0, 2.0]``, ``"a=2,b=1"`` -> ``{"a": 2.0, "b": 1.0}``,
    ``None`` -> ``None``. Every speed a finite number > 0.

    Parameters
    ----------
    text : str or None

    Raises
    ------
    TaskflowError
        A speed that is no number > 0, or a NAME=SPEED pair without a name.
    """
    if text is None:
        return None
    items = [x.strip() for x in text.split(",")]
    named = any("=" in x for x in items)
    out = {} if named else []
    for item in items:
        name, sep, value = item.rpartition("=") if named else ("", "", item)
        try:
            speed = float(value)
        except ValueError:
            speed = None
        if (named and (not sep or not name)) or speed is None or not 0 < speed < float("inf"):
            raise UsageError(f"--speeds: {item!r} is not a speed > 0 (give 1,1,2 or w0=1,w2=2)")
        if named:
            out[name] = speed
        else:
            out.append(speed)
    return out


def cluster_from_args(args) -> Cluster:
    """The cluster model of ``--cluster FILE``, else of ``--workers N`` with ``--speeds``,
    ``--cores``, ``--bandwidth`` and ``--latency``.

    Parameters
    ----------
    args : argparse.Namespace

    Raises
    ------
    TaskflowError
        Neither given, no workers, speeds that do not fit the workers, a bad rate.
    """
    from ...formats import load_cluster

    if args.cluster:
        if args.speeds:
            raise UsageError("--speeds goes with --workers; a --cluster file declares its own speeds")
        return load_cluster(args.cluster)
    if args.workers is None:
        raise UsageError("give --cluster FILE or --workers N")
    if args.workers < 1:
        raise UsageError(f"cluster has no workers: --workers must be >= 1, got {args.workers}")
    ids = [f"w{i}" for i in range(args.workers)]
    speeds = parse_speeds(args.speeds)
    if isinstance(speeds, list):
        if len(speeds) != args.workers:
            raise UsageError(f"--speeds lists {len(speeds)} speeds for --workers {args.workers}")
        speeds = dict(zip(ids, speeds))
    unknown = sorted(set(speeds or {}) - set(ids))
    if unknown:
        raise UsageError(f"--speeds names unknown worker(s) {', '.join(unknown)} (workers: w0..w{args.workers - 1})")
    try:
        bandwidth = parse_rate(args.bandwidth)
    except TaskflowError as e:
        raise UsageError(f"--bandwidth: {e}") from None
    return Cluster([Worker(w, (speeds or {}).get(w, 1.0), args.cores) for w in ids],
                   bandwidth=bandwidth, latency=args.latency, name=f"{args.workers}-workers")


def scheduler_names(text: str | None, default: str | None = None, static_all: bool = False) -> list:
    """``--scheduler``: ``"heft"`` -> ``["heft"]``, ``"heft,cpop"`` -> both, ``"all"`` -> every
    static scheduler (where ``static_all``).

    Parameters
    ----------
    text : str or None
    default : str, optional
    static_all : bool

    Raises
    ------
    TaskflowError
        An empty name; an unknown one (the message lists the known ones).
    """
    from ...scheduling import available, canonical_name, scheduler_class

    text = default if text is None else text
    if text is None:
        return []
    names = [x.strip() for x in text.split(",")]
    if not all(names):
        raise UsageError(f"--scheduler: empty name in {text!r}")
    if static_all and names == ["all"]:
        return available("static")
    out = []
    for n in names:
        scheduler_class(n)  # an unknown name fails here, listing the known ones
        name = canonical_name(n) or n
        if name not in out:
            out.append(name)
    return out


