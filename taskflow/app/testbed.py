"""Real networks on one machine: a Dask scheduler and workers, each in a network namespace of its
own, joined by veth links and bridges whose rates are shaped with ``tc``.

Layout (everything inside namespaces this testbed creates; the host's interfaces are never used
or changed)::

    <id>-sw    the switch: one bridge per rack (br0, br1), the host ends of every node's link
               (v-<node>), and with two racks the inter-rack link (ir0 <-> ir1)
    <id>-s     the Dask scheduler, eth0 = 10.213.7.1, on rack 0, unshaped
    <id>-c     the client (your command), eth0 = 10.213.7.2, on rack 0, unshaped
    <id>-wK    worker wK, eth0 = 10.213.7.(11+K), its link shaped in both directions

Shaping: each worker's link has a token bucket (``tbf``) on both ends, so a worker's upload and
its download are each a shared bottleneck, as a NIC is; the inter-rack link has one in each
direction, shared by every flow between the racks. A per-pair matrix instead shapes each
worker's traffic to each destination separately (``htb``, one class per destination), so pairs
do not share. Latency cannot be shaped (``netem`` is missing in many kernels): the links add
none beyond the kernel's own, which the calibration measures.

Teardown (:meth:`Testbed.stop`, also on Ctrl-C and exceptions) ends every process in the
testbed's namespaces and deletes them, which deletes every link and bridge. A reaper process
started with the testbed does the same if its owner dies without stopping it (SIGKILL, a
crash). ``taskflow testbed --clean`` removes what a dead owner left, should the reaper have died
with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..checks import parse_rate
from ..cluster import Cluster, Worker
from ..errors import TaskflowError

__all__ = ["Testbed", "TestbedUnavailable", "available", "parse_rate", "clean_stale", "leftovers",
           "TOPOLOGIES", "PREFIX", "SUBNET", "CpuLimits", "cpu_limits_available", "remove_cpu_groups"]

ROOT = Path(__file__).resolve().parents[2]
#: Namespace names start with this (then a 6-hex id).
PREFIX = "tfnet"
#: The /24 every testbed uses inside its own namespaces (they are isolated, so testbeds never clash).
SUBNET = "10.213.7"
#: Where each running testbed records its namespaces and owner (for the reaper and --clean).
STATE_DIR = Path(os.environ.get("TASKFLOW_TESTBED_STATE", "/run/taskflow-testbed"))
TOPOLOGIES = ("uniform", "two-racks", "slow-link", "matrix")
MAX_WORKERS = 64
PORT = 8786


class TestbedUnavailable(TaskflowError):
    """This machine cannot make a testbed (not root, no ``ip netns``, no ``tc``)."""

    __test__ = False  # not a pytest test class


def _run(cmd, check=True, timeout=30) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise TaskflowError(f"{' '.join(cmd)}: {(p.stderr or p.stdout).strip().splitlines()[-1:] or ['failed']}")
    return p


_AVAILABLE: list = []


def available() -> str | None:
    """None when this machine can make a testbed, else why not (one line): root, ``ip``
    with network namespaces, veth and bridges, and ``tc`` with ``tbf``, tried on a namespace made
    and removed for the purpose."""
    if _AVAILABLE:
        return _AVAILABLE[0]
    why = None
    if os.geteuid() != 0:
        why = "the testbed needs root (network namespaces and tc); run as root or skip it"
    elif shutil.which("ip") is None or shutil.which("tc") is None:
        why = "the testbed needs the ip and tc commands (apt-get install iproute2)"
    else:
        ns = f"{PREFIX}-probe{os.getpid()}"
        try:
            _run(["ip", "netns", "add", ns])
            try:
                _run(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
                _run(["ip", "-n", ns, "link", "add", "pbr", "type", "bridge"])
                _run(["tc", "-n", ns, "qdisc", "add", "dev", "pa", "root", "tbf", "rate", "1mbit", "burst",
                      "32kb", "latency", "50ms"])
                _run(["tc", "-n", ns, "qdisc", "add", "dev", "pb", "root", "handle", "1:", "htb"])
            finally:
                _run(["ip", "netns", "del", ns], check=False)
        except (TaskflowError, OSError, subprocess.TimeoutExpired) as e:
            why = f"network namespaces, veth, bridges or tc do not work here: {e}"
    _AVAILABLE.append(why)
    return why


def _cpu_hierarchy() -> tuple:
    """``(directory, version)`` of a cgroup hierarchy whose cpu controller this process can use
    (v1: the ``cpu`` mount; v2: a ``cgroup2`` mount offering ``cpu``), or ``(None, why)``."""
    try:
        mounts = [line.split() for line in open("/proc/self/mountinfo")]
    except OSError as e:
        return None, f"cannot read /proc/self/mountinfo: {e}"
    v2 = None
    for m in mounts:
        sep = m.index("-")
        fstype, point = m[sep + 1], m[4]
        opts = m[sep + 3].split(",") if len(m) > sep + 3 else []
        if fstype == "cgroup" and "cpu" in opts and os.path.isfile(os.path.join(point, "cpu.cfs_quota_us")):
            return point, 1
        if fstype == "cgroup2" and v2 is None:
            try:
                if "cpu" in open(os.path.join(point, "cgroup.controllers")).read().split():
                    v2 = point
            except OSError:
                pass
    if v2 is not None:
        return v2, 2
    return None, "no cgroup hierarchy with the cpu controller is mounted"


def cpu_limits_available() -> str | None:
    """None when this machine can limit a process's CPU (root and a cgroup cpu controller), else
    why not (one line)."""
    if os.geteuid() != 0:
        return "CPU limits need root (cgroups)"
    base, why = _cpu_hierarchy()
    return None if base else why


class CpuLimits:
    """CPU bandwidth limits for running processes: each gets a cgroup of its own whose CFS quota
    allows it ``cores`` cores (``0.25``: a quarter of one) in periods of ``period_us``: a real,
    steadily slower worker, as ``docker --cpus`` or a Kubernetes CPU limit makes one. Calibration
    (:func:`~taskflow.runtime.calibrate.cpu_limit`) reads the limit back.

    Use it as a context manager; :meth:`release` moves the processes still alive back to the
    root group and removes the groups. :attr:`groups` lists the directories (for a reaper).

    Parameters
    ----------
    cores : dict
        Process id -> cores (> 0).
    period_us : int
        The CFS period (short periods make the slowdown steadier within a task).

    Raises
    ------
    TaskflowError
        Not root, no cpu controller, a bad figure, or a group could not be made (named).
    """

    def __init__(self, cores: dict, period_us: int = 10_000):
        why = cpu_limits_available()
        if why:
            raise TaskflowError(why)
        self.base, self.version = _cpu_hierarchy()
        for pid, c in cores.items():
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 or c != c:
                raise TaskflowError(f"CPU limit for process {pid}: {c!r} is not a positive number of cores")
        self.cores = dict(cores)
        self.period = int(period_us)
        #: process id -> the group it gets
        self.paths = {pid: os.path.join(self.base, f"{PREFIX}-cpu-{os.getpid()}-{pid}") for pid in self.cores}
        self.groups: list = []

    def __enter__(self) -> "CpuLimits":
        return self.apply()

    def __exit__(self, *exc) -> None:
        self.release()

    def apply(self) -> "CpuLimits":
        """Make the groups and move the processes in; on a failure, undo what was done.

        Raises
        ------
        TaskflowError
            A group could not be made or a process moved (named).
        """
        try:
            if self.version == 2:
                with open(os.path.join(self.base, "cgroup.subtree_control"), "w") as f:
                    f.write("+cpu")
            for pid, c in self.cores.items():
                d = self.paths[pid]
                os.makedirs(d, exist_ok=True)
                self.groups.append(d)
                quota = max(1000, int(round(c * self.period)))
                if self.version == 2:
                    _write(os.path.join(d, "cpu.max"), f"{quota} {self.period}")
                else:
                    _write(os.path.join(d, "cpu.cfs_period_us"), str(self.period))
                    _write(os.path.join(d, "cpu.cfs_quota_us"), str(quota))
                _write(os.path.join(d, "cgroup.procs"), str(pid))
        except OSError as e:
            self.release()
            raise TaskflowError(f"could not limit the CPU of processes {sorted(self.cores)}: {e}") from e
        return self

    def release(self) -> None:
        """Move the processes still in the groups back to the root group; remove the groups."""
        remove_cpu_groups(self.groups, self.base)
        self.groups = []


def remove_cpu_groups(groups, base: str | None = None) -> None:
    """Empty and remove cgroup directories made by :class:`CpuLimits` (missing ones are skipped).

    Parameters
    ----------
    groups : list of str
    base : str, optional
        The hierarchy's root (default: the directory above each group).
    """
    for d in groups:
        root = base or os.path.dirname(d)
        try:
            pids = [line.strip() for line in open(os.path.join(d, "cgroup.procs")) if line.strip()]
        except OSError:
            continue
        for pid in pids:
            try:
                _write(os.path.join(root, "cgroup.procs"), pid)
            except OSError:
                pass  # it exited meanwhile
        for _ in range(50):
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)  # a process leaving the group takes a moment


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


@dataclass
class _Node:
    name: str       # s, c, w0, w1, ...
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
    topology : {"uniform", "two-racks", "slow-link", "matrix"}
        ``uniform``: every worker link at ``bandwidth``. ``two-racks``: the first half of the
        workers on rack 0, the rest on rack 1, links at ``bandwidth``, the racks joined by a link
        at ``inter_rack``. ``slow-link``: as uniform, but ``slow_worker``'s link at
        ``slow_bandwidth``. ``matrix``: ``matrix[a][b]`` shapes a -> b for each ordered pair.
    bandwidth, inter_rack, slow_bandwidth : str or float
        Rates (:func:`parse_rate`); ``inter_rack`` defaults to a tenth of ``bandwidth``, and so
        does ``slow_bandwidth``.
    slow_worker : str
        Default: the last worker.
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

    def __init__(self, workers: int = 4, topology: str = "uniform", bandwidth="1gbit", inter_rack=None,
                 slow_worker: str | None = None, slow_bandwidth=None, matrix: dict | None = None,
                 nthreads: int = 1, cpus: dict | None = None, timeout: float = 60.0):
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
            raise TaskflowError(f"testbed workers must be 1..{MAX_WORKERS}, got {workers!r}")
        if topology not in TOPOLOGIES:
            raise TaskflowError(f"unknown topology {topology!r}; known: {', '.join(TOPOLOGIES)}")
        if topology == "two-racks" and workers < 2:
            raise TaskflowError("two-racks needs at least 2 workers")
        self.topology = topology
        self.names = [f"w{k}" for k in range(workers)]
        self.bandwidth = parse_rate(bandwidth)
        self.inter_rack = parse_rate(inter_rack) if inter_rack is not None else self.bandwidth / 10
        self.slow_bandwidth = parse_rate(slow_bandwidth) if slow_bandwidth is not None else self.bandwidth / 10
        self.slow_worker = slow_worker if slow_worker is not None else self.names[-1]
        if self.slow_worker not in self.names:
            raise TaskflowError(f"slow worker {self.slow_worker!r} is not one of {', '.join(self.names)}")
        self.matrix = {}
        if topology == "matrix":
            if not isinstance(matrix, dict) or not matrix:
                raise TaskflowError("topology 'matrix' needs a matrix {a: {b: rate}} of worker names")
            for a, row in matrix.items():
                if a not in self.names or not isinstance(row, dict):
                    raise TaskflowError(f"matrix: unknown worker {a!r} (workers: {', '.join(self.names)})")
                for b, r in row.items():
                    if b not in self.names or b == a:
                        raise TaskflowError(f"matrix[{a!r}]: bad destination {b!r}")
                    self.matrix.setdefault(a, {})[b] = parse_rate(r)
        self.nthreads = int(nthreads)
        self.cpus = {}
        for n, c in (cpus or {}).items():
            if n not in self.names:
                raise TaskflowError(f"cpus: unknown worker {n!r} (workers: {', '.join(self.names)})")
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0 or c != c:
                raise TaskflowError(f"cpus[{n!r}]: {c!r} is not a positive number of cores")
            self.cpus[n] = float(c)
        self.cpu_limits = None
        self.timeout = float(timeout)
        self.id = f"{PREFIX}-{uuid.uuid4().hex[:6]}"
        racks = {n: (1 if topology == "two-racks" and k >= (workers + 1) // 2 else 0) for k, n in enumerate(self.names)}
        self.nodes = {"s": _Node("s", f"{self.id}-s", f"{SUBNET}.1", 0, None),
                      "c": _Node("c", f"{self.id}-c", f"{SUBNET}.2", 0, None)}
        for k, n in enumerate(self.names):
            rate = None if topology == "matrix" else (
                self.slow_bandwidth if topology == "slow-link" and n == self.slow_worker else self.bandwidth)
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
        """The rack (0 or 1) of worker ``name``.

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

    def model(self, speeds: dict | None = None, latency: float = 0.0) -> Cluster:
        """The declared cluster model of this network: one worker per testbed worker, the shaped
        rate of each ordered pair (:meth:`rate`), ``bandwidth`` the fastest of them; with two
        racks, the racks and the inter-rack link as their shared ``uplink``.

        Parameters
        ----------
        speeds : dict, optional
            Worker name -> relative speed (default: a worker with a CPU limit below its threads
            runs at its share of a core, the others at 1).
        latency : float
        """
        if speeds is None:
            speeds = {n: min(1.0, c / self.nthreads) for n, c in self.cpus.items()}
        pairs = {a: {b: self.rate(a, b) for b in self.names if b != a and self.rate(a, b) < float("inf")}
                 for a in self.names}
        finite = [r for row in pairs.values() for r in row.values()]
        top = max(finite) if finite else 1e9
        racks = {n: self.nodes[n].rack for n in self.names} if self.topology == "two-racks" else None
        return Cluster([Worker(n, (speeds or {}).get(n, 1.0), self.nthreads) for n in self.names], bandwidth=top,
                       bandwidths={a: {b: r for b, r in row.items() if r != top} for a, row in pairs.items()},
                       latency=latency, name=f"testbed-{self.topology}", racks=racks,
                       uplink=self.inter_rack if racks else None)

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
        self.reaper = subprocess.Popen([sys.executable, "-m", "taskflow.app.testbed", "--reap", str(self.state_file)],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True, env=self._env())
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
        tmp = self.state_file.with_suffix(".tmp")
        groups = list(self.cpu_limits.paths.values()) if self.cpu_limits is not None else []
        tmp.write_text(json.dumps({"id": self.id, "owner": os.getpid(), "created": time.time(),
                                   "namespaces": self._namespaces(), "cgroups": groups}))
        os.replace(tmp, self.state_file)

    def _namespaces(self) -> list:
        return [self.switch] + [n.ns for n in self.nodes.values()]

    def _make_network(self) -> None:
        sw = self.switch
        _run(["ip", "netns", "add", sw])
        _run(["ip", "-n", sw, "link", "set", "lo", "up"])
        racks = sorted({n.rack for n in self.nodes.values()})
        for r in racks:
            _run(["ip", "-n", sw, "link", "add", f"br{r}", "type", "bridge"])
            _run(["ip", "-n", sw, "link", "set", f"br{r}", "up"])
        if len(racks) == 2:
            _run(["ip", "-n", sw, "link", "add", "ir0", "type", "veth", "peer", "name", "ir1"])
            for r in (0, 1):
                _run(["ip", "-n", sw, "link", "set", f"ir{r}", "master", f"br{r}", "up"])
                _tbf(sw, f"ir{r}", self.inter_rack)
        for node in self.nodes.values():
            _run(["ip", "netns", "add", node.ns])
            _run(["ip", "-n", node.ns, "link", "set", "lo", "up"])
            host_end = f"v-{node.name}"
            _run(["ip", "-n", sw, "link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", node.ns])
            _run(["ip", "-n", sw, "link", "set", host_end, "master", f"br{node.rack}", "up"])
            _run(["ip", "-n", node.ns, "addr", "add", f"{node.ip}/24", "dev", "eth0"])
            _run(["ip", "-n", node.ns, "link", "set", "eth0", "up"])
            if node.rate is not None:
                _tbf(node.ns, "eth0", node.rate)     # its upload
                _tbf(sw, host_end, node.rate)        # its download
        if self.topology == "matrix":
            for a, row in self.matrix.items():
                _htb(self.nodes[a].ns, "eth0", [(self.nodes[b].ip, r) for b, r in row.items()])

    def _env(self) -> dict:
        path = os.pathsep.join(p for p in (os.path.dirname(sys.executable), os.environ.get("PATH")) if p)
        return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
                    PATH=path, DASK_SCHEDULER_ADDRESS=self.address)

    def _start_dask(self) -> None:
        dask_cli = os.path.join(os.path.dirname(sys.executable), "dask")
        log = STATE_DIR / f"{self.id}-scheduler.log"
        self.procs["s"] = self._spawn("s", [dask_cli, "scheduler", "--host", self.nodes["s"].ip, "--port", str(PORT),
                                            "--no-dashboard"], log)
        for n in self.names:
            self.procs[n] = self._spawn(n, [dask_cli, "worker", self.address, "--host", self.nodes[n].ip,
                                            "--name", n, "--nthreads", str(self.nthreads), "--no-nanny",
                                            "--no-dashboard"], STATE_DIR / f"{self.id}-{n}.log")
        wait = ("import sys; from distributed import Client\n"
                f"c = Client({self.address!r}, timeout='{int(self.timeout)}s')\n"
                f"c.wait_for_workers({len(self.names)}, timeout={self.timeout})\n"
                "print(sorted(w['name'] for w in c.scheduler_info()['workers'].values())); c.close()")
        p = self.exec([sys.executable, "-c", wait], timeout=2 * self.timeout + 30)
        if p.returncode != 0:
            dead = [n for n, proc in self.procs.items() if proc.poll() is not None]
            raise TaskflowError(f"the testbed's Dask cluster did not come up within {self.timeout:g} s"
                                + (f" (exited: {', '.join(dead)}; logs in {STATE_DIR})" if dead else "")
                                + f": {(p.stderr.strip().splitlines() or ['no output'])[-1]}")

    def _spawn(self, node: str, argv, log: Path) -> subprocess.Popen:
        from ..runtime.calibrate import CPU_LIMIT_ENV

        env = self._env()
        if node in self.cpus:  # ip netns exec mounts a fresh /sys: the worker cannot read its cgroup
            env[CPU_LIMIT_ENV] = repr(self.cpus[node])
        f = open(log, "wb")
        try:
            return subprocess.Popen(["ip", "netns", "exec", self.nodes[node].ns, *argv], stdin=subprocess.DEVNULL,
                                    stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
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
                raise TaskflowError(f"{' '.join(map(str, argv))[:80]}: still running after {timeout:g} s") from None
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def stop(self) -> None:
        """End every process in the testbed's namespaces and delete them (and so every link and
        bridge). Safe to call twice."""
        if not self.started:
            return
        _teardown(self._namespaces())
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.cpu_limits is not None:
            self.cpu_limits.release()
            self.cpu_limits = None
        for f in STATE_DIR.glob(f"{self.id}-*.log"):
            f.unlink(missing_ok=True)
        self.state_file.unlink(missing_ok=True)
        if self.reaper is not None:
            try:
                self.reaper.wait(timeout=5)  # it sees the state file gone and exits
            except subprocess.TimeoutExpired:
                self.reaper.kill()
                self.reaper.wait(timeout=5)
        self.started = False


def _tbf(ns: str, dev: str, rate: float) -> None:
    """A token bucket of ``rate`` bytes/s on ``dev``'s egress: a burst of 5 ms of it (at least
    16 KiB; the kernel splits larger offloaded packets), a queue of 100 ms."""
    burst = max(16 << 10, int(rate * 0.005))
    _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(rate * 8)}bit",
          "burst", str(burst), "latency", "100ms"])


