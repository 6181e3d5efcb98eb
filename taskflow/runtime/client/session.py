"""The client's side of the scheduler plugin: installing it, calling it with a bounded wait, and
:func:`use` (place every graph a client submits with a static policy)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import sys
import time
from typing import NamedTuple

from ...errors import (LaunchError, PolicyError, RunFailed, RunTimeout, SchedulerLost, TaskflowError, UsageError,
                      WorkersLost)
from ...policy import get_scheduler, require_runnable
from ..messages import install_scheduler_plugin
from ..worker.worker_plugin import TransferLog, worker_records

__all__ = ["ensure_plugin", "call", "check_call", "use", "status", "Watchdog", "wait_for", "stream_index", "stream_since", "cancelled_error",
           "gather", "workers_reachable", "frozen_heap", "workers_records", "WorkersRecords", "close_quietly", "progress_bar",
           "in_notebook"]

#: seconds a call to the scheduler waits before it checks that the scheduler is still connected
CALL_TIMEOUT = 10.0
#: seconds a call to the scheduler waits in all while the scheduler stays connected
CALL_LIMIT = 120.0
#: seconds without an answer from the scheduler after which a run is abandoned
SCHEDULER_LOSS = 10.0


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
            raise RunTimeout(f"the Dask scheduler ({address}) did not answer {op!r} within "
                             f"{time.monotonic() - t0:.0f} s") from e
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


def ensure_plugin(client) -> None:
    """Install the taskflow scheduler plugin on ``client``'s scheduler unless it is there already
    (an operator may have preloaded it).

    Parameters
    ----------
    client : distributed.Client

    Raises
    ------
    TaskflowError
        The scheduler refused the plugin or did not answer.
    """
    try:
        client.run_on_scheduler(install_scheduler_plugin)  # by name: the client holds none of its code
        client.register_plugin(TransferLog(), name=TransferLog.name)
    except Exception as e:  # noqa: BLE001 - reported with what the scheduler said
        raise LaunchError(f"could not install the taskflow scheduler plugin: {type(e).__name__}: {e} "
                            f"(the scheduler needs dask-taskflow installed; or preload it: "
                            f"dask scheduler --preload taskflow.runtime.scheduler.plugin)") from e


def use(client, policy: str | None = "adaptive", **options) -> None:
    """Place every graph ``client`` submits from now on with a static ``policy``, inside the
    scheduler: ``x.compute()``, ``client.compute``, ``persist``, ``client.get`` alike. Lost workers
    are survived by re-planning; results are Dask's own. ``policy=None`` goes back to Dask's own
    scheduling.

    Parameters
    ----------
    client : distributed.Client
    policy : str or None
        A static policy's name: ``adaptive`` (the default: HEFT where it is predicted to beat
        Dask's own scheduling, Dask's own elsewhere, decided again as durations are learned),
        ``heft``, ``cpop``, ``blevel``, ...
    **options
        Options for the policy (``seed=...``).

    Raises
    ------
    TaskflowError
        An unknown or dynamic policy, or the scheduler refused.

    Examples
    --------
    With a ``client`` and a dask array ``x``::

        taskflow.use(client, "heft")
        (x @ x.T).sum().compute()  # placed by HEFT inside the scheduler
    """
    if policy is None and options:
        raise UsageError(f"use(client, None) goes back to Dask's own scheduling, which takes no options; got "
                            f"{', '.join(map(str, options))}")
    if policy is not None:
        sch = get_scheduler(policy, **options)
        if sch.kind != "static":
            raise PolicyError(f"{sch.name!r} is a dynamic policy; inside Dask a static policy places tasks "
                                f"(taskflow.use(client, None) gives Dask's own scheduling)")
        require_runnable(sch, "dask")
    ensure_plugin(client)
    reply = call(client, "taskflow_use", client=client.id, policy=policy, options=options)
    if reply.get("status") != "OK":
        raise PolicyError(reply.get("error", "the scheduler refused the policy"))


def check_call(client=None, cluster=None, address=None, scheduler_file=None, workers=2, threads_per_worker=1,
               timeout=None, costs=None) -> None:
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

    if client is not None and not (hasattr(client, "scheduler") and hasattr(client, "submit")):
        raise UsageError(f"client must be a distributed.Client, got {type(client).__name__} {client!r:.60}")
    if cluster is not None and not isinstance(cluster, Cluster):
        raise UsageError(f"cluster must be a taskflow.Cluster (the model of the workers), got "
                            f"{type(cluster).__name__} {cluster!r:.60}")
    for name, v in (("address", address), ("scheduler_file", scheduler_file)):
        if v is not None and not isinstance(v, (str, os.PathLike)):
            raise UsageError(f"{name} must be a string, got {type(v).__name__}")
    if client is None and not (address or scheduler_file):
        for name, v in (("workers", workers), ("threads_per_worker", threads_per_worker)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 1 <= v <= 10_000:
                raise UsageError(f"an embedded cluster needs {name} to be an integer from 1 to 10,000, got {v!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, numbers.Real)
                                or not math.isfinite(timeout) or timeout <= 0):
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
        the adaptive policy), ``predicted`` (seconds, or None), ``makespan``, ``replans``, ``error``.

    Raises
    ------
    TaskflowError
        The scheduler did not answer.
    """
    check_call(client)
    ensure_plugin(client)
    reply = call(client, "taskflow_status", run=run, client=None if run else client.id)
    return {k: v for k, v in reply.items() if k not in ("lost_all_since", "grace", "now", "path")}


