"""A testbed's lifetime beyond its owner: the state file each running testbed keeps (its
namespaces, CPU groups and owner), the reaper process that tears a testbed down when its owner dies
without stopping it, and the removal of what dead owners left (``taskflow testbed --clean``).

The reaper runs as ``python -m taskflow.testbed.lifetime --reap STATE_FILE``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from .cgroups import remove_cpu_groups
from .namespaces import PREFIX, STATE_DIR, teardown

__all__ = ["write_state", "dispose", "clean_stale", "reap"]


def write_state(path: Path, testbed_id: str, namespaces: list, cgroups: list) -> None:
    """Record a running testbed, atomically, with this process as its owner.

    Parameters
    ----------
    path : Path
        The state file (in :data:`~.namespaces.STATE_DIR`).
    testbed_id : str
    namespaces : list of str
    cgroups : list of str
        The CPU groups it makes (recorded before any is made).
    """
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        json.dumps(
            {
                "id": testbed_id,
                "owner": os.getpid(),
                "created": time.time(),
                "namespaces": namespaces,
                "cgroups": cgroups,
            }
        )
    )
    os.replace(tmp, path)


def dispose(state: dict, path: Path) -> None:
    """Remove everything a testbed made: its namespaces (ending their processes), its CPU groups,
    its logs and, last, its state file ``path``.

    Parameters
    ----------
    state : dict
        As :func:`write_state` wrote it.
    path : Path
    """
    teardown(state.get("namespaces", []))
    remove_cpu_groups(state.get("cgroups", []))
    for log in STATE_DIR.glob(f"{state.get('id', path.stem)}-*.log"):
        log.unlink(missing_ok=True)
    path.unlink(missing_ok=True)


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
        dispose(state, f)
        cleaned.append(state.get("id", f.stem))
    return cleaned


def reap(state_file: str) -> int:
    """The reaper: wait until the owner stops the testbed (the state file goes) or dies (then tear
    it down).

    Parameters
    ----------
    state_file : str
    """
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
            dispose(state, path)
            return 0
        time.sleep(0.2)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--reap":
    sys.exit(reap(sys.argv[2]))