def _htb(ns: str, dev: str, dests) -> None:
    """One ``htb`` class per destination address (rate = ceil), the rest of the traffic unshaped."""
    _run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "999"])
    _run(["tc", "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:999", "htb", "rate", "10gbit"])
    for k, (ip, rate) in enumerate(dests, start=10):
        bits = f"{int(rate * 8)}bit"
        burst = str(max(16 << 10, int(rate * 0.005)))
        _run(["tc", "-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", f"1:{k}", "htb", "rate", bits,
              "ceil", bits, "burst", burst, "cburst", burst])
        _run(["tc", "-n", ns, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
              "match", "ip", "dst", f"{ip}/32", "flowid", f"1:{k}"])


def _ns_pids(ns: str) -> list:
    p = _run(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in p.stdout.split() if x.isdigit()] if p.returncode == 0 else []


def _teardown(namespaces) -> None:
    """SIGTERM every process in ``namespaces``, SIGKILL what is left after 3 s, delete them."""
    existing = set(_list_namespaces())
    namespaces = [ns for ns in namespaces if ns in existing]
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        pids = [pid for ns in namespaces for pid in _ns_pids(ns)]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        t0 = time.monotonic()
        while pids and time.monotonic() - t0 < grace:
            pids = [pid for ns in namespaces for pid in _ns_pids(ns)]
            if pids:
                time.sleep(0.05)
        if not pids:
            break
    for ns in namespaces:
        _run(["ip", "netns", "del", ns], check=False)


