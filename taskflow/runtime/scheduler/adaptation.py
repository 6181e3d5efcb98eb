"""What the ``adaptive`` scheduler (:mod:`schedulers.adaptive`) adds to the scheduler plugin: the guard
that keeps a plan only where it is predicted to beat Dask's own scheduling, and the re-decisions as
a run's durations are learned. :class:`Adaptation` is an object that
:class:`~taskflow.runtime.scheduler.plugin.TaskflowPlugin` owns; its state of each run is one record,
:class:`~..adaptive_state.AdaptiveState` (the run's ``adapt``: a phase, moved through its table,
and what the decisions used); its options are the scheduler's :class:`~taskflow.scheduling.AdaptiveOptions`;
what it measured of each kind of work is an :class:`~..outcomes.Outcomes` record.
"""

from __future__ import annotations

import copy
import time
from typing import Protocol

from .patching import move_queued, restrict

from .reading import BARRIER_PREFIX, compared, cpu_shares, dask_state, placed_inputs, warm
from ..decide import CLOSE, KEEP_OUTCOMES, WATCH, AdaptiveCore, GraphFacts, TaskDone
from ..outcomes import EARLY, PROGRESS_POINTS, behind, progress_curve
from ..predict import CHOICES, DASK, SUBSET
from .runs import MOVABLE, signature

__all__ = [
    "Adaptation",
    "PluginView",
    "P2P_PREFIXES",
    "has_p2p",
    "signature",
    "KEEP_OUTCOMES",
    "MIN_TASKS",
    "MIN_SECONDS",
    "CLOSE",
    "WATCH",
    "EARLY",
    "PROGRESS_POINTS",
    "progress_curve",
    "behind",
]

#: tasks of a prefix a worker must have run for its speed to count in the guard's spread
MIN_TASKS = 3
#: seconds a worker must have spent on a prefix's tasks for its speed to count in the guard's
#: spread (three tasks of half a millisecond differ by 2x and more from one scheduling hiccup)
MIN_SECONDS = 0.05


#: task-name prefixes of Dask's peer-to-peer shuffles and rechunks, whose output tasks Dask's shuffle
#: extension itself pins to workers: a graph with one is left to Dask's own scheduling
P2P_PREFIXES = (
    "shuffle-transfer",
    BARRIER_PREFIX,
    "shuffle_p2p",
    "rechunk-transfer",
    "rechunk-p2p",
    "hash-join-transfer",
    "hash-join",
)


def has_p2p(tasks, keys) -> bool:
    """Whether any of ``keys`` is a task of Dask's peer-to-peer shuffles (:data:`P2P_PREFIXES`).

    Parameters
    ----------
    tasks : dict
        Dask's task states by key.
    keys : iterable
    """
    return any(k in tasks and tasks[k].prefix.name.startswith(P2P_PREFIXES) for k in keys)


class PluginView(Protocol):
    """What :class:`Adaptation` may use of the scheduler plugin: nothing else of it."""

    dask_scheduler: object
    durations: dict
    sizes: dict

    def learned_speeds(self) -> dict:
        """Worker name -> speed measured from the tasks that ran."""

    def graph_of(self, tss, prefix_costs: dict | None = None):
        """The cost model of Dask tasks ``tss``, from what was measured (a TaskGraph)."""

    def live_cluster(self, r):
        """The cluster run ``r`` has now: its declared workers that are alive, with learned speeds."""

    def unfinished(self, r) -> list:
        """The keys of run ``r`` not finished."""

    def replan(self, r, stimulus_id: str) -> None:
        """Plan run ``r``'s unfinished part again, and go back to its state (or fail it)."""


