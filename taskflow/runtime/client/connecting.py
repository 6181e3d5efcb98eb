"""Reaching a Dask cluster for a run: :func:`connect` (a client given, an address or a scheduler
file, a job queue, or an embedded LocalCluster started and warmed), and Dask's dashboard where it is
asked for (:func:`dashboard_address`, :func:`dashboard_link`, :func:`say_dashboard`).
"""

from __future__ import annotations

import importlib.util
import sys

from ...errors import MissingExtra, UsageError, WorkersLost
from ..launch.existing import client_for
from ..launch.local import local_cluster, warm_cluster
from .waiting import close_quietly

__all__ = [
    "connect",
    "client_for",
    "dashboard_link",
    "dashboard_address",
    "say_dashboard",
    "DASHBOARD",
    "WAIT_FOR_WORKERS",
]


#: Where ``dashboard=True`` (``--dashboard``) serves Dask's dashboard: loopback, Dask's usual port
#: (Dask moves to a free port when it is taken). Reach it from elsewhere through an SSH tunnel.
DASHBOARD = "127.0.0.1:8787"


def dashboard_address(dashboard) -> str | None:
    """The ``dashboard_address`` of an embedded LocalCluster for ``dashboard``: None (no dashboard)
    for False, :data:`DASHBOARD` for True, else the HOST:PORT given.

    Parameters
    ----------
    dashboard : bool or str

    Raises
    ------
    TaskflowError
        bokeh is not installed, or ``dashboard`` is neither a bool nor HOST:PORT.
    """
    if dashboard is None or dashboard is False:
        return None
    if importlib.util.find_spec("bokeh") is None:
        raise MissingExtra("the Dask dashboard needs bokeh: pip install 'bokeh>=3.1'")
    if dashboard is True:
        return DASHBOARD
    host, _, port = dashboard.rpartition(":") if isinstance(dashboard, str) else ("", "", "")
    if not host or not (port.isascii() and port.isdigit() and int(port) <= 65535):
        raise UsageError(f"--dashboard: must be HOST:PORT with a port from 0 to 65535, got {dashboard!r}")
    return dashboard


def dashboard_link(client) -> str | None:
    """The link to the Dask dashboard of ``client``'s cluster, or None when it serves none.

    A Dask scheduler always runs an HTTP server (health, metrics) that it lists as its
    "dashboard" service; the dashboard itself is there only when a bokeh application is mounted
    on it, which this asks the scheduler.

    Parameters
    ----------
    client : distributed.Client
    """
    try:
        if "dashboard" not in client.scheduler_info().get("services", {}):
            return None
        if not client.run_on_scheduler(_serves_dashboard):
            return None
        return client.dashboard_link
    except Exception:  # a scheduler that does not say: no link rather than an error
        return None


def _serves_dashboard(dask_scheduler=None) -> bool:
    """On the scheduler: is bokeh's dashboard application mounted on its HTTP server?"""
    apps = getattr(getattr(dask_scheduler, "http_application", None), "applications", [])
    return any("Bokeh" in type(a).__name__ for a in apps)  # distributed mounts a BokehTornado


def say_dashboard(client) -> None:
    """Print the dashboard link of ``client``'s cluster to stderr, if it serves one.

    Parameters
    ----------
    client : distributed.Client
    """
    link = dashboard_link(client)
    if link:
        print(f"taskflow: Dask dashboard at {link}", file=sys.stderr, flush=True)


#: Seconds a run on an existing cluster waits for its first worker.
WAIT_FOR_WORKERS = 30.0


def connect(
    client,
    address,
    scheduler_file,
    workers,
    threads_per_worker,
    work_stealing,
    dashboard=False,
    jobqueue=None,
    jobqueue_options=None,
):
    """(client, things to close). Without a client or address (nor Dask's ``scheduler-address``
    setting, e.g. the environment variable ``DASK_SCHEDULER_ADDRESS``), an embedded LocalCluster.

    Parameters
    ----------
    client : distributed.Client or None
    address, scheduler_file : str or None
        An existing cluster.
    workers, threads_per_worker : int
        The embedded LocalCluster (processes).
    work_stealing : bool
        Dask's work stealing in the embedded cluster (off for static plans).
    dashboard : bool or str
        Serve the embedded cluster's dashboard (True: :data:`DASHBOARD`, or HOST:PORT).
    jobqueue : {"slurm", "pbs"}, optional
        Start ``workers`` batch jobs of one worker each instead (:func:`.jobqueue.start_jobqueue`
        with ``jobqueue_options``).
    jobqueue_options : dict, optional

    Raises
    ------
    TaskflowError
        An existing cluster has no worker within ``WAIT_FOR_WORKERS`` seconds; a dashboard without
        bokeh installed.
    """
    import dask
    from distributed import Client

    if client is not None:
        return client, []
    if jobqueue:
        from ..launch.jobqueue import start_jobqueue

        c, jq = start_jobqueue(jobqueue, workers, work_stealing=work_stealing, **(jobqueue_options or {}))
        return c, [c, jq]
    if not (address or scheduler_file):  # Dask's own convention: DASK_SCHEDULER_ADDRESS names a cluster
        address = dask.config.get("scheduler-address", None) or None
    if address or scheduler_file:
        c = client_for(address, scheduler_file)
        try:  # a cluster just started may not have its workers yet: wait for one, bounded
            c.wait_for_workers(1, timeout=WAIT_FOR_WORKERS)
        except (TimeoutError, OSError):
            close_quietly([c])
            raise WorkersLost(
                f"the cluster at {address or scheduler_file} has no worker (waited {WAIT_FOR_WORKERS:g} s)"
            ) from None
        return c, [c]
    where = dashboard_address(dashboard)
    lc = local_cluster(workers, threads_per_worker, where, work_stealing=bool(work_stealing))
    c = None
    try:
        c = Client(lc)
        warm_cluster(c)
    except BaseException:  # Ctrl-C before the caller holds them: closed here
        close_quietly([x for x in (c, lc) if x is not None])
        raise
    return c, [c, lc]
