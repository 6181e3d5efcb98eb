"""The client's side of the scheduler plugin: installing it by name, calling it with a bounded
wait, :func:`use` (place every graph a client submits with a static scheduler), :func:`status`,
and the checks of a run's arguments before any cluster starts."""

from __future__ import annotations

import asyncio
import os
import time
import weakref

from ...errors import LaunchError, SchedulerError, RunTimeout, SchedulerLost, UsageError
from ...scheduling import get_scheduler, require_runnable
from ..messages import install_scheduler_plugin
from ..worker.worker_plugin import TransferLog

__all__ = [
    "check_client",
    "check_flags",
    "CALL_TIMEOUT",
    "CALL_LIMIT",
    "call",
    "ensure_plugin",
    "use",
    "check_call",
    "status",
]


#: seconds a call to the scheduler waits before it checks that the scheduler is still connected
CALL_TIMEOUT = 10.0


#: seconds a call to the scheduler waits in all while the scheduler stays connected
CALL_LIMIT = 120.0


def call(client, op: str, /, timeout: float | None = None, limit: float | None = None, **kwargs):
    """Call the scheduler handler ``op`` and return its answer. The call is watched, not cut at a
    fixed bound: after each ``timeout`` seconds without an answer it goes on waiting while the
    connection to the scheduler stays open (a scheduler on a loaded machine, or planning a big
    graph, answers late), up to ``limit`` seconds in all.

    Parameters
    ----------
    client : distributed.Client
    op : str
        A handler name (``taskflow_register``, ``taskflow_status``, ...).
    timeout : float, optional
        Default :data:`CALL_TIMEOUT`.
    limit : float, optional
        Default :data:`CALL_LIMIT` (never less than ``timeout``).
    **kwargs
        The message.

    Raises
    ------
    TaskflowError
        The scheduler did not answer in time or the connection is gone.
    """
    timeout = CALL_TIMEOUT if timeout is None else timeout
    limit = max(timeout, CALL_LIMIT if limit is None else limit)
    t0 = time.monotonic()
    try:
        return client.sync(_watched, client, getattr(client.scheduler, op), timeout, limit, kwargs)
    except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 - any failure to reach it means the same
        # (a scheduler gone cancels the call: CancelledError is a BaseException, and it must not
        # replace the error a caller is already raising when it cleans up)
        address = getattr(client.scheduler, "address", "?")
        if isinstance(e, (TimeoutError, asyncio.TimeoutError)):
            raise RunTimeout(
                f"the Dask scheduler ({address}) did not answer {op!r} within {time.monotonic() - t0:.0f} s"
            ) from e
        raise SchedulerLost(f"lost the Dask scheduler ({address}) during {op!r}: {type(e).__name__}: {e}") from e


async def _watched(client, handler, timeout: float, limit: float, kwargs: dict):
    task = asyncio.ensure_future(handler(**kwargs))
    t0 = time.monotonic()
    while True:
        done, _ = await asyncio.wait({task}, timeout=min(timeout, max(0.0, t0 + limit - time.monotonic())))
        if done:
            return task.result()
        if time.monotonic() - t0 >= limit or not _connected(client):
            task.cancel()
            raise asyncio.TimeoutError()


def _connected(client) -> bool:
    """Whether ``client`` still holds an open connection to its scheduler."""
    stream = getattr(client, "scheduler_comm", None)
    comm = getattr(stream, "comm", None)
    return client.status == "running" and comm is not None and not comm.closed()


#: client -> the id of the scheduler it installed the plugins on (each run asks; a job of a shared
#: cluster runs one per epoch)
_INSTALLED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def ensure_plugin(client) -> None:
    """Install the taskflow scheduler plugin on ``client``'s scheduler unless it is there already
    (an operator may have preloaded it), and the transfer log on its workers (those that join later
    too). Asked again through the same client of the same scheduler, nothing is sent.

    Parameters
    ----------
    client : distributed.Client

    Raises
    ------
    TaskflowError
        The scheduler refused the plugin or did not answer.
    """
    ident = (getattr(client, "_scheduler_identity", None) or {}).get("id")
    if ident is not None and _INSTALLED.get(client) == ident:
        return
    try:
        client.run_on_scheduler(install_scheduler_plugin)  # by name: the client holds none of its code
        client.register_plugin(TransferLog(), name=TransferLog.name)
    except Exception as e:  # noqa: BLE001 - reported with what the scheduler said
        raise LaunchError(
            f"could not install the taskflow scheduler plugin: {type(e).__name__}: {e} "
            f"(the scheduler needs dask-taskflow installed; or preload it: "
            f"dask scheduler --preload taskflow.runtime.scheduler.plugin)"
        ) from e
    if ident is not None:
        _INSTALLED[client] = ident


