"""What the client, the scheduler plugin and the workers tell each other, the one module the three
sides share: a run's graph and its plan's priorities, as plain messages (lists, strings, numbers),
one format each way; the declared cluster, which crosses as the text of a cluster file
(:func:`taskflow.formats.native.cluster_to_dict`), so that what the plugin reads is exactly what
``taskflow run --cluster FILE`` reads; the names each side looks things up by (the plugin's, the
workers' heartbeat metrics); and :func:`install_scheduler_plugin`, which the client sends to the
scheduler by name, so that the client never imports the scheduler's code."""

from __future__ import annotations

import json

from ..cluster import Cluster
from ..errors import FormatError
from ..formats.native import cluster_from_dict, cluster_to_dict
from ..graph import TaskGraph

__all__ = [
    "plan_priorities",
    "plan_message",
    "graph_payload",
    "graph_from_payload",
    "cluster_message",
    "cluster_from_message",
    "PLACING_META",
    "PLUGIN_NAME",
    "SCHEDULER_PLUGIN",
    "RATES_METRIC",
    "CPU_METRIC",
    "install_scheduler_plugin",
    "workers_info",
]

#: the name the taskflow scheduler plugin is installed under
PLUGIN_NAME = "taskflow"
#: the module that defines it (imported on the scheduler only)
SCHEDULER_PLUGIN = "taskflow.runtime.scheduler.plugin"
#: the heartbeat metric (``WorkerState.metrics``) holding the rates a worker received at, by sender
RATES_METRIC = "taskflow_incoming"
#: the heartbeat metric holding the cores a worker's cgroup allows it
CPU_METRIC = "taskflow_cpu_limit"


async def install_scheduler_plugin(dask_scheduler=None) -> str:
    """Install the taskflow scheduler plugin where this runs: on the scheduler, sent there by name
    (``client.run_on_scheduler``). Nothing happens where it is installed already (an operator may
    have preloaded it). Returns its name.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    """
    import importlib

    plugin = importlib.import_module(SCHEDULER_PLUGIN).TaskflowPlugin()
    await dask_scheduler.register_scheduler_plugin(plugin, name=PLUGIN_NAME, idempotent=True)
    return PLUGIN_NAME


def workers_info(client) -> dict:
    """Dask's description of every worker of ``client``'s cluster, by address, asked of the
    scheduler each time. ``client.scheduler_info()`` returns the client's cached copy, which the
    client's own refresh (every 2 s, asking for no workers) can overwrite between the call's fetch
    and its return: a run then saw a cluster without workers ("cluster model names worker '0' but
    Dask has []", twice in suite runs on a loaded machine).

    Parameters
    ----------
    client : distributed.Client
    """
    import inspect

    try:
        takes = "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        takes = False
    if takes:
        return client.sync(client.scheduler.identity, n_workers=-1)["workers"]
    return client.sync(client.scheduler.identity)["workers"]


#: the meta keys a run's graph carries to the scheduler plugin: what schedulers place and order by
#: (``placed``: worker, place, stage, rank; every list scheduler: priority)
PLACING_META = ("worker", "place", "stage", "rank", "priority")


def plan_priorities(plan) -> dict:
    """Task -> its priority under ``plan`` (higher runs first): the plan's tasks ranked by planned
    start, then finish; the first gets ``len(plan)``. The plugin sets these inside Dask's scheduler, and
    :func:`taskflow.run` sends the same with the graph, so that Dask hands each worker its tasks in
    the plan's order from the start (see :class:`~.plugin.TaskflowPlugin`).

    Parameters
    ----------
    plan : Schedule
    """
    order = sorted(range(len(plan)), key=lambda k: (plan.start[k], plan.finish[k]))
    n = len(plan)
    return {plan.tasks[k]: n - rank for rank, k in enumerate(order)}


def plan_message(plan) -> dict:
    """A plan as the plugin answers a registration with it: ``keys``, ``workers`` (by name),
    ``start`` and ``finish`` (empty lists where there is no plan).

    Parameters
    ----------
    plan : Schedule or None
    """
    if plan is None:
        return {"keys": [], "workers": [], "start": [], "finish": []}
    return {
        "keys": list(plan.tasks),
        "workers": list(plan.workers),
        "start": plan.start.tolist(),
        "finish": plan.finish.tolist(),
    }


def graph_payload(graph: TaskGraph, key_of: dict) -> dict:
    """A task graph with its ids replaced by Dask keys, as a message (lists, strings, numbers).

    Parameters
    ----------
    graph : TaskGraph
    key_of : dict
        Task id -> Dask key (strings or tuples).

    Returns
    -------
    dict
    """
    a = graph.arrays
    placing = []  # the meta a scheduler places by (placed: rank, stage, worker; priority), numbers and text only
    for i, md in graph.metas().items():
        kept = {k: v for k in PLACING_META if isinstance(v := md.get(k), (int, float, str)) and not isinstance(v, bool)}
        if kept:
            placing.append([i, kept])
    return {
        "name": graph.name,
        "keys": [key_of[t] for t in a.ids],
        "cost": a.cost.tolist(),
        "output_size": a.output_size.tolist(),
        "cores": a.cores.tolist(),
        "src": a.src.tolist(),
        "dst": a.dst.tolist(),
        "size": a.size.tolist(),
        "costs": [[i, {str(w): float(s) for w, s in c.items()}] for i, c in a.costs.items()],
        "meta": placing,
    }


def graph_from_payload(doc: dict) -> TaskGraph:
    """The :class:`TaskGraph` of a :func:`graph_payload` message (task ids are the Dask keys).

    Parameters
    ----------
    doc : dict
    """
    keys = [tuple(k) if isinstance(k, list) else k for k in doc["keys"]]  # msgpack turns tuples into lists
    meta = None
    if doc.get("meta"):
        meta = [None] * len(keys)
        for i, md in doc["meta"]:
            meta[int(i)] = dict(md)
    g = TaskGraph.from_arrays(
        doc.get("name", "run"),
        keys,
        doc["cost"],
        doc["output_size"],
        doc["src"],
        doc["dst"],
        doc["size"],
        meta=meta,
        cores=doc.get("cores"),
    )
    if doc.get("costs"):
        g = g.with_costs(costs={keys[i]: c for i, c in doc["costs"]})
    return g


def cluster_message(cluster: Cluster) -> str:
    """The declared cluster as the text of a native cluster file.

    Parameters
    ----------
    cluster : Cluster
    """
    return json.dumps(cluster_to_dict(cluster))


def cluster_from_message(text: str) -> Cluster:
    """The cluster of a :func:`cluster_message`.

    Parameters
    ----------
    text : str

    Raises
    ------
    FormatError, ClusterError
        Not a cluster document, or a bad field (named).
    """
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as e:
        raise FormatError(f"the run's cluster is not a cluster document: {e}") from None
    return cluster_from_dict(doc, "the run's cluster")
