"""What runs on the workers beside the tasks: each worker's long log of the transfers it received
(:class:`TransferLog`, the source of a run report's transfers), the rates it received at
(:class:`IncomingRates`, sent with its heartbeat), and what a report collects of them at the end
of a run (:func:`worker_records`)."""

from __future__ import annotations

import os
import sys
import time
from collections import deque

from distributed.diagnostics.plugin import WorkerPlugin

from ..messages import CPU_METRIC, RATES_METRIC


__all__ = [
    "TransferLog",
    "register_serializers",
    "IncomingRates",
    "CpuLimit",
    "worker_records",
    "TRIM_CALLBACK",
    "RATES_METRIC",
    "CPU_METRIC",
    "cpu_limit",
    "CPU_LIMIT_ENV",
    "trim_if_high",
    "REUSE_ENV",
    "TRIM_AT",
    "job_id",
    "SETUP_HEARTBEAT_TIMEOUT",
    "dask_setup",
]


#: the environment variable that turns memory reuse off (``0``) and marks a worker that has it on
REUSE_ENV = "TASKFLOW_REUSE_MEMORY"
#: a worker whose memory passes this share of its limit gives its free memory back
TRIM_AT = 0.5


def trim_if_high(worker, libc=None) -> bool:
    """Give ``worker``'s free memory back to the system (glibc's ``malloc_trim``) when its process
    uses more than :data:`TRIM_AT` of its memory limit. Returns whether it trimmed.

    Parameters
    ----------
    worker : distributed.Worker
    libc : ctypes.CDLL, optional
        glibc (found when not given); without it nothing is trimmed.
    """
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    if not limit:
        return False
    rss = worker.monitor.get_process_memory()
    if rss <= TRIM_AT * limit:
        return False
    libc = libc if libc is not None else _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def _libc():
    import ctypes
    import ctypes.util

    try:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return lib if hasattr(lib, "malloc_trim") else None
    except OSError:
        return None


def job_id() -> str | None:
    """The batch job this process runs in (SLURM or PBS), or None."""
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID") or None


def cpu_limit(proc: str = "/proc/self") -> float | None:
    """Cores the CPU bandwidth limit of this process's cgroup allows (the smallest quota / period
    on its way to the root, cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), or None when there
    is none or it cannot be read: what ``docker --cpus``, Kubernetes CPU limits and systemd's
    ``CPUQuota`` set. A process whose mount namespace hides the cgroup files (``ip netns exec``
    mounts a fresh ``/sys``) reads the environment variable :data:`CPU_LIMIT_ENV` instead.

    Parameters
    ----------
    proc : str
        The ``/proc`` entry of the process.
    """
    try:
        groups = [line.rstrip("\n").split(":", 2) for line in open(f"{proc}/cgroup")]
        mounts = [line.split() for line in open(f"{proc}/mountinfo")]
    except OSError:
        return None
    limits = []
    for _, controllers, path in groups:
        for m in mounts:
            sep = m.index("-")
            fstype, root, point = m[sep + 1], m[3], m[4]
            opts = m[sep + 3].split(",") if len(m) > sep + 3 else []
            if controllers == "" and fstype == "cgroup2":
                files = ("cpu.max",)
            elif "cpu" in controllers.split(",") and fstype == "cgroup" and "cpu" in opts:
                files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            else:
                continue
            rel = os.path.relpath(path, root) if path.startswith(root) else None
            if rel is None or rel.startswith(".."):
                continue
            d = os.path.normpath(os.path.join(point, rel))
            while True:
                limits.append(_quota(d, files))
                if os.path.normpath(d) == os.path.normpath(point):
                    break
                d = os.path.dirname(d)
    found = [x for x in limits if x is not None]
    if not found and proc == "/proc/self":
        try:  # set by whoever limited it where the cgroup files are hidden (the testbed's workers)
            declared = float(os.environ.get(CPU_LIMIT_ENV, ""))
            found = [declared] if declared > 0 else []
        except ValueError:
            pass
    return min(found) if found else None


#: cores a process may use, for :func:`cpu_limit` where its cgroup files cannot be read
CPU_LIMIT_ENV = "TASKFLOW_CPU_LIMIT"


def _quota(d: str, files) -> float | None:
    try:
        if len(files) == 1:
            quota, period = open(os.path.join(d, files[0])).read().split()[:2]
        else:
            quota, period = (open(os.path.join(d, f)).read().strip() for f in files)
        if quota in ("max", "-1") or int(quota) <= 0:
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        return None


