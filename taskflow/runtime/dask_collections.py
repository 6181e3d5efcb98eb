"""Dask collections (dask.array, dask.bag, dask.delayed, ...) planned by a static policy."""

from __future__ import annotations

from ..cluster import Cluster
from ..graph import TaskGraph
from ..policy import get_scheduler
from .calibrate import attach_addresses, cluster_from_dask
from .dask_graph import plan_annotations
from .runner import connect

__all__ = ["compute"]


def compute(*collections, scheduler="heft", client=None, costs: dict | None = None, cluster: Cluster | None = None,
            **run_options):
    """Plan the task graph of Dask collections with ``scheduler`` and return exactly what
    ``dask.compute(*collections)`` returns.

    ``costs`` maps a task-name prefix (the part of a key before its token) to seconds, e.g. from
    :func:`learn_costs` on a previous run; otherwise every task costs 1.0.

    Parameters
    ----------
    *collections
        Dask collections (and other objects, passed through as ``dask.compute`` does).
    scheduler : str or Scheduler
        A static policy, or ``work-stealing`` (Dask's own).
    client : distributed.Client, optional
        Else an embedded LocalCluster (``workers``, ``threads_per_worker`` in ``run_options``) or
        ``address`` / ``scheduler_file``.
    costs : dict, optional
        Task-name prefix -> seconds.
    cluster : Cluster, optional
        The model to plan with (default: measured from the live cluster).
    **run_options
        ``address``, ``scheduler_file``, ``workers``, ``threads_per_worker``.
    """
    import dask
    from dask._expr import FinalizeCompute
    from dask.base import collections_to_expr, unpack_collections
    from dask.core import flatten

    colls, repack = unpack_collections(*collections)
    if not colls:
        return collections
    expr = FinalizeCompute(collections_to_expr(colls, True)).optimize()
    keys = list(flatten(expr.__dask_keys__()))
    dsk = dict(expr.__dask_graph__())
    g = TaskGraph("dask-collection")
    name_of = {}
    for k in dsk:
        name = str(k)
        if name in name_of.values():
            name = repr(k)
        name_of[k] = name
    for k, v in dsk.items():
        prefix = _prefix(k)
        g.add_task(name_of[k], cost=(costs or {}).get(prefix, 1.0), meta={"category": prefix})
    for k, v in dsk.items():
        for d in _dependencies(v, dsk):
            g.add_edge(name_of[d], name_of[k], size=0)
    c, owned = connect(client, run_options.pop("address", None), run_options.pop("scheduler_file", None),
                        run_options.pop("workers", 2), run_options.pop("threads_per_worker", 1),
                        work_stealing=scheduler == "work-stealing")
    try:
        sch = get_scheduler(scheduler)
        if sch.kind == "static":
            model = attach_addresses(cluster, c) if cluster is not None else cluster_from_dask(c)
            plan = sch.schedule(g, model)
            with dask.annotate(**plan_annotations(plan, model, {name: k for k, name in name_of.items()})):
                results = c.get(expr, keys)
        else:
            results = c.get(expr, keys)
    finally:
        for x in owned:
            x.close()
    return repack(results)


def _prefix(key) -> str:
    from dask.utils import key_split
    return key_split(key)


def _dependencies(task, dsk) -> set:
    deps = getattr(task, "dependencies", None)
    if deps is not None:
        return {d for d in deps if d in dsk}
    from dask.core import get_dependencies
    return set(get_dependencies(dsk, task=task))
