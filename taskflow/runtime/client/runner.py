"""Running a task graph on real Dask workers.

A static plan is made and carried out inside the Dask scheduler by the taskflow scheduler plugin
(:mod:`.plugin`): :func:`run` installs it if needed, registers the graph with its costs (the
plugin plans it on the live workers and answers with the plan, the prediction), then submits the
graph once with ``client.get``. The plugin restricts each task to its planned worker and orders
each worker's tasks by planned start; when a worker is lost it re-plans the unfinished part on the
survivors in the same scheduler event, so nothing waits on a dead worker. ``work-stealing`` means
Dask's own scheduler: no restrictions, Dask's placement and stealing. Other dynamic schedulers run in
the simulator only.

Graphs without callables (every file format) run in *emulation*: each task sleeps its duration on
the worker it landed on (its exact cost there, else cost / that worker's declared speed, times
``time_scale``) and returns a buffer of its output size (or of its largest out-edge, when a consumer
needs more; times ``size_scale``), so its consumers
receive real bytes moved by Dask.

Every wait is bounded: a task that raises ends the run with :class:`TaskFailed` naming the task
(results already computed stay available on the exception); a scheduler that stops answering for
:data:`~taskflow.runtime.client.waiting.SCHEDULER_LOSS` seconds, losing every worker for longer than the plugin's grace period, a
run the plugin cannot plan, or ``timeout`` end it with a :class:`~taskflow.TaskflowError`.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings

from ...cluster import Cluster, Worker
from ...errors import GraphError, SchedulerError, TaskflowError, TaskflowWarning, UsageError
from ...analysis import task_kind
from ...graph import TaskGraph
from ...scheduling import get_scheduler, require_runnable
from ...schedule import Schedule
from .calibrate import attach_addresses, cluster_from_dask
from ..worker.calls import TaskFailed, ship_code
from .dask_graph import dask_graph, keys_for
from ..learn import CostProfile
from ..messages import cluster_message, graph_payload, plan_priorities
from ..predict import DASK_DRAWS, predict_dask, predict_plan
from .report import RunReport, report_from_stream
from .records import stream_index, stream_since, workers_records
from .session import call, check_call, check_flags, ensure_plugin
from .connecting import connect, say_dashboard
from .waiting import Watchdog, close_quietly, frozen_heap, gather, progress_bar, wait_for, workers_reachable

__all__ = ["run", "predict_dask", "submit_order", "GUESS_ERROR", "DASK_DRAWS"]

#: a prediction off by more than this share (without a cost profile) says the costs look like guesses
GUESS_ERROR = 0.25


def run(
    graph: TaskGraph,
    scheduler="heft",
    client=None,
    cluster: Cluster | None = None,
    *,
    address=None,
    scheduler_file=None,
    workers: int = 2,
    threads_per_worker: int = 1,
    speeds: dict | None = None,
    calibrate: bool = False,
    time_scale: float = 1.0,
    size_scale: float = 1.0,
    retries: int = 0,
    quiet: bool = False,
    timeout: float | None = None,
    seed: int = 0,
    profile=None,
    dashboard=False,
    jobqueue: str | None = None,
    jobqueue_options: dict | None = None,
    keep=None,
    hold: bool = False,
) -> RunReport:
    """Run ``graph`` on Dask under ``scheduler`` and measure it.

    Parameters
    ----------
    client : distributed.Client, optional
        Use this client's cluster unchanged. Else ``address`` / ``scheduler_file`` reach an
        existing cluster, else an embedded ``LocalCluster`` (processes, ``threads_per_worker``
        threads each) is started and closed after.
    cluster : Cluster, optional
        The cluster model to plan with; by default measured from the live cluster
        (:func:`cluster_from_dask`) with ``speeds`` declared by worker name.
    time_scale, size_scale
        Shrink emulated durations and output sizes (graphs without callables).
    retries : int
        How often Dask retries a task that raised before the run fails.
    timeout : float, optional
        Seconds after which the run is abandoned with an error.
    profile : str, os.PathLike or CostProfile, optional
        Plan with what earlier runs measured (task durations per worker, speeds, bandwidth per
        worker pair, Dask's per-task overhead) and add this run's measurements: a file is read if
        it exists and written after the run (learn on the first run, plan with it on the next).
    quiet : bool
        No progress bar, no warning (what the run has to say stays in ``notes``), and no dashboard
        link unless ``dashboard`` asks for one.
    dashboard : bool or str
        Serve the embedded cluster's Dask dashboard (True: on :data:`DASHBOARD`, or HOST:PORT). The
        link is printed to stderr whenever the cluster has a dashboard (with ``quiet``, only when
        asked for).
    jobqueue : {"slurm", "pbs"}, optional
        Run on a batch system instead: ``workers`` jobs of one Dask worker each, through
        dask-jobqueue, cancelled after the run. ``jobqueue_options`` are
        :func:`~taskflow.runtime.launch.jobqueue.start_jobqueue`'s (``cores``, ``memory``, ``walltime``,
        ``queue``, ``interface``, ``wait``, ``log_directory``). The report's ``jobs``: each worker's job.
    jobqueue_options : dict, optional
    keep : iterable, optional
        The task ids whose results come back here (default: all); the others are released.
    hold : bool
        Run on the workers ``cluster`` names and no other (a job given its workers beside other
        jobs on one cluster); default: on every live worker, those the model does not name (one
        that joined) as they are.

    Returns
    -------
    RunReport
        ``results`` maps every kept task id to its result (emulated tasks: a byte buffer).

    Raises
    ------
    TaskFailed
        A task raised; the message names it; ``.results`` holds what had finished.
    RunTimeout
        The run took longer than ``timeout``, or the scheduler did not answer a call in time.
    SchedulerLost
        The Dask scheduler went away.
    WorkersLost
        Every worker was lost and none joined within the plugin's grace period, or the cluster had
        no worker.
    TaskflowError
        (the base of all of these) A simulator-only scheduler, an empty graph, a dashboard without
        bokeh.
    """
    check_call(client, cluster, address, scheduler_file, workers, threads_per_worker, timeout)
    check_flags(calibrate=calibrate, quiet=quiet)
    scheduler = get_scheduler(scheduler, seed=seed)
    dynamic = scheduler.kind == "dynamic"
    require_runnable(scheduler, "dask")
    graph.validate()
    for t in graph.ids:  # Dask's messages are UTF-8 msgpack: an id that is not text cannot cross
        if isinstance(t, str) and not t.isascii():
            try:
                t.encode("utf-8")
            except UnicodeEncodeError:
                raise GraphError(
                    f"task {t!r}: its id is not UTF-8 text (a lone surrogate); Dask cannot carry it"
                ) from None
    if not len(graph):
        raise GraphError(f"graph {graph.name!r} has no tasks: nothing to run")
    keep = None if keep is None else list(dict.fromkeys(keep))
    for t in keep or ():
        if t not in graph:
            raise UsageError(f"keep names task {t!r}, which is not in graph {graph.name!r}")
    if isinstance(profile, (str, os.PathLike)):  # read (and checked) before any cluster starts
        profile = (profile, CostProfile.load(profile) if os.path.exists(profile) else None)
    started = time.monotonic()  # the timeout counts from here: starting a cluster is part of the run
    c, owned = connect(
        client,
        address,
        scheduler_file,
        workers,
        threads_per_worker,
        work_stealing=dynamic,
        dashboard=dashboard,
        jobqueue=jobqueue,
        jobqueue_options=jobqueue_options,
    )
    finished = False  # an abandoned run's workers are killed, not waited for
    try:
        if dashboard or not quiet:
            say_dashboard(c)
        left = None if timeout is None else max(0.05, timeout - (time.monotonic() - started))
        with frozen_heap():
            report = _Runner(
                graph,
                scheduler,
                c,
                cluster,
                speeds,
                calibrate,
                time_scale,
                size_scale,
                retries,
                quiet,
                left,
                profile,
                keep,
                timeout,
                hold,
            ).go()
        finished = True
        return report
    finally:
        close_quietly(owned, now=not finished)


def submit_order(plan, key_of: dict):
    """A context to submit a planned graph in: every key carries its priority under ``plan``
    (:func:`.messages.plan_priorities`) as a Dask annotation. The plugin sets the same priorities
    inside Dask's scheduler, but Dask has already ordered the graph's first transitions by its own
    priorities then, and a worker that is given several ready tasks at once starts the first to
    arrive: without this, a worker began with whichever of its roots Dask ranked first, not the
    plan's first (a 0.26 s root ahead of a speed-1 worker's critical chain in layered-ccr1 under
    CPOP). Nothing for Dask's own scheduling (``plan`` None).

    Parameters
    ----------
    plan : Schedule or None
        Over task ids.
    key_of : dict
        Task id -> Dask key.
    """
    import contextlib

    import dask

    if plan is None:
        return contextlib.nullcontext()
    prio = {key_of[t]: p for t, p in plan_priorities(plan).items()}
    return dask.annotate(priority=lambda key: prio.get(key, 0))


class _Runner:
    """One run: plan (inside Dask's scheduler), submit once, watch, measure."""

    def __init__(
        self,
        graph,
        scheduler,
        client,
        cluster,
        speeds,
        calibrate,
        time_scale,
        size_scale,
        retries,
        quiet,
        timeout,
        profile=None,
        keep=None,
        said_timeout=None,
        hold=False,
    ):
        self.graph = graph
        self.hold = hold
        self.keep = graph.ids if keep is None else keep
        #: the tasks whose futures the run holds: every one, or the kept ones and the sinks (the
        #: others are released as soon as their consumers are done)
        self.wanted = graph.ids if keep is None else list(dict.fromkeys([*keep, *graph.sinks()]))
        self.scheduler = scheduler
        self.client = client
        self.declared = cluster
        self.speeds = speeds
        self.calibrate = calibrate
        self.time_scale = time_scale
        self.size_scale = size_scale
        self.retries = retries
        self.quiet = quiet
        self.timeout, self.said_timeout = timeout, said_timeout  # what is left of it, and what the caller gave
        self.profile_path, self.profile = profile if isinstance(profile, tuple) else (None, profile)
        self.run_id = f"run-{uuid.uuid4().hex[:12]}"
        self.key_of = keys_for(graph, self.run_id[4:12], 0)
        self.task_of = {k: t for t, k in self.key_of.items()}
        self.futures = {}  # task id -> Future
        self.replans = 0
        #: ``{"state": ...}``: Dask's scheduler state at submission (:func:`.reading.dask_state`),
        #: for a run it schedules (a box, so that the prediction holds it and not the runner)
        self.dask_state = {}
        self.watchdog = Watchdog(client, self.run_id if scheduler.kind == "static" else None)

    def _cluster(self) -> Cluster:
        """The cluster the run plans for: the declared one with Dask's addresses, or one measured."""
        if self.declared is not None:
            cluster = attach_addresses(self.declared, self.client)
        else:
            cluster = cluster_from_dask(self.client, calibrate=self.calibrate, speeds=self.speeds)
        if cluster.task_overhead and self.time_scale != 1.0:
            # predictions are scaled by time_scale; Dask's per-task overhead is not
            cluster = cluster.with_task_overhead(cluster.task_overhead / self.time_scale)
        return cluster

    def _register(self, graph: TaskGraph, cluster: Cluster):
        """Hand the graph and its costs to the scheduler plugin, which plans it; return the plan."""
        reply = call(
            self.client,
            "taskflow_register",
            run=self.run_id,
            graph=graph_payload(graph, self.key_of),
            scheduler=self.scheduler.name,
            options={"seed": self.scheduler.seed, **self.scheduler.options},
            cluster=cluster_message(cluster),
            client=self.client.id,
            **({"hold": True} if self.hold else {}),
        )
        if reply.get("status") != "OK":
            raise SchedulerError(reply.get("error", "the scheduler plugin refused the run"))
        task_of = self.task_of
        keys = [tuple(k) if isinstance(k, list) else k for k in reply["keys"]]
        self.workers_info = reply.get("workers_info", [])
        return Schedule(
            [task_of[k] for k in keys], reply["workers"], reply["start"], reply["finish"], scheduler=self.scheduler.name
        )

    def _joined(self, cluster: Cluster, plan) -> Cluster:
        """``cluster`` over the live workers the plugin planned on (:meth:`Cluster.on_workers`), when
        the plan uses a worker that joined after the cluster was measured."""
        if plan is None or set(map(str, plan.workers)) <= {str(w.id) for w in cluster.workers}:
            return cluster
        return cluster.on_workers(
            [
                Worker(w["name"], w.get("speed", 1.0), max(1, int(w.get("cores", 1))), address=w.get("address"))
                for w in self.workers_info
            ]
        )

    def go(self) -> RunReport:
        cluster = self._cluster()  # declared: what emulated tasks sleep by
        self.cluster = cluster
        plan_graph, plan_cluster = self.graph, cluster
        if self.profile is not None:  # plan with what earlier runs measured
            plan_graph, plan_cluster = self.profile.apply(self.graph, cluster, self.time_scale, self.size_scale)
        ensure_plugin(self.client)
        static = self.scheduler.kind == "static"
        plan = self._register(plan_graph, plan_cluster) if static else None
        self.cluster, plan_cluster = self._joined(cluster, plan), self._joined(plan_cluster, plan)
        cluster = self.cluster
        predicted = self._predict(plan, plan_graph, plan_cluster)
        ids = self.graph.ids
        ship_code(self.graph)
        dsk = dask_graph(self.graph, ids, self.key_of, cluster, self.time_scale, self.size_scale)
        direct = workers_reachable(self.client, [w.address for w in cluster.workers if w.address])
        try:
            index = stream_index(self.client)
            if plan is None:
                self._read_dask_state()
            t_submit = time.time()
            with submit_order(plan, self.key_of):
                futs = self.client.get(
                    dsk,
                    [self.key_of[t] for t in self.wanted],
                    sync=False,
                    **({"retries": self.retries} if self.retries else {}),
                )
            del dsk  # sent: what a large run holds per task is kept to what its report needs
            self.futures = dict(zip(self.wanted, futs))
            self._watch()
            kept = self.keep
            results = dict(zip(kept, gather(self.client, [self.futures[t] for t in kept], kept, direct=direct)))
            del futs
            self.futures = {}  # the results are here: Dask may forget the keys
            records = stream_since(self.client, index)
            seen = workers_records(self.client, t_submit)
            planned = self._final_plan() if static else {}
            report = report_from_stream(
                self.graph,
                records,
                scheduler=self.scheduler.name,
                client=self.client,
                cluster=self.cluster,
                key_of=self.key_of,
                task_of=self.task_of,
                plan=plan,
                predicted=predicted,
                planned_worker=planned,
                results=results,
                replans=self.replans,
                t_submit=t_submit,
                time_scale=self.time_scale,
                size_scale=self.size_scale,
                incoming=seen.transfers,
                clocks=seen.clocks,
            )
            del records
            by_address = {w.address: w.id for w in report.cluster.workers}
            report.jobs = {by_address[a]: j for a, j in seen.jobs.items() if a in by_address}
            del seen
            return self._learn(report)
        except BaseException:
            self._cancel()
            raise
        finally:
            if static:
                try:
                    call(self.client, "taskflow_forget", timeout=2.0, limit=2.0, run=self.run_id)
                except TaskflowError:
                    pass  # the scheduler is gone: nothing to forget

    def _watch(self) -> None:
        """Wait for the sinks (every task is an ancestor of one); every wait is bounded."""
        bar = None if self.quiet else progress_bar(len(self.futures), self.scheduler.name)
        state = {"last": time.perf_counter()}

        def progress():
            if bar is not None and time.perf_counter() - state["last"] >= 0.5:
                state["last"] = time.perf_counter()
                bar.update(sum(f.done() for f in self.futures.values()) - bar.n)

        try:
            wait_for(
                [self.futures[t] for t in self.graph.sinks()],
                self.watchdog,
                self.timeout,
                progress,
                said=self.said_timeout,
            )
        finally:
            if bar is not None:
                bar.close()
        self.replans = self.watchdog.replans
        self._raise_errors()

    def _final_plan(self) -> dict:
        """Task id -> the worker of the latest plan (after any re-plans)."""
        status = call(self.client, "taskflow_status", run=self.run_id, plan=True)
        self.replans = status.get("replans", self.replans)
        task_of = self.task_of
        return {task_of[tuple(k) if isinstance(k, list) else k]: w for k, w in status.get("plan", [])}

    def _predict(self, plan, graph, cluster):
        """A function predicting the makespan in scaled seconds: the simulator carrying out
        ``plan`` on ``cluster`` with the max-min network; without a plan (Dask's own scheduling),
        the simulator's model of Dask's decisions (``dask-model``) started from the state Dask's
        scheduler was in when the graph was submitted (:attr:`dask_state`), averaged over
        draws of the orders Dask's hashes give its sets of tasks."""
        scheduler, scale, size_scale, box, keys = (
            self.scheduler,
            self.time_scale,
            self.size_scale,
            self.dask_state,
            self.key_of,
        )

        def predict():
            g = graph.restrict_costs(cluster.ids)
            if plan is not None:  # the plugin sends planned outputs ahead to their consumers' workers
                return predict_plan(g, cluster, plan, scheduler) * scale
            return predict_dask(g, cluster, box.get("state"), scale, size_scale, keys=keys)

        return predict

    def _read_dask_state(self) -> None:
        """What Dask's scheduler will decide the graph from, read just before submitting it (None
        when the scheduler does not answer: the prediction then takes Dask's defaults)."""
        prefixes = sorted({task_kind(self.graph, t) for t in self.graph.ids})
        try:
            self.dask_state["state"] = call(self.client, "taskflow_dask_state", prefixes=prefixes)
        except TaskflowError:
            self.dask_state["state"] = None

    def _learn(self, report: RunReport) -> RunReport:
        """Say where the plan's costs came from, warn when they look like guesses, and fold this
        run's measurements into the profile (saved when it came from a file)."""
        report.costs = "declared" if self.profile is None else f"profile ({self.profile.runs} run(s))"
        learned = CostProfile.learn(self.graph, report)
        report.profile = learned if self.profile is None else self.profile.merge(learned)
        if self.profile_path is not None:
            report.profile.save(self.profile_path)
        # cheap: the plan's own makespan (the full prediction is a simulation, made only when read)
        expected = report.planned_makespan if report.plan is not None else report.predicted_makespan
        said = "the plan expected" if report.plan is not None else "taskflow predicted"
        err = abs(report.measured_makespan - expected) / expected if expected else 0.0
        if self.profile is None and err > GUESS_ERROR:
            how = (
                f"this run's measurements are in {os.fspath(self.profile_path)!r}; the next run with it plans with them"
                if self.profile_path is not None
                else "learn them from this run: taskflow run ... --profile costs.json, or "
                "run(..., profile='costs.json')"
            )
            note = (
                f"{said} {expected:.3g} s, the run took {report.measured_makespan:.3g} s "
                f"({err:.0%} off): the costs or the network it used look like guesses; {how}"
            )
            report.notes.append(note)
            if not self.quiet:  # quiet: the note is in report.notes, not printed
                warnings.warn(note, TaskflowWarning, stacklevel=4)
        return report

    def _raise_errors(self):
        """Raise TaskFailed for the first task (in topological order) that raised itself."""
        for t in self.graph.topological_order():
            f = self.futures.get(t)
            if f is not None and f.status == "error":
                err = f.exception()
                done = {x: self.futures[x].result() for x in self.keep if self.futures[x].status == "finished"}
                raise TaskFailed(self._blamed(t), err, done, tb=f.traceback())

    def _blamed(self, t):
        """The task that raised the error ``t``'s future holds (``t`` itself, or where the run
        holds no future for every task, the ancestor Dask's scheduler blames)."""
        try:
            key = (
                t if self.wanted is self.graph.ids else call(self.client, "taskflow_blamed", key=self.key_of[t])["key"]
            )
        except Exception:  # noqa: BLE001 - the scheduler is gone: name the task the run waited on
            return t
        return self.task_of.get(key, t)

    def _cancel(self) -> None:
        if self.futures and self.client.status == "running":
            try:
                self.client.cancel(list(self.futures.values()), force=True)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
