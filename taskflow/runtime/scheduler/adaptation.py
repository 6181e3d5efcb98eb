"""What the ``adaptive`` scheduler (:mod:`schedulers.adaptive`) adds to the scheduler plugin: the guard
that keeps a plan only where it is predicted to beat Dask's own scheduling, and the re-decisions as
a run's durations are learned. :class:`Adaptation` is an object that
:class:`~taskflow.runtime.scheduler.plugin.TaskflowPlugin` owns; its state of each run is one record,
:class:`~.adaptive_state.AdaptiveState` (the run's ``adapt``: a phase, moved through its table,
and what the decisions used); its options are the scheduler's :class:`~taskflow.scheduling.AdaptiveOptions`;
what it measured of each kind of work is an :class:`~.outcomes.Outcomes` record.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Protocol

from .patching import move_queued, restrict

from .reading import BARRIER_PREFIX, compared, cpu_shares, dask_state, placed_inputs, warm
from .adaptive_state import Phase
from .outcomes import Outcomes, drifted, spread_of
from ..predict import CHOICES, DASK, PLAN, SUBSET, across_hosts, choose, narrow_pairs, narrow_rate, subsets
from .runs import EARLY, FAILED, MOVABLE, PROGRESS_POINTS, REPLANNING, behind, progress_curve, race_own_plan, signature

__all__ = ["Adaptation", "PluginView", "P2P_PREFIXES", "has_p2p", "signature", "KEEP_OUTCOMES",
           "MIN_TASKS", "MIN_SECONDS", "CLOSE", "WATCH", "EARLY", "PROGRESS_POINTS",
           "progress_curve", "behind"]

#: measured runs kept per kind of work and choice (the latest), and kinds of work kept
KEEP_OUTCOMES = (5, 256)
#: tasks of a prefix a worker must have run for its speed to count in the guard's spread
MIN_TASKS = 3
#: seconds a worker must have spent on a prefix's tasks for its speed to count in the guard's
#: spread (three tasks of half a millisecond differ by 2x and more from one scheduling hiccup)
MIN_SECONDS = 0.05

#: a choice measured once within this fraction of the shortest is measured again (runs of one work differ by 13%)
CLOSE = 0.15
#: how much longer (a fraction) than the shortest measured so far a run trying a choice may run before it is given up
WATCH = 0.25

#: task-name prefixes of Dask's peer-to-peer shuffles and rechunks, whose output tasks Dask's shuffle
#: extension itself pins to workers: a graph with one is left to Dask's own scheduling
P2P_PREFIXES = ("shuffle-transfer", BARRIER_PREFIX, "shuffle_p2p", "rechunk-transfer", "rechunk-p2p",
                "hash-join-transfer", "hash-join")


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

    def move(self, r, to: str, *args):
        """Move run ``r`` to state ``to`` (through the run's one transition method)."""


class Adaptation:
    """The adaptive scheduler's part of the scheduler plugin: an object the plugin owns, as Dask's
    scheduler owns its work-stealing extension. It holds its own state (``outcomes``: the runs it
    measured, by kind of work; ``narrow_seen``: the links found narrow for a kind) and reaches the
    plugin only through this narrow interface (:class:`PluginView`): ``dask_scheduler``,
    ``durations``, ``sizes``, ``learned_speeds()``, ``graph_of()``, ``live_cluster()``,
    ``unfinished()`` and ``move()``. The plugin calls its :meth:`adaptive`,
    :meth:`worth_planning`, :meth:`guard`, :meth:`begin`, :meth:`record`, :meth:`learn_within` and
    :meth:`lost_worker`.

    Parameters
    ----------
    plugin : PluginView
    """

    def __init__(self, plugin):
        self.plugin = plugin
        self.outcomes: dict = {}  # kind of work (a run's signature) -> Outcomes: what its runs measured
        self.narrow_seen: dict = {}  # kind of work -> the rate below which a link was narrow for it

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
        tasks = self.plugin.dask_scheduler.tasks
        p2p = has_p2p(tasks, keys)
        started = len(keys) < len(r.graph)
        if p2p and started and r.adapt.held:
            return False  # held while its shuffle runs: the shuffle's outputs are pinned within the hold
        # the network counts as uneven where declared so (rates learned on a loaded machine vary
        # widely between identical pairs), speeds where declared or learned
        declared = r.cluster
        shaped = declared is not None and (bool(declared.bandwidths) or declared.racks is not None)
        opts = r.scheduler.adaptive
        worth = (shaped or self._spread(r, cluster) > opts.spread or self._narrow(r, cluster, keys)) and not (
            p2p and (started or SUBSET not in opts.choices))
        if not worth:
            self._leave_to_dask(r, keys, cluster)
            measured = self._outcomes(r).shortest()
            if r.predicted is None and len(keys) == len(r.graph) and measured is not None:
                # as long as its earlier runs took by what they were left to or chose (a run that
                # begins left to Dask may choose once its tasks show uneven workers)
                r.predicted = measured[1]
        return worth

    def _narrow(self, r, cluster, keys=None) -> bool:
        """Whether a link between two of ``cluster``'s workers (declared, or as learned between
        hosts: :meth:`_links`) is narrow for ``r``'s graph (:func:`.predict.narrow_pairs`), or for
        its unfinished ``keys`` where some have finished (costs learned within the run are theirs)."""
        if cluster is None or self._one_host(r, cluster):
            return False
        graph = r.graph.subgraph(keys) if keys is not None and 0 < len(keys) < len(r.graph) else r.graph
        links = self._links(r, cluster)
        return bool(narrow_pairs(links, self._narrow_rate(r, links, graph)))

    def _narrow_rate(self, r, links, graph) -> float:
        """The rate below which a link of ``links`` is narrow for ``graph`` of ``r``
        (:func:`.predict.narrow_rate`) or, where higher, the rate at which one was narrow for an
        earlier graph of the same work: once narrow for a kind of work, a link stays narrow for it
        (its tasks' costs, learned anew in each run, vary with the machine's load; a decision
        should not flip on that)."""
        seen = self.narrow_seen.get(r.adapt.signature, 0.0)
        rate = narrow_rate(graph, r.scheduler.adaptive.ccr)
        if rate > seen and r.adapt.signature is not None and narrow_pairs(links, rate):
            if r.adapt.signature not in self.narrow_seen and len(self.narrow_seen) >= KEEP_OUTCOMES[1]:
                del self.narrow_seen[next(iter(self.narrow_seen))]
            self.narrow_seen[r.adapt.signature] = rate
        return max(rate, seen)

    def _links(self, r, cluster):
        """``cluster`` as a holding decision weighs its links: rates learned between workers of
        one host left out (:func:`.predict.across_hosts`), the run's declared ones kept."""
        declared = r.cluster.bandwidths if r.cluster is not None else {}
        return across_hosts(cluster, {a: set(row) for a, row in declared.items()})

    def _one_host(self, r, cluster=None) -> bool:
        """Whether every worker (of ``cluster``, else every live one) is on one host and ``r``
        declares no rates or racks: then no link of ``r``'s is narrow (:meth:`_links`), and none
        needs estimating."""
        from distributed.comm import get_address_host

        if r.cluster is not None and (r.cluster.bandwidths or r.cluster.racks is not None):
            return False
        addresses = [w.address for w in cluster.workers] if cluster is not None else list(self.plugin.dask_scheduler.workers)
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
        learned = {w: s for w, s in relative_speeds(warm(compared(self.plugin.durations)), MIN_TASKS, MIN_SECONDS).items() if w in live}
        declared = ({w.id: w.speed for w in r.cluster.workers} if r.cluster is not None else
                    {w: s for w, s in cpu_shares(self.plugin.dask_scheduler).items() if w in live})
        speeds = list(speeds_on(declared, learned if len(learned) >= 2 else {}).values() if declared else
                      learned.values())
        return max(speeds) / min(speeds) if len(speeds) >= 2 and min(speeds) > 0 else 1.0

    def _outcomes(self, r) -> Outcomes:
        """What the earlier runs of ``r``'s kind of work measured (an empty record where none)."""
        return self.outcomes.get(r.adapt.signature) or Outcomes()

    def _leave_to_dask(self, r, keys, cluster, stimulus_id: str | None = None) -> None:
        r.adapt.decision = DASK
        if r.adapt.phase is Phase.UNDECIDED:  # left to Dask: decided once the workers look uneven
            r.adapt.move(Phase.LEARNING)
        r.adapt.decided_at = time.monotonic()
        r.adapt.speeds_used = {w.id: w.speed for w in cluster.workers} if cluster is not None else {}
        tasks = self.plugin.dask_scheduler.tasks
        held = bool(r.adapt.held)
        r.adapt.held = ()
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
            if src in load and best.address != src and \
                    (load[best.address] + 1) / rate[best.address] < load[src] / rate[src] and \
                    move_queued(self.plugin.dask_scheduler, ts, [best]):
                load[best.address] += 1
                load[src] -= 1

    def _hold(self, r, keys, addresses, stimulus_id: str | None = None) -> None:
        """Hold the unfinished ``keys`` of ``r`` to the workers at ``addresses`` (the
        :data:`~.predict.SUBSET` choice): Dask's own scheduling among them, stealing included.
        Tasks Dask queued (which it hands to any worker with a free thread) and tasks with no
        worker left go back to waiting, to be placed among those workers; tasks already sent to
        another worker and not started there are asked over to them (:func:`.reading.move_queued`)."""
        tasks = self.plugin.dask_scheduler.tasks
        r.adapt.held = tuple(sorted(addresses))
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
        """``(choice, predicted makespan or None)`` from earlier runs of the same work on this
        cluster (:meth:`record`), or None where they do not say yet. The first run of a kind of
        work learns (the guard's prediction, re-decisions within the run) and is not counted; the
        next one is the guard's, whose predictions are kept; the next ones try once each other of
        ``choices`` that the predictions do not rule out (predicted within ``1 / (1 - margin)`` of
        the best, a band widened to twice the largest error, measured / predicted - 1, of the
        choices measured so far), the shortest predicted first, each watched (:meth:`_give_up`):
        once it has run :data:`WATCH` longer than the median of the choice measured shortest so
        far, it is given up for that one. Then the one measured shortest (medians of the latest :data:`KEEP_OUTCOMES`)
        is taken, Dask's own unless another is at least :data:`MEASURED_MARGIN` shorter; a choice
        measured once within :data:`CLOSE` of the shortest, or within the noise of any choice's
        own runs (:func:`spread_of`) where that is wider, is measured once more first, watched, unless it was
        given up in a race (it fell behind: :func:`.runs.behind`, :func:`.runs.race_own_plan`). A run that
        begins left to Dask (a peer-to-peer shuffle in its graph, or workers not yet seen to
        differ) makes its first choice mid-run, by the same rules."""
        book = self.outcomes.get(r.adapt.signature)
        if book is None:
            return None
        if not book.any_measured(choices):
            r.adapt.move(Phase.FIXED)
            return None  # the guard decides, once
        runs, preds = book.measured, book.predicted
        tried = [c for c in choices if runs.get(c)]
        medians = {c: statistics.median(runs[c]) for c in tried}
        best = min(medians, key=medians.get)
        # the guard's predictions rule out a choice only as far as they proved right: the band
        # widens with the error of the predictions of the choices measured
        errors = [abs(medians[c] / preds[c] - 1.0) for c in tried if preds.get(c)]
        slack = max([1.0 / (1.0 - r.scheduler.adaptive.margin) - 1.0] + [2.0 * e for e in errors])
        band = min(preds.values()) * (1.0 + slack) if preds else float("inf")
        untried = sorted((c for c in choices if not runs.get(c) and (not preds or preds.get(c, float("inf")) <= band)),
                         key=lambda c: preds.get(c, float("inf")))
        close = max([CLOSE] + [spread_of(runs[c]) for c in tried if len(runs[c]) >= 2])
        # a close second measured once is measured again: one run is not its median
        again = [c for c in tried if c != best and len(runs[c]) == 1 and c not in book.lost and
                 medians[c] <= (1.0 + close) * medians[best]]
        if not untried and not again:
            r.adapt.move(Phase.FIXED)
            return book.shortest(choices)
        curves = book.curves.get(best) or []
        # a try, or a second run, is watched: given up at 1.25x the best so far, or once behind its curve
        r.adapt.try_choice((1.0 + WATCH) * medians[best], best,
                           [statistics.median(at) for at in zip(*curves)] if curves else [])
        # an untried one as the guard predicted it, if it did
        return (untried[0], preds.get(untried[0])) if untried else (again[0], medians[again[0]])

    def _give_up(self, r, stimulus_id: str, measured: float) -> None:
        """``r``, trying a choice for the first time, has run longer than its watch allows, or
        fallen behind the choice measured shortest so far (:func:`behind`): that choice is
        measured as ``measured`` seconds (it lost already) and the unfinished part goes to the
        choice measured shortest."""
        book = self.outcomes.get(r.adapt.signature)
        if book is not None and r.adapt.decision in book.measured:
            book.measured[r.adapt.decision].append(measured)
            book.lost.add(r.adapt.decision)  # lost a race: not measured again as a close second
        r.adapt.give_up()
        self.plugin.move(r, REPLANNING)
        self.plugin.move(r, FAILED if r.error else r.before, stimulus_id)

    def begin(self, r) -> None:
        """``r`` begins running: what kind of work it is (:func:`signature`), and since when.

        Parameters
        ----------
        r : GraphRun
        """
        r.started = time.monotonic()
        if self.adaptive(r):
            r.adapt.signature = signature(r.graph, self.plugin.dask_scheduler.tasks)

    def record(self, r) -> None:
        """``r`` finished: keep its makespan (since it began running) under its decision, for the
        next runs of the same work (:meth:`_measured_choice`); a first run of its kind is not
        kept (it learned as it went), nor one that changed its mind on the way.

        Parameters
        ----------
        r : GraphRun
        """
        if not self.adaptive(r) or r.adapt.signature is None or not r.adapt.decision:
            return
        book = self.outcomes.get(r.adapt.signature)
        if book is None:
            if len(self.outcomes) >= KEEP_OUTCOMES[1]:
                del self.outcomes[next(iter(self.outcomes))]
            self.outcomes[r.adapt.signature] = Outcomes()
            return
        if r.adapt.guarded <= 1:  # it chose once at most: its makespan is that choice's
            if r.adapt.predictions and not book.predicted:
                book.predicted = dict(r.adapt.predictions)  # the guard's, for the next runs to explore by
            book.keep(r.adapt.decision, time.monotonic() - r.started, progress_curve(r), KEEP_OUTCOMES[0])

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
        prefixes = {k: tasks[k].prefix.name for k in graph.ids if k in tasks}
        p = r.scheduler.adaptive
        whole = len(graph) == len(r.graph)
        # mid-run on workers of several hosts, the outputs the unfinished tasks read sit where they
        # ran (on both sides of a narrow link): Dask's own choices are predicted with them there; a
        # group behind a narrow link is weighed only so
        inputs = None if whole or self._one_host(r, cluster) else \
            placed_inputs(tasks, graph.ids, {w.address: w.id for w in cluster.workers}, self.plugin.sizes)
        links = self._links(r, cluster)
        candidates = subsets(links, p.spread, self._narrow_rate(r, links, graph) if whole or inputs is not None else 0.0)
        first = r.adapt.guarded == 0
        if r.adapt.held and not first:  # a hold in place is weighed as long as its workers are there
            kept = [w.id for w in cluster.workers if w.address in r.adapt.held]
            if kept and kept not in candidates:
                candidates.append(kept)
        # Dask's shuffle extension places a peer-to-peer shuffle's outputs itself: no plan for them
        p2p = has_p2p(tasks, graph.ids)
        choices = tuple(c for c in p.choices
                        if (c != SUBSET or candidates) and not (c == PLAN and p2p)) or (DASK,)
        # the run's first choice (at its start, or mid-run where it began left to Dask: a graph with a
        # peer-to-peer shuffle, or workers that looked alike) follows the measured runs of the same work
        r.adapt.guarded += 1
        measured = self._measured_choice(r, choices) if first else None
        fallback = r.adapt.take_fallback()
        if fallback is not None:  # a watched try given up: the choice measured shortest
            measured = (fallback if fallback in choices else DASK), None
        state = None
        if measured is None or (measured[0] == SUBSET and len(candidates) > 1):
            state = dask_state(self.plugin.dask_scheduler, sorted(set(prefixes.values())))
        r.adapt.predictions = {}
        if measured is None:
            # until a run of this work has been measured, nothing can watch a plan (a try is given up by the measured
            # runs it falls behind): the prediction picks among Dask's own choices, which keep its stealing where the
            # costs learned so far are wrong; the plan is predicted for the later runs to try it, watched (not in the
            # first run of the work: its predictions are not kept, and HEFT and its simulation take 0.1 s on 674 tasks)
            unwatched = () if self._outcomes(r).any_measured() else (PLAN,)
            if unwatched and r.adapt.signature not in self.outcomes and set(choices) - {PLAN}:
                choices = tuple(c for c in choices if c != PLAN)
            # mid-run a hold in place stays unless another choice is predicted ``margin`` shorter: undone, its queue
            # and data move again (first runs flipped between a hold and Dask's own up to 3 times)
            incumbent = SUBSET if r.adapt.decision == SUBSET and not first else DASK
            plan = (plan() if callable(plan) else plan) if PLAN in choices else None
            decision, predicted, _, held = choose(graph, cluster, plan, state, p, choices=choices, candidates=candidates,
                                                  predictions=r.adapt.predictions if first else None,
                                                  unwatched=unwatched, incumbent=incumbent, inputs=inputs,
                                                  scheduler=r.scheduler)
        else:
            decision, predicted = measured
            held = candidates[0] if decision == SUBSET else None
            if decision == SUBSET and len(candidates) > 1:  # the subset predicted best
                held = choose(graph, cluster, None, state, dataclasses.replace(p, margin=0.0), choices=(SUBSET,),
                              candidates=candidates, inputs=inputs, scheduler=r.scheduler)[3] or held
            trying = r.adapt.phase is Phase.TRYING
            if trying and decision == SUBSET and r.adapt.fallback != SUBSET:  # a try of a hold races the whole cluster
                r.adapt.pace = max(1.0, cluster.total_speed / max(1e-9, cluster.subset(held).total_speed))
            elif trying and decision == PLAN:  # a try of the plan races its own timeline
                plan = plan() if callable(plan) else plan
                race_own_plan(r, plan, time.monotonic() - r.started, r.adapt.watch / (1.0 + WATCH))
        r.adapt.decided_at = time.monotonic()
        r.adapt.decide_secs = time.perf_counter() - t0
        cost, sums = graph.arrays.cost, {}
        for i, k in enumerate(graph.ids):  # a prefix's mean: its tasks' costs differ with their inputs
            if k in prefixes:
                cell = sums.setdefault(prefixes[k], [0.0, 0])
                cell[0] += float(cost[i]) - shift
                cell[1] += 1
        r.adapt.estimates = {name: total / n for name, (total, n) in sums.items()}
        if decision == DASK:
            self._leave_to_dask(r, graph.ids, cluster)
        elif decision == SUBSET:
            self._hold(r, graph.ids, [cluster.worker(w).address for w in held])
        elif r.adapt.held:  # the plan's restrictions replace the hold's
            self._leave_to_dask(r, graph.ids, cluster)
        r.adapt.decision = decision
        r.adapt.speeds_used = {w.id: w.speed for w in cluster.workers}
        if r.adapt.phase is Phase.UNDECIDED:  # decided by its predictions: decided again as it learns
            r.adapt.move(Phase.LEARNING)
        return predicted

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
        p = r.scheduler.adaptive
        if r.adapt.phase is Phase.TRYING:
            elapsed = time.monotonic() - r.started
            lag = behind(r, elapsed)
            if elapsed > r.adapt.watch or lag > 1.0 + WATCH:  # measured as long as it would run at this pace
                self._give_up(r, stimulus_id, max(elapsed, lag * r.adapt.watch / (1.0 + WATCH)))
                return
        if r.adapt.phase not in (Phase.UNDECIDED, Phase.LEARNING) or r.adapt.redecisions >= p.replans or \
                time.monotonic() - r.adapt.decided_at < max(p.interval, 20 * r.adapt.decide_secs):
            return  # at most a twentieth of the scheduler's time goes to deciding
        fresh = None
        if r.adapt.decision == DASK:  # left to Dask: worth a new decision once the workers look uneven
            if self._spread(r, None) <= p.spread:  # or a link looks narrow for the graph as now estimated
                choices = p.choices
                if SUBSET not in choices and (PLAN not in choices or
                                              (DASK in choices and not self._outcomes(r).any_measured())):
                    # until a run of this work was measured a plan is not taken where Dask's own can
                    # be: without a hold, a narrow link would change nothing
                    r.adapt.decided_at = time.monotonic()
                    return
                t0 = time.perf_counter()
                links = None if self._one_host(r) else self.plugin.live_cluster(r)
                links = self._links(r, links) if links is not None else None  # (on one host: none)
                if links is not None and (links.bandwidths or links.racks) and len(r.graph) <= p.limit:
                    fresh = self._estimate_unfinished(r)
                if fresh is None or not narrow_pairs(links, self._narrow_rate(r, links, fresh)):
                    r.adapt.decided_at = time.monotonic()
                    r.adapt.decide_secs = max(r.adapt.decide_secs, time.perf_counter() - t0)  # the next look waits 20x this
                    return
        else:
            used = r.adapt.estimates.get(prefix)
            speeds = self.plugin.learned_speeds()
            measured = secs * speeds.get(worker, 1.0)
            off = used is None or abs(measured - used) > p.drift * max(used, 1e-3)
            off = off or drifted(r.adapt.speeds_used, speeds, p.drift)
            if not off:
                return
        fresh = fresh or self._estimate_unfinished(r)
        if fresh is None:
            return
        arr = fresh.arrays
        ids = arr.ids
        r.graph = r.graph.with_costs(cost=dict(zip(ids, arr.cost.tolist())),
                                     sizes={(ids[a], ids[b]): v for a, b, v in zip(arr.src.tolist(), arr.dst.tolist(),
                                                                                 arr.size.tolist())})
        r.adapt.redecisions += 1
        self.plugin.move(r, REPLANNING)
        self.plugin.move(r, FAILED if r.error else r.before, stimulus_id)


def _with_queued(keys, r, tasks) -> list:
    """``keys`` (a run's unfinished keys) and those of ``r``'s keys Dask sent to a worker that has
    not finished them: under a plan's restrictions every ready task is sent at once, and a new
    decision must reach those not started yet."""
    seen = set(keys)
    return list(keys) + [k for k in r.graph.ids if k not in seen and k in tasks and tasks[k].state == "processing"]



