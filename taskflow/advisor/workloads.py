"""What the advisor simulates on each configuration: one fixed graph, or a training job whose graph
depends on the configuration (one rank, or one pipeline stage, per GPU).

A training job of many steps is simulated for 2 and 3 steps and extrapolated: every step after the
first ones repeats the same tasks, so the steady-state step time is ``T(3) - T(2)`` and ``steps``
take ``T(3) + (steps - 3) (T(3) - T(2))``. Its work bound extrapolates exactly (each step adds the
same work); its critical-path bound is that of 3 steps (a part of the whole).
"""

from __future__ import annotations

from ..errors import UsageError
from ..graph import TaskGraph

__all__ = ["FixedWorkload", "Training", "profiled"]

_SIMULATED = (2, 3)  # steps simulated for a longer job


class FixedWorkload:
    """One graph, the same on every configuration.

    Parameters
    ----------
    graph : TaskGraph
    """

    steps = None

    def __init__(self, graph: TaskGraph):
        a = graph.arrays
        #: tasks whose exact per-worker costs were dropped: they name the graph's own workers, not
        #: a catalog's nodes (each keeps its ``cost``, scaled by the node's speed)
        self.dropped = len(a.costs)
        self.graph = graph.with_costs(costs={a.ids[i]: None for i in a.costs}) if a.costs else graph
        self.name = graph.name

    def infeasible(self, config) -> str:
        """'' (a graph runs on any configuration whose workers fit its tasks)."""
        return ""

    def graphs(self, config):
        """``[(graph, None)]``: the graph to simulate on ``config``."""
        return [(self.graph, None)]

    def total(self, times: list) -> float:
        """The makespan from the simulated ones (here the one)."""
        return times[0]

    def bound(self, cps: list, works: list) -> float:
        """The makespan bound from the graphs' critical-path and work bounds."""
        return max(cps[0], works[0])

    def describe(self) -> str:
        """One line for the report."""
        note = (
            f" ({self.dropped} tasks' exact per-worker costs dropped: the catalog's nodes are not the graph's workers)"
            if self.dropped
            else ""
        )
        return f"{self.graph.name}: {len(self.graph)} tasks, {self.graph.arrays.m} edges{note}"


