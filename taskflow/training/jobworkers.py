"""The Dask workers a real job run gives out (:mod:`.jobrun`): named, numbered, placed on nodes and
racks, and watched for the workers lost and joined as the run goes on.

A job scheduler numbers workers ``0 .. n - 1``; the real run's worker ``w`` is the Dask worker
``names[w]``. A worker Dask loses keeps its number, and takes it again if it comes back under the
same name (a nanny's restart; one back at another address between two looks was lost and came
back); a worker of a new name takes the next number.
"""

from __future__ import annotations

import inspect
import time

from ..errors import UsageError

__all__ = ["workers_of", "check_racks", "Workers", "POLL_SECONDS"]

#: seconds between two looks at the cluster's workers (a lost worker's job stops within about this)
POLL_SECONDS = 0.5


def workers_of(client) -> list:
    """The cluster's worker names, in a stable order (numbers by value).

    Parameters
    ----------
    client : distributed.Client
    """
    return sorted(_live(client), key=lambda n: (0, int(n), n) if n.isdigit() else (1, 0, n))


def _live(client) -> dict:
    """The cluster's workers now: name -> address."""
    if "n_workers" in inspect.signature(client.scheduler_info).parameters:
        info = client.scheduler_info(n_workers=-1)["workers"]
    else:
        info = client.scheduler_info()["workers"]
    return {str(w.get("name", a)): a for a, w in info.items()}


def check_racks(racks, names) -> None:
    """Every Dask worker of ``names`` has a rack in ``racks`` (None: no racks), and no other does.

    Parameters
    ----------
    racks : dict or None
    names : list of str

    Raises
    ------
    UsageError
        A worker without a rack, or a rack for a worker the cluster does not have (named).
    """
    if racks is None:
        return
    missing = [n for n in names if n not in racks]
    if missing:
        raise UsageError(
            f"worker {missing[0]!r} of the Dask cluster has no rack (the racks name "
            f"{', '.join(map(str, sorted(racks, key=str)[:4]))}{' ...' if len(racks) > 4 else ''})"
        )
    extra = [n for n in racks if n not in names]
    if extra:
        raise UsageError(
            f"the racks name worker {extra[0]!r}, which the Dask cluster does not have "
            f"(its workers: {', '.join(names[:4])}{' ...' if len(names) > 4 else ''})"
        )


class Workers:
    """The run's workers: ``names[w]`` for worker ``w``, ``nodes`` and ``racks`` as a job
    scheduler's :class:`~taskflow.jobscheduling.View` takes them, and :meth:`look`, which says
    which were lost and which joined since the last look.

    Parameters
    ----------
    client : distributed.Client
    names : list of str
        The workers at the start (:func:`workers_of`).
    racks : dict, optional
        Worker name -> rack: each rack one node; a worker that joins under a name the racks do not
        give sits on a rack of its own. Without racks every worker sits on one node (one machine).
    """

    def __init__(self, client, names, racks=None):
        self.client = client
        self.names = list(names)
        self.number = {n: w for w, n in enumerate(self.names)}
        self.down: set = set()  # numbers lost and not back
        self._racks = dict(racks) if racks else None
        self._labels: dict = {}
        self.racks: tuple = tuple(self._label(n) for n in self.names) if racks else ()
        self._last = time.monotonic()
        self._at = _live(client)  # name -> address at the last look

    @property
    def nodes(self) -> tuple:
        """``nodes[w]``: worker ``w``'s node (its rack's, with racks; else one node)."""
        return self.racks or (0,) * len(self.names)

    def _label(self, name) -> int:
        rack = self._racks.get(name, ("joined", name))
        return self._labels.setdefault(rack, len(self._labels))

    def look(self, now: bool = False) -> tuple:
        """``(lost, joined)``: the numbers of the workers lost and of those that joined (or came
        back) since the last look, each ascending (a worker in both was lost and came back);
        ``((), ())`` within :data:`POLL_SECONDS` of the last look unless ``now``.

        Parameters
        ----------
        now : bool
            Look at once.
        """
        t = time.monotonic()
        if not now and t - self._last < POLL_SECONDS:
            return (), ()
        self._last = t
        live = _live(self.client)
        lost = sorted(w for w, n in enumerate(self.names) if w not in self.down and live.get(n) != self._at.get(n))
        self._at = live
        for n in sorted(set(live) - set(self.names)):  # new names: the next numbers
            self.number[n] = len(self.names)
            self.names.append(n)
            self.down.add(self.number[n])  # (it joins below, as a worker back does)
            if self._racks is not None:
                self.racks += (self._label(n),)
        self.down.update(lost)
        joined = sorted(w for w in self.down if self.names[w] in live)
        self.down.difference_update(joined)
        return tuple(lost), tuple(joined)
