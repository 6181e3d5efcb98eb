"""The few exception types of taskflow.

Every error a user can cause is one of these, each a :class:`TaskflowError` that says what
failed (bad input, a scheduler that cannot, a cluster that would not start, a run that failed),
with a message that names the problem (the task id, the line, the field). The command line turns
them into one line on stderr and exit status 2, or 1 for a run that failed (:class:`RunFailed`).
"""

__all__ = [
    "ClusterError",
    "CycleError",
    "FormatError",
    "GraphError",
    "ScheduleError",
    "TaskflowError",
    "TaskflowWarning",
    "UnknownSchedulerError",
    "WorkflowError",
    "UsageError",
    "SchedulerError",
    "LaunchError",
    "TestbedError",
    "MissingExtra",
    "RunFailed",
    "RunTimeout",
    "SchedulerLost",
    "WorkersLost",
]


class TaskflowError(Exception):
    """Base class of every error taskflow raises on purpose."""


class GraphError(TaskflowError, ValueError):
    """A task graph is malformed: duplicate id, dangling edge, bad number, unknown worker."""


class CycleError(GraphError):
    """The graph has a cycle; ``cycle`` lists task ids along it (first == last)."""

    def __init__(self, cycle):
        self.cycle = list(cycle)
        path = " -> ".join(str(t) for t in self.cycle)
        super().__init__(f"graph has a cycle: {path}")


class ClusterError(TaskflowError, ValueError):
    """A cluster description is malformed (no workers, bad speed, bandwidth, ...)."""


class FormatError(TaskflowError, ValueError):
    """A file cannot be read: malformed content, unknown format, missing field."""


class ScheduleError(TaskflowError, ValueError):
    """A schedule is invalid for its graph and cluster; ``problems`` lists every finding."""

    def __init__(self, problems):
        self.problems = list(problems)
        first = self.problems[0] if self.problems else "invalid schedule"
        more = len(self.problems) - 1
        super().__init__(first + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))


class WorkflowError(TaskflowError, ValueError):
    """A workflow generator was given parameters it cannot build a graph from."""


class UsageError(TaskflowError, ValueError):
    """A call or a command was given what it cannot use: a value out of range, options that do not
    go together, a name it does not know, an output that cannot be written. Found before anything
    ran (the command line's exit status 2)."""


class SchedulerError(TaskflowError, ValueError):
    """A scheduler cannot do what was asked of it: a dynamic one where a static one must place, one
    that runs in the simulator only, an option it does not take, a plugin that will not load."""


class LaunchError(TaskflowError):
    """A cluster could not be started or reached: a batch system's jobs, an embedded cluster's
    workers, a scheduler file, the scheduler plugin."""


class TestbedError(TaskflowError):
    """The network testbed could not be set up or used (namespaces, links, ``tc``, cgroups)."""

    __test__ = False  # not a test class, whatever pytest makes of its name


class MissingExtra(TaskflowError, ImportError):
    """A feature needs a package that is not installed; the message names the pip command."""


class RunFailed(TaskflowError):
    """A run that started did not finish: a task raised, time ran out, the cluster went away. The
    command line exits with status 1 on one (2 is for bad input)."""


class RunTimeout(RunFailed, TimeoutError):
    """A bounded wait on Dask ran out: a run longer than its ``timeout``, or a Dask scheduler that
    did not answer a call in time (it may still be there)."""


class SchedulerLost(RunFailed, ConnectionError):
    """The Dask scheduler went away during a run or a call: its connection closed, or it stopped
    answering for longer than the client waits."""


class WorkersLost(RunFailed):
    """No worker is left to run on: every worker was lost and none joined within the grace period,
    or a cluster had no worker when a run began (after a bounded wait for one)."""


class TaskflowWarning(UserWarning):
    """Something a user should know about a result (e.g. a prediction from guessed costs)."""


class UnknownSchedulerError(TaskflowError, ValueError):
    """No scheduler is registered under the requested name."""

    def __init__(self, name, known):
        import difflib

        self.name = name
        self.known = sorted(known)
        close = difflib.get_close_matches(str(name).lower(), self.known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        if str(name).strip().lower() == "dask":  # a word for Dask itself, not one of the schedulers
            hint = "Dask's own scheduling is 'work-stealing'; "
        super().__init__(f"unknown scheduler {name!r}; {hint}known schedulers: {', '.join(self.known)}")
