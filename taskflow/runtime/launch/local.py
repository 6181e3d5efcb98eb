"""The embedded ``LocalCluster``: worker processes on this machine that reuse freed memory for the
outputs they receive.

Between two worker processes on one machine an output moves through loopback TCP into a buffer the
receiver allocates for it. glibc serves an allocation above its mmap threshold (32 MiB at most,
lower at first) with fresh pages from the kernel, which zeroes every page (every 2 MiB huge page,
for numpy's buffers) before the copy overwrites it, and gives the pages back when the output is
released. Measured on a 2-core machine (two one-thread workers, twenty 50 MB outputs moved from
one to the other, three rounds): 0.7-1.5 s a round and 2.0 GB of pages allocated for each 1 GB
moved; with the settings below, from the second round on, 0.3-0.4 s and 1.0 GB (the kernel's own
socket buffers). In the ``quick`` suite on Dask the kernel's page zeroing was the largest use of
CPU in the workers after waiting; with reuse, two runs of one static plan differ by a median of
1.4-2.5% instead of 6.4%.

So the workers of every cluster taskflow starts itself get, before they start,
``MALLOC_MMAP_THRESHOLD_`` (1 GiB: received buffers come from the heap),
``MALLOC_TRIM_THRESHOLD_`` (half a worker's memory limit, :data:`TRIM_AT`; half this machine's
memory for a worker without a limit) and ``MALLOC_ARENA_MAX`` (1: one heap for all of a worker's
threads). A worker then holds on to memory it has used, up to its peak; Dask counts that as
unmanaged memory, so the workers' plugin (:class:`~.worker_plugin.TransferLog`) hands free memory back
(``malloc_trim``) whenever a worker's memory passes half its limit, before Dask's own thresholds
(spilling at 70%, pausing at 80%) could act on it. ``TASKFLOW_REUSE_MEMORY=0`` in the
environment turns all of this off. Clusters taskflow only connects to are never changed.

The first output a worker receives from another one over a new connection moves 5-10x slower than
the ones after it (measured in the ``quick`` suite's fork-join on a fresh 4-worker cluster, Dask's
own scheduling: a median of 208-231 MB/s for the 18 transfers of the first run, 1.4-1.8 GB/s in
every run after it, and the same 1.4-1.5 GB/s in the first run once each pair of workers had
exchanged 1 kB). A first run's measured bandwidth then says the network is several times slower
than it is, and a cost profile learned from it plans and predicts the next run with that.
:func:`warm_connections` makes each pair of workers exchange a few bytes first.

A worker's heap starts empty too: until it has grown to what a run needs, every output a worker
receives or makes lands on pages the kernel has to zero first. Measured on the ``quick`` suite's
layered-ccr1 under a HEFT plan on a fresh 4-worker cluster (connections warmed): 5.2-5.4 s and
6.4-6.6 s spent in transfers, then 2.7 s and 0.8 s for the same plan in the next run; with each
worker's heap grown first, the first run took 2.7 s and 0.8 s as well. A profile learned from a run
on a cold heap took transfers for 2-10x slower than they are (its plan, predicted 5.1 s, ran in
3.1-4.2 s). :func:`warm_heaps` has every worker that reuses memory grow its heap to
:data:`HEAP_SHARE` of :func:`heap_size` (a quarter of its memory limit, at most 1 GiB) and free it
again. Taskflow calls both, as
:func:`warm_cluster`, on every cluster it starts itself.

The heap above is the process's main one, which the worker's event loop (receiving) allocates
from. By default glibc gives each further thread an arena of its own, made of 64 MiB heaps that it
unmaps as soon as one is wholly free, whatever the trim threshold: the outputs a task makes in the
worker's thread pool landed on fresh pages run after run, the heap warmed at start never served
them, and how many fresh pages a run needed depended on which outputs its plan put on which worker.
Measured on the ``quick`` suite's layered-ccr1 (35-52 MB outputs) under HEFT on a fresh 4-worker
cluster, five runs (declared costs, then four with the learned profile): 221-470 MB of page
faults a run, each task's time past its emulated duration 11-44 ms on average and up to 0.1-0.4 s,
runs of 3.91, 3.13, 3.08, 3.05 and 2.93 s against a learned prediction of 3.50 s; with
``MALLOC_ARENA_MAX=1``, 1-73 MB of page faults, 7-12 ms past on average, and 2.81, 2.77, 2.77, 2.79
and 2.73 s against 2.74 s. One arena means the threads of a worker take turns in ``malloc``; the
Python objects of a task come from Python's own allocator, not from it.

The trim threshold is not what the heap keeps: once the free memory at the top of the heap passes
it, glibc gives all of it back. With the threshold at a quarter of the limit (at most 1 GiB), as it
was, a worker whose run needed more than that lost its whole warmed heap when the run's outputs
were released, and the next run started cold. Measured on layered-ccr1 under HEFT, three fresh
clusters: the busiest worker grew to 1.16-1.27 GB in the first run, held 157-255 MB when the
second (learned) run began, and the kernel zeroed 700-830 MB of huge pages for it again; those
second runs took 3.49-3.66 s, the runs before and after them 2.68-3.05 s. With the threshold at
half the limit, where the plugin trims anyway, the heap stays as grown between runs.
"""