class Adaptation:
    """The adaptive scheduler's part of the scheduler plugin: an object the plugin owns, as Dask's
    scheduler owns its work-stealing extension. It holds its own state (``outcomes``: the runs it
    measured, by kind of work; ``narrow_seen``: the links found narrow for a kind) and reaches the
    plugin only through this narrow interface (:class:`PluginView`): ``dask_scheduler``,
    ``durations``, ``sizes``, ``learned_speeds()``, ``graph_of()``, ``live_cluster()``,
    ``unfinished()`` and ``replan()``. The plugin calls its :meth:`adaptive`,
    :meth:`worth_planning`, :meth:`guard`, :meth:`begin`, :meth:`record`, :meth:`learn_within` and
    :meth:`lost_worker`.

    Parameters
    ----------
    plugin : PluginView
    """

    def __init__(self, plugin):
        self.plugin = plugin
        #: the decisions (:class:`.decide.AdaptiveCore`): this object reads Dask for it and carries them out
        self.core = AdaptiveCore()

    @property
    def outcomes(self) -> dict:
        """What the runs of each kind of work measured (the core's)."""
        return self.core.outcomes

    @property
    def narrow_seen(self) -> dict:
        """The links once found narrow for each kind of work (the core's)."""
        return self.core.narrow_seen

    def adaptive(self, r) -> bool:
        """Whether run ``r`` is placed by the adaptive scheduler's rules (a run whose costs are
        learned from Dask, with a scheduler that declares them: :attr:`Scheduler.adaptive`).

        Parameters
        ----------
        r : GraphRun
        """
        return r.learned and r.scheduler.adaptive is not None

    def worth_planning(self, r, keys, cluster) -> bool:
        """Whether planning ``keys`` of ``r`` on ``cluster`` can pay: workers whose speeds (declared
        or learned) differ by more than the scheduler's ``spread``, or a declared network of per-pair
        rates or racks as :func:`.predict.uneven` says, or a link narrow for its graph (declared
        or learned: :func:`.predict.narrow_pairs`). A graph with tasks of Dask's peer-to-peer
        shuffles (whose output tasks Dask's shuffle extension pins to workers itself) can pay only
        before any of its tasks runs, and only by holding Dask to a subset of the workers (the
        extension pins the outputs within the workers its barrier task is restricted to); mid-run
        it is left as it is. When not worth it, the run is left to Dask at once (nothing is
        planned or simulated) and its unfinished tasks' restrictions are lifted, unless it is held
        to a subset while its shuffle runs; its prediction
        is then the median of the earlier runs of the same work left to Dask, where there were some.

        Parameters
        ----------
        r : GraphRun
        keys : list
            Its unfinished keys.
        cluster : Cluster
            The live workers, as the run sees them.
        """
        declared = r.cluster
        shaped = declared is not None and (bool(declared.bandwidths) or declared.racks is not None)
        worth = self.core.worth_planning(
            r,
            keys,
            cluster,
            spread=1.0 if shaped else self._spread(r, cluster),
            p2p=has_p2p(self.plugin.dask_scheduler.tasks, keys),
            one_host=self._one_host(r, cluster),
        )
        if worth is False:
            self._leave_to_dask(r, keys, cluster)
        return bool(worth)

    def _narrow(self, r, cluster, keys=None) -> bool:
        """Whether a link of ``cluster`` is narrow for ``r``'s graph (:meth:`.decide.AdaptiveCore.narrow`)."""
        return self.core.narrow(r, cluster, cluster is None or self._one_host(r, cluster), keys)

    def _one_host(self, r, cluster=None) -> bool:
        """Whether every worker (of ``cluster``, else every live one) is on one host and ``r``
        declares no rates or racks: then no link of ``r``'s is narrow (:meth:`_links`), and none
        needs estimating."""
        from distributed.comm import get_address_host

        if r.cluster is not None and (r.cluster.bandwidths or r.cluster.racks is not None):
            return False
        addresses = (
            [w.address for w in cluster.workers] if cluster is not None else list(self.plugin.dask_scheduler.workers)
        )
        try:
            return all(addresses) and len({get_address_host(a) for a in addresses}) <= 1
        except (ValueError, TypeError):
            return False

    def _spread(self, r, cluster) -> float:
        """The fastest worker's speed over the slowest's: learned from prefixes with at least
        :data:`MIN_TASKS` tasks and :data:`MIN_SECONDS` seconds on a worker (a few tasks on a
        loaded machine differ by 1.5x and more between identical workers), else as the run's
        declared cluster has them (undeclared: the shares of a core the workers' cgroups allow,
        :func:`.reading.cpu_shares`); a declared worker not measured keeps its declared speed relative
        to the measured ones (:func:`.measured.speeds_on`: a run held off a slow worker never measures
        it, and the next run must still see it slow); 1 where unknown."""
        from ..measured import relative_speeds, speeds_on

        live = {str(ws.name) for ws in self.plugin.dask_scheduler.workers.values()}
        learned = {
            w: s
            for w, s in relative_speeds(warm(compared(self.plugin.durations)), MIN_TASKS, MIN_SECONDS).items()
            if w in live
        }
        declared = (
            {w.id: w.speed for w in r.cluster.workers}
            if r.cluster is not None
            else {w: s for w, s in cpu_shares(self.plugin.dask_scheduler).items() if w in live}
        )
        speeds = list(
            speeds_on(declared, learned if len(learned) >= 2 else {}).values() if declared else learned.values()
        )
        return max(speeds) / min(speeds) if len(speeds) >= 2 and min(speeds) > 0 else 1.0

    def _leave_to_dask(self, r, keys, cluster, stimulus_id: str | None = None) -> None:
        r.adapt.decide(DASK)  # left to Dask: decided again once the workers look uneven
        r.adapt.stamped(time.monotonic())
        r.adapt.used({w.id: w.speed for w in cluster.workers} if cluster is not None else {})
        tasks = self.plugin.dask_scheduler.tasks
        held = bool(r.adapt.held)
        r.adapt.hold(())
        again = {}
        planned = False
        for k in _with_queued(keys, r, tasks):
            ts = tasks.get(k)
            if ts is not None and ts.state in MOVABLE and (r.plan.pop(k, None) is not None or held):
                planned = True
                restrict(ts, None)  # one queued on a worker is Dask's stealing's to move now
                if ts.state == "no-worker":
                    again[k] = "waiting"
        if again:
            self.plugin.dask_scheduler.transitions(again, stimulus_id=stimulus_id or f"taskflow-lift-{time.time()}")
        if planned:
            self._even_out(r)

    def _even_out(self, r) -> None:
        """Spread the tasks of ``r`` sent to a worker and not started there (a plan sends every ready
        task at once, and may have sent many to one worker) over the workers by their learned
        speeds, before Dask's own scheduling takes the run over: Dask's stealing counts a task's
        duration alike on every worker and moves few at a time, so a slow worker handed a plan's
        queue would run it at its own pace. The latest queued (lowest priority) move first, each
        to the worker that would finish its share soonest (tasks per thread over learned speed),
        where that is sooner than where it waits; a task already running stays (Dask's stealing
        protocol: :func:`.reading.move_queued`)."""
        tasks = self.plugin.dask_scheduler.tasks
        workers = list(self.plugin.dask_scheduler.workers.values())
        if len(workers) < 2:
            return
        speeds = self.plugin.learned_speeds()
        rate = {ws.address: max(1, ws.nthreads) * max(speeds.get(str(ws.name), 1.0), 1e-3) for ws in workers}
        load = {ws.address: len(ws.processing) for ws in workers}
        queued = sorted((tasks[k] for k in r.queued(tasks)), key=lambda ts: ts.priority or (), reverse=True)
        for ts in queued:
            src = ts.processing_on.address
            best = min(workers, key=lambda ws: ((load[ws.address] + 1) / rate[ws.address], ws.address))
            if (
                src in load
                and best.address != src
                and (load[best.address] + 1) / rate[best.address] < load[src] / rate[src]
                and move_queued(self.plugin.dask_scheduler, ts, [best])
            ):
                load[best.address] += 1
                load[src] -= 1

    def _hold(self, r, keys, addresses, stimulus_id: str | None = None) -> None:
        """Hold the unfinished ``keys`` of ``r`` to the workers at ``addresses`` (the
        :data:`~.predict.SUBSET` choice): Dask's own scheduling among them, stealing included.
        Tasks Dask queued (which it hands to any worker with a free thread) and tasks with no
        worker left go back to waiting, to be placed among those workers; tasks already sent to
        another worker and not started there are asked over to them (:func:`.reading.move_queued`)."""
        tasks = self.plugin.dask_scheduler.tasks
        r.adapt.hold(addresses)
        held = [self.plugin.dask_scheduler.workers[a] for a in r.adapt.held if a in self.plugin.dask_scheduler.workers]
        again = {}
        for k in _with_queued(keys, r, tasks):
            ts = tasks.get(k)
            if ts is None or ts.state not in MOVABLE:
                continue
            r.plan.pop(k, None)
            restrict(ts, r.adapt.held)
            if ts.state in ("queued", "no-worker"):
                again[k] = "waiting"
            elif ts.state == "processing":
                move_queued(self.plugin.dask_scheduler, ts, held)
        if again:
            self.plugin.dask_scheduler.transitions(again, stimulus_id=stimulus_id or f"taskflow-hold-{time.time()}")

    def lost_worker(self, r, address: str, stimulus_id: str) -> None:
        """A worker ``r``'s tasks are held to (:meth:`_hold`) left: held to the others, or, with
        none left, left to Dask.

        Parameters
        ----------
        r : GraphRun
        address : str
        stimulus_id : str
        """
        if address not in r.adapt.held:
            return
        rest = [a for a in r.adapt.held if a != address and a in self.plugin.dask_scheduler.workers]
        keys = self.plugin.unfinished(r)
        if rest:
            self._hold(r, keys, rest, stimulus_id)
            return
        self._leave_to_dask(r, keys, None, stimulus_id)

    def _measured_choice(self, r, choices=CHOICES):
        """``(choice, predicted makespan or None)`` from earlier runs of the same work, or None where
        they do not say yet (:meth:`.decide.AdaptiveCore.measured_choice`)."""
        return self.core.measured_choice(r, choices)

    def _give_up(self, r, stimulus_id: str, measured: float) -> None:
        """``r``, trying a choice for the first time, has run longer than its watch allows, or
        fallen behind the choice measured shortest so far (:func:`behind`): that choice is
        measured as ``measured`` seconds (it lost already) and the unfinished part goes to the
        choice measured shortest."""
        self.core.give_up(r, measured)
        self.plugin.replan(r, stimulus_id)

    def begin(self, r) -> None:
        """``r`` begins running: what kind of work it is (:func:`signature`), and since when.

        Parameters
        ----------
        r : GraphRun
        """
        r.started = time.monotonic()
        if self.adaptive(r):
            r.adapt.named(signature(r.graph, self.plugin.dask_scheduler.tasks))

    def record(self, r) -> None:
        """``r`` finished: keep its makespan (since it began running) under its decision, for the
        next runs of the same work (:meth:`.decide.AdaptiveCore.record`).

        Parameters
        ----------
        r : GraphRun
        """
        if self.adaptive(r):
            self.core.record(r, time.monotonic() - r.started)

    def guard(self, r, graph, cluster, plan, shift: float = 0.0) -> float:
        """Decide what runs the unfinished part of ``r`` (:func:`.predict.choose`, or the measured
        runs of the same work: :meth:`_measured_choice`): its plan; Dask's own scheduling (the
        restrictions of its unfinished tasks lifted); or Dask's own scheduling held to a subset of
        the workers (:meth:`_hold`): the fastest, or a group joined by links not narrow for it.
        Returns the predicted makespan of what runs.

        Parameters
        ----------
        r : GraphRun
        graph : TaskGraph
            The unfinished part planned.
        cluster : Cluster
        plan : Schedule, or a callable that makes it
            Made only where needed: where the measured runs choose Dask's own or a hold, no plan
            is made.
        shift : float
            Seconds each cost of ``graph`` carries beyond its task's own (Dask's cost per task).
        """
        t0 = time.perf_counter()
        tasks = self.plugin.dask_scheduler.tasks
        one_host = self._one_host(r, cluster)
        whole = len(graph) == len(r.graph)
        prefixes = {k: tasks[k].prefix.name for k in graph.ids if k in tasks}
        read: dict = {}  # Dask's state, where the decision read it
        facts = GraphFacts(
            prefixes=prefixes,
            p2p=has_p2p(tasks, graph.ids),
            one_host=one_host,
            inputs=None
            if whole or one_host
            else placed_inputs(tasks, graph.ids, {w.address: w.id for w in cluster.workers}, self.plugin.sizes),
            state=lambda: read.setdefault(
                "state", dask_state(self.plugin.dask_scheduler, sorted(set(prefixes.values())))
            ),
            elapsed=time.monotonic() - r.started,
        )
        book = copy.deepcopy(self.core.outcomes.get(r.adapt.signature))
        d = self.core.decide(r, graph, cluster, plan, facts, shift)
        r.adapt.first_read((graph, cluster, read.get("state"), book))  # the simulator replays it
        r.adapt.stamped(time.monotonic(), time.perf_counter() - t0)
        if d.choice == DASK:
            self._leave_to_dask(r, graph.ids, cluster)
        elif d.choice == SUBSET:
            self._hold(r, graph.ids, [cluster.worker(w).address for w in d.held])
        elif r.adapt.held:  # the plan's restrictions replace the hold's
            self._leave_to_dask(r, graph.ids, cluster)
        self.core.decided(r, d.choice)
        r.adapt.used({w.id: w.speed for w in cluster.workers})
        return d.predicted

    def _estimate_unfinished(self, r):
        """The cost model of ``r``'s unfinished tasks as estimated now (or None: none left)."""
        tasks = self.plugin.dask_scheduler.tasks
        todo = [tasks[k] for k in r.unfinished(tasks) if k in tasks and tasks[k].run_spec is not None]
        return self.plugin.graph_of(todo, r.prefix_costs) if todo else None

    def learn_within(self, r, prefix: str, secs: float, worker: str, stimulus_id: str) -> None:
        """A task of ``r`` finished (``prefix``, ``secs`` of compute on ``worker``): when that, or
        the worker speeds learned since, is ``drift`` off what the last decision used (for a run
        left to Dask: once the workers look uneven, or, where the decision could then take a plan,
        a link learned narrow for the unfinished tasks as now estimated), re-estimate the
        unfinished tasks' costs and decide again (at most every ``interval`` seconds, and 20 times
        the last decision's time, and ``replans`` times per run). A run whose decision came from measured runs (:meth:`record`) is not
        re-decided.

        Parameters
        ----------
        r : GraphRun
        prefix : str
        secs : float
        worker : str
        stimulus_id : str
        """
        t0 = time.perf_counter()

        def links():
            live = None if self._one_host(r) else self.plugin.live_cluster(r)
            return self.core.links(r, live) if live is not None else None  # (on one host: none)

        now = time.monotonic()
        done = TaskDone(
            prefix,
            secs,
            worker,
            now,
            now - r.started,
            speeds=self.plugin.learned_speeds,
            spread=lambda: self._spread(r, None),
            links=links,
            estimate=lambda: self._estimate_unfinished(r),
        )
        what, measured = self.core.task_finished(r, done)
        if what == "give up":
            self._give_up(r, stimulus_id, measured)
        elif what == "looked":  # the next look waits 20x this
            r.adapt.took(time.perf_counter() - t0)
        elif what == "decide again":
            self.plugin.replan(r, stimulus_id)


def _with_queued(keys, r, tasks) -> list:
    """``keys`` (a run's unfinished keys) and those of ``r``'s keys Dask sent to a worker that has
    not finished them: under a plan's restrictions every ready task is sent at once, and a new
    decision must reach those not started yet."""
    seen = set(keys)
    return list(keys) + [k for k in r.graph.ids if k not in seen and k in tasks and tasks[k].state == "processing"]
