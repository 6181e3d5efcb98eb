"""What the client collects after a run: the task stream since a mark (:func:`stream_index`,
:func:`stream_since`) and the workers' transfer records and clocks (:func:`workers_records`)."""

from __future__ import annotations

from typing import NamedTuple

from ...errors import RunFailed
from ..worker.worker_plugin import worker_records
from .session import call

__all__ = ["stream_index", "stream_since", "WorkersRecords", "workers_records"]


def stream_index(client) -> int:
    """The scheduler's task-stream cursor now (what :func:`stream_since` starts from).

    Parameters
    ----------
    client : distributed.Client
    """
    return call(client, "get_task_stream_index")


def stream_since(client, index: int) -> list:
    """Task-stream records (one per task run: key, worker, startstops) since ``index``, with a
    bounded wait (``distributed.get_task_stream`` blocks for 30 s on a dead scheduler).

    Parameters
    ----------
    client : distributed.Client
    index : int
    """
    return call(client, "get_task_stream", timeout=60.0, start_index=index)


class WorkersRecords(NamedTuple):
    """What the live workers recorded of a run, by worker address, every time on the worker's own
    clock (see :func:`~taskflow.runtime.worker.worker_plugin.worker_records`)."""

    #: received transfers (``transfer_incoming_log`` entries)
    transfers: dict
    #: the batch job each worker runs in, where it runs in one
    jobs: dict
    #: ``{"compute": {key: correction}, "delay": correction now}``: what to take off the times
    #: Dask's task stream reports for the tasks each worker ran
    clocks: dict


def workers_records(client, since: float) -> WorkersRecords:
    """Every live worker's records of what happened since ``since``, in one call to each, with a
    bounded wait. Workers that died took their records with them.

    Parameters
    ----------
    client : distributed.Client
    since : float
        Wall-clock seconds.

    Raises
    ------
    TaskflowError
        The workers could not be asked (the connection is gone).
    """
    try:
        out = client.sync(client._run, worker_records, since, on_error="return", callback_timeout=60)
    except Exception as e:  # noqa: BLE001 - the records are lost with the connection
        raise RunFailed(f"could not collect the workers' transfer records: {type(e).__name__}: {e}") from e
    got = {addr: rec for addr, rec in out.items() if isinstance(rec, dict)}
    return WorkersRecords(
        {addr: rec["transfers"] for addr, rec in got.items()},
        {addr: rec["job"] for addr, rec in got.items() if isinstance(rec["job"], str)},
        {addr: {"compute": rec["compute"], "delay": rec["delay"]} for addr, rec in got.items()},
    )