def _list_namespaces() -> list:
    p = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()] if p.returncode == 0 else []


def leftovers() -> list:
    """Namespaces named like a testbed's that exist now (for tests and ``--clean``)."""
    return [ns for ns in _list_namespaces() if ns.startswith(PREFIX + "-")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def clean_stale() -> list:
    """Remove the namespaces (and their processes) of testbeds whose owner process is gone; return
    their ids."""
    cleaned = []
    if not STATE_DIR.is_dir():
        return cleaned
    for f in STATE_DIR.glob(f"{PREFIX}-*.json"):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if _alive(int(state.get("owner", 0))):
            continue
        _teardown(state.get("namespaces", []))
        remove_cpu_groups(state.get("cgroups", []))
        for log in STATE_DIR.glob(f"{state.get('id', f.stem)}-*.log"):
            log.unlink(missing_ok=True)
        f.unlink(missing_ok=True)
        cleaned.append(state.get("id", f.stem))
    return cleaned


def _reap(state_file: str) -> int:
    """The reaper: wait until the owner stops the testbed (the state file goes) or dies (then tear
    it down)."""
    path = Path(state_file)
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    while True:
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError):
            time.sleep(0.1)
            continue
        if not _alive(int(state["owner"])):
            _teardown(state["namespaces"])
            remove_cpu_groups(state.get("cgroups", []))
            for log in STATE_DIR.glob(f"{state['id']}-*.log"):
                log.unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            return 0
        time.sleep(0.2)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--reap":
    sys.exit(_reap(sys.argv[2]))
