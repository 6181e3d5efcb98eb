"""The :class:`Testbed`: a Dask scheduler and workers, each in a network namespace of its own, on
veth links and bridges shaped with ``tc``; the package docstring draws its layout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..checks import parse_rate
from ..cluster import Cluster, Worker
from ..errors import TaskflowError, TestbedError
from .cgroups import CpuLimits, cpu_limits_available
from .lifetime import clean_stale, dispose, write_state
from .namespaces import PREFIX, STATE_DIR, SUBNET, available, run_command, teardown
from .shaping import htb, tbf

__all__ = ["Testbed", "TestbedUnavailable", "TOPOLOGIES", "MAX_WORKERS", "PORT"]

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ("uniform", "two-racks", "racks", "slow-link", "matrix")
MAX_WORKERS = 64
#: The Dask scheduler's port in its namespace.
PORT = 8786


class TestbedUnavailable(TaskflowError):
    """This machine cannot make a testbed (not root, no ``ip netns``, no ``tc``)."""

    __test__ = False  # not a pytest test class


@dataclass
class _Node:
    name: str  # s, c, w0, w1, ...
    ns: str
    ip: str
    rack: int
    rate: float | None  # bytes/s of its link (None: unshaped)


class Testbed:
    """A Dask scheduler and ``workers`` Dask workers in network namespaces on shaped links.

    Use it as a context manager; :attr:`address` is the scheduler's address, reachable from the
    client namespace, where :meth:`exec` and :meth:`popen` run commands (with
    ``DASK_SCHEDULER_ADDRESS`` set, so ``taskflow run`` and ``distributed.Client()`` find it).

    Parameters
    ----------
    workers : int
        Workers w0 .. w{n-1}.
    topology : {"uniform", "two-racks", "racks", "slow-link", "matrix"}
        ``uniform``: every worker link at ``bandwidth``. ``two-racks``: the first half of the
        workers on rack 0, the rest on rack 1, links at ``bandwidth``, the racks joined by a link
        at ``inter_rack``. ``racks``: ``racks`` racks of consecutive workers (as even as the count
        allows), each joined to one core switch by an uplink and a downlink at ``inter_rack``
        (the flows leaving a rack share its uplink, those entering it its downlink). ``slow-link``: as uniform, but ``slow_worker``'s link at
        ``slow_bandwidth``. ``matrix``: ``matrix[a][b]`` shapes a -> b for each ordered pair.
    bandwidth, inter_rack, slow_bandwidth : str or float
        Rates (:func:`parse_rate`); ``inter_rack`` defaults to a tenth of ``bandwidth``, and so
        does ``slow_bandwidth``.
    slow_worker : str
        Default: the last worker.
    racks : int
        How many racks (``racks`` topology; 2 to the number of workers).
    matrix : dict
        ``{a: {b: rate}}`` by worker name; pairs not given are unshaped.
    nthreads : int
        Threads per worker.
    cpus : dict, optional
        Worker name -> the cores its process may use (:class:`CpuLimits`): ``{"w3": 0.25}`` makes
        w3 a worker at a quarter of a core, really slower. Needs a cgroup cpu controller.
    timeout : float
        Seconds to wait for the scheduler and workers.

    Raises
    ------
    TestbedUnavailable
        On :meth:`start`, when :func:`available` says why not.
    TaskflowError
        A bad topology, rate, worker name or count.
    """

    def __init__(
        self,
        workers: int = 4,
        topology: str = "uniform",
        bandwidth="1gbit",
        inter_rack=None,
        slow_worker: str | None = None,
        slow_bandwidth=None,
        matrix: dict | None = None,
        nthreads: int = 1,
        cpus: dict | None = None,
        timeout: float = 60.0,
        racks: int = 2,
    ):
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
            raise TestbedError(f"testbed workers must be 1..{MAX_WORKERS}, got {workers!r}")
        if topology not in TOPOLOGIES:
            raise TestbedError(f"unknown topology {topology!r}; known: {', '.join(TOPOLOGIES)}")
        if topology == "two-racks" and workers < 2:
            raise TestbedError("two-racks needs at least 2 workers")
        if topology == "racks" and (isinstance(racks, bool) or not isinstance(racks, int) or not 2 <= racks <= workers):
            raise TestbedError(f"racks needs 2 to {workers} racks (one worker each at least), got {racks!r}")
        self.racks = racks if topology == "racks" else (2 if topology == "two-racks" else 1)
        self.topology = topology
        self.names = [f"w{k}" for k in range(workers)]
        self.bandwidth = parse_rate(bandwidth)
        self.inter_rack = parse_rate(inter_rack) if inter_rack is not None else self.bandwidth / 10
        self.slow_bandwidth = parse_rate(slow_bandwidth) if slow_bandwidth is not None else self.bandwidth / 10
        self.slow_worker = slow_worker if slow_worker is not None else self.names[-1]
        if self.slow_worker not in self.names:
            raise TestbedError(f"slow worker {self.slow_worker!r} is not one of {', '.join(self.names)}")
        self.matrix = {}
        if topology == "matrix":
            if not isinstance(matrix, dict) or not matrix:
                raise TestbedError("topology 'matrix' needs a matrix {a: {b: rate}} of worker names")
            for a, row in matrix.items():
                if a not in self.names or not isinstance(row, dict):
                    raise TestbedError(f"matrix: unknown worker {a!r} (workers: {', '.join(self.names)})")
                for b, r in row.items():
                    if b not in self.names or b == a:
                        raise TestbedError(f"matrix[{a!r}]: bad destination {b!r}")
                    self.matrix.setdefault(a, {})[b] = parse_rate(r)
        self.nthreads = int(nthreads)
        self.cpus = {}
        for n, c in (cpus or {}).items():
            if n not in self.names:
                raise TestbedError(f"cpus: unknown worker {n!r} (workers: {', '.join(self.names)})")
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < float("inf"):
                raise TestbedError(f"cpus[{n!r}]: {c!r} is not a positive number of cores")
            self.cpus[n] = float(c)
        self.cpu_limits = None
        self.timeout = float(timeout)
        self.id = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
        if topology == "racks":
            racks = {n: k * self.racks // workers for k, n in enumerate(self.names)}
        else:
            racks = {
                n: (1 if topology == "two-racks" and k >= (workers + 1) // 2 else 0) for k, n in enumerate(self.names)
            }
        self.nodes = {
            "s": _Node("s", f"{self.id}-s", f"{SUBNET}.1", 0, None),
            "c": _Node("c", f"{self.id}-c", f"{SUBNET}.2", 0, None),
        }
        for k, n in enumerate(self.names):
            rate = (
                None
                if topology == "matrix"
                else (self.slow_bandwidth if topology == "slow-link" and n == self.slow_worker else self.bandwidth)
            )
            self.nodes[n] = _Node(n, f"{self.id}-{n}", f"{SUBNET}.{11 + k}", racks[n], rate)
        self.switch = f"{self.id}-sw"
        self.state_file = STATE_DIR / f"{self.id}.json"
        self.procs: dict = {}
        self.reaper = None
        self.started = False

    # -- what the network is -------------------------------------------------------------------
    @property
    def address(self) -> str:
        """The scheduler's address (reachable from the client namespace)."""
        return f"tcp://{self.nodes['s'].ip}:{PORT}"

    def rack(self, name: str) -> int:
        """The rack (0, 1, ...) of worker ``name``.

        Parameters
        ----------
        name : str
        """
        return self.nodes[name].rack

    def rate(self, a: str, b: str) -> float:
        """Bytes/s one flow from worker ``a`` to worker ``b`` gets alone: its narrowest shaped link.

        Parameters
        ----------
        a, b : str
            Worker names.
        """
        if self.topology == "matrix":
            return self.matrix.get(a, {}).get(b, float("inf"))
        r = min(self.nodes[a].rate, self.nodes[b].rate)
        if self.nodes[a].rack != self.nodes[b].rack:
            r = min(r, self.inter_rack)
        return r

    def cluster(self, speeds: dict | None = None, latency: float = 0.0) -> Cluster:
        """The declared cluster model of this network: one worker per testbed worker, the shaped
        rate of each ordered pair (:meth:`rate`), ``bandwidth`` the fastest of them; with racks,
        the racks and the inter-rack link as their shared ``uplink``.

        Parameters
        ----------
        speeds : dict, optional
            Worker name -> relative speed (default: a worker with a CPU limit below its threads
            runs at its share of a core, the others at 1).
        latency : float
        """
        if speeds is None:
            speeds = {n: min(1.0, c / self.nthreads) for n, c in self.cpus.items()}
        pairs = {
            a: {b: self.rate(a, b) for b in self.names if b != a and self.rate(a, b) < float("inf")} for a in self.names
        }
        finite = [r for row in pairs.values() for r in row.values()]
        top = max(finite) if finite else 1e9
        racks = {n: self.nodes[n].rack for n in self.names} if self.racks > 1 else None
        return Cluster(
            [Worker(n, (speeds or {}).get(n, 1.0), self.nthreads) for n in self.names],
            bandwidth=top,
            bandwidths={a: {b: r for b, r in row.items() if r != top} for a, row in pairs.items()},
            latency=latency,
            name=f"testbed-{self.topology}",
            racks=racks,
            uplink=self.inter_rack if racks else None,
        )

    def describe(self) -> str:
        """One line per worker: its address, rack and link rate."""
        lines = [f"testbed {self.id}: {self.topology}, scheduler {self.address}"]
        for n in self.names:
            node = self.nodes[n]
            rate = "per-pair (htb)" if node.rate is None else f"{node.rate * 8 / 1e6:g} Mbit/s"
            cpu = f", CPU limited to {self.cpus[n]:g} core(s)" if n in self.cpus else ""
            lines.append(f"  {n}: {node.ip}, rack {node.rack}, link {rate}{cpu}")
        if self.topology == "two-racks":
            lines.append(f"  inter-rack link: {self.inter_rack * 8 / 1e6:g} Mbit/s each way")
        elif self.topology == "racks":
            lines.append(f"  each rack's uplink and downlink to the core: {self.inter_rack * 8 / 1e6:g} Mbit/s")
        return "\n".join(lines)

    # -- life cycle ----------------------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> "Testbed":
        """Make the namespaces, links and shaping; start the scheduler and the workers; wait for
        them. Anything made is removed again if a step fails.

        Raises
        ------
        TestbedUnavailable
            Not root, no ``ip netns`` or no ``tc``.
        TaskflowError
            A step failed (named), or the workers did not connect within ``timeout``.
        """
        why = available() or (cpu_limits_available() if self.cpus else None)
        if why:
            raise TestbedUnavailable(why)
        clean_stale()
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        self.started = True
        self._write_state()
        self.reaper = subprocess.Popen(
            [sys.executable, "-m", "taskflow.testbed.lifetime", "--reap", str(self.state_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=self._env(),
        )
        try:
            self._make_network()
            self._start_dask()
            if self.cpus:
                self.cpu_limits = CpuLimits({self.procs[n].pid: c for n, c in self.cpus.items()})
                self._write_state()  # the groups, for the reaper, before any is made
                self.cpu_limits.apply()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_state(self) -> None:
        groups = list(self.cpu_limits.paths.values()) if self.cpu_limits is not None else []
        write_state(self.state_file, self.id, self._namespaces(), groups)

    def _namespaces(self) -> list:
        return [self.switch] + [n.ns for n in self.nodes.values()]

    def _make_network(self) -> None:
        sw = self.switch
        run_command(["ip", "netns", "add", sw])
        run_command(["ip", "-n", sw, "link", "set", "lo", "up"])
        racks = sorted({n.rack for n in self.nodes.values()})
        for r in racks:
            run_command(["ip", "-n", sw, "link", "add", f"br{r}", "type", "bridge"])
            run_command(["ip", "-n", sw, "link", "set", f"br{r}", "up"])
        if self.topology == "racks":  # a core switch; each rack's link to it shaped both ways
            run_command(["ip", "-n", sw, "link", "add", "core", "type", "bridge"])
            run_command(["ip", "-n", sw, "link", "set", "core", "up"])
            for r in racks:
                run_command(["ip", "-n", sw, "link", "add", f"up{r}", "type", "veth", "peer", "name", f"dn{r}"])
                run_command(["ip", "-n", sw, "link", "set", f"up{r}", "master", f"br{r}", "up"])
                run_command(["ip", "-n", sw, "link", "set", f"dn{r}", "master", "core", "up"])
                tbf(sw, f"up{r}", self.inter_rack)  # leaving rack r
                tbf(sw, f"dn{r}", self.inter_rack)  # entering rack r
        elif len(racks) == 2:
            run_command(["ip", "-n", sw, "link", "add", "ir0", "type", "veth", "peer", "name", "ir1"])
            for r in (0, 1):
                run_command(["ip", "-n", sw, "link", "set", f"ir{r}", "master", f"br{r}", "up"])
                tbf(sw, f"ir{r}", self.inter_rack)
        for node in self.nodes.values():
            run_command(["ip", "netns", "add", node.ns])
            run_command(["ip", "-n", node.ns, "link", "set", "lo", "up"])
            host_end = f"v-{node.name}"
            run_command(
                ["ip", "-n", sw, "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", node.ns]
            )
            run_command(["ip", "-n", sw, "link", "set", host_end, "master", f"br{node.rack}", "up"])
            run_command(["ip", "-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0"])
            run_command(["ip", "-n", node.ns, "link", "set", "eth0", "up"])
            if node.rate is not None:
                tbf(node.ns, "eth0", node.rate)  # its upload
                tbf(sw, host_end, node.rate)  # its download
        if self.topology == "matrix":
            for a, row in self.matrix.items():
                htb(self.nodes[a].ns, "eth0", [(self.nodes[b].ip, r) for b, r in row.items()])

    def _env(self) -> dict:
        path = os.pathsep.join(p for p in (os.path.dirname(sys.executable), os.environ.get("PATH")) if p)
        return dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
            PATH=path,
            DASK_SCHEDULER_ADDRESS=self.address,
        )

    def _start_dask(self) -> None:
        dask_cli = os.path.join(os.path.dirname(sys.executable), "dask")
        log = STATE_DIR / f"{self.id}-scheduler.log"
        self.procs["s"] = self._spawn(
            "s", [dask_cli, "scheduler", "--host", self.nodes["s"].ip, "--port", str(PORT), "--no-dashboard"], log
        )
        for n in self.names:
            self.procs[n] = self._spawn(
                n,
                [
                    dask_cli,
                    "worker",
                    self.address,
                    "--host",
                    self.nodes[n].ip,
                    "--name",
                    n,
                    "--nthreads",
                    str(self.nthreads),
                    "--no-nanny",
                    "--no-dashboard",
                ],
                STATE_DIR / f"{self.id}-{n}.log",
            )
        wait = (
            "import sys; from distributed import Client\n"
            f"c = Client({self.address!r}, timeout='{int(self.timeout)}s')\n"
            f"c.wait_for_workers({len(self.names)}, timeout={self.timeout})\n"
            "print(sorted(w['name'] for w in c.scheduler_info()['workers'].values())); c.close()"
        )
        p = self.exec([sys.executable, "-c", wait], timeout=2 * self.timeout + 30)
        if p.returncode != 0:
            dead = [n for n, proc in self.procs.items() if proc.poll() is not None]
            raise TestbedError(
                f"the testbed's Dask cluster did not come up within {self.timeout:g} s"
                + (f" (exited: {', '.join(dead)}; logs in {STATE_DIR})" if dead else "")
                + f": {(p.stderr.strip().splitlines() or ['no output'])[-1]}"
            )

    def _spawn(self, node: str, argv, log: Path) -> subprocess.Popen:
        from ..runtime.worker.worker_plugin import CPU_LIMIT_ENV
        from ..runtime.launch.local import nanny_environ

        env = self._env()
        if node in self.names:  # as Dask's nanny starts a worker (one BLAS thread a process, ...)
            env.update(nanny_environ())
        if node in self.cpus:  # ip netns exec mounts a fresh /sys: the worker cannot read its cgroup
            env[CPU_LIMIT_ENV] = repr(self.cpus[node])
        f = open(log, "wb")
        try:
            return subprocess.Popen(
                ["ip", "netns", "exec", self.nodes[node].ns, *argv],
                stdin=subprocess.DEVNULL,
                stdout=f,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        finally:
            f.close()

    def popen(self, argv, **kwargs) -> subprocess.Popen:
        """Start ``argv`` in the client namespace (``DASK_SCHEDULER_ADDRESS`` set).

        Parameters
        ----------
        argv : list of str
        **kwargs
            For :class:`subprocess.Popen` (``env`` entries are added to the testbed's).
        """
        env = {**self._env(), **kwargs.pop("env", {})}
        return subprocess.Popen(["ip", "netns", "exec", self.nodes["c"].ns, *argv], env=env, **kwargs)

    def exec(self, argv, timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` in the client namespace and wait (bounded by ``timeout``); output captured
        as text unless ``kwargs`` say otherwise.

        Parameters
        ----------
        argv : list of str
        timeout : float, optional
        **kwargs
            For :meth:`popen`.
        """
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("text", True)
        with self.popen(argv, start_new_session=True, **kwargs) as p:
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
                raise TestbedError(f"{' '.join(map(str, argv))[:80]}: still running after {timeout:g} s") from None
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def stop(self) -> None:
        """End every process in the testbed's namespaces and delete them (and so every link and
        bridge). Safe to call twice."""
        if not self.started:
            return
        teardown(self._namespaces())
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        groups = self.cpu_limits.groups if self.cpu_limits is not None else []
        dispose({"id": self.id, "namespaces": [], "cgroups": groups}, self.state_file)
        self.cpu_limits = None
        if self.reaper is not None:
            try:
                self.reaper.wait(timeout=5)  # it sees the state file gone and exits
            except subprocess.TimeoutExpired:
                self.reaper.kill()
                self.reaper.wait(timeout=5)
        self.started = False