class Training:
    """``steps`` of training ``model`` on a global ``batch`` of samples per step, whatever the
    cluster: split over one rank per GPU (``parallelism="data"``:
    :func:`workflows.training.data_parallel`, ``ceil(batch / ranks)`` samples per rank; more ranks
    than samples cannot run) or over pipeline stages (``"pipeline"``:
    :func:`workflows.pipeline.pipeline_parallel`, one stage per GPU up to the model's layers,
    ``batch`` split into ``microbatches``). Task costs are seconds on a V100 (the generators'
    device): a catalog gives GPU speeds relative to it.

    Parameters
    ----------
    model : str
        A model name of ``workflows/data/models.json`` or a size (``350m``, ``1.3b``).
    steps, batch : int
    parallelism : {"data", "pipeline"}
    allreduce : {"ring", "tree", "ps"}
    microbatches : int
    profile : CostProfile, optional
        Task costs per kind measured on a real run (see :func:`profiled`).

    Raises
    ------
    TaskflowError
        A bad parameter (the generators' own checks).
    """

    def __init__(
        self,
        model="resnet50",
        steps: int = 100,
        batch: int = 32,
        parallelism: str = "data",
        allreduce: str = "ring",
        microbatches: int = 8,
        profile=None,
    ):
        if parallelism not in ("data", "pipeline"):
            raise UsageError(f"parallelism must be 'data' or 'pipeline', got {parallelism!r}")
        for name, v in (("steps", steps), ("batch", batch), ("microbatches", microbatches)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UsageError(f"{name} must be an integer >= 1, got {v!r}")
        self.model, self.steps, self.batch = model, steps, batch
        self.parallelism, self.allreduce, self.microbatches = parallelism, allreduce, microbatches
        self.profile = profile
        self.name = f"{parallelism}-parallel {model}, {steps} steps, batch {batch}"
        self._cache = {}
        self._build(1, 1)  # a bad model or option fails here, once, not per configuration

    def _build(self, ranks: int, steps: int) -> TaskGraph:
        key = (ranks, steps)
        if key not in self._cache:
            from workflows.training import data_parallel, model_profile, pipeline_parallel

            if self.parallelism == "data":
                g = data_parallel(
                    self.model,
                    workers=ranks,
                    iterations=steps,
                    batch=-(-self.batch // ranks) * ranks,
                    allreduce=self.allreduce,
                )
            else:
                layers = len(model_profile(self.model)) if isinstance(self.model, str) else len(self.model)
                g = pipeline_parallel(
                    self.model,
                    stages=min(ranks, layers),
                    microbatches=self.microbatches,
                    iterations=steps,
                    batch=self.batch,
                )
            self._cache[key] = profiled(g, self.profile) if self.profile is not None else g
        return self._cache[key]

    def infeasible(self, config) -> str:
        """Why ``config`` cannot run the job ('' when it can)."""
        if self.parallelism == "data" and config.workers > self.batch:
            return f"{config.workers} ranks for a batch of {self.batch} samples"
        return ""

    def graphs(self, config):
        """The graphs to simulate on ``config``: one rank (stage) per worker; 2 and 3 steps when
        ``steps`` is larger (then extrapolated), else all of them."""
        ranks = config.workers
        if self.steps <= _SIMULATED[-1]:
            return [(self._build(ranks, self.steps), self.steps)]
        return [(self._build(ranks, k), k) for k in _SIMULATED]

    def total(self, times: list) -> float:
        """``steps``' makespan from the simulated ones."""
        if len(times) == 1:
            return times[0]
        a, b = times
        return b + (self.steps - _SIMULATED[-1]) * max(b - a, 0.0)

    def bound(self, cps: list, works: list) -> float:
        """A makespan bound for ``steps``: the work grows by the same amount every step."""
        if len(cps) == 1:
            return max(cps[0], works[0])
        per = max(works[1] - works[0], 0.0)
        return max(cps[1], works[1] + (self.steps - _SIMULATED[-1]) * per)

    def describe(self) -> str:
        """One line for the report."""
        extra = " (simulated 2 and 3 steps, extrapolated)" if self.steps > _SIMULATED[-1] else ""
        return self.name + extra


def profiled(graph: TaskGraph, profile, reference: str | None = None) -> TaskGraph:
    """``graph`` with each task's cost as ``profile`` measured it: seconds on the profile's
    ``reference`` worker (default its fastest), which is what a catalog's speed 1.0 then means.
    A task's own measurement, else its kind's duration model or mean (see
    :meth:`CostProfile.apply`), each worker's measurement carried over to the reference worker by
    their learned speeds. Tasks the profile never saw keep their declared cost.

    Parameters
    ----------
    graph : TaskGraph
    profile : CostProfile
    reference : str, optional
        A worker name of the profiled run.

    Raises
    ------
    TaskflowError
        ``reference`` is not a worker of the profile.
    """
    from ..cluster import Cluster, Worker

    names = set(profile.speeds)
    for rows in (profile.tasks, profile.prefixes):
        for row in rows.values():
            names.update(row)
    for m in profile.models.values():
        names.update(m.get("unit", {}))
    if not names:
        return graph
    if reference is not None and reference not in names:
        raise UsageError(f"profile has no worker {reference!r}; workers: {', '.join(sorted(names))}")
    speeds = profile.speeds or {}
    s_ref = speeds.get(reference, 1.0) if reference is not None else max(speeds.values(), default=1.0)
    g, _ = profile.apply(graph, Cluster([Worker(n) for n in sorted(names)]))
    a = g.arrays
    seen = [a.ids[i] for i in a.costs]  # the tasks the profile gave costs
    return g.with_costs(cost={t: float(a.cost[a.index[t]]) / s_ref for t in seen}, costs={t: None for t in seen})