from __future__ import annotations

import contextlib
import logging
import os

from ..worker.worker_plugin import REUSE_ENV, TRIM_AT

__all__ = [
    "local_cluster",
    "check_local_workers",
    "WORKERS_PER_CORE",
    "prompt_messages",
    "PROMPT_INTERVAL",
    "warm_cluster",
    "warm_connections",
    "warm_heaps",
    "HEAP_SHARE",
    "worker_environ",
    "nanny_environ",
    "reuse_wanted",
    "MMAP_THRESHOLD",
    "ARENAS",
    "heap_size",
]

#: glibc's mmap threshold in the workers: allocations below it come from the heap
MMAP_THRESHOLD = 1 << 30
#: glibc's arenas in a worker: one, so that its task threads allocate from the heap it keeps
ARENAS = 1
#: seconds :func:`warm_connections` waits for its transfers at most
WARM_TIMEOUT = 30.0
#: the share of :func:`heap_size` a worker grows its heap to at start
HEAP_SHARE = 0.9


def _warm_bytes(n: int) -> bytes:
    return b"\1" * n


def warm_cluster(client) -> None:
    """Warm a cluster taskflow started itself before its first run: :func:`warm_heaps`, then
    :func:`warm_connections`.

    Parameters
    ----------
    client : distributed.Client
    """
    warm_heaps(client)
    warm_connections(client)


#: seconds between two batches of messages, scheduler to workers and back, on a cluster whose runs
#: are chains of short tasks (Dask's own: 5 ms and 2 ms)
PROMPT_INTERVAL = 0.0


def _scheduler_interval(dask_scheduler=None, interval: float = PROMPT_INTERVAL) -> int:
    for stream in dask_scheduler.stream_comms.values():
        stream.interval = interval
    return len(dask_scheduler.stream_comms)


def _worker_interval(dask_worker=None, interval: float = PROMPT_INTERVAL) -> None:
    dask_worker.batched_stream.interval = interval


def prompt_messages(client, interval: float = PROMPT_INTERVAL) -> None:
    """Send Dask's messages between the scheduler and the workers as soon as the previous send is
    done, not in batches every 5 ms (scheduler to worker) and 2 ms (worker to scheduler): a training
    iteration of short steps is a chain of hops (a task's end reported, its dependent sent), each of
    which waited out a batch's interval. Messages that come while a send is under way still go
    together. For a cluster taskflow started itself (:func:`local_cluster`), for its workers of now.

    Parameters
    ----------
    client : distributed.Client
    interval : float
        Seconds.
    """
    client.run_on_scheduler(_scheduler_interval, interval=interval)
    client.run(_worker_interval, interval=interval)


def heap_size(memory_limit) -> int:
    """The heap a worker is grown to at start, before :data:`HEAP_SHARE`: a quarter of its memory
    limit, at most 1 GiB (1 GiB without a limit).

    Parameters
    ----------
    memory_limit : float or None
        The worker's memory limit in bytes (0 or None: none).
    """
    return int(min(1 << 30, memory_limit / 4)) if memory_limit and memory_limit > 0 else 1 << 30


def _grow_heap(dask_worker, share: float = HEAP_SHARE) -> int:
    """On a worker: allocate and touch ``share`` x :func:`heap_size`, then free it (under the trim
    threshold, the heap keeps it). Nothing on a worker without memory reuse. Returns the bytes
    grown."""
    if os.environ.get(REUSE_ENV) != "1":
        return 0
    limit = getattr(getattr(dask_worker, "memory_manager", None), "memory_limit", None)
    n = int(heap_size(limit) * share)
    buf = bytearray(n)  # zero-filled: every page is touched
    del buf
    return n


def warm_heaps(client) -> dict:
    """Have every worker that reuses freed memory (see the module docstring) grow its heap to
    :data:`HEAP_SHARE` of :func:`heap_size`, so that a first run does not wait for the kernel
    to zero fresh pages for its outputs. Workers of clusters taskflow did not start are left alone.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    dict
        Worker address -> bytes grown (0 where the worker does not reuse memory, or failed).
    """
    got = client.run(_grow_heap, on_error="return")
    return {a: v if isinstance(v, int) else 0 for a, v in got.items()}