def register_serializers() -> None:
    """Register Dask's serializers of numpy arrays (and of torch tensors, where torch is loaded)
    now. Dask registers them lazily, on the first array a worker receives: on its event loop it
    imports modules and parses signatures (``inspect``, ``ast``) while a task thread may be
    compiling code too (a first training step imports and traces PyTorch's), and CPython 3.11 can
    fail the two at once (``SystemError: AST constructor recursion depth mismatch``), which loses
    the transfer."""
    import numpy as np
    from distributed.protocol.serialize import dask_deserialize, dask_serialize

    kinds = [np.ndarray]
    torch = sys.modules.get("torch")
    if torch is not None:
        kinds.append(torch.Tensor)
    for registry in (dask_serialize, dask_deserialize):
        for kind in kinds:
            registry.dispatch(kind)


class TransferLog(WorkerPlugin):
    """Keeps a long log of every transfer a worker receives (Dask keeps its last 1,000 by default):
    the source of a run report's transfers.

    Parameters
    ----------
    maxlen : int
        Entries kept per worker (one entry is one message, which may carry several outputs).
    """

    name = "taskflow-transfer-log"
    idempotent = True

    def __init__(self, maxlen: int = 200_000):
        self.maxlen = int(maxlen)
        self.worker = None
        #: ``(kind, key) -> (the worker's scheduler_delay then, local time)``, kind ``compute`` (as
        #: the task started) or ``fetch`` (as its output arrived here)
        self.delays: dict = {}

    async def setup(self, worker) -> None:
        """Lengthen the worker's ``transfer_incoming_log``, keeping what is in it, and report the
        rates it receives at from each sender with every heartbeat (:class:`IncomingRates`), and
        the cores its cgroup allows it (:class:`CpuLimit`), sent at once. On a
        worker of a cluster taskflow started (:mod:`.local`), check every second whether its
        retained free memory should go back to the system (:func:`trim_if_high`)."""
        self.worker = worker
        register_serializers()
        log = worker.transfer_incoming_log
        if (log.maxlen or 0) < self.maxlen:
            worker.transfer_incoming_log = deque(log, maxlen=self.maxlen)
        if not isinstance(worker.metrics.get(RATES_METRIC), IncomingRates):
            worker.metrics[RATES_METRIC] = IncomingRates()
        if not isinstance(worker.metrics.get(CPU_METRIC), CpuLimit):
            worker.metrics[CPU_METRIC] = CpuLimit()
        if os.environ.get(REUSE_ENV) == "1" and TRIM_CALLBACK not in worker.periodic_callbacks:
            # a worker of a cluster taskflow started keeps freed memory for reuse: hand it back
            # before Dask's memory thresholds would count it against the worker
            from tornado.ioloop import PeriodicCallback

            pc = PeriodicCallback(lambda: trim_if_high(worker), 1000)
            worker.periodic_callbacks[TRIM_CALLBACK] = pc
            pc.start()
        # the scheduler has the metrics before the plugin's registration returns: a graph
        # submitted next is placed knowing the workers' CPU limits (best effort, bounded: a worker
        # closing as the plugin arrives sends them, if at all, with its next heartbeat)
        import asyncio

        try:
            await asyncio.wait_for(worker.heartbeat(), SETUP_HEARTBEAT_TIMEOUT)
        except Exception:  # noqa: BLE001 - the periodic heartbeat sends them later
            pass

    def transition(self, key, start, finish, **kwargs) -> None:
        """Note the clock correction Dask applies to the times of a task that starts here and of an
        output that arrives here. A worker adds its ``scheduler_delay`` (its estimate of how far the
        scheduler's clock is ahead, from the latest heartbeat's round trip) to every time it
        reports; the estimate moves with each heartbeat, by up to half a round trip, which on a busy
        scheduler is tenths of a second: noted per task, it can be taken off again."""
        if finish == "executing":
            kind = "compute"
        elif start == "flight" and finish == "memory":
            kind = "fetch"
        else:
            return
        d = self.delays
        d.pop((kind, key), None)
        d[(kind, key)] = (float(self.worker.scheduler_delay), time.time())
        if len(d) > self.maxlen:
            del d[next(iter(d))]


#: the name of the worker's periodic callback that hands retained free memory back
TRIM_CALLBACK = "taskflow-trim"


