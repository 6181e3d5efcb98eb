"""Network namespaces: the command runner every part of the testbed uses, whether this machine can
make a testbed at all, and listing, emptying and deleting namespaces."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..errors import TaskflowError, TestbedError

__all__ = [
    "PREFIX",
    "SUBNET",
    "STATE_DIR",
    "run_command",
    "available",
    "ns_pids",
    "teardown",
    "list_namespaces",
    "leftovers",
]

#: Namespace names start with this (then a 6-hex id).
PREFIX = "tfnet"
#: The /24 every testbed uses inside its own namespaces (they are isolated, so testbeds never clash).
SUBNET = "10.213.7"
#: Where each running testbed records its namespaces and owner (for the reaper and --clean).
STATE_DIR = Path(os.environ.get("TASKFLOW_TESTBED_STATE", "/run/taskflow-testbed"))


def run_command(cmd, check=True, timeout=30) -> subprocess.CompletedProcess:
    """Run ``cmd`` (``ip`` or ``tc``), output captured, bounded by ``timeout`` seconds.

    Parameters
    ----------
    cmd : list of str
    check : bool
        Raise on a non-zero exit status.
    timeout : float

    Raises
    ------
    TaskflowError
        ``check`` and it failed: the command and the last line it printed.
    """
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise TestbedError(f"{' '.join(cmd)}: {(p.stderr or p.stdout).strip().splitlines()[-1:] or ['failed']}")
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
            run_command(["ip", "netns", "add", ns])
            try:
                run_command(["ip", "-n", ns, "link", "add", "pa", "type", "veth", "peer", "name", "pb"])
                run_command(["ip", "-n", ns, "link", "add", "pbr", "type", "bridge"])
                run_command(
                    [
                        "tc",
                        "-n",
                        ns,
                        "qdisc",
                        "add",
                        "dev",
                        "pa",
                        "root",
                        "tbf",
                        "rate",
                        "1mbit",
                        "burst",
                        "32kb",
                        "latency",
                        "50ms",
                    ]
                )
                run_command(["tc", "-n", ns, "qdisc", "add", "dev", "pb", "root", "handle", "1:", "htb"])
            finally:
                run_command(["ip", "netns", "del", ns], check=False)
        except (TaskflowError, OSError, subprocess.TimeoutExpired) as e:
            why = f"network namespaces, veth, bridges or tc do not work here: {e}"
    _AVAILABLE.append(why)
    return why


def ns_pids(ns: str) -> list:
    """The process ids running in namespace ``ns`` (none if it does not exist).

    Parameters
    ----------
    ns : str
    """
    p = run_command(["ip", "netns", "pids", ns], check=False)
    return [int(x) for x in p.stdout.split() if x.isdigit()] if p.returncode == 0 else []


def teardown(namespaces) -> None:
    """SIGTERM every process in ``namespaces``, SIGKILL what is left after 3 s, delete them.

    Parameters
    ----------
    namespaces : list of str
        Missing ones are skipped.
    """
    existing = set(list_namespaces())
    namespaces = [ns for ns in namespaces if ns in existing]
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        pids = [pid for ns in namespaces for pid in ns_pids(ns)]
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        t0 = time.monotonic()
        while pids and time.monotonic() - t0 < grace:
            pids = [pid for ns in namespaces for pid in ns_pids(ns)]
            if pids:
                time.sleep(0.05)
        if not pids:
            break
    for ns in namespaces:
        run_command(["ip", "netns", "del", ns], check=False)


def list_namespaces() -> list:
    """Every network namespace that exists now."""
    p = run_command(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()] if p.returncode == 0 else []


def leftovers() -> list:
    """Namespaces named like a testbed's that exist now (for tests and ``--clean``)."""
    return [ns for ns in list_namespaces() if ns.startswith(PREFIX + "-")]
