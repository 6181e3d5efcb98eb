"""Placement inside Dask's scheduler: a :class:`~distributed.diagnostics.plugin.SchedulerPlugin`
that places tasks with our static scheduler where Dask makes its decisions.

A *run* is a set of Dask keys with a cost model (a :class:`~taskflow.TaskGraph` whose task ids are
the keys) and a scheduler. It comes from two places:

* :func:`taskflow.run` and :func:`taskflow.compute` register their graph with its costs before
  submitting it (``taskflow_register``); the plugin plans it on the live workers at once and
  answers with the plan, which the client uses for its prediction;
* :func:`taskflow.use` names a scheduler for a client: every graph that client submits afterwards
  (``x.compute()``, ``client.compute``, ``persist``, ``client.get``) becomes a run, its costs
  estimated from what Dask has measured (per-prefix duration averages, ``nbytes`` of data in
  memory; Dask's own defaults where nothing is known yet), and worker speeds learned from the
  compute times the plugin saw (per task prefix and worker: a prefix run on several says how much
  faster one is than another) and Dask's cost per task from their gaps (:mod:`.overhead`).

What the plugin does, each in Dask's scheduler's own event:

* ``update_graph`` (a graph arrives): its tasks get worker restrictions (strict: no other worker,
  nothing stolen) and priorities (planned start order) before Dask transitions them. A plan made
  at registration is checked against the live workers first and made afresh if one of its
  workers has gone in between.
* ``remove_worker`` (a worker is lost): Dask has just sent the lost worker's tasks back; every
  run with unfinished work planned there is re-planned on the survivors and its stranded tasks
  (``no-worker``) are released to their new workers, in the same event, so no task can wait on
  a dead worker whatever the timing. Losing every worker starts a grace period
  (``grace`` seconds) in which a joining worker takes over; after it, clients are told the run
  failed.
* ``add_worker`` (a worker joins): runs with tasks left without a live worker are re-planned; the
  next re-plan of any run uses the new worker.
* ``transition`` to memory (a task finished): an output of at least :data:`PREFETCH_BYTES` is sent
  at once (Dask's ``acquire-replicas``) to each other worker the plan puts one of its consumers
  on while that consumer still waits for other inputs. Dask alone moves an input only when its
  consumer is ready and placed; the plan knows the consumer's worker in advance, so the transfer
  overlaps the computing of the other inputs, as the plan's cost model assumes (off with the
  environment variable ``TASKFLOW_PREFETCH=0`` where the plugin is made).

Results are Dask's own: the plugin sets restrictions and priorities, and moves data early. A plan's
unfinished part is re-planned as the simulator does after a failure (the same scheduler, the
unfinished tasks, the surviving workers). The ``adaptive`` scheduler adds a guard and re-decisions
as it learns (:mod:`.adaptation`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

from distributed.diagnostics.plugin import SchedulerPlugin

from ...cluster import Cluster, Worker
from ...graph import TaskGraph
from ...scheduling import DASK, SUBSET, get_scheduler, require_runnable
from .adaptation import Adaptation
from .handlers import ClientMessages
from ..adaptive_state import LISTENING
from ..measured import last_compute, relative_speeds, speeds_on
from .patching import keep_planned_replicas, move_queued, prefetch, restrict, send_planned_in_order
from .reading import blamed_key, compared, cpu_shares, estimated_graph, observe, received_rates, warm
from .overhead import BYTE_SECONDS, DispatchGaps
from ..messages import PLUGIN_NAME, plan_priorities
from .runs import (
    FAILED,
    FINISHED,
    FINISHED_KEY,
    LIVE,
    MOVABLE,
    PLANNED,
    REGISTERED,
    REPLANNING,
    RUNNING,
    TRANSITIONS,
    GraphRun,
    Unplannable,
    plan_maker,
)

__all__ = ["TaskflowPlugin", "PLUGIN_NAME", "DEFAULT_GRACE", "dask_setup", "PREFETCH_BYTES", "KEEP_FINISHED"]

logger = logging.getLogger("taskflow.runtime")

#: the name the plugin is registered under on the scheduler
#: seconds a run waits for a worker to join after losing every worker, before it fails
DEFAULT_GRACE = 30.0

#: finished runs of ``taskflow.use`` kept (inert) for a look at their plans; older ones are dropped
KEEP_FINISHED = 32

#: Outputs at least this big are sent ahead to the workers of their planned consumers (smaller
#: ones cost a message each for no gain: their transfer time is mostly latency).
PREFETCH_BYTES = 64 * 1024


class TaskflowPlugin(ClientMessages, SchedulerPlugin):
    """Places tasks with a static scheduler inside Dask's scheduler; see the module docstring.

    Parameters
    ----------
    scheduler : str, optional
        A scheduler for every client's graphs (as if each had called :func:`taskflow.use`); what an
        operator preloads with ``dask scheduler --preload taskflow.runtime.scheduler.plugin``.
    grace : float
        Seconds to wait for a worker after losing every worker before runs fail.
    validate : bool, optional
        Check every move of a run against :data:`~taskflow.runtime.scheduler.runs.TRANSITIONS` and its
        state before and after (default: the environment variable ``TASKFLOW_VALIDATE=1``).
    """

    name = PLUGIN_NAME
    #: registering it again (each run does) keeps the one installed, with its state
    idempotent = True

    def __init__(self, scheduler: str | None = None, grace: float = DEFAULT_GRACE, validate: bool | None = None):
        self.validate = os.environ.get("TASKFLOW_VALIDATE") == "1" if validate is None else bool(validate)
        #: (from, to) -> the method that moves a run between the two states
        self._transitions = {
            (REGISTERED, PLANNED): self._transition_registered_planned,
            (REGISTERED, RUNNING): self._transition_registered_running,
            (PLANNED, RUNNING): self._transition_planned_running,
            (PLANNED, REPLANNING): self._transition_live_replanning,
            (RUNNING, REPLANNING): self._transition_live_replanning,
            (REPLANNING, PLANNED): self._transition_replanning_live,
            (REPLANNING, RUNNING): self._transition_replanning_live,
            (RUNNING, FINISHED): self._transition_running_finished,
            **{(a, FAILED): self._transition_to_failed for a in (REGISTERED, PLANNED, RUNNING, REPLANNING)},
        }
        assert set(self._transitions) == TRANSITIONS
        self.default_scheduler = scheduler
        self.grace = float(grace)
        self.runs: dict = {}
        self.key_run: dict = {}
        self.schedulers: dict = {}  # client id -> (scheduler name, options)
        self.lost_all_since: float | None = None
        self.dask_scheduler, self._count = None, 0
        self.durations: dict = {}  # task prefix -> {worker name: [compute seconds, tasks, longest]}
        self.sizes: dict = {}  # task prefix -> [output bytes, tasks]
        self.inputs: dict = {}  # task prefix -> sums of (seconds, input megabytes), for input_scaling
        self.adaptation = Adaptation(self)  # the adaptive scheduler's part, reaching this through PluginView
        self.gaps = DispatchGaps()  # between one worker thread's tasks: Dask's cost per task
        #: send each planned output to the workers of its consumers as soon as it exists
        self.prefetch = os.environ.get("TASKFLOW_PREFETCH", "1") != "0"

    # ------------------------------------------------------------------ wiring
    async def start(self, scheduler) -> None:
        """Install the handlers clients call (``taskflow_register``, ``taskflow_status``, ...)."""
        self.dask_scheduler = scheduler
        scheduler.handlers.update(
            {
                "taskflow_register": self.handle_register,
                "taskflow_status": self.handle_status,
                "taskflow_use": self.handle_use,
                "taskflow_forget": self.handle_forget,
                "taskflow_dask_state": self.handle_dask_state,  # and whom Dask blames for a key's error
                "taskflow_blamed": lambda key: {"key": blamed_key(key, self.dask_scheduler)},
            }
        )
        if self.default_scheduler:
            # an unknown name (or one Dask cannot carry out) fails the scheduler's start, loudly
            require_runnable(get_scheduler(self.default_scheduler), "dask")
        keep_planned_replicas(scheduler, self)
        send_planned_in_order(scheduler, self)

    # ------------------------------------------------------------------ scheduler events
    def transition(self, key, start, finish, *args, stimulus_id=None, **kwargs) -> None:
        """A task finished: add its compute time to its prefix's durations on its worker, and its
        output's bytes to its prefix's sizes."""
        rid = self.key_run.get(key)
        run = self.runs.get(rid) if rid is not None else None
        if (
            run is not None
            and run.state == RUNNING
            and (finish in FINISHED_KEY or key in run.done)
            and run.key_moved(key, finish)
        ):
            self.move(run, FINISHED)  # its last key: no worker's loss or arrival concerns it any more
        if start != "processing" or finish != "memory":
            return
        if run is not None and run.plan and self.prefetch:
            prefetch(
                self.dask_scheduler,
                key,
                self._planned_address,
                PREFETCH_BYTES,
                stimulus_id or f"taskflow-prefetch-{time.time()}",
            )
        span = last_compute(kwargs.get("startstops"))
        secs = span[1] - span[0] if span else 0.0
        ws = self.dask_scheduler.workers.get(kwargs.get("worker"))
        ts = self.dask_scheduler.tasks.get(key)
        if secs <= 0 or ws is None or ts is None:
            return
        self.gaps.add(str(ws.name), kwargs.get("thread"), kwargs.get("startstops"))
        if run is not None and not run.learned:
            return  # a taskflow.run graph: its keys are unique per run, its costs declared
        observe(self.durations, self.sizes, self.inputs, ts, str(ws.name), secs)
        if run is not None and run.state == RUNNING and run.adapt.phase in LISTENING and self.adaptation.adaptive(run):
            self.adaptation.learn_within(
                run, ts.prefix.name, secs, str(ws.name), stimulus_id or f"taskflow-adapt-{time.time()}"
            )

    def _planned_address(self, key) -> str | None:
        """The address of the worker the latest plan of ``key``'s run puts it on, if any."""
        r = self.runs.get(self.key_run.get(key))
        return None if r is None else r.addr.get(r.plan.get(key))

    def planned_holders(self, ts) -> set:
        """Addresses of the workers the plans put a still-waiting consumer of ``ts`` on.

        Parameters
        ----------
        ts : distributed.scheduler.TaskState
        """
        return {a for a in (self._planned_address(dts.key) for dts in ts.waiters or ()) if a is not None}

    def learned_speeds(self) -> dict:
        """Worker name -> speed relative to the others, from the compute times of task prefixes
        that ran on several workers (weighted by their seconds)."""
        return relative_speeds(warm(compared(self.durations)))

    def update_graph(
        self, scheduler, *, client: str, keys, tasks, annotations, priority, stimulus_id: str, **kwargs
    ) -> None:
        """A graph arrived: place its tasks before Dask transitions them."""
        spec = self.schedulers.get(client) or ((self.default_scheduler, {}) if self.default_scheduler else None)
        # keys sent again that a run made for ``taskflow.use`` still holds: with the scheduler since
        # switched off or changed, that run is over (its restrictions go) and the keys are new
        wanted = get_scheduler(spec[0], **spec[1]).name if spec else None
        for rid in {self.key_run.get(k) for k in tasks} - {None}:
            r = self.runs.get(rid)
            if r is not None and r.owned and r.client == client and r.scheduler.name != wanted:
                self.handle_forget(rid)
        touched = set()
        unowned = []
        key_run = self.key_run
        for k in tasks:
            rid = key_run.get(k)
            if rid is not None:
                touched.add(rid)
            else:
                unowned.append(k)
        for rid in touched:
            r = self.runs[rid]
            if r.state in (REGISTERED, PLANNED):
                self.move(r, RUNNING, stimulus_id)
            elif r.state == RUNNING:  # keys sent again (a collection computed again): still placed
                if self._stale(r):
                    self._plan(r)
                self._apply(r, stimulus_id)
        if spec and unowned:
            tss = [scheduler.tasks[k] for k in unowned if k in scheduler.tasks]
            tss = [ts for ts in tss if ts.state not in FINISHED_KEY and ts.run_spec is not None]
            if tss:
                self._count += 1
                r = GraphRun(
                    f"{client}-{self._count}",
                    self.graph_of(tss),
                    get_scheduler(spec[0], **spec[1]),
                    None,
                    client,
                    owned=True,
                )
                self.runs[r.id] = r
                for ts in tss:
                    key_run[ts.key] = r.id
                self.move(r, RUNNING, stimulus_id)

    def remove_worker(self, scheduler, worker: str, *, stimulus_id: str, **kwargs) -> None:
        """A worker is lost: re-plan every run with unfinished work planned there, at once."""
        live = [r for r in self.runs.values() if r.state in LIVE]
        if not scheduler.workers:
            self.lost_all_since = time.time()
            # (not at a cluster's close: the clients went first)
            if any(self.unfinished(r) and r.client in scheduler.clients for r in live):
                logger.warning("taskflow: every worker was lost; waiting %g s for one to join", self.grace)
            return
        for r in live:
            if r.adapt.held:
                self.adaptation.lost_worker(r, worker, stimulus_id)
            elif any(r.addr.get(w) == worker for w in set(r.plan.values())) and self.unfinished(r):
                self.replan(r, stimulus_id)

    def add_worker(self, scheduler, worker: str) -> None:
        """A worker joined: runs left without a live worker for some task are re-planned."""
        self.lost_all_since = None
        for r in [r for r in self.runs.values() if r.state in LIVE]:
            stranded = [
                k
                for k in self.unfinished(r)
                if r.plan.get(k) not in r.addr or r.addr[r.plan[k]] not in scheduler.workers
            ]
            if stranded:
                self.replan(r, f"taskflow-add-worker-{time.time()}")

    # ------------------------------------------------------------------ a run's states
    def replan(self, r: GraphRun, stimulus_id: str) -> None:
        """Plan ``r``'s unfinished part again (a worker lost or joined, a decision taken again):
        replanning, then back to the state it was in, or failed where no plan could be made."""
        self.move(r, REPLANNING)
        self.move(r, FAILED if r.error else r.before, stimulus_id)

    def move(self, r: GraphRun, to: str, *args):
        """Move ``r`` to state ``to`` by the table's method for that move; what the method returns."""
        start = r.state
        if self.validate:
            assert (start, to) in self._transitions, f"run {r.id!r}: no move from {start} to {to}"
        r.state = to  # the one place a run's state changes; the method may move it on (to failed, finished)
        if to == REPLANNING:
            r.before = start
        out = self._transitions[start, to](r, *args)
        if self.validate:
            assert r.state in (to, FAILED, FINISHED), (r, to)  # a run can finish or fail on its way
            assert r.state != RUNNING or not r.estimate, r
            assert r.state != FAILED or r.error, r
        return out

    def _transition_registered_planned(self, r: GraphRun):
        """Registered with declared costs: plan on the live workers now (the client predicts with it)."""
        plan = self._plan(r)
        if r.error:
            self.move(r, FAILED)
        return plan

    def _transition_registered_running(self, r: GraphRun, stimulus_id: str) -> None:
        """Its tasks arrived before any plan (costs to estimate, or a graph under ``taskflow.use``):
        estimate the costs from what Dask knows, plan, place."""
        if r.estimate:
            tss = [self.dask_scheduler.tasks[k] for k in r.graph.ids if k in self.dask_scheduler.tasks]
            r.graph = self.graph_of([ts for ts in tss if ts.run_spec is not None], r.prefix_costs)
            r.estimate = False
            r.plan = {}
        self._transition_planned_running(r, stimulus_id)

    def _transition_planned_running(self, r: GraphRun, stimulus_id: str) -> None:
        """Its tasks arrived: a plan whose workers have gone since is made afresh; then each task is
        restricted to its worker and ordered."""
        self.adaptation.begin(r)
        if self._stale(r):
            self._plan(r)
            if r.error:
                self.move(r, FAILED)
                return
        r.count_done(self.dask_scheduler.tasks)
        self._apply(r, stimulus_id)
        if len(r.done) == len(r.graph):  # nothing left to run (every key was already in memory)
            self.move(r, FINISHED)

    def _transition_live_replanning(self, r: GraphRun) -> None:
        """A worker its plan uses left, or one joined while tasks had no live worker: plan the
        unfinished part again on the workers there are."""
        r.replans += 1
        self._plan(r)

    def _transition_replanning_live(self, r: GraphRun, stimulus_id: str) -> None:
        """Back to where the run was, its unfinished tasks placed by the new plan."""
        r.before = None
        self._apply(r, stimulus_id)

    def _transition_running_finished(self, r: GraphRun) -> None:
        """Its last key finished. A run the plugin made for ``taskflow.use`` releases its keys at
        once (they may come again in a new graph) and is kept, inert, among the latest
        :data:`KEEP_FINISHED` (to be looked at); one a client registered waits for its client."""
        r.ended = time.monotonic()
        self.adaptation.record(r)
        if r.owned:
            self._release(r)
            owned = [rid for rid, x in self.runs.items() if x.owned and x.state == FINISHED]
            for rid in owned[: max(0, len(owned) - KEEP_FINISHED + 1)]:
                del self.runs[rid]

    def _transition_to_failed(self, r: GraphRun, *args) -> None:
        """It could not be planned (``r.error`` says why): clients are told on their next status."""
        if self.validate:
            assert r.error, r
        logger.error("taskflow: run %s failed: %s", r.id, r.error)

    def _stale(self, r: GraphRun) -> bool:
        """No plan yet, or one that names a worker no longer there."""
        workers = self.dask_scheduler.workers
        return not r.plan or any(w not in r.addr or r.addr[w] not in workers for w in set(r.plan.values()))

    # ------------------------------------------------------------------ planning
    def unfinished(self, r: GraphRun) -> list:
        """Keys of ``r`` not finished and not running on a live worker (see :meth:`GraphRun.unfinished`)."""
        return r.unfinished(self.dask_scheduler.tasks)

    def live_cluster(self, r: GraphRun) -> Cluster | None:
        """The declared cluster of ``r`` over the live workers it may use (``r.only``); for a run
        that learns, with the speeds and rates Dask's tasks and transfers showed. Where nothing is
        declared, a worker's speed before any of its tasks is measured is the share of a core its
        cgroup's CPU limit allows each of its threads (:func:`.reading.cpu_shares`)."""
        prior = cpu_shares(self.dask_scheduler)
        live = [
            Worker(str(ws.name), prior.get(str(ws.name), 1.0), max(1, int(ws.nthreads)), address=ws.address)
            for ws in sorted(self.dask_scheduler.workers.values(), key=lambda ws: str(ws.name))
            if r.only is None or str(ws.name) in r.only
        ]
        if not live:
            return None
        declared = r.cluster or Cluster(live, bandwidth=self.dask_scheduler.bandwidth or 1e9, name="dask")
        cluster = declared.on_workers(live)
        if not r.learned:
            return cluster
        # speeds Dask's tasks showed, and rates the workers received at, beat declared or calibrated ones
        speeds = speeds_on({w.id: w.speed for w in cluster.workers}, self.learned_speeds())
        pairs = {a: dict(row) for a, row in cluster.bandwidths.items()}
        names = set(cluster.ids)
        learned = received_rates(self.dask_scheduler)  # what each receiver took in
        for a, row in learned.items():
            if a in names:
                pairs.setdefault(a, {}).update({b: v for b, v in row.items() if b in names})
        for a, row in learned.items():  # measured one way only: the same the other way, unless declared
            for b, v in row.items():  # (else a hold would pull data over a link taken for as wide as the default)
                if {a, b} <= names and a not in learned.get(b, {}) and a not in cluster.bandwidths.get(b, {}):
                    pairs.setdefault(b, {})[a] = v
        return cluster.replace(
            workers=[dataclasses.replace(w, speed=speeds[w.id]) for w in cluster.workers],
            bandwidths={a: row for a, row in pairs.items() if row},
        )

    def _plan(self, r: GraphRun):
        """Plan the unfinished part of ``r`` on the live workers; the plan (a Schedule) or None. A
        plan made again also places the tasks sent to a worker and not started (:meth:`GraphRun.queued`)."""
        cluster = self.live_cluster(r)
        if cluster is None:
            return None
        todo = self.unfinished(r) + (r.queued(self.dask_scheduler.tasks) if r.state == REPLANNING else [])
        if not todo or (self.adaptation.adaptive(r) and not self.adaptation.worth_planning(r, todo, cluster)):
            return None
        sub = r.graph if len(todo) == len(r.graph) else r.graph.subgraph(todo)
        sub = sub.restrict_costs(cluster.ids)
        # Dask's cost per task (at speed 1, :mod:`.overhead`) on every task planned and predicted
        shift = (self.gaps.overhead(self.learned_speeds()) or 0.0) if r.learned and not cluster.task_overhead else 0.0
        sub = sub.with_costs(cost={k: c + shift for k, c in zip(sub.ids, sub.arrays.cost.tolist())}) if shift else sub
        sched = r.scheduler
        if shift and self.adaptation.adaptive(r):  # a transfer costs each end's CPU a dispatch and its bytes' copying
            sched = sched.inside_dask(shift, BYTE_SECONDS)
        make = plan_maker(r, sub, cluster, sched)  # made once, where needed
        r.addr = {w.id: w.address for w in cluster.workers}
        try:
            predicted = (
                self.adaptation.guard(r, sub, cluster, make, shift)
                if self.adaptation.adaptive(r)
                else float(make().makespan)
            )
            plan = None if r.adapt.decision in (DASK, SUBSET) else make()  # the guard left it to Dask
        except Unplannable as e:
            r.error = str(e)
            return None
        r.error = None
        if len(todo) == len(r.graph) and r.predicted is None:
            r.predicted = predicted
        if plan is None:
            return None
        r.prio.update(plan_priorities(plan))
        for key, w in zip(plan.tasks, plan.workers):
            r.plan[key] = w
        return plan

    def _apply(self, r: GraphRun, stimulus_id: str) -> None:
        """Restrict each unfinished planned task to its worker, set its priority, release the
        stranded ones to their new worker; one sent to another worker and not started there is
        asked over (:func:`.reading.move_queued`)."""
        tasks = self.dask_scheduler.tasks
        workers = self.dask_scheduler.workers
        recommendations = {}
        loose = (
            r.scheduler.adaptive is not None and r.scheduler.adaptive.steal
        )  # an idle worker may steal a planned task
        for key, name in r.plan.items():
            ts = tasks.get(key)
            if ts is None or ts.state not in MOVABLE:
                continue
            addr = r.addr.get(name)
            if addr is None or addr not in workers:
                continue
            restrict(ts, (addr,), loose)
            if ts.priority:
                ts.priority = (-r.prio[key], *ts.priority[1:])
            if ts.state == "no-worker":
                recommendations[key] = "waiting"
            elif ts.state == "processing" and not loose:  # (a loose one an idle worker may have stolen)
                move_queued(self.dask_scheduler, ts, (workers[addr],))
        if recommendations:
            self.dask_scheduler.transitions(recommendations, stimulus_id=stimulus_id)

    def graph_of(self, tss, prefix_costs: dict | None = None) -> TaskGraph:
        """The cost model of Dask tasks ``tss`` from what was measured (:func:`.reading.estimated_graph`)."""
        return estimated_graph(
            self.dask_scheduler, tss, self.durations, self.sizes, self.learned_speeds(), prefix_costs, self.inputs
        )

    def _workers_message(self, r: GraphRun) -> list:
        speeds = {str(w.id): w.speed for w in r.cluster.workers} if r.cluster is not None else {}
        return [
            {
                "name": str(ws.name),
                "address": ws.address,
                "cores": int(ws.nthreads),
                "speed": speeds.get(str(ws.name), 1.0),
            }
            for ws in self.dask_scheduler.workers.values()
        ]


async def dask_setup(scheduler, name: str | None = None) -> None:
    """Preload hook: ``dask scheduler --preload taskflow.runtime.scheduler.plugin`` installs the plugin; with
    the environment variable ``TASKFLOW_SCHEDULER=heft`` it places every client's graphs under our scheduler
    of that name (``scheduler`` here is Dask's).

    Parameters
    ----------
    scheduler : distributed.Scheduler
    name : str, optional
        Our scheduler's name (default: ``TASKFLOW_SCHEDULER``, or its earlier spelling ``TASKFLOW_SCHEDULER``).
    """
    from .preload import preloaded_scheduler

    name = preloaded_scheduler(name)
    plugin = TaskflowPlugin(scheduler=name)
    await scheduler.register_scheduler_plugin(plugin, name=PLUGIN_NAME, idempotent=True)