def warm_connections(client, nbytes: int = 1024, timeout: float = WARM_TIMEOUT) -> int:
    """Open the connections between every pair of the cluster's workers: each worker makes
    ``nbytes`` and every other worker fetches them (see the module docstring). Bounded: after
    ``timeout`` seconds what has not happened is cancelled and the run goes on.

    Parameters
    ----------
    client : distributed.Client
    nbytes : int
    timeout : float

    Returns
    -------
    int
        The pairs warmed (0 when there are fewer than two workers, or on timeout).
    """
    from distributed import wait

    from ..messages import workers_info

    addrs = sorted(workers_info(client))
    if len(addrs) < 2:
        return 0
    # bytes of their own for each pair: Dask fetches an input from any worker holding it, and a
    # copy of one worker's bytes already read elsewhere would open that connection instead
    made = {
        (a, b): client.submit(_warm_bytes, nbytes, workers=[a], allow_other_workers=False, pure=False)
        for a in addrs
        for b in addrs
        if a != b
    }
    reads = [client.submit(len, made[a, b], workers=[b], allow_other_workers=False, pure=False) for a, b in made]
    try:
        wait(reads, timeout=timeout)
        return len(reads)
    except TimeoutError:  # (a worker lost meanwhile: its pinned tasks would wait for ever)
        return 0
    finally:
        client.cancel([*made.values(), *reads])


def reuse_wanted() -> bool:
    """Whether memory reuse is on (``TASKFLOW_REUSE_MEMORY`` is not ``0``)."""
    return os.environ.get(REUSE_ENV, "1") != "0"


