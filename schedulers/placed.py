"""``placed``: the placement the workflow asks for, timed like HEFT.

Training jobs fix where work runs: rank ``r`` of a data-parallel job owns device ``r``, stage ``s``
of a pipeline owns device ``s``. A task whose ``meta`` names its place keeps it: ``meta["worker"]``
(a worker id of the cluster), else ``meta[key]`` for the first key of ``keys`` it has (default
``("place", "stage", "rank")``: ``place`` a worker of its own, as a training job's data loaders
have), an integer ``k`` that means the cluster's worker ``k mod W``. Every other
task (a parameter-server sum, a loader without a rank) goes where it finishes earliest. Tasks start
in decreasing upward rank (HEFT's order), each as early as its inputs and its worker allow, using
idle gaps. A pinned task whose worker lacks the cores it needs is an error that names it.

This is the baseline a training framework runs (each rank on its own device); comparing it with
``heft`` shows what a free placement would change. O((V + E) W) like HEFT.
"""

from __future__ import annotations

import numpy as np

from taskflow.errors import UsageError

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import upward_rank

__all__ = ["Placed"]


@register
class Placed(Scheduler):
    """The workflow's own placement (``meta`` worker, stage or rank), timed like HEFT."""

    name = "placed"
    option_names = ("keys",)
    summary = "the workflow's own placement (meta worker/stage/rank), HEFT timing"

    def plan(self, cost_model):
        keys = tuple(self.options.get("keys", ("place", "stage", "rank")))
        g = cost_model.graph
        a = cost_model.arrays
        ids = cost_model.cluster.ids
        by_id = {str(w): k for k, w in enumerate(ids)}
        W = len(ids)
        fixed = np.full(a.n, -1, dtype=np.int64)
        level = np.zeros(a.n)
        feasible = cost_model.feasible()
        for i, md in g.metas().items():
            if isinstance(md.get("priority"), (int, float)):
                level[i] = float(md["priority"])
            if "worker" in md:
                k = by_id.get(str(md["worker"]))
                if k is None:
                    raise UsageError(f"task {a.ids[i]!r}: meta worker {md['worker']!r} is not in the cluster")
            else:
                key = next((x for x in keys if isinstance(md.get(x), (int, np.integer))), None)
                if key is None:
                    continue
                k = int(md[key]) % W
            if not feasible[i, k]:
                raise UsageError(f"task {a.ids[i]!r}: pinned to worker {ids[k]!r}, which lacks the cores it needs")
            fixed[i] = k
        rank = upward_rank(cost_model)
        if level.any():  # meta priority first, then upward rank
            rank = rank + level * (float(rank.max()) + 1.0) * 2.0
        return to_schedule(cost_model, list_schedule(cost_model, rank, fixed=fixed, insertion=True), self.name)
