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


def graph_iterations(cluster, device: str = "v100", per_rank: int = 32, iterations: int = 2):
    """``iteration(model, counts, uplink) -> seconds`` for :class:`~taskflow.jobs.JobNetwork`:
    ``model`` a model of the library, or the path of a profiled job's cost graph (``taskflow train
    --cost-graph FILE``: its ranks and iterations as they ran; timed only on as many workers as it
    had ranks); None for anything else.

    Parameters
    ----------
    cluster : JobCluster
        Its ``bandwidth`` (a worker's link).
    device : str
        A device of ``workflows/data/models.json`` (the papers' GPU: ``v100``, ``a100``).
    per_rank : int
        Samples per rank and iteration: a job on ``n`` workers trains a global batch of
        ``per_rank x n`` (weak scaling, as the papers' jobs keep their per-GPU batch).
    iterations : int
        Iterations simulated (the time is their average).
    """
    import os

    from workflows.models import model_profile
    from workflows.training import data_parallel

    from ..cluster import Cluster, Worker
    from ..errors import WorkflowError
    from ..simulator import simulate

    profiled: dict = {}  # path -> (graph, ranks, iterations)

    def graph_for(model, n):
        """The job's graph on ``n`` workers and its iterations, or None."""
        name = str(model)
        if name.endswith(".json") and os.path.isfile(name):  # a profiled job's cost graph
            if name not in profiled:
                from ..formats import load_graph

                g = load_graph(name)
                ranks = {t.meta.get("rank") for t in g.tasks() if t.meta.get("rank") is not None}
                its = {t.meta.get("iteration") for t in g.tasks() if t.meta.get("iteration") is not None}
                profiled[name] = (g, len(ranks), max(1, len(its)))
            g, ranks, its = profiled[name]
            return (g, its) if ranks == n else None
        try:
            model_profile(name)
        except WorkflowError:
            return None
        return data_parallel(name, workers=n, iterations=iterations, batch=per_rank * n, device=device), iterations

    def iteration(model, counts, uplink):
        n = sum(counts)
        got = graph_for(model, n)
        if got is None:
            return None
        workers = [Worker(f"w{k}") for k in range(n)]
        racks = {}
        for r, c in enumerate(counts):
            for k in range(len(racks), len(racks) + c):
                racks[f"w{k}"] = r
        net = (
            Cluster(workers, bandwidth=cluster.bandwidth, racks=racks, uplink=uplink)
            if len(counts) > 1
            else Cluster(workers, bandwidth=cluster.bandwidth)
        )
        return simulate(got[0], net, "placed").makespan / got[1]

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
