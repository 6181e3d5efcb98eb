"""dask-taskflow: task-graph workflows scheduled by interchangeable policies, simulated or run on Dask.

>>> from taskflow import TaskGraph, Cluster
>>> import schedulers
>>> g = TaskGraph("tiny")
>>> a = g.add_task("a", cost=2.0, output_size=1e9)
>>> b = g.add_task("b", cost=1.0)
>>> g.add_edge("a", "b")
>>> plan = schedulers.get_scheduler("round-robin").schedule(g, Cluster.homogeneous(2))
>>> plan.validate(g, Cluster.homogeneous(2)).makespan
4.0
"""

__version__ = "0.1.0"

from .analysis import critical_path, lower_bound, sequential_time
from .cluster import Cluster, Worker
from .costs import CostModel
from .errors import (ClusterError, CycleError, FormatError, GraphError, ScheduleError, TaskflowError,
                     UnknownSchedulerError)
from .formats import (from_networkx, load_cluster, load_graph, load_graphs, load_schedule, save_cluster,
                      save_graph, save_schedule, to_dot, to_networkx)
from .graph import TaskGraph, TaskHandle
from .schedule import Assignment, Schedule
from .simulator import simulate
from .runtime import RunReport, TaskFailed, compute, execute, run
from .trace import Trace

__all__ = [
    "TaskGraph", "TaskHandle", "simulate", "Trace", "run", "compute", "execute", "RunReport", "TaskFailed", "Cluster", "Worker", "CostModel", "Schedule", "Assignment",
    "critical_path", "lower_bound", "sequential_time",
    "load_graph", "load_graphs", "save_graph", "load_cluster", "save_cluster", "load_schedule",
    "save_schedule", "to_networkx", "from_networkx", "to_dot",
    "TaskflowError", "GraphError", "CycleError", "ClusterError", "FormatError", "ScheduleError",
    "UnknownSchedulerError", "__version__",
]