class Watchdog:
    """Once a second (at most): the scheduler still answers, the cluster still has a worker (or one
    may still join within the plugin's grace period), and the plugin could plan the run.

    Parameters
    ----------
    client : distributed.Client
    run : str, optional
        The run registered with the plugin.
    """

    def __init__(self, client, run: str | None = None):
        self.client = client
        self.run = run
        self.replans = 0
        self.unreachable_since = None
        self.last = 0.0

    def check(self, force: bool = False) -> None:
        """Raise if the run cannot go on.

        Parameters
        ----------
        force : bool
            Check now even if the last check was less than a second ago.

        Raises
        ------
        TaskflowError
            The scheduler has not answered for :data:`SCHEDULER_LOSS` seconds, every worker has been
            lost for longer than the grace period, or the plugin could not plan the run.
        """
        import time

        now = time.perf_counter()
        if not force and now - self.last < 1.0:
            return
        self.last = now
        status = None
        if self.client.status == "running":
            try:
                status = call(self.client, "taskflow_status", timeout=5.0, limit=5.0, run=self.run)
            except TaskflowError:
                status = None
        if status is None:
            self.unreachable_since = self.unreachable_since or now
            if now - self.unreachable_since > SCHEDULER_LOSS:
                raise SchedulerLost(f"lost the Dask scheduler ({self.client.scheduler.address}): no answer for "
                                    f"{SCHEDULER_LOSS:g} s; the run is abandoned")
            return
        self.unreachable_since = None
        if status.get("error"):
            raise RunFailed(status["error"])
        self.replans = status.get("replans", self.replans)
        since = status.get("lost_all_since")
        if since is not None and status["now"] - since > status["grace"]:
            raise WorkersLost(f"every worker was lost and none joined within {status['grace']:g} s; "
                                f"the run is abandoned")


def wait_for(futures, watchdog: Watchdog, timeout: float | None = None, on_poll=None,
             said: float | None = None) -> None:
    """Wait until every future is done or one has failed; every wait is bounded.

    Parameters
    ----------
    futures : list of distributed.Future
    watchdog : Watchdog
    timeout : float, optional
        Seconds before giving up.
    said : float, optional
        The timeout the caller gave, for the message (``timeout`` may be what is left of it).
    on_poll : callable, optional
        Called after each poll (a progress bar).

    Raises
    ------
    TaskflowError
        ``timeout`` passed, a result was cancelled (the scheduler connection was lost), or the
        watchdog says the run cannot go on.
    """
    import time

    from distributed import wait
    from distributed.client import FuturesCancelledError

    t0 = time.perf_counter()
    while True:
        pending = [f for f in futures if not f.done()]
        if any(f.status == "cancelled" for f in futures):
            raise cancelled_error(watchdog.client)
        if not pending or any(f.status == "error" for f in futures if f.done()):
            return
        try:
            wait(pending, timeout=0.25, return_when="FIRST_COMPLETED")
        except TimeoutError as e:
            # its traceback holds this frame and the caller's in a cycle with the event loop's
            # frames: the run's futures, and so its results on the workers, would outlive the run
            # until Python's cycle collector happened to run
            _drop_tracebacks(e)
        except FuturesCancelledError as e:
            raise cancelled_error(watchdog.client) from e
        if timeout is not None and time.perf_counter() - t0 > timeout:
            raise RunTimeout(f"run did not finish within {said or timeout:g} s ({len(pending)} result(s) pending)")
        watchdog.check()
        if on_poll is not None:
            on_poll()


