"""Dask's own scheduler states for the tests of the code that reads and changes them: distributed's
``WorkerState`` and ``TaskState`` objects and an unstarted ``Scheduler``, set as a test needs them,
instead of stand-ins that would agree with our code and not with Dask."""

from __future__ import annotations

from distributed.core import Status
from distributed.scheduler import TaskGroup, TaskPrefix, TaskState, WorkerState


def worker(address: str, nthreads: int = 1, name: str | None = None) -> WorkerState:
    """A running worker of ``nthreads`` threads at ``address`` (named ``name``, default the address)."""
    return WorkerState(
        address=address,
        status=Status.running,
        pid=0,
        name=address if name is None else name,
        nthreads=nthreads,
        memory_limit=0,
        local_directory="",
        nanny=None,
        server_id=f"test-{address}",
    )


def task(key: str, state: str = "released", prefix: str | None = None, **fields) -> TaskState:
    """A task ``key`` of task prefix ``prefix`` (default: the key's part before its last ``-``) in
    ``state``, with ``fields`` set on it; processing on a worker (``processing_on``), it is among that
    worker's processing tasks too, as Dask keeps them."""
    name = prefix or key.rsplit("-", 1)[0]
    ts = TaskState(key, None, state, TaskGroup(f"{name}-group", TaskPrefix(name)), False)
    for field, value in fields.items():
        setattr(ts, field, value)
    if ts.processing_on is not None:
        ts.processing_on.processing.add(ts)
    return ts


def scheduler(workers=()):
    """An unstarted Dask scheduler (no comms, no event loop) that knows ``workers`` as running ones,
    with its own extensions (work stealing among them)."""
    from distributed import Scheduler

    s = Scheduler(validate=False, dashboard=False, dashboard_address="127.0.0.1:0")
    for ws in workers:
        s.workers[ws.address] = ws
        s.running.add(ws)
    return s
