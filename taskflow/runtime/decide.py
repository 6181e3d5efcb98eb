"""The ``adaptive`` scheduler's decision core (:class:`AdaptiveCore`): what runs a graph (its plan,
Dask's own scheduling, or Dask's own held to a subset of the workers), from what the run's driver
tells it (:class:`GraphFacts`) and what the earlier runs of the same work measured. No clock, no
Dask: the Dask plugin (:class:`.scheduler.adaptation.Adaptation`) reads the facts from Dask's scheduler and
carries the decision out on it; the simulator (:func:`simulate_adaptive`) takes the facts from the
graph and the cluster and carries the decision out in simulation. The same object, fed the same
facts, decides the same in both.

A run's own state is its :class:`~.adaptive_state.AdaptiveState` (``r.adapt`` of a
:class:`RunRecord`, or of the plugin's :class:`~.scheduler.runs.GraphRun`); the core's is :attr:`AdaptiveCore.outcomes` (what the
runs of each kind of work measured, by choice) and :attr:`AdaptiveCore.narrow_seen` (the links once
found narrow for a kind of work).
"""

from __future__ import annotations

import dataclasses
import statistics

from .predict import CHOICES, DASK, PLAN, SUBSET, across_hosts, choose, narrow_pairs, narrow_rate, subsets
from .adaptive_events import Decision, GraphFacts, RunRecord, TaskDone
from .adaptive_state import Phase
from .outcomes import Outcomes, behind, drifted, progress_curve, race_own_plan, spread_of

__all__ = ["AdaptiveCore", "GraphFacts", "TaskDone", "Decision", "RunRecord", "KEEP_OUTCOMES", "CLOSE", "WATCH"]

#: measured runs kept per kind of work and choice (the latest), and kinds of work kept
KEEP_OUTCOMES = (5, 256)
#: a choice measured once within this fraction of the shortest is measured again (runs of one work differ by 13%)
CLOSE = 0.15
#: how much longer (a fraction) than the shortest measured so far a run trying a choice may run before it is given up
WATCH = 0.25


