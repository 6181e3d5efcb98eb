"""Several jobs on one cluster: one graph whose tasks are tagged by job.

``multijob(graphs, names)`` puts independent graphs side by side: task ``t`` of job ``j`` becomes
``"{j}/{t}"`` with ``meta["job"] = j`` (the job's own meta kept), and no edge joins two jobs, so a
scheduler is free to interleave them (one job's communication under another's computation, as
CrossoverScheduler does, Luo et al. 2021). :func:`job_completion_times` reads, from a schedule or a
simulated trace, when each job's last task finished. Running the jobs back to back takes the sum of
their makespans alone.

Counts: tasks and edges are the sums over the jobs.
"""

from __future__ import annotations

import numpy as np

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from ._builder import paused_gc

__all__ = ["multijob", "job_completion_times", "job_of"]


def multijob(graphs, names=None, name: str | None = None, priorities=None) -> TaskGraph:
    """Independent ``graphs`` as one graph, task ids prefixed ``{job}/``.

    ``names`` defaults to ``job0, job1, ...``; a job name may not contain ``/``. Exact per-worker
    costs are kept; callables are kept too, so executable jobs stay executable. ``priorities`` (one
    number per job) sets every task's ``meta["priority"]``: the ``placed`` scheduler plans the
    higher job first and lets the others fill its idle time, and the max-min network sends its
    bytes first.

    Parameters
    ----------
    graphs : list of TaskGraph
    names : list of str, optional
    name : str, optional
        The combined graph's name.
    priorities : list of float, optional

    Returns
    -------
    TaskGraph

    Raises
    ------
    WorkflowError
        Repeated or malformed job names, or not one priority per graph.

    Examples
    --------
    >>> from workflows.scientific import fork_join
    >>> g = multijob([fork_join(2, 1), fork_join(3, 1)], names=["a", "b"])
    >>> len(g), g.task("b/join0").meta["job"]
    (9, 'b')
    """
    graphs = list(graphs)
    names = [f"job{j}" for j in range(len(graphs))] if names is None else [str(x) for x in names]
    if len(names) != len(graphs) or len(set(names)) != len(names):
        raise WorkflowError("names must be distinct, one per graph")
    bad = [x for x in names if "/" in x or not x]
    if bad:
        raise WorkflowError(f"job name {bad[0]!r} must be non-empty and hold no '/'")
    label = name or "+".join(names)
    if priorities is not None and len(priorities) != len(graphs):
        raise WorkflowError("priorities: one number per graph")
    extra = [{} if priorities is None else {"priority": priorities[j]} for j in range(len(graphs))]
    if any(g.executable for g in graphs):
        return _executable(graphs, names, label, extra)
    ids, metas, costs, base = [], [], {}, 0
    src, dst = [], []
    with paused_gc():
        for g, job, more in zip(graphs, names, extra):
            a = g.arrays
            md = g.metas()
            ids += [f"{job}/{t}" for t in a.ids]
            metas += [{**md.get(i, {}), "job": job, **more} for i in range(a.n)]
            costs.update({f"{job}/{a.ids[i]}": c for i, c in a.costs.items()})
            src.append(a.src + base)
            dst.append(a.dst + base)
            base += a.n
        arrays = [g.arrays for g in graphs]
        cores = np.concatenate([x.cores for x in arrays])
        out = TaskGraph.from_arrays(
            label,
            ids,
            np.concatenate([x.cost for x in arrays]),
            np.concatenate([x.output_size for x in arrays]),
            np.concatenate(src),
            np.concatenate(dst),
            np.concatenate([x.size for x in arrays]),
            meta=metas,
            cores=None if (cores == 1).all() else cores.tolist(),
        )
    return out.with_costs(costs=costs) if costs else out


def _executable(graphs, names, label, extra) -> TaskGraph:
    """Executable jobs: every task re-added with its callable, handles renamed into the new graph."""
    from taskflow.graph import TaskHandle

    out = TaskGraph(label)
    for g, job, more in zip(graphs, names, extra):
        handle = {}

        def swap(x):
            if isinstance(x, TaskHandle):
                return handle[x.id]
            if isinstance(x, (list, tuple)):
                return type(x)(swap(v) for v in x)
            if isinstance(x, dict):
                return {k: swap(v) for k, v in x.items()}
            return x

        for t in g.topological_order():
            task = g.task(t)
            fn, args, kwargs = task.fn, swap(task.args), swap(task.kwargs or {})
            handle[t] = out.add_task(
                f"{job}/{t}",
                fn=fn,
                args=args,
                kwargs=kwargs,
                cost=task.cost,
                costs=task.costs,
                output_size=task.output_size,
                cores=task.cores,
                meta={**(task.meta or {}), "job": job, **more},
            )
        for s, d, z in g.edges():
            if not out.has_edge(handle[s], handle[d]):  # arguments made the others
                out.add_edge(handle[s], handle[d], size=z)
    return out


def job_of(task_id) -> str:
    """The job name of a task id made by :func:`multijob`.

    Parameters
    ----------
    task_id : str
    """
    return str(task_id).split("/", 1)[0]


def job_completion_times(schedule, graph: TaskGraph | None = None) -> dict:
    """``{job: time its last task finished}`` from a :class:`~taskflow.Schedule` or a simulated
    :class:`~taskflow.Trace` (any object with ``to_schedule()``).

    Parameters
    ----------
    schedule : Schedule or Trace
    graph : TaskGraph, optional
        Unused; kept for symmetry with other measures.
    """
    if hasattr(schedule, "to_schedule"):
        schedule = schedule.to_schedule()
    done: dict = {}
    for a in schedule:
        job = job_of(a.task)
        done[job] = max(done.get(job, 0.0), a.finish)
    return dict(sorted(done.items()))
