"""What ``dask scheduler --preload taskflow.runtime.scheduler.plugin`` checks before it installs the
plugin: the scheduler named by ``TASKFLOW_SCHEDULER`` must exist and run inside Dask.

Dask logs a preload that fails and starts the scheduler anyway, so that every client's graph
would go to Dask's own scheduling with nothing said but a traceback in a log. A ``dask scheduler``
process whose preload names a scheduler that cannot serve stops instead, with one line on stderr
and exit status 2; a scheduler started in a Python program gets the error raised."""

from __future__ import annotations

import os
import sys

from ...errors import TaskflowError
from ...scheduling import get_scheduler, require_runnable

__all__ = ["preloaded_scheduler"]

#: the module of Dask's ``dask scheduler`` command
CLI = "distributed.cli.dask_scheduler"
#: the variable's earlier spelling, still read where ``TASKFLOW_SCHEDULER`` is not set
EARLIER = "TASKFLOW_POLICY"


def preloaded_scheduler(name: str | None = None) -> str | None:
    """The scheduler the preload places every graph with (``name``, else ``TASKFLOW_SCHEDULER``,
    else its earlier spelling), checked; None for none.

    Parameters
    ----------
    name : str, optional

    Raises
    ------
    TaskflowError
        In a program of the caller's own (a ``dask scheduler`` process exits with 2 instead).
    """
    name = name or os.environ.get("TASKFLOW_SCHEDULER") or os.environ.get(EARLIER) or None
    if not name:
        return None
    try:
        require_runnable(get_scheduler(name), "dask")
    except TaskflowError as e:
        main = getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
        if CLI not in sys.modules and main != CLI:  # a scheduler in the caller's own program
            raise
        print(f"error: TASKFLOW_SCHEDULER={name!r}: {e}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(2)  # the scheduler's event loop would catch SystemExit and go on with a traceback
    return name