class AdaptiveCore:
    """The adaptive scheduler's decisions (see the module docstring). A driver calls
    :meth:`worth_planning` and :meth:`decide` when a run's graph arrives or is decided again,
    :meth:`record` when it finishes and :meth:`give_up` when a try falls behind."""

    def __init__(self):
        self.outcomes: dict = {}  # kind of work (a run's signature) -> Outcomes: what its runs measured
        self.narrow_seen: dict = {}  # kind of work -> the rate below which a link was narrow for it

    def book(self, r) -> Outcomes:
        """What the earlier runs of ``r``'s kind of work measured (an empty record where none).

        Parameters
        ----------
        r : RunRecord
        """
        return self.outcomes.get(r.adapt.signature) or Outcomes()

    def links(self, r, cluster):
        """``cluster`` as a holding decision weighs its links: rates learned between workers of
        one host left out (:func:`.predict.across_hosts`), the run's declared ones kept.

        Parameters
        ----------
        r : RunRecord
        cluster : Cluster
        """
        declared = r.cluster.bandwidths if r.cluster is not None else {}
        return across_hosts(cluster, {a: set(row) for a, row in declared.items()})

    def narrow_rate(self, r, links, graph) -> float:
        """The rate below which a link of ``links`` is narrow for ``graph`` of ``r``
        (:func:`.predict.narrow_rate`) or, where higher, the rate at which one was narrow for an
        earlier graph of the same work: once narrow for a kind of work, a link stays narrow for it
        (its tasks' costs, learned anew in each run, vary with the machine's load; a decision
        should not flip on that).

        Parameters
        ----------
        r : RunRecord
        links : Cluster
        graph : TaskGraph
        """
        seen = self.narrow_seen.get(r.adapt.signature, 0.0)
        rate = narrow_rate(graph, r.scheduler.adaptive.ccr)
        if rate > seen and r.adapt.signature is not None and narrow_pairs(links, rate):
            if r.adapt.signature not in self.narrow_seen and len(self.narrow_seen) >= KEEP_OUTCOMES[1]:
                del self.narrow_seen[next(iter(self.narrow_seen))]
            self.narrow_seen[r.adapt.signature] = rate
        return max(rate, seen)

    def narrow(self, r, cluster, one_host: bool, keys=None) -> bool:
        """Whether a link between two of ``cluster``'s workers is narrow for ``r``'s graph, or for
        its unfinished ``keys`` where some have finished.

        Parameters
        ----------
        r : RunRecord
        cluster : Cluster or None
        one_host : bool
            Every worker on one host, nothing declared: no link is narrow.
        keys : list, optional
        """
        if cluster is None or one_host:
            return False
        graph = r.graph.subgraph(keys) if keys is not None and 0 < len(keys) < len(r.graph) else r.graph
        links = self.links(r, cluster)
        return bool(narrow_pairs(links, self.narrow_rate(r, links, graph)))

    def worth_planning(self, r, keys, cluster, *, spread: float, p2p: bool, one_host: bool) -> bool | None:
        """Whether deciding between choices can pay for the unfinished ``keys`` of ``r`` on
        ``cluster`` (see :meth:`.scheduler.adaptation.Adaptation.worth_planning`): a declared network, a
        ``spread`` of worker speeds above the options', or a narrow link; a graph with a
        peer-to-peer shuffle only before it starts, and only by a hold. False: the driver leaves
        the run to Dask (:data:`DASK`), and a whole run's prediction is the earlier runs' (set on
        ``r.predicted``); None: it leaves the run as it is (held while its shuffle runs).

        Parameters
        ----------
        r : RunRecord
        keys : list
        cluster : Cluster
        spread : float
            The fastest worker's speed over the slowest's, as the driver knows them.
        p2p : bool
        one_host : bool
        """
        started = len(keys) < len(r.graph)
        if p2p and started and r.adapt.held:
            return None  # held while its shuffle runs: the shuffle's outputs are pinned within the hold
        declared = r.cluster
        shaped = declared is not None and (bool(declared.bandwidths) or declared.racks is not None)
        opts = r.scheduler.adaptive
        worth = (shaped or spread > opts.spread or self.narrow(r, cluster, one_host, keys)) and not (
            p2p and (started or SUBSET not in opts.choices)
        )
        if not worth:
            measured = self.book(r).shortest()
            if r.predicted is None and len(keys) == len(r.graph) and measured is not None:
                # as long as its earlier runs took by what they were left to or chose
                r.predicted = measured[1]
        return worth

    def measured_choice(self, r, choices=CHOICES):
        """``(choice, predicted makespan or None)`` from earlier runs of the same work
        (:meth:`record`), or None where they do not say yet. The first run of a kind of work
        learns (the guard's prediction, re-decisions within the run) and is not counted; the next
        one is the guard's, whose predictions are kept; the next ones try once each other of
        ``choices`` that the predictions do not rule out (predicted within ``1 / (1 - margin)`` of
        the best, a band widened to twice the largest error, measured / predicted - 1, of the
        choices measured so far), the shortest predicted first, each watched (:meth:`give_up`):
        once it has run :data:`WATCH` longer than the median of the choice measured shortest so
        far, it is given up for that one. Then the one measured shortest (medians of the latest
        :data:`KEEP_OUTCOMES`) is taken, Dask's own unless another is at least
        :data:`~.outcomes.MEASURED_MARGIN` shorter; a choice measured once within :data:`CLOSE`
        of the shortest, or within the noise of any choice's own runs (:func:`.outcomes.spread_of`)
        where that is wider, is measured once more first, watched, unless it was given up in a
        race (it fell behind: :func:`.runs.behind`, :func:`.runs.race_own_plan`). A run that
        begins left to Dask (a peer-to-peer shuffle in its graph, or workers not yet seen to
        differ) makes its first choice mid-run, by the same rules.

        Parameters
        ----------
        r : RunRecord
        choices : tuple of str
        """
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
        untried = sorted(
            (c for c in choices if not runs.get(c) and (not preds or preds.get(c, float("inf")) <= band)),
            key=lambda c: preds.get(c, float("inf")),
        )
        close = max([CLOSE] + [spread_of(runs[c]) for c in tried if len(runs[c]) >= 2])
        # a close second measured once is measured again: one run is not its median
        again = [
            c
            for c in tried
            if c != best and len(runs[c]) == 1 and c not in book.lost and medians[c] <= (1.0 + close) * medians[best]
        ]
        if not untried and not again:
            r.adapt.move(Phase.FIXED)
            return book.shortest(choices)
        curves = book.curves.get(best) or []
        # a try, or a second run, is watched: given up at 1.25x the best so far, or once behind its curve
        r.adapt.try_choice(
            (1.0 + WATCH) * medians[best], best, [statistics.median(at) for at in zip(*curves)] if curves else []
        )
        # an untried one as the guard predicted it, if it did
        return (untried[0], preds.get(untried[0])) if untried else (again[0], medians[again[0]])

    def decide(self, r, graph, cluster, plan, facts: GraphFacts, shift: float = 0.0) -> Decision:
        """Decide what runs ``graph`` (the unfinished part of ``r``) on ``cluster``: the measured
        runs of the same work (:meth:`measured_choice`), else the guard's prediction
        (:func:`.predict.choose`) among its plan, Dask's own scheduling and Dask's own held to a
        subset of the workers (the fastest, or a group joined by links not narrow for it), updating ``r.adapt`` (its phase, decision,
        estimates, the speeds and predictions it used). The driver carries the decision out and
        stamps when it was taken.

        Parameters
        ----------
        r : RunRecord
        graph : TaskGraph
        cluster : Cluster
        plan : Schedule, or a callable that makes it
            Made only where needed.
        facts : GraphFacts
        shift : float
            Seconds each cost of ``graph`` carries beyond its task's own (Dask's cost per task).

        Returns
        -------
        Decision
        """
        p = r.scheduler.adaptive
        whole = len(graph) == len(r.graph)
        # mid-run on workers of several hosts, the outputs the unfinished tasks read sit where they
        # ran (on both sides of a narrow link): a group behind a narrow link is weighed only so
        inputs = None if whole or facts.one_host else facts.inputs
        links = self.links(r, cluster)
        candidates = subsets(links, p.spread, self.narrow_rate(r, links, graph) if whole or inputs is not None else 0.0)
        first = r.adapt.guarded == 0
        if r.adapt.held and not first:  # a hold in place is weighed as long as its workers are there
            kept = [w.id for w in cluster.workers if w.address in r.adapt.held]
            if kept and kept not in candidates:
                candidates.append(kept)
        # Dask's shuffle extension places a peer-to-peer shuffle's outputs itself: no plan for them
        choices = tuple(c for c in p.choices if (c != SUBSET or candidates) and not (c == PLAN and facts.p2p)) or (
            DASK,
        )
        # the run's first choice follows the measured runs of the same work
        predictions = r.adapt.guarding()
        measured = self.measured_choice(r, choices) if first else None
        fallback = r.adapt.take_fallback()
        if fallback is not None:  # a watched try given up: the choice measured shortest
            measured = (fallback if fallback in choices else DASK), None
        state = None
        if measured is None or (measured[0] == SUBSET and len(candidates) > 1):
            state = facts.state() if facts.state is not None else None
        if measured is None:
            # until a run of this work has been measured, nothing can watch a plan: the prediction
            # picks among Dask's own choices, and the plan is predicted for the later runs to try it
            unwatched = () if self.book(r).any_measured() else (PLAN,)
            if unwatched and r.adapt.signature not in self.outcomes and set(choices) - {PLAN}:
                choices = tuple(c for c in choices if c != PLAN)
            # mid-run a hold in place stays unless another choice is predicted ``margin`` shorter
            incumbent = SUBSET if r.adapt.decision == SUBSET and not first else DASK
            plan = (plan() if callable(plan) else plan) if PLAN in choices else None
            decision, predicted, _, held = choose(
                graph,
                cluster,
                plan,
                state,
                p,
                choices=choices,
                candidates=candidates,
                predictions=predictions if first else None,
                unwatched=unwatched,
                incumbent=incumbent,
                inputs=inputs,
                scheduler=r.scheduler,
            )
        else:
            decision, predicted = measured
            held = candidates[0] if decision == SUBSET else None
            if decision == SUBSET and len(candidates) > 1:  # the subset predicted best
                held = (
                    choose(
                        graph,
                        cluster,
                        None,
                        state,
                        dataclasses.replace(p, margin=0.0),
                        choices=(SUBSET,),
                        candidates=candidates,
                        inputs=inputs,
                        scheduler=r.scheduler,
                    )[3]
                    or held
                )
            trying = r.adapt.phase is Phase.TRYING
            if trying and decision == SUBSET and r.adapt.fallback != SUBSET:  # a try of a hold races the whole cluster
                r.adapt.race(max(1.0, cluster.total_speed / max(1e-9, cluster.subset(held).total_speed)))
            elif trying and decision == PLAN:  # a try of the plan races its own timeline
                plan = plan() if callable(plan) else plan
                race_own_plan(r, plan, facts.elapsed, r.adapt.watch / (1.0 + WATCH))
        cost, sums = graph.arrays.cost, {}
        for i, k in enumerate(graph.ids):  # a prefix's mean: its tasks' costs differ with their inputs
            if k in facts.prefixes:
                cell = sums.setdefault(facts.prefixes[k], [0.0, 0])
                cell[0] += float(cost[i]) - shift
                cell[1] += 1
        r.adapt.used({w.id: w.speed for w in cluster.workers}, {name: total / n for name, (total, n) in sums.items()})
        return Decision(decision, predicted, held if decision == SUBSET else None, plan if decision == PLAN else None)

    def decided(self, r, decision: str) -> None:
        """``decision`` now runs ``r``: its phase moves on from undecided (decided again as it
        learns).

        Parameters
        ----------
        r : RunRecord
        decision : str
        """
        r.adapt.decide(decision)

    def record(self, r, makespan: float) -> None:
        """``r`` finished in ``makespan`` seconds since it began: kept under its decision for the
        next runs of the same work (:meth:`measured_choice`); a first run of its kind is not kept
        (it learned as it went), nor one that changed its mind on the way.

        Parameters
        ----------
        r : RunRecord
        makespan : float
        """
        if r.adapt.signature is None or not r.adapt.decision:
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
            book.keep(r.adapt.decision, makespan, progress_curve(r), KEEP_OUTCOMES[0])

    def give_up(self, r, measured: float) -> None:
        """``r``, trying a choice, fell behind: that choice is measured as ``measured`` seconds (it
        lost already), and the next decision takes the fallback.

        Parameters
        ----------
        r : RunRecord
        measured : float
        """
        book = self.outcomes.get(r.adapt.signature)
        if book is not None and r.adapt.decision in book.measured:
            book.measured[r.adapt.decision].append(measured)
            book.lost.add(r.adapt.decision)  # lost a race: not measured again as a close second
        r.adapt.give_up()

    def task_finished(self, r, done: TaskDone) -> tuple:
        """A task of ``r`` finished: whether to decide again. A try (phase ``trying``) that has run
        longer than its watch, or fallen behind the choice it races (:func:`.outcomes.behind`), is
        given up: ``("give up", seconds it is measured as)`` (:meth:`give_up` records it). A run
        decided by its guard's predictions is decided again when the task's duration at speed 1,
        or the worker speeds learned since, is ``drift`` off what its last decision used; one left
        to Dask, once the workers look uneven or, where a plan or a hold could then be taken, a
        link looks narrow for its unfinished tasks as now estimated: ``("decide again", None)``,
        ``r.graph`` carrying the costs as now estimated. At most every ``interval`` seconds and
        20 times the last decision's time, and ``replans`` times per run; a run whose decision came
        from measured runs is not decided again. ``("looked", None)``: the links were weighed and
        nothing changed (the driver counts what the look cost); ``(None, None)``: nothing to do.

        Parameters
        ----------
        r : RunRecord
        done : TaskDone

        Returns
        -------
        tuple
        """
        p = r.scheduler.adaptive
        if r.adapt.phase is Phase.TRYING:
            lag = behind(r, done.elapsed)
            if done.elapsed > r.adapt.watch or lag > 1.0 + WATCH:  # measured as long as it would run at this pace
                return "give up", max(done.elapsed, lag * r.adapt.watch / (1.0 + WATCH))
        if (
            r.adapt.phase not in (Phase.UNDECIDED, Phase.LEARNING)
            or r.adapt.redecisions >= p.replans
            or done.now - r.adapt.decided_at < max(p.interval, 20 * r.adapt.decide_secs)
        ):
            return None, None  # at most a twentieth of the scheduler's time goes to deciding
        fresh = None
        if r.adapt.decision == DASK:  # left to Dask: worth a new decision once the workers look uneven
            if done.spread() <= p.spread:  # or a link looks narrow for the graph as now estimated
                choices = p.choices
                if SUBSET not in choices and (
                    PLAN not in choices or (DASK in choices and not self.book(r).any_measured())
                ):
                    # until a run of this work was measured a plan is not taken where Dask's own can
                    # be: without a hold, a narrow link would change nothing
                    r.adapt.stamped(done.now)
                    return None, None
                links = done.links()
                if links is not None and (links.bandwidths or links.racks) and len(r.graph) <= p.limit:
                    fresh = done.estimate()
                if fresh is None or not narrow_pairs(links, self.narrow_rate(r, links, fresh)):
                    r.adapt.stamped(done.now)
                    return "looked", None
        else:
            used = r.adapt.estimates.get(done.prefix)
            speeds = done.speeds()
            measured = done.secs * speeds.get(done.worker, 1.0)
            off = used is None or abs(measured - used) > p.drift * max(used, 1e-3)
            if not (off or drifted(r.adapt.speeds_used, speeds, p.drift)):
                return None, None
        fresh = fresh or done.estimate()
        if fresh is None:
            return None, None
        arr = fresh.arrays
        ids = arr.ids
        r.graph = r.graph.with_costs(
            cost=dict(zip(ids, arr.cost.tolist())),
            sizes={(ids[a], ids[b]): v for a, b, v in zip(arr.src.tolist(), arr.dst.tolist(), arr.size.tolist())},
        )
        r.adapt.redecided()
        return "decide again", None
