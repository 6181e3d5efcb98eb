"""An existing cluster, reached by its scheduler's address or scheduler file: read without blocking,
waited for within bounds, and refused at once where nothing listens (a cluster that would not answer
is bad input, exit status 2 from the command line)."""

from __future__ import annotations

import gc
import os
import time

from ...errors import LaunchError, UsageError
from ...files import open_regular

__all__ = ["client_for", "SCHEDULER_FILE_WAIT", "PROBE_SECONDS"]

#: seconds a TCP probe of the scheduler's address may take before the client's own wait takes over
PROBE_SECONDS = 5.0

#: seconds to wait for a scheduler file to appear (a scheduler started a moment ago writes it)
SCHEDULER_FILE_WAIT = 20.0


def client_for(address: str | None, scheduler_file: str | None):
    """A client of the existing cluster at ``address``, or named by ``scheduler_file`` (read here,
    waiting at most :data:`SCHEDULER_FILE_WAIT` seconds for it to appear and be whole: Dask's own
    client waits for a missing file forever).

    Parameters
    ----------
    address, scheduler_file : str or None

    Raises
    ------
    TaskflowError
        The scheduler file is missing, unreadable or not one; the address is not one.
    LaunchError
        Nothing answers there within 30 s (a cluster that would not answer: bad input).
    """
    import json

    from distributed import Client

    if scheduler_file and not address:
        deadline = time.monotonic() + SCHEDULER_FILE_WAIT
        while True:  # a scheduler just started writes its file in a moment: wait for it, bounded
            try:
                if not os.path.exists(scheduler_file):
                    raise FileNotFoundError(scheduler_file)
                with open_regular(scheduler_file, "scheduler file", LaunchError) as f:  # a FIFO: refused
                    doc = json.load(f)
                break
            except FileNotFoundError:
                if time.monotonic() > deadline:
                    raise LaunchError(
                        f"{scheduler_file}: no such scheduler file (waited {SCHEDULER_FILE_WAIT:g} s for it)"
                    ) from None
            except (OSError, ValueError) as e:
                if time.monotonic() > deadline:
                    raise LaunchError(
                        f"{scheduler_file}: not a Dask scheduler file ({type(e).__name__}: {e})"[:300]
                    ) from None
            time.sleep(0.1)
        address = doc.get("address") if isinstance(doc, dict) else None
        if not isinstance(address, str) or not address:
            raise LaunchError(f'{scheduler_file}: not a Dask scheduler file (no "address")')
    try:
        _check_address(address)
        _probe(address)
        return Client(address, timeout="30s")
    except (ValueError, TypeError) as e:
        error = UsageError(f"--address {address!r} is not a Dask scheduler address ({e})"[:300])
    except (OSError, TimeoutError) as e:
        error = LaunchError(f"no Dask scheduler answered at {address} within 30 s ({type(e).__name__})")
    # a client whose start failed is closed by its __del__: now, not inside the next client's start,
    # where it deadlocks on the event-loop runner's lock
    gc.collect()
    raise error


def _check_address(address: str) -> None:
    """Raise ValueError where ``address`` is no Dask address (before a client is built on it)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, where = parse_address(address)
    if scheme in ("tcp", "tls", "ws", "wss", "ucx"):
        parse_host_port(where)


def _probe(address: str) -> None:
    """Refuse at once a TCP address where nothing listens (Dask's client would retry for its 30 s):
    a refused connection is certain; a probe that times out leaves the wait to the client."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    scheme, where = parse_address(address)
    if scheme != "tcp":
        return
    host, port = parse_host_port(where)
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
    except ConnectionRefusedError:
        raise LaunchError(f"no Dask scheduler at {address}: nothing listens there (connection refused)") from None
    except OSError:
        pass  # a name that does not resolve, a host that does not answer: the client says it