class IncomingRates:
    """A worker's measured incoming rates, per sender: over its last ``window`` received messages
    of at least ``smallest`` bytes from that sender, ``[bytes, seconds]`` summed (the rate is their
    ratio: a busy receiver's slow transfers weigh by their time, as they cost). Called by the
    worker for each heartbeat; reads only what arrived since the last call.

    Parameters
    ----------
    window : int
    smallest : int
    """

    def __init__(self, window: int = 64, smallest: int = 1 << 20):
        self.window = int(window)
        self.smallest = int(smallest)
        self.last = None
        self.per: dict = {}

    def __call__(self, worker) -> dict:
        new = []
        for e in reversed(worker.transfer_incoming_log):
            if e is self.last:
                break
            new.append(e)
        if new:
            self.last = new[0]
        for e in reversed(new):
            secs = float(e.get("stop", 0.0)) - float(e.get("start", 0.0))
            if e.get("total", 0) >= self.smallest and secs > 0:
                self.per.setdefault(e["who"], deque(maxlen=self.window)).append((float(e["total"]), secs))
        return {who: [sum(b for b, _ in xs), sum(t for _, t in xs)] for who, xs in self.per.items()}


#: seconds the workers' plugin waits, as it is set up, for the heartbeat that sends its metrics
SETUP_HEARTBEAT_TIMEOUT = 5.0


class CpuLimit:
    """The cores the CPU bandwidth limit of a worker's cgroup allows it
    (:func:`cpu_limit`; None where there is none), read again at most every ``every``
    seconds: a worker may be moved into a limited cgroup after it started. Called by the worker
    for each heartbeat.

    Parameters
    ----------
    every : float
        Seconds between two reads of the cgroup's files.
    """

    def __init__(self, every: float = 5.0):
        self.every = float(every)
        self.read_at = None
        self.cores = None

    def __call__(self, worker) -> float | None:
        now = time.monotonic()
        if self.read_at is None or now - self.read_at >= self.every:
            try:
                self.cores = cpu_limit()
            except Exception:  # noqa: BLE001 - cgroup files of a shape not understood: no limit known
                self.cores = None
            self.read_at = now
        return self.cores


#: seconds before ``since`` that :func:`worker_records` reads back past (corrections move by less)
HISTORY_MARGIN = 5.0


def worker_records(since: float, dask_worker=None) -> dict:
    """Run on a worker (``client.run``): what a run report needs of it, in one call, every time on
    the worker's own clock (Dask's heartbeat-based correction taken off, see
    :meth:`TransferLog.transition`): ``transfers``, those it received that started at or after
    ``since`` (``transfer_incoming_log`` entries); ``compute``, key -> the correction in the times
    Dask reported for each task that started here since ``since``; ``delay``, the correction now
    (for tasks not noted); ``job``, the batch job it runs in (or None).

    Parameters
    ----------
    since : float
        Wall-clock seconds.
    dask_worker : distributed.Worker
        Given by ``client.run``.
    """

    log = dask_worker.plugins.get(TransferLog.name)
    delays = getattr(log, "delays", None) or {}
    now = float(dask_worker.scheduler_delay)
    transfers = []
    # both logs are in time order (transfers as they ended, delays as noted): read back from the
    # newest to the first older than ``since`` (with a margin for the clock corrections), not the
    # whole of a long-lived worker's history at every run
    for e in reversed(dask_worker.transfer_incoming_log):
        first = next(iter(e["keys"]), None)
        d = delays.get(("fetch", first), (now,))[0]
        if e["stop"] - d < since - HISTORY_MARGIN:
            break
        if e["start"] - d >= since:
            transfers.append({**e, "start": e["start"] - d, "stop": e["stop"] - d})
    transfers.reverse()
    compute = {}
    for (kind, key), (d, t) in reversed(delays.items()):
        if t < since:
            break
        if kind == "compute":
            compute[key] = d
    return {"transfers": transfers, "compute": compute, "delay": now, "job": job_id()}


def dask_setup(worker) -> None:
    """Preload hook of an embedded cluster's workers (:func:`.local.local_cluster`): a worker
    process leaves Ctrl-C to the process that started it, which closes the cluster (a terminal
    sends SIGINT to the whole process group); the tasks that closing cancels, and the transfers
    it cuts (a connection closed by a peer), are not logged one by one: a worker really lost is
    the scheduler's to notice, and a run reports it. Nor is a task that raised ("Compute
    Failed"): the run that asked for it reports it, in the user's own terms (its file and line).

    Parameters
    ----------
    worker : distributed.Worker
    """
    import logging
    import signal
    import threading

    logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
    logging.getLogger("distributed.worker").addFilter(_not_a_closed_connection)
    logging.getLogger("distributed.worker").addFilter(_not_a_failed_task)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _not_a_closed_connection(record) -> bool:
    from distributed.comm.core import CommClosedError

    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, (CommClosedError, ConnectionError))


def _not_a_failed_task(record) -> bool:
    return not (isinstance(record.msg, str) and record.msg.startswith("Compute Failed"))
