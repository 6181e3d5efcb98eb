"""The few exception types of taskflow.

Every error a user can cause by bad input is one of these, with a message that names the
problem (the task id, the line, the field). The CLI turns them into one line on stderr and
exit status 2.
"""

__all__ = ["RunFailed", "ClusterError", "CycleError", "FormatError", "GraphError", "ScheduleError", "TaskflowError",
           "TaskflowWarning", "UnknownSchedulerError", "WorkflowError", "RunTimeout", "SchedulerLost",
           "WorkersLost"]


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
        super().__init__(f"unknown scheduler {name!r}; {hint}known schedulers: {', '.join(self.known)}")
