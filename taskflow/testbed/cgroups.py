"""CPU limits with cgroups: a process in a group of its own whose CFS quota allows it a fraction of
a core (cgroup v1 or v2), and removing such groups again."""

from __future__ import annotations

import os
import time

from ..errors import TestbedError
from .namespaces import PREFIX

__all__ = ["CpuLimits", "cpu_hierarchy", "cpu_limits_available", "remove_cpu_groups"]


def cpu_hierarchy() -> tuple:
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
    base, why = cpu_hierarchy()
    return None if base else why


class CpuLimits:
    """CPU bandwidth limits for running processes: each gets a cgroup of its own whose CFS quota
    allows it ``cores`` cores (``0.25``: a quarter of one) in periods of ``period_us``: a real,
    steadily slower worker, as ``docker --cpus`` or a Kubernetes CPU limit makes one. Calibration
    (:func:`~taskflow.runtime.worker.worker_plugin.cpu_limit`) reads the limit back.

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
            raise TestbedError(why)
        self.base, self.version = cpu_hierarchy()
        for pid, c in cores.items():
            if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < float("inf"):
                raise TestbedError(f"CPU limit for process {pid}: {c!r} is not a positive number of cores")
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
            raise TestbedError(f"could not limit the CPU of processes {sorted(self.cores)}: {e}") from e
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
