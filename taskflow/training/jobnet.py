"""A job's iteration time on an allocation, from its own training task graph
(:func:`graph_iterations`): the timing :class:`~taskflow.jobs.JobNetwork` reads.

A data-parallel job of a model of the library (``workflows/data/models.json``, or a transformer's
size such as ``1.3b``) on ``counts`` workers per rack is its synchronous training graph
(:func:`workflows.training.data_parallel`: each rank's steps, the ring allreduce of its gradient
buckets), simulated under ``placed`` (rank ``r`` on worker ``r``) on a cluster of those racks, each
worker's link ``bandwidth`` and each rack's uplink ``uplink`` bytes per second, on the project's
max-min network. The job network
calls it once per allocation shape and uplink share and keeps the answer.
"""

from __future__ import annotations

__all__ = ["graph_iterations", "comm_shares"]


def graph_iterations(cluster, device: str = "v100", batch: int = 32, iterations: int = 2):
    """``iteration(model, counts, uplink) -> seconds`` (None for a model the library does not
    have), for :class:`~taskflow.jobs.JobNetwork`.

    Parameters
    ----------
    cluster : JobCluster
        Its ``bandwidth`` (a worker's link).
    device : str
        A device of ``workflows/data/models.json`` (the papers' GPU: ``v100``, ``a100``).
    batch : int
        Samples per rank per iteration.
    iterations : int
        Iterations simulated (the time is their average).
    """
    from workflows.models import model_profile
    from workflows.training import data_parallel

    from ..cluster import Cluster, Worker
    from ..errors import WorkflowError
    from ..simulator import simulate

    def iteration(model, counts, uplink):
        try:
            model_profile(str(model))
        except WorkflowError:
            return None
        n = sum(counts)
        workers = [Worker(f"w{k}") for k in range(n)]
        racks = {}
        for r, c in enumerate(counts):
            for k in range(len(racks), len(racks) + c):
                racks[f"w{k}"] = r
        net = Cluster(workers, bandwidth=cluster.bandwidth, racks=racks, uplink=uplink) if len(counts) > 1 \
            else Cluster(workers, bandwidth=cluster.bandwidth)
        g = data_parallel(model, workers=n, iterations=iterations, batch=batch, device=device)
        return simulate(g, net, "placed").makespan / iterations
    return iteration


def comm_shares(cluster, models, workers: int = 4, **options) -> dict:
    """Model -> the share of an iteration spent communicating on ``cluster``'s links, from the job's
    own training graph (its iteration time, and its time with links that cost nothing): what
    Crossover overlaps (the job schedulers' ``crossover`` option).

    Parameters
    ----------
    cluster : JobCluster
    models : iterable of str
        Models of the library (others are left out).
    workers : int
        Workers of the job timed (in one rack).
    **options
        As :func:`graph_iterations` takes them.
    """
    import dataclasses

    real = graph_iterations(cluster, **options)
    free = graph_iterations(dataclasses.replace(cluster, bandwidth=1e18), **options)
    out = {}
    for m in models:
        t, t0 = real(m, (workers,), cluster.uplink or cluster.bandwidth), free(m, (workers,), 1e18)
        if t is not None and t > 0:
            out[m] = min(0.99, max(0.0, 1.0 - t0 / t))
    return out