def _drop_tracebacks(exc: BaseException) -> None:
    """Cut ``exc`` and the exceptions chained to it from their tracebacks."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc.__traceback__ = None
        exc = exc.__context__ or exc.__cause__


def stream_index(client) -> int:
    """The scheduler's task-stream cursor now (what :func:`stream_since` starts from).

    Parameters
    ----------
    client : distributed.Client
    """
    return call(client, "get_task_stream_index")


def stream_since(client, index: int) -> list:
    """Task-stream records (one per task run: key, worker, startstops) since ``index``, with a
    bounded wait (``distributed.get_task_stream`` blocks for 30 s on a dead scheduler).

    Parameters
    ----------
    client : distributed.Client
    index : int
    """
    return call(client, "get_task_stream", timeout=60.0, start_index=index)


def cancelled_error(client) -> RunFailed:
    """The error for results that were cancelled under a run: a lost scheduler, or someone else.

    Parameters
    ----------
    client : distributed.Client
    """
    if client.status != "running":
        return SchedulerLost(f"lost the Dask scheduler ({client.scheduler.address}): the client's connection was "
                             f"closed and its results cancelled; the run is abandoned")
    return RunFailed("results of the run were cancelled (by another client or the scheduler)")


def gather(client, futures, names=None, direct=None):
    """``client.gather(futures)``, with a lost scheduler reported as a :class:`TaskflowError`.

    Parameters
    ----------
    client : distributed.Client
    futures : list of distributed.Future
    names : list, optional
        The task id of each future, to name a result that cannot be sent.
    direct : bool, optional
        Fetch straight from the workers (:func:`workers_reachable`) instead of through the
        scheduler (Dask's default); a result a worker cannot give falls back to the scheduler.

    Raises
    ------
    TaskflowError
        The results were cancelled (the scheduler was lost), or a result cannot be serialised
        (the task is named).
    """
    from distributed.client import FuturesCancelledError

    try:
        return client.gather(futures, direct=direct)
    except (FuturesCancelledError, OSError) as e:
        raise cancelled_error(client) from e
    except TypeError as e:  # "Could not serialize object of type generator": find whose it is
        if names is None or "serializ" not in str(e):
            raise
        for name, f in zip(names, futures):
            try:
                client.gather(f, direct=direct)
            except TypeError as one:
                raise RunFailed(f"task {name!r}: its result cannot be sent from the worker ({one}); "
                                    f"return something picklable (a list, not a generator; no locks or open "
                                    f"files)") from None
        raise


def workers_reachable(client, addresses=None) -> bool:
    """Whether this process can fetch results straight from ``client``'s workers: the client says so
    (``direct_to_workers=True``), or every worker listens on a loopback address (a cluster on this
    machine). Elsewhere (a batch system's nodes, a cloud behind a gateway) results come through the
    scheduler, as Dask's client fetches them by default.

    Parameters
    ----------
    client : distributed.Client
    addresses : iterable of str, optional
        The workers' addresses, when known (else the client's latest view of the cluster).
    """
    import ipaddress

    from distributed.comm import get_address_host

    from ..messages import workers_info

    if getattr(client, "direct_to_workers", None):
        return True
    try:
        hosts = {get_address_host(a) for a in (addresses if addresses is not None else workers_info(client))}
    except Exception:  # noqa: BLE001 - an address we cannot read: through the scheduler
        return False

    def loopback(host: str) -> bool:
        try:
            return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
        except ValueError:
            return False
    return bool(hosts) and all(loopback(h) for h in hosts)


#: gen-1 collections between two full ones while a run goes on (Python's default is 10): in effect none
RUN_FULL_COLLECTIONS = 1_000_000


@contextlib.contextmanager
def frozen_heap():
    """While a run is submitted, executed and its results fetched, Python's cyclic garbage
    collector makes no full collection and leaves alone the objects that existed before
    (``gc.freeze()``); the young generations are collected as usual, and everything is as before
    afterwards (``gc.unfreeze()``, the thresholds restored).

    A full collection walks every object of the process, and the client's process also hosts the
    scheduler of a local cluster, whose event loop stops meanwhile. Measured there: each full
    collection took 45-115 ms, two per run of 2,000 small tasks; at 20,000 tasks, plain
    ``client.get`` spent 2.4-2.7 s of its 18 s in 9-11 of them. A run's own objects (its tasks'
    states, its futures) live until its results are fetched anyway; what a full collection could
    free early is cyclic garbage that outlived two young collections, collected once the run is
    over. A process that froze objects itself (``gc.get_freeze_count() > 0``) or turned the
    collector off is left as it is.
    """
    import gc

    mine = gc.isenabled() and gc.get_freeze_count() == 0
    if mine:
        thresholds = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(thresholds[0], thresholds[1], max(thresholds[2], RUN_FULL_COLLECTIONS))
    try:
        yield
    finally:
        if mine:
            gc.set_threshold(*thresholds)
            gc.unfreeze()


class WorkersRecords(NamedTuple):
    """What the live workers recorded of a run, by worker address, every time on the worker's own
    clock (see :func:`~taskflow.runtime.worker.worker_plugin.worker_records`)."""

    #: received transfers (``transfer_incoming_log`` entries)
    transfers: dict
    #: the batch job each worker runs in, where it runs in one
    jobs: dict
    #: ``{"compute": {key: correction}, "delay": correction now}``: what to take off the times
    #: Dask's task stream reports for the tasks each worker ran
    clocks: dict


def workers_records(client, since: float) -> WorkersRecords:
    """Every live worker's records of what happened since ``since``, in one call to each, with a
    bounded wait. Workers that died took their records with them.

    Parameters
    ----------
    client : distributed.Client
    since : float
        Wall-clock seconds.

    Raises
    ------
    TaskflowError
        The workers could not be asked (the connection is gone).
    """
    try:
        out = client.sync(client._run, worker_records, since, on_error="return", callback_timeout=60)
    except Exception as e:  # noqa: BLE001 - the records are lost with the connection
        raise RunFailed(f"could not collect the workers' transfer records: {type(e).__name__}: {e}") from e
    got = {addr: rec for addr, rec in out.items() if isinstance(rec, dict)}
    return WorkersRecords({addr: rec["transfers"] for addr, rec in got.items()},
                          {addr: rec["job"] for addr, rec in got.items() if isinstance(rec["job"], str)},
                          {addr: {"compute": rec["compute"], "delay": rec["delay"]} for addr, rec in got.items()})


def close_quietly(things, now: bool = False) -> None:
    """Close clients and clusters a run started; when the scheduler is gone, without the
    reconnection tracebacks distributed would log (the run has already said what happened).

    Parameters
    ----------
    things : list
        Clients and clusters, closed in order.
    now : bool
        The run was abandoned (a timeout, Ctrl-C, a failure): the worker processes of an
        embedded cluster are killed first, not waited for (a task still running would hold each
        for its nanny's five seconds).
    """
    import logging

    if now:
        _kill_workers(things)
    quiet = now or any(getattr(x, "status", "running") != "running" for x in things if hasattr(x, "scheduler"))
    loggers = [logging.getLogger(n) for n in ("distributed.client", "distributed.core", "distributed.comm")]
    levels = [lg.level for lg in loggers]
    if quiet:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
    try:
        for x in things:
            try:
                x.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _kill_workers(things) -> None:
    """Kill the worker processes of the embedded clusters among ``things``, their nannies told
    first not to restart them."""
    import signal

    for x in things:
        for nanny in list(getattr(x, "workers", {}).values()) if isinstance(getattr(x, "workers", None), dict) else ():
            pid = getattr(getattr(getattr(nanny, "process", None), "process", None), "pid", None)
            if pid is None or not hasattr(nanny, "close_gracefully"):
                continue
            try:
                nanny.close_gracefully(reason="taskflow-abandoned")
                os.kill(pid, signal.SIGKILL)
            except (OSError, AttributeError):  # already gone
                pass


def progress_bar(total: int, name: str, unit: str = "task"):
    """A progress bar for a run (tqdm: a widget in a notebook that has ipywidgets, else text),
    shown only once the run has taken 2 s.

    Parameters
    ----------
    total : int
    name : str
        Its label.
    unit : str
        What it counts (tasks, iterations).
    """
    if in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm
    else:  # tqdm.auto would warn in a notebook without ipywidgets
        from tqdm.std import tqdm
    # disable=None: no bar where stderr is no terminal (a log, a pipe), where its redraws would pile
    # into one long line
    return tqdm(total=total, unit=unit, desc=name, file=sys.stderr, delay=2.0, mininterval=0.5, leave=False,
                disable=None if tqdm.__module__ == "tqdm.std" else False)


def in_notebook() -> bool:
    """Inside a Jupyter kernel (as tqdm.autonotebook decides)."""
    ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    try:
        return ipython is not None and ipython() is not None and "IPKernelApp" in ipython().config
    except Exception:  # an IPython that is not what we expect: text bar
        return False
