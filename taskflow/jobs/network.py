"""Jobs whose allreduces cross racks share the racks' uplinks: :class:`JobNetwork`.

A job placed inside one rack talks over its workers' own links; a job spread over several racks
sends its allreduce through the uplink of each rack it touches, and every job crossing the same
uplink shares it. As the communication-contention-aware papers model it (Wang, Shi, Chu et al.,
"Communication contention aware scheduling of multiple deep learning training jobs", 2020), the
uplinks are shared max-min fairly among the jobs crossing them: a job gets the share of its most
crowded uplink, and what a job held back by another uplink leaves is shared by the rest
(progressive filling, :func:`maxmin_shares`).

A job's speed on its allocation is then its iteration time inside one rack over its iteration
time on its racks with that share of the uplink: ``iteration(model, counts, uplink)`` gives
seconds per iteration for a data-parallel job of ``model`` with ``counts[i]`` workers in its
``i``-th rack and ``uplink`` bytes per second through each rack's uplink.
:func:`taskflow.training.jobnet.graph_iterations` times the job's own training task graph on
the project's max-min network, once per allocation shape (cached here); a hand-written function
serves as well (a profile's).
"""

from __future__ import annotations

from ..errors import UsageError

__all__ = ["JobNetwork", "maxmin_shares"]


def maxmin_shares(flows: dict) -> dict:
    """The max-min fair share of each flow over links of capacity 1 (progressive filling: the
    most crowded link's flows get its equal share, the rest share what is left).

    Parameters
    ----------
    flows : dict
        Flow -> the links it crosses (an iterable, not empty).

    Returns
    -------
    dict
        Flow -> its share in (0, 1].
    """
    left: dict = {}
    for links in flows.values():
        for link in links:
            left[link] = 1.0
    active = {f: set(links) for f, links in flows.items()}
    share: dict = {}
    while active:
        count: dict = {}
        for links in active.values():
            for link in links:
                count[link] = count.get(link, 0) + 1
        link, level = min(((k, left[k] / c) for k, c in count.items()), key=lambda kv: (kv[1], str(kv[0])))
        for f in sorted((f for f, links in active.items() if link in links), key=str):
            share[f] = level
            for k in active.pop(f):
                left[k] -= level
    return share


class JobNetwork:
    """The speed of each running job on its racks' shared uplinks (see the module docstring).

    Parameters
    ----------
    cluster : JobCluster
        Its ``uplink`` (bytes per second, > 0) and racks.
    iteration : callable
        ``iteration(model, counts, uplink) -> seconds`` per iteration, or None for a model it
        does not know (such a job is not slowed by the network).
    ordered : bool
        Contention-aware ordering of the allreduces: the jobs crossing an uplink take turns on it
        (one job's transfer while the others compute) instead of sharing it at once; a job is
        slowed only where its uplink's transfers add up to more than the uplink can carry.

    Raises
    ------
    UsageError
        A cluster that does not say its uplink.
    """

    def __init__(self, cluster, iteration, ordered: bool = False):
        if not cluster.uplink:
            raise UsageError(
                f"cluster {cluster.name!r} does not say its uplink (bytes per second): a network of "
                f"shared uplinks needs it"
            )
        self.cluster, self.iteration, self.ordered = cluster, iteration, bool(ordered)
        self.racks = cluster.worker_racks
        self._cache: dict = {}

    def time(self, model, counts: tuple, share: float = 1.0):
        """Seconds per iteration of a job of ``model`` with ``counts`` workers per rack and
        ``share`` of each uplink (cached: ``counts`` sorted, ``share`` to 6 digits); None: a
        model the timing does not know.

        Parameters
        ----------
        model : str or None
        counts : tuple of int
        share : float
        """
        key = (model, tuple(sorted(counts, reverse=True)), round(share, 6))
        if key not in self._cache:
            uplink = self.cluster.uplink * key[2] if len(counts) > 1 else self.cluster.uplink
            self._cache[key] = None if model is None else self.iteration(model, key[1], uplink)
        return self._cache[key]

    def spans(self, workers) -> bool:
        """Whether ``workers`` lie in more than one rack.

        Parameters
        ----------
        workers : iterable of int
        """
        return len({self.racks[w] for w in workers}) > 1

    def speeds(self, running) -> dict:
        """Job id -> the share of its speed inside one rack it keeps, for the jobs of ``running``
        that span racks (the others keep all of it).

        Parameters
        ----------
        running : iterable of (Job, workers)
        """
        placed = {job.id: (job, workers) for job, workers in running if self.spans(workers)}
        if self.ordered:
            return self._ordered(placed)
        shares = maxmin_shares({jid: {self.racks[w] for w in ws} for jid, (_, ws) in placed.items()})
        out = {}
        for jid, (job, ws) in placed.items():
            alone, here = self.time(job.model, (len(ws),)), self.time(job.model, self._counts(ws), shares[jid])
            out[jid] = 1.0 if alone is None or here is None else min(1.0, float(alone / here))
        return out

    def _counts(self, ws) -> tuple:
        counts: dict = {}
        for w in ws:
            counts[self.racks[w]] = counts.get(self.racks[w], 0) + 1
        return tuple(counts.values())

    def _ordered(self, placed: dict) -> dict:
        """Speeds with the allreduces on each uplink taking turns: a job's iteration is its time on
        its racks with the whole uplink, stretched by the busiest of its uplinks' loads (the sum of
        each crossing job's transfer time over its iteration) where that is above 1."""
        own, load = {}, {}
        for jid, (job, ws) in placed.items():
            alone, across = self.time(job.model, (len(ws),)), self.time(job.model, self._counts(ws))
            if alone is None or across is None:
                continue
            own[jid] = (alone, across, {self.racks[w] for w in ws})
            for r in own[jid][2]:
                load[r] = load.get(r, 0.0) + max(0.0, across - alone) / across
        return {
            jid: min(1.0, float(alone / (across * max([1.0] + [load[r] for r in rs]))))
            for jid, (alone, across, rs) in own.items()
        }