def use(client, scheduler: str | None = "adaptive", **options) -> None:
    """Place every graph ``client`` submits from now on with a static ``scheduler``, inside the
    scheduler: ``x.compute()``, ``client.compute``, ``persist``, ``client.get`` alike. Lost workers
    are survived by re-planning; results are Dask's own. ``scheduler=None`` goes back to Dask's own
    scheduling.

    Parameters
    ----------
    client : distributed.Client
    scheduler : str or None
        A static scheduler's name: ``adaptive`` (the default: HEFT where it is predicted to beat
        Dask's own scheduling, Dask's own elsewhere, decided again as durations are learned),
        ``heft``, ``cpop``, ``blevel``, ...
    **options
        Options for the scheduler (``seed=...``).

    Raises
    ------
    TaskflowError
        An unknown or dynamic scheduler, or the scheduler refused.

    Examples
    --------
    With a ``client`` and a dask array ``x``::

        taskflow.use(client, "heft")
        (x @ x.T).sum().compute()  # placed by HEFT inside Dask's scheduler
    """
    if "policy" in options:  # the earlier spelling of ``scheduler``
        if scheduler != "adaptive":
            raise UsageError("use(client, scheduler, policy=...): name the scheduler once, as scheduler=")
        scheduler = options.pop("policy")
    if scheduler is None and options:
        raise UsageError(
            f"use(client, None) goes back to Dask's own scheduling, which takes no options; got "
            f"{', '.join(map(str, options))}"
        )
    if scheduler is not None:
        sch = get_scheduler(scheduler, **options)
        if sch.kind != "static":
            raise SchedulerError(
                f"{sch.name!r} is a dynamic scheduler; inside Dask a static scheduler places tasks "
                f"(taskflow.use(client, None) gives Dask's own scheduling)"
            )
        require_runnable(sch, "dask")
    check_client(client)
    ensure_plugin(client)
    reply = call(client, "taskflow_use", client=client.id, scheduler=scheduler, options=options)
    if reply.get("status") != "OK":
        raise SchedulerError(reply.get("error", "the scheduler plugin refused it"))


def check_client(client) -> None:
    """Refuse what is not a running ``distributed.Client`` (None, another object, a closed one).

    Parameters
    ----------
    client : object

    Raises
    ------
    UsageError
    """
    if client is None or not (hasattr(client, "scheduler") and hasattr(client, "submit")):
        raise UsageError(f"client must be a distributed.Client, got {type(client).__name__} {client!r:.60}")
    state = getattr(client, "status", "running")
    if state != "running":
        raise UsageError(f"the client is {state}, not running: connect a new distributed.Client")


def check_flags(**flags) -> None:
    """Refuse a flag that is not True or False (``report="no"`` is not a no).

    Parameters
    ----------
    **flags
        Name -> value.

    Raises
    ------
    UsageError
    """
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise UsageError(f"{name} must be True or False, got {type(value).__name__} {value!r:.40}")


def check_call(
    client=None,
    cluster=None,
    address=None,
    scheduler_file=None,
    workers=2,
    threads_per_worker=1,
    timeout=None,
    costs=None,
) -> None:
    """Refuse, before any cluster starts, arguments of :func:`taskflow.run` and
    :func:`taskflow.compute` that are of the wrong kind or out of range (one line naming the
    argument): a run with them would fail obscurely or wait forever.

    Parameters
    ----------
    client, cluster, address, scheduler_file, workers, threads_per_worker, timeout, costs
        As the callers take them.

    Raises
    ------
    TaskflowError
    """
    import math
    import numbers

    from ...cluster import Cluster

    if client is not None:
        check_client(client)
    if cluster is not None and not isinstance(cluster, Cluster):
        raise UsageError(
            f"cluster must be a taskflow.Cluster (the cluster model of the workers), got "
            f"{type(cluster).__name__} {cluster!r:.60}"
        )
    for name, v in (("address", address), ("scheduler_file", scheduler_file)):
        if v is not None and not isinstance(v, (str, os.PathLike)):
            raise UsageError(f"{name} must be a string, got {type(v).__name__}")
    if client is None and not (address or scheduler_file):
        for name, v in (("workers", workers), ("threads_per_worker", threads_per_worker)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 1 <= v <= 10_000:
                raise UsageError(f"an embedded cluster needs {name} to be an integer from 1 to 10,000, got {v!r}")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise UsageError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    if costs is not None:
        if not isinstance(costs, dict):
            raise UsageError(f"costs must map a task-name prefix to seconds, got {type(costs).__name__}")
        for k, v in costs.items():
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
                raise UsageError(f"costs[{k!r}] must be a finite number of seconds >= 0, got {v!r}")


def status(client, run: str | None = None) -> dict:
    """What the taskflow scheduler plugin knows: of the cluster, and of the latest graph ``client``
    submitted under :func:`use` (or of the run ``run``, a report's ``run`` id).

    Parameters
    ----------
    client : distributed.Client
    run : str, optional

    Returns
    -------
    dict
        ``workers`` (how many), ``learned_speeds`` (worker name -> speed measured from the tasks that
        ran), and for a run: ``run``, ``state``, ``decision`` (``plan``, ``dask`` or ``subset``, for
        the adaptive scheduler) and ``phase`` (``learning``, ``trying``, ``fixed``, ...: see
        docs/schedulers/adaptive.md), ``predicted`` (seconds, or None), ``makespan``, ``replans``, ``error``.

    Raises
    ------
    TaskflowError
        The scheduler did not answer.
    """
    check_call(client)
    ensure_plugin(client)
    reply = call(client, "taskflow_status", run=run, client=None if run else client.id)
    return {k: v for k, v in reply.items() if k not in ("lost_all_since", "grace", "now", "path")}
