"""What the ``adaptive`` policy (:mod:`schedulers.adaptive`) adds to the scheduler plugin: the guard
that keeps a plan only where it is predicted to beat Dask's own scheduling, and the re-decisions as
a run's durations are learned. :class:`Adapting` is a part of
:class:`~taskflow.runtime.plugin.TaskflowPlugin`; it reads and writes the run's fields that
:class:`~taskflow.runtime.runs.Run` keeps for it (``decision``, ``estimates``, ``speeds_used``, ...).
"""

from __future__ import annotations

import time

from .dask_hooks import dask_state
from .predict import plan_or_dask
from .runs import FAILED, REPLANNING, UNFINISHED_KEY

__all__ = ["Adapting", "P2P_PREFIXES", "decision_note"]

#: task-name prefixes of Dask's peer-to-peer shuffles and rechunks, whose output tasks Dask's shuffle
#: extension itself pins to workers: a graph with one is left to Dask's own scheduling
P2P_PREFIXES = ("shuffle-transfer", "shuffle-barrier", "shuffle_p2p", "rechunk-transfer", "rechunk-p2p",
                "hash-join-transfer", "hash-join")


class Adapting:
    """The adaptive policy's part of the plugin (a mixin: ``dask_scheduler``, ``runs``,
    ``learned_speeds``, ``_graph_of`` and ``_move`` are the plugin's)."""

    def adaptive(self, r) -> bool:
        """Whether run ``r`` is placed by the adaptive policy's rules (a run whose costs are
        learned from Dask, with a policy that asks for them).

        Parameters
        ----------
        r : Run
        """
        return r.learned and getattr(r.policy, "adaptive", False)

    def guard(self, r, graph, cluster, plan) -> float:
        """Keep ``plan`` for ``r`` or leave the run to Dask (:func:`.predict.plan_or_dask`); on
        leaving, the restrictions of its unfinished tasks are lifted. Returns the predicted
        makespan of what runs.

        Parameters
        ----------
        r : Run
        graph : TaskGraph
            The unfinished part planned.
        cluster : Cluster
        plan : Schedule
        """
        t0 = time.perf_counter()
        tasks = self.dask_scheduler.tasks
        prefixes = {k: tasks[k].prefix.name for k in graph.ids if k in tasks}
        state = dask_state(self.dask_scheduler, sorted(set(prefixes.values())))
        p = r.policy
        if any(name.startswith(P2P_PREFIXES) for name in state["durations"]):
            keep, predicted = False, float(plan.makespan)  # Dask's shuffle extension places those itself
        else:
            keep, predicted, _ = plan_or_dask(graph, cluster, plan, state, p.margin, p.limit, p, p.spread)
        r.decision = "plan" if keep else "dask"
        r.decided_at = time.monotonic()
        r.decide_secs = time.perf_counter() - t0
        cost = graph.arrays.cost
        r.estimates = {prefixes[k]: float(cost[i]) for i, k in enumerate(graph.ids) if k in prefixes}
        r.speeds_used = {w.id: w.speed for w in cluster.workers}
        if not keep:
            for k in graph.ids:
                ts = tasks.get(k)
                if ts is not None and ts.state in UNFINISHED_KEY and r.plan.pop(k, None) is not None:
                    ts.worker_restrictions = None
                    ts.loose_restrictions = False
        return predicted

    def learn_within(self, r, prefix: str, secs: float, worker: str, stimulus_id: str) -> None:
        """A task of ``r`` finished (``prefix``, ``secs`` of compute on ``worker``): when that, or
        the worker speeds learned since, is ``drift`` off what the last decision used, re-estimate
        the unfinished tasks' costs and decide again (at most every ``interval`` seconds and
        ``replans`` times per run).

        Parameters
        ----------
        r : Run
        prefix : str
        secs : float
        worker : str
        stimulus_id : str
        """
        p = r.policy
        if r.redecisions >= p.replans or time.monotonic() - r.decided_at < max(p.interval, 4 * r.decide_secs):
            return
        speeds = self.learned_speeds()
        used = r.estimates.get(prefix)
        measured = secs * speeds.get(worker, 1.0)
        off = used is None or abs(measured - used) > p.drift * max(used, 1e-3)
        off = off or any(abs(speeds.get(w, s) / s - 1.0) > p.drift for w, s in r.speeds_used.items() if s > 0)
        if not off:
            return
        tasks = self.dask_scheduler.tasks
        todo = [tasks[k] for k in r.unfinished(tasks) if k in tasks and tasks[k].run_spec is not None]
        if not todo:
            return
        fresh = self._graph_of(todo, r.prefix_costs)
        r.graph = r.graph.with_costs(cost=dict(zip(fresh.ids, fresh.arrays.cost.tolist())))
        r.redecisions += 1
        self._move(r, REPLANNING)
        self._move(r, FAILED if r.error else r.before, stimulus_id)


def decision_note(policy: str, decision: str, redecisions: int) -> str:
    """What the adaptive policy's guard decided last for a run, as a report's note.

    Parameters
    ----------
    policy : str
    decision : {"plan", "dask"}
    redecisions : int
    """
    what = ("placed by its plan" if decision == "plan"
            else "left to Dask's own scheduling (no plan predicted to win by the margin)")
    return f"{policy}: {what}; decided {1 + redecisions} time(s) as the run's durations were learned"
