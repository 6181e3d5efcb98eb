"""Waiting on a run from the client, every wait bounded or watched: the watchdog on the scheduler
and the workers (:class:`Watchdog`), waiting for results (:func:`wait_for`) and gathering them
(:func:`gather`), a heap frozen while a run's objects are alive (:func:`frozen_heap`), ending the
clusters a run started (:func:`close_quietly`) and the progress bar."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading

from ...errors import RunFailed, RunTimeout, SchedulerLost, TaskflowError, WorkersLost
from .session import call

__all__ = [
    "SCHEDULER_LOSS",
    "Watchdog",
    "wait_for",
    "cancelled_error",
    "gather",
    "workers_reachable",
    "RUN_FULL_COLLECTIONS",
    "WAIT_AT_ONCE",
    "frozen_heap",
    "close_quietly",
    "progress_bar",
    "in_notebook",
]


#: seconds without an answer from the scheduler after which a run is abandoned
SCHEDULER_LOSS = 10.0


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
                raise SchedulerLost(
                    f"lost the Dask scheduler ({self.client.scheduler.address}): no answer for "
                    f"{SCHEDULER_LOSS:g} s; the run is abandoned"
                )
            return
        self.unreachable_since = None
        if status.get("error"):
            raise RunFailed(status["error"])
        self.replans = status.get("replans", self.replans)
        since = status.get("lost_all_since")
        if since is not None and status["now"] - since > status["grace"]:
            raise WorkersLost(
                f"every worker was lost and none joined within {status['grace']:g} s; the run is abandoned"
            )


#: futures one poll of :func:`wait_for` waits on (it wakes when one of them is done, or after a
#: quarter second): waiting on all of them made garbage per future per poll, in cycles that only a
#: full collection frees, which :func:`frozen_heap` holds off while a run goes on (a client of a
#: 100,000-task run grew to 3.5 GB)
WAIT_AT_ONCE = 64


def wait_for(
    futures, watchdog: Watchdog, timeout: float | None = None, on_poll=None, said: float | None = None
) -> None:
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
        try:  # a few at a time: each wait makes objects per future that only a full collection frees
            wait(pending[:WAIT_AT_ONCE], timeout=0.25, return_when="FIRST_COMPLETED")
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


def cancelled_error(client) -> RunFailed:
    """The error for results that were cancelled under a run: a lost scheduler, or someone else.

    Parameters
    ----------
    client : distributed.Client
    """
    if client.status != "running":
        return SchedulerLost(
            f"lost the Dask scheduler ({client.scheduler.address}): the client's connection was "
            f"closed and its results cancelled; the run is abandoned"
        )
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
                raise RunFailed(
                    f"task {name!r}: its result cannot be sent from the worker ({one}); "
                    f"return something picklable (a list, not a generator; no locks or open "
                    f"files)"
                ) from None
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


#: the runs of this process inside :func:`frozen_heap` now, and the thresholds to restore after the last
_FROZEN: dict = {"runs": 0, "thresholds": None}
_FROZEN_LOCK = threading.Lock()


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
    over. A process that froze objects itself or turned the collector off is left as it is.

    Runs that overlap (several threads, as jobs on a shared cluster) share one freeze: the first
    in freezes, the last out thaws. Whether the caller froze objects is asked only when no run of
    ours holds the heap: ``gc.get_freeze_count()`` walks every frozen object, and asked by each of
    many overlapping runs it held the interpreter for milliseconds a time, more as the heap grew.
    """
    import gc

    with _FROZEN_LOCK:
        if _FROZEN["runs"] == 0:
            if not (gc.isenabled() and gc.get_freeze_count() == 0):
                mine = False
            else:
                mine = True
                _FROZEN["thresholds"] = t = gc.get_threshold()
                gc.freeze()
                gc.set_threshold(t[0], t[1], max(t[2], RUN_FULL_COLLECTIONS))
        else:
            mine = True
        if mine:
            _FROZEN["runs"] += 1
    try:
        yield
    finally:
        if mine:
            with _FROZEN_LOCK:
                _FROZEN["runs"] -= 1
                if _FROZEN["runs"] == 0:
                    gc.set_threshold(*_FROZEN["thresholds"])
                    gc.unfreeze()


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

    quiet = now or any(getattr(x, "status", "running") != "running" for x in things if hasattr(x, "scheduler"))
    loggers = [logging.getLogger(n) for n in ("distributed.client", "distributed.core", "distributed.comm")]
    levels = [lg.level for lg in loggers]
    # an abandoned run's embedded cluster: what its scheduler says of the workers killed under it
    # (closed comms, with their tracebacks) is not the user's to read
    handlers = [*logging.getLogger("distributed").handlers, *logging.getLogger().handlers] if now and things else []
    for h in handlers:
        h.addFilter(_not_distributed)
    if quiet:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
    try:
        if now:
            _kill_workers(things)
        for x in things:
            try:
                x.close()
            except Exception:  # noqa: BLE001 - best effort at shutdown
                pass
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
        for h in handlers:
            h.removeFilter(_not_distributed)


def _not_distributed(record) -> bool:
    return not record.name.startswith("distributed")


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
    return tqdm(
        total=total,
        unit=unit,
        desc=name,
        file=sys.stderr,
        delay=2.0,
        mininterval=0.5,
        leave=False,
        disable=None if tqdm.__module__ == "tqdm.std" else False,
    )


def in_notebook() -> bool:
    """Inside a Jupyter kernel (as tqdm.autonotebook decides)."""
    ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    try:
        return ipython is not None and ipython() is not None and "IPKernelApp" in ipython().config
    except Exception:  # an IPython that is not what we expect: text bar
        return False
