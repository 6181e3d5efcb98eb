"""dask-taskflow: task-graph workflows scheduled by interchangeable schedulers, simulated or run on Dask.

>>> from taskflow import TaskGraph, Cluster
>>> import schedulers
>>> g = TaskGraph("tiny")
>>> a = g.add_task("a", cost=2.0, output_size=1e9)
>>> b = g.add_task("b", cost=1.0)
>>> g.add_edge("a", "b")
>>> plan = schedulers.get_scheduler("round-robin").schedule(g, Cluster.homogeneous(2))
>>> plan.validate(g, Cluster.homogeneous(2)).makespan
4.0

The model is imported at once; the simulator, the Dask runtime and training when first used
(``taskflow.simulate``, ``taskflow.run``, ``taskflow.train``, ...), so a short command starts quickly.
"""

__version__ = "0.1.0"


def _early_signals() -> None:
    """The ``taskflow`` command, interrupted while it is still importing (nothing started yet, so
    nothing to clean up): one line and the signal's status, not a traceback from deep inside an
    import. The command's own handlers replace these as it starts (``taskflow.app.cli``)."""
    import os
    import signal
    import sys

    # this interpreter's own command line: a worker process spawned by the command is given the
    # command's sys.argv, not its orig_argv
    if not any(os.path.basename(a) == "taskflow" for a in getattr(sys, "orig_argv", sys.argv)[:2]):
        return

    def ended(signum, frame):
        line, status = (b"error: interrupted\n", 130) if signum == signal.SIGINT else (b"error: terminated\n", 143)
        os.write(2, line)
        os._exit(status)

    ended.taskflow_early = True
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, ended)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, ended)
    except ValueError:  # not the main thread: signals are not ours to handle
        pass


_early_signals()

from .analysis import critical_path, lower_bound, sequential_time
from .cluster import Cluster, Worker
from .costs import CostModel
from .errors import (
    ClusterError,
    CycleError,
    FormatError,
    GraphError,
    RunFailed,
    RunTimeout,
    ScheduleError,
    SchedulerLost,
    TaskflowError,
    TaskflowWarning,
    UnknownSchedulerError,
    WorkersLost,
)
from .formats import (
    from_networkx,
    load_cluster,
    load_graph,
    load_graphs,
    load_schedule,
    save_cluster,
    save_graph,
    save_schedule,
    to_dot,
    to_networkx,
)
from .graph import TaskGraph, TaskHandle
from .scheduling import DynamicScheduler, Scheduler, available, get_scheduler, register
from .schedule import Assignment, Schedule
from .trace import Trace


def simulate(graph, cluster, scheduler="heft", network: str = "maxmin", **options) -> Trace:
    """Simulate ``graph`` on ``cluster`` under ``scheduler``: :func:`taskflow.simulator.simulate`,
    except that the ``adaptive`` scheduler (by name or instance, without a ``plan``) makes its own
    decisions as it does inside Dask, its decision core fed the graph and the cluster
    (:func:`taskflow.runtime.simulated.simulate_adaptive`).

    Parameters
    ----------
    graph : TaskGraph
    cluster : Cluster
    scheduler : str or Scheduler
    network : {"simple", "maxmin"}
    **options
        What :func:`taskflow.simulator.simulate` takes.

    Returns
    -------
    Trace
    """
    name = scheduler if isinstance(scheduler, str) else getattr(scheduler, "name", None)
    if name == "adaptive" and options.get("plan") is None:
        from .runtime.simulated import simulate_adaptive

        given = None if isinstance(scheduler, str) else scheduler
        return simulate_adaptive(graph, cluster, scheduler=given, network=network, **options)[0]
    from .simulator import simulate as carry_out

    return carry_out(graph, cluster, scheduler, network, **options)


# name -> the subpackage that defines it, imported on first use
_LAZY = {
    "plan": "simulator",
    "run": "runtime",
    "compute": "runtime",
    "use": "runtime",
    "status": "runtime",
    "execute": "runtime",
    "RunReport": "runtime",
    "TaskFailed": "runtime",
    "cluster_from_dask": "runtime",
    "learn_costs": "runtime",
    "CostProfile": "runtime",
    "advise": "advisor",
    "train": "training",
}

__all__ = [
    "TaskGraph",
    "TaskHandle",
    "simulate",
    "plan",
    "Trace",
    "run",
    "compute",
    "use",
    "status",
    "execute",
    "RunReport",
    "TaskFailed",
    "advise",
    "train",
    "cluster_from_dask",
    "learn_costs",
    "CostProfile",
    "Cluster",
    "Worker",
    "CostModel",
    "Schedule",
    "Assignment",
    "Scheduler",
    "DynamicScheduler",
    "available",
    "get_scheduler",
    "register",
    "critical_path",
    "lower_bound",
    "sequential_time",
    "load_graph",
    "load_graphs",
    "save_graph",
    "load_cluster",
    "save_cluster",
    "load_schedule",
    "save_schedule",
    "to_networkx",
    "from_networkx",
    "to_dot",
    "TaskflowError",
    "TaskflowWarning",
    "GraphError",
    "CycleError",
    "ClusterError",
    "FormatError",
    "ScheduleError",
    "UnknownSchedulerError",
    "RunFailed",
    "RunTimeout",
    "SchedulerLost",
    "WorkersLost",
    "__version__",
]


def __getattr__(name):
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module 'taskflow' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
