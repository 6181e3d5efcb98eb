"""Load (or compile, the first time on a machine) the numba kernels before anything is timed."""

_done = False


def warm_up(tasks: int | None = None, workers: int = 1) -> None:
    """Load the compiled kernels once, so that no timing counts it.

    Parameters
    ----------
    tasks : int, optional
        The size of the graph about to be planned: a small one runs the kernels as plain Python
        (:mod:`taskflow.jit`), so nothing is loaded for it, and for a larger one the kernels numba
        has cached are loaded (the others compile only once they repay it). Default: load them
        all, compiling those not cached.
    workers : int
        The cluster's size (with ``tasks``).
    """
    global _done
    from taskflow.jit import SMALL, compiled

    if _done or (tasks is not None and 3 * tasks * max(workers, 1) < SMALL):
        return
    from taskflow.cluster import Cluster
    from taskflow.costs import CostModel
    from taskflow.graph import TaskGraph

    from .base import available, get_scheduler

    g = TaskGraph("warm-up")
    g.add_task("a", cost=1.0, output_size=1.0)
    g.add_task("b", cost=1.0)
    g.add_edge("a", "b")
    c = Cluster.homogeneous(2)
    cost_model = CostModel(g, c)
    # sized: load only what numba has cached (a first compile costs seconds; a plan of this size
    # runs as plain Python until it repays one: taskflow.jit)
    with compiled(cached_only=tasks is not None):
        for name in available("static"):
            get_scheduler(name, seed=0).schedule(g, c, cost_model=cost_model)
    _done = True
