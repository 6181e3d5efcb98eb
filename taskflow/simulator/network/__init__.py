"""Network models for the simulator: how long moving bytes between workers takes.

* ``simple`` (:mod:`.simple`): no contention; the cost model exactly.
* ``maxmin`` (:mod:`.maxmin`): max-min fair sharing of each worker's upload and download capacity,
  with strict transfer-priority classes.

Both implement :class:`~.base.Network`; :func:`make_network` builds one by name.
"""

from __future__ import annotations

from ...errors import UsageError
from .base import Flow, Network
from .maxmin import MaxMinNetwork
from .simple import SimpleNetwork

__all__ = ["Flow", "Network", "SimpleNetwork", "MaxMinNetwork", "make_network", "NETWORKS"]

NETWORKS = ("simple", "maxmin")


def make_network(name: str, cluster, schedule, on_arrival, on_complete, classes: int = 1) -> Network:
    """The network model called ``name``.

    Parameters
    ----------
    name : {"simple", "maxmin"}
    cluster : Cluster
    schedule : callable
        ``schedule(time, kind, payload)`` puts a network event on the simulator's clock.
    on_arrival, on_complete : callable
        The simulator's callbacks (see :mod:`.base`).
    classes : int
        Transfer-priority classes (``maxmin`` only).

    Raises
    ------
    TaskflowError
        Unknown name.
    """
    if name == "simple":
        return SimpleNetwork(cluster, schedule, on_arrival, on_complete)
    if name == "maxmin":
        return MaxMinNetwork(cluster, schedule, on_arrival, on_complete, classes)
    raise UsageError(f"unknown network model {name!r}; known: {', '.join(NETWORKS)}")
