"""What the ``adaptive`` policy (:mod:`schedulers.adaptive`) adds to the scheduler plugin: the guard
that keeps a plan only where it is predicted to beat Dask's own scheduling, and the re-decisions as
a run's durations are learned. :class:`Adapting` is a part of
:class:`~taskflow.runtime.plugin.TaskflowPlugin`; it reads and writes the run's fields that
:class:`~taskflow.runtime.runs.Run` keeps for it (``decision``, ``estimates``, ``speeds_used``, ...).
"""

from __future__ import annotations

import math
import statistics
import time

from .dask_hooks import dask_state
from .predict import plan_or_dask
from .runs import FAILED, REPLANNING, UNFINISHED_KEY

__all__ = ["Adapting", "P2P_PREFIXES", "decision_note", "signature", "KEEP_OUTCOMES", "MIN_TASKS"]

#: measured runs kept per kind of work and choice (the latest), and kinds of work kept
KEEP_OUTCOMES = (5, 256)
#: tasks of a prefix a worker must have run for its speed to count in the guard's spread
MIN_TASKS = 3

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

    def worth_planning(self, r, keys, cluster) -> bool:
        """Whether planning ``keys`` of ``r`` on ``cluster`` can pay: workers whose speeds (declared
        or learned) differ by more than the policy's ``spread``, or a declared network of per-pair
        rates or racks as :func:`.predict.uneven` says; and no task of Dask's peer-to-peer shuffles
        (which Dask's shuffle extension places itself). When not, the run is left to Dask at once (nothing is
        planned or simulated) and its unfinished tasks' restrictions are lifted.

        Parameters
        ----------
        r : Run
        keys : list
            Its unfinished keys.
        cluster : Cluster
            The live workers, as the run sees them.
        """
        tasks = self.dask_scheduler.tasks
        # the network counts as uneven where declared so (rates learned on a loaded machine vary
        # widely between identical pairs), speeds where declared or learned
        declared = r.cluster
        shaped = declared is not None and (bool(declared.bandwidths) or declared.racks is not None)
        worth = (shaped or self._spread(r, cluster) > r.policy.spread) and not any(
            k in tasks and tasks[k].prefix.name.startswith(P2P_PREFIXES) for k in keys)
        if not worth:
            self._leave_to_dask(r, keys, cluster)
        return worth

    def _spread(self, r, cluster) -> float:
        """The fastest worker's speed over the slowest's: learned from prefixes with at least
        :data:`MIN_TASKS` tasks on a worker (a few tasks on a loaded machine differ by 1.5x and
        more between identical workers), else as ``cluster`` (declared) has them; 1 where unknown."""
        from .learn import relative_speeds

        live = {str(ws.name) for ws in self.dask_scheduler.workers.values()}
        learned = {w: s for w, s in relative_speeds(self.durations, MIN_TASKS).items() if w in live}
        speeds = list(learned.values()) if len(learned) >= 2 else \
            ([w.speed for w in r.cluster.workers] if r.cluster is not None else [])
        return max(speeds) / min(speeds) if len(speeds) >= 2 and min(speeds) > 0 else 1.0

    def _leave_to_dask(self, r, keys, cluster) -> None:
        r.decision = "dask"
        r.decided_at = time.monotonic()
        r.speeds_used = {w.id: w.speed for w in cluster.workers}
        tasks = self.dask_scheduler.tasks
        for k in keys:
            ts = tasks.get(k)
            if ts is not None and ts.state in UNFINISHED_KEY and r.plan.pop(k, None) is not None:
                ts.worker_restrictions = None
                ts.loose_restrictions = False

    def _measured_choice(self, r):
        """``(keep the plan, predicted makespan or None)`` from earlier runs of the same work on
        this cluster (:meth:`record`), or None where they do not say yet. The first run of a kind of
        work learns (the guard's prediction, re-decisions within the run) and is not counted; the
        next ones try each choice once (the plan first where the guard would keep it), then take
        the one whose measured runs are shorter (medians of the latest :data:`KEEP_OUTCOMES`)."""
        runs = self.outcomes.get(r.signature)
        if runs is None:
            return None
        r.fixed = True
        if not runs["plan"] and not runs["dask"]:
            return None  # the guard decides, once
        if not runs["dask"]:
            return False, None  # try Dask's own once (no measured prediction yet)
        if not runs["plan"]:
            return True, None  # try the plan once
        plan, dask = statistics.median(runs["plan"]), statistics.median(runs["dask"])
        return plan < dask, min(plan, dask)

    def begin(self, r) -> None:
        """``r`` begins running: what kind of work it is (:func:`signature`), and since when.

        Parameters
        ----------
        r : Run
        """
        r.started = time.monotonic()
        if self.adaptive(r):
            r.signature = signature(r.graph, self.dask_scheduler.tasks)

    def record(self, r) -> None:
        """``r`` finished: keep its makespan (since it began running) under its decision, for the
        next runs of the same work (:meth:`_measured_choice`); a first run of its kind is not
        kept (it learned as it went), nor one that changed its mind on the way.

        Parameters
        ----------
        r : Run
        """
        if not self.adaptive(r) or r.signature is None or not r.decision:
            return
        book = self.outcomes
        if r.signature not in book:
            if len(book) >= KEEP_OUTCOMES[1]:
                del book[next(iter(book))]
            book[r.signature] = {"plan": [], "dask": []}
            return
        if r.redecisions == 0:
            kept = book[r.signature][r.decision]
            kept.append(time.monotonic() - r.started)
            del kept[:-KEEP_OUTCOMES[0]]

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
        p = r.policy
        measured = self._measured_choice(r) if len(graph) == len(r.graph) else None
        if measured is not None:
            keep, predicted = measured
        else:
            state = dask_state(self.dask_scheduler, sorted(set(prefixes.values())))
            keep, predicted, _ = plan_or_dask(graph, cluster, plan, state, p.margin, p.limit, p, p.spread)
        r.decision = "plan" if keep else "dask"
        r.decided_at = time.monotonic()
        r.decide_secs = time.perf_counter() - t0
        cost, sums = graph.arrays.cost, {}
        for i, k in enumerate(graph.ids):  # a prefix's mean: its tasks' costs differ with their inputs
            if k in prefixes:
                cell = sums.setdefault(prefixes[k], [0.0, 0])
                cell[0] += float(cost[i])
                cell[1] += 1
        r.estimates = {name: total / n for name, (total, n) in sums.items()}
        r.speeds_used = {w.id: w.speed for w in cluster.workers}
        if not keep:
            self._leave_to_dask(r, graph.ids, cluster)
        return predicted

    def learn_within(self, r, prefix: str, secs: float, worker: str, stimulus_id: str) -> None:
        """A task of ``r`` finished (``prefix``, ``secs`` of compute on ``worker``): when that, or
        the worker speeds learned since, is ``drift`` off what the last decision used, re-estimate
        the unfinished tasks' costs and decide again (at most every ``interval`` seconds, and 20
        times the last decision's time, and ``replans`` times per run). A run whose decision came
        from measured runs (:meth:`record`) is not re-decided.

        Parameters
        ----------
        r : Run
        prefix : str
        secs : float
        worker : str
        stimulus_id : str
        """
        p = r.policy
        if r.fixed or r.redecisions >= p.replans or \
                time.monotonic() - r.decided_at < max(p.interval, 20 * r.decide_secs):
            return  # at most a twentieth of the scheduler's time goes to deciding
        speeds = self.learned_speeds()
        if r.decision == "dask":  # left to Dask: worth a new decision only once the workers look uneven
            if self._spread(r, None) <= p.spread:
                r.decided_at = time.monotonic()
                return
        else:
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


def signature(graph, tasks) -> tuple:
    """What makes two runs the same work, for comparing their measured makespans: the task-name
    prefixes of ``graph``'s keys and its size to within a factor of two.

    Parameters
    ----------
    graph : TaskGraph
    tasks : dict
        Dask's task states by key.
    """
    names = frozenset(tasks[k].prefix.name for k in graph.ids if k in tasks)
    return names, int(math.log2(max(1, len(graph))))


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
