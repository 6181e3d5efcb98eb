"""A real ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 that can be killed and started
one by one (no nanny by default, so a killed worker stays dead): for the fault benchmark and the
tests of worker and scheduler loss."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Loopback"]

ROOT = Path(__file__).resolve().parents[2]


#: seconds the processes of a stopping loopback cluster get to end before they are killed
STOP_GRACE = 5.0


class Loopback:
    """A scheduler and named workers on loopback; :meth:`start` them, :meth:`stop` ends every
    process started (call it in a ``finally``).

    Parameters
    ----------
    folder : path
        Where the scheduler file is written.
    workers : sequence of str
        Worker names.
    nthreads : int
        Threads per worker.
    nanny : bool
        Start workers under a nanny (which restarts a killed worker).
    env : dict, optional
        Extra environment variables for the processes.
    """

    def __init__(self, folder, workers=("wa", "wb"), nthreads: int = 1, nanny: bool = False, env=None):
        self.folder = Path(folder)
        self.sched_file = self.folder / "scheduler.json"
        self.names = list(workers)
        self.nthreads = nthreads
        self.nanny = nanny
        self.bindir = os.path.dirname(sys.executable)
        self.env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **(env or {})
        )
        self.scheduler = None
        self.workers: dict = {}

    @property
    def address(self) -> str:
        """The scheduler's address."""
        return json.loads(self.sched_file.read_text())["address"]

    def start(self, timeout: float = 60.0) -> "Loopback":
        """Start the scheduler and every worker; wait until all workers are connected.

        Parameters
        ----------
        timeout : float
        """
        self.start_scheduler(timeout)
        for name in self.names:
            self.start_worker(name)
        self.wait_for_workers(len(self.names), timeout)
        return self

    def start_scheduler(self, timeout: float = 60.0, preload=None) -> None:
        """Start ``dask scheduler`` on a free port (its scheduler file in ``folder``).

        Parameters
        ----------
        timeout : float
        preload : list of str, optional
            Modules for ``--preload``.

        Raises
        ------
        RuntimeError
            It did not start within ``timeout``.
        """
        if self.sched_file.exists():
            self.sched_file.unlink()
        cmd = [
            os.path.join(self.bindir, "dask"),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--dashboard-address",  # its HTTP server starts all the same: not on 8787, which may be taken
            "127.0.0.1:0",
            "--scheduler-file",
            str(self.sched_file),
        ]
        for p in preload or ():
            cmd += ["--preload", p]
        self.scheduler = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        t0 = time.time()
        while not (self.sched_file.exists() and self.sched_file.stat().st_size > 0):
            if time.time() - t0 > timeout or self.scheduler.poll() is not None:
                raise RuntimeError("the dask scheduler did not start")
            time.sleep(0.05)

    def start_worker(self, name: str) -> None:
        """Start ``dask worker`` named ``name`` (returns at once; see :meth:`wait_for_workers`).

        Parameters
        ----------
        name : str
        """
        cmd = [
            os.path.join(self.bindir, "dask"),
            "worker",
            "--scheduler-file",
            str(self.sched_file),
            "--nthreads",
            str(self.nthreads),
            "--name",
            name,
            "--no-dashboard",
            "--host",
            "127.0.0.1",
        ]
        if not self.nanny:
            cmd.append("--no-nanny")
        self.workers[name] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)

    def wait_for_workers(self, n: int, timeout: float = 60.0) -> None:
        """Wait until ``n`` workers are connected.

        Parameters
        ----------
        n : int
        timeout : float
        """
        from distributed import Client

        with Client(scheduler_file=str(self.sched_file), timeout="30s") as c:
            c.wait_for_workers(n, timeout=timeout)

    def kill_worker(self, name: str) -> None:
        """SIGKILL the worker ``name`` (if it runs) and reap it.

        Parameters
        ----------
        name : str
        """
        p = self.workers.get(name)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)

    def kill_scheduler(self) -> None:
        """SIGKILL the scheduler."""
        if self.scheduler is not None and self.scheduler.poll() is None:
            self.scheduler.send_signal(signal.SIGKILL)
            self.scheduler.wait(timeout=10)

    def stop(self) -> None:
        """End every process this started: the workers first (they leave while their scheduler still
        answers), then the scheduler; each is given :data:`STOP_GRACE` seconds, then killed."""
        self._end(list(self.workers.values()))
        self._end([self.scheduler] if self.scheduler else [])

    @staticmethod
    def _end(procs) -> None:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