def worker_environ(memory_limit: float, base: dict | None = None) -> dict:
    """The environment variables set before a worker process starts: ``base`` (Dask's own
    ``distributed.nanny.pre-spawn-environ`` by default) with glibc's thresholds and arenas for
    reusing freed memory and :data:`REUSE_ENV`, or ``base`` alone when reuse is off.

    Parameters
    ----------
    memory_limit : float
        A worker's memory limit in bytes (0: none).
    base : dict, optional
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ") if base is None else base)
    if not reuse_wanted():
        return env
    from distributed.system import MEMORY_LIMIT

    limit = memory_limit if memory_limit and memory_limit > 0 else MEMORY_LIMIT
    env.update(
        {
            "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD,
            "MALLOC_TRIM_THRESHOLD_": max(int(TRIM_AT * limit), heap_size(memory_limit)),
            "MALLOC_ARENA_MAX": ARENAS,
            REUSE_ENV: 1,
        }
    )
    return env


#: worker processes an embedded cluster may start per core of this machine
WORKERS_PER_CORE = 4
#: the memory a worker process takes before any task (Python, Dask, numpy; torch adds more)
WORKER_BYTES = 200 * 2**20


def check_local_workers(n_workers: int, threads_per_worker: int = 1) -> None:
    """Refuse, at once, an embedded cluster larger than this machine holds: more than
    :data:`WORKERS_PER_CORE` worker processes per core, or more processes than its
    free memory holds. Past that they take minutes to start, contend for every core and ignore
    nothing but SIGKILL while they do; a larger cluster is reached with an address.

    Parameters
    ----------
    n_workers, threads_per_worker : int

    Raises
    ------
    UsageError
    """
    import psutil

    from ...errors import UsageError

    cores = os.cpu_count() or 1
    most = WORKERS_PER_CORE * cores
    if n_workers > most:
        raise UsageError(
            f"{n_workers} worker processes are more than this machine's {cores} core(s) run at once "
            f"({most} at most, {WORKERS_PER_CORE} a core): fewer workers, or an existing cluster's "
            f"--address"
        )
    free = psutil.virtual_memory().available
    if n_workers * WORKER_BYTES > free:
        raise UsageError(
            f"{n_workers} worker processes need about {n_workers * WORKER_BYTES / 2**30:.1f} GiB, more "
            f"than this machine's {free / 2**30:.1f} GiB free: fewer workers, or an existing cluster's "
            f"--address"
        )


def local_cluster(
    n_workers: int, threads_per_worker: int = 1, dashboard_address=None, work_stealing: bool | None = None, **kwargs
):
    """A ``LocalCluster`` of ``n_workers`` processes whose workers reuse freed memory (see the
    module docstring). This process's own environment is left as it was.

    Parameters
    ----------
    n_workers : int
    threads_per_worker : int
    dashboard_address : str or None
        None: no dashboard.
    work_stealing : bool, optional
        Dask's ``distributed.scheduler.work-stealing`` for this cluster's scheduler (default: as
        configured).
    **kwargs
        More ``LocalCluster`` arguments (``memory_limit`` among them).
    """
    import dask
    from distributed import LocalCluster
    from distributed.system import MEMORY_LIMIT

    check_local_workers(n_workers, threads_per_worker)

    limit = kwargs.get("memory_limit", "auto")
    if isinstance(limit, (int, float)):
        per_worker = float(limit)
    elif isinstance(limit, str) and limit != "auto":
        per_worker = float(dask.utils.parse_bytes(limit))
    else:
        per_worker = MEMORY_LIMIT / max(1, n_workers)
    env = worker_environ(per_worker)
    config = {
        "distributed.nanny.pre-spawn-environ": env,  # and Ctrl-C is this process's to handle
        "distributed.worker.preload": [
            *dask.config.get("distributed.worker.preload", []),
            "taskflow.runtime.worker.worker_plugin",
        ],
    }
    if work_stealing is not None:
        config["distributed.scheduler.work-stealing"] = bool(work_stealing)
    from distributed.deploy.spec import SpecCluster

    nanny = logging.getLogger("distributed.nanny")
    if not any(isinstance(f, _BusyAtClose) for f in nanny.filters):
        nanny.addFilter(_BusyAtClose())
    before = set(SpecCluster._instances)
    saved = dict(os.environ)
    lc = None
    try:
        # Dask takes a variable already in this process's environment over its configuration (an
        # earlier cluster's Nanny may have left MALLOC_TRIM_THRESHOLD_ there)
        os.environ.update({k: str(v) for k, v in env.items()})
        if dashboard_address is None:
            # Dask's scheduler serves its HTTP routes (health, metrics) even without a dashboard, on
            # port 8787 unless told otherwise, and warns when that port is taken: a free port, quietly
            kwargs["scheduler_kwargs"] = {
                "dashboard": False,
                "dashboard_address": "127.0.0.1:0",
                **kwargs.get("scheduler_kwargs", {}),
            }
        with dask.config.set(config), _interrupts_held():
            lc = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=True,
                dashboard_address=dashboard_address,
                **kwargs,
            )
        return lc  # a Ctrl-C held while it started is raised as the block above ends
    except BaseException:
        if lc is not None:  # started, then the Ctrl-C held came: close it before it goes on
            with contextlib.suppress(Exception):
                lc.close(timeout=10)
        else:  # failed while starting: Dask would close the half-made cluster at exit, and fail there
            for c in set(SpecCluster._instances) - before:
                SpecCluster._instances.discard(c)
            logging.getLogger("distributed.process").setLevel(logging.ERROR)  # its workers' ends, as they go
        raise
    finally:
        # a Nanny writes its workers' variables into this process's environment as it starts them;
        # later clusters (Dask's own, in a comparison) must not inherit them
        for k in set(os.environ) - set(saved):
            del os.environ[k]
        for k, v in saved.items():
            if os.environ.get(k) != v:
                os.environ[k] = v


class _BusyAtClose(logging.Filter):
    """Drops the nanny's note that it killed a worker still running a task when its cluster closed
    (an embedded cluster closes when its command ends, interrupted or not)."""

    def filter(self, record) -> bool:
        return "still alive after" not in record.getMessage()


@contextlib.contextmanager
def _interrupts_held():
    """Ctrl-C held back while a cluster starts, in the main thread: its threads and worker processes
    are born with SIGINT blocked (a terminal sends it to the whole process group, and a worker
    importing Dask would print a traceback), and this process gets it once the cluster runs, as a
    KeyboardInterrupt like any other. Multiprocessing's resource tracker starts first: starting,
    it unblocks SIGINT in the thread that starts it."""
    import signal
    import threading
    from multiprocessing import resource_tracker

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    resource_tracker.ensure_running()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def nanny_environ() -> dict:
    """The environment variables Dask's nanny sets for the worker it starts (its configuration's
    ``distributed.nanny.pre-spawn-environ`` and ``distributed.nanny.environ``: one OpenMP, MKL and
    OpenBLAS thread a process, ...): a worker started without a nanny (the testbed's) needs them, or each
    worker's linear algebra would start a thread per core and contend with the others' (the
    suite's SVD tasks took about 10x longer on two workers of a 2-core machine)."""
    import dask.config
    import distributed  # noqa: F401 - its defaults join Dask's configuration when it is imported

    env = {}
    for key in ("distributed.nanny.pre-spawn-environ", "distributed.nanny.environ"):
        env.update({str(k): str(v) for k, v in (dask.config.get(key, default=None) or {}).items()})
    return env
