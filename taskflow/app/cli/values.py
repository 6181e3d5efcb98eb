"""The values the command line's options name, read: a graph (a file or ``module:function``,
:func:`read_graph`), worker speeds in either form (:func:`parse_speeds`), the cluster model of
``--cluster`` or ``--workers`` (:func:`cluster_from_args`), scheduler names (:func:`scheduler_names`).
Each bad value is one line naming the option and the value (:class:`Prefixed` where a file said it).
"""

from __future__ import annotations

import os
import sys

from ...checks import parse_rate
from ...cluster import Cluster, Worker
from ...errors import TaskflowError, UsageError
from ...formats import load_graph, load_graphs, with_source

__all__ = ["Prefixed", "read_graph", "read_graphs", "parse_speeds", "cluster_from_args", "scheduler_names"]


class Prefixed(TaskflowError):
    """An error message already prefixed with the file it came from."""


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
    return Cluster(
        [Worker(w, (speeds or {}).get(w, 1.0), args.cores) for w in ids],
        bandwidth=bandwidth,
        latency=args.latency,
        name=f"{args.workers}-workers",
    )


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
