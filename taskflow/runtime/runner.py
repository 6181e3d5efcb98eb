"""Running a task graph on real Dask workers.

A static plan becomes per-task worker restrictions and priorities in one graph submission
(``dask.annotate(workers=..., priority=..., allow_other_workers=False)`` around ``client.get``), so
each worker runs its tasks in plan order. ``work-stealing`` means Dask's own scheduler: no
restrictions, Dask's placement and stealing. Other dynamic policies run in the simulator only.

Graphs without callables (every file format) run in *emulation*: each task sleeps its duration on
the worker it landed on (its exact cost there, else cost / that worker's declared speed, times
``time_scale``) and returns a buffer of its output size (times ``size_scale``), so its consumers
receive real bytes moved by Dask.

The run is watched: a task that raises ends it with :class:`TaskFailed` naming the task (results
already computed stay available on the exception); when the set of workers changes (a worker is
killed), finished results still held somewhere are kept, everything else is cancelled, re-planned
on the current workers with the same scheduler and resubmitted, so nothing waits forever on a task
pinned to a dead worker.
"""

from __future__ import annotations

import sys
import time

from ..cluster import Cluster
from ..errors import TaskflowError
from ..graph import TaskGraph
from ..policy import get_scheduler
from .calibrate import attach_addresses, cluster_from_dask, workers_info
from .calls import TaskFailed
from .dask_graph import dask_graph, keys_for, plan_annotations
from .report import RunReport, report_from_stream

__all__ = ["run", "connect"]


def _progress(done, total, t0, last):
    now = time.perf_counter()
    if now - t0 < 2.0 or now - last < 1.0:
        return last
    width = 30
    fill = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} tasks  {now - t0:5.1f} s")
    sys.stderr.flush()
    return now


def connect(client, address, scheduler_file, workers, threads_per_worker, work_stealing):
    """(client, things to close). Without a client or address, an embedded LocalCluster.

    Parameters
    ----------
    client : distributed.Client or None
    address, scheduler_file : str or None
        An existing cluster.
    workers, threads_per_worker : int
        The embedded LocalCluster (processes).
    work_stealing : bool
        Dask's work stealing in the embedded cluster (off for static plans).
    """
    import dask
    from distributed import Client, LocalCluster

    if client is not None:
        return client, []
    if address or scheduler_file:
        c = Client(address, timeout="30s") if address else Client(scheduler_file=scheduler_file, timeout="30s")
        return c, [c]
    with dask.config.set({"distributed.scheduler.work-stealing": bool(work_stealing)}):
        lc = LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker, processes=True,
                          dashboard_address=None)
        c = Client(lc)
    return c, [c, lc]


def run(graph: TaskGraph, scheduler="heft", client=None, cluster: Cluster | None = None, *, address=None,
        scheduler_file=None, workers: int = 2, threads_per_worker: int = 1, speeds: dict | None = None,
        calibrate: bool = False, time_scale: float = 1.0, size_scale: float = 1.0, retries: int = 0,
        quiet: bool = False, timeout: float | None = None, seed: int = 0) -> RunReport:
    """Run ``graph`` on Dask under ``scheduler`` and measure it.

    Parameters
    ----------
    client : distributed.Client, optional
        Use this client's cluster unchanged. Else ``address`` / ``scheduler_file`` reach an
        existing cluster, else an embedded ``LocalCluster`` (processes, ``threads_per_worker``
        threads each) is started and closed after.
    cluster : Cluster, optional
        The model to plan with; by default measured from the live cluster
        (:func:`cluster_from_dask`) with ``speeds`` declared by worker name.
    time_scale, size_scale
        Shrink emulated durations and output sizes (graphs without callables).
    retries : int
        How often Dask retries a task that raised before the run fails.
    timeout : float, optional
        Seconds after which the run is abandoned with an error.

    Returns
    -------
    RunReport
        ``results`` maps every task id to its result (emulated tasks: a byte buffer).

    Raises
    ------
    TaskFailed
        A task raised; the message names it; ``.results`` holds what had finished.
    """
    sch = get_scheduler(scheduler, seed=seed)
    dynamic = sch.kind == "dynamic"
    if dynamic and sch.name != "work-stealing":
        raise TaskflowError(f"scheduler {sch.name!r} runs in the simulator only; on Dask use a static "
                            f"scheduler or 'work-stealing' (Dask's own)")
    graph.validate()
    c, owned = connect(client, address, scheduler_file, workers, threads_per_worker, work_stealing=dynamic)
    try:
        return _Runner(graph, sch, c, cluster, speeds, calibrate, time_scale, size_scale, retries, quiet,
                       timeout).go()
    finally:
        for x in owned:
            try:
                x.close()
            except Exception:  # pragma: no cover - best effort at shutdown
                pass


class _Runner:
    def __init__(self, graph, sch, client, cluster, speeds, calibrate, time_scale, size_scale, retries, quiet,
                 timeout):
        self.graph = graph
        self.sch = sch
        self.client = client
        self.model_given = cluster
        self.speeds = speeds
        self.calibrate = calibrate
        self.time_scale = time_scale
        self.size_scale = size_scale
        self.retries = retries
        self.quiet = quiet
        self.timeout = timeout
        self.gen = 0
        import uuid
        self.run_token = uuid.uuid4().hex[:8]
        self.futures = {}  # task id -> Future (current generation)
        self.key_of = {}  # task id -> current key
        self.task_of = {}  # key -> task id
        self.planned_worker = {}  # task id -> worker id (latest plan)
        self.replans = 0
        self.measured_overhead = 0.0  # what the first calibration measured, kept for re-plans

    # ------------------------------------------------------------------ planning and submitting
    def _model(self) -> Cluster:
        if self.model_given is not None and self.gen == 0:
            model = attach_addresses(self.model_given, self.client)
        elif self.model_given is None:
            model = cluster_from_dask(self.client, calibrate=self.calibrate and self.gen == 0, speeds=self.speeds)
            if self.gen == 0:
                self.measured_overhead = model.task_overhead
            else:  # a re-plan keeps what the first calibration measured
                model = model.with_task_overhead(self.measured_overhead)
        else:
            model = attach_addresses(self.model_given, self.client, subset=True)
        if model.task_overhead and self.time_scale != 1.0:
            # predictions are scaled by time_scale; Dask's per-task overhead is not
            model = model.with_task_overhead(model.task_overhead / self.time_scale)
        return model

    def _submit(self, todo: list, model: Cluster):
        import dask

        sub = self.graph if len(todo) == len(self.graph) else self.graph.subgraph(todo)
        sub = sub.restrict_costs(w.id for w in model.workers)  # workers that are gone no longer count
        keys = keys_for(self.graph, self.run_token, self.gen)
        for t in todo:
            self.key_of[t] = keys[t]
            self.task_of[keys[t]] = t
        dsk = dask_graph(self.graph, todo, self.key_of, model, self.time_scale, self.size_scale, kept=self.futures)
        annotations = {"retries": self.retries} if self.retries else {}
        if self.sch.kind == "static":
            plan = self.sch.schedule(sub, model)
            for t, w in zip(plan.tasks, plan.workers):
                self.planned_worker[t] = w
            annotations.update(plan_annotations(plan, model, self.key_of))
        else:
            plan = None
        with dask.annotate(**annotations):
            futs = self.client.get(dsk, [self.key_of[t] for t in todo], sync=False)
        for t, f in zip(todo, futs):
            self.futures[t] = f
        return plan

    # ------------------------------------------------------------------ the run
    def go(self) -> RunReport:
        from distributed import get_task_stream, wait

        model = self._model()
        self.model0 = model
        ids = self.graph.ids
        with get_task_stream(client=self.client) as stream:
            t_submit = time.time()
            plan = self._submit(ids, model)
            predicted = self._predict(plan, model)
            t0 = time.perf_counter()
            last = t0
            known = set(workers_info(self.client))
            last_check = time.perf_counter()
            sinks = self.graph.sinks()  # every task is an ancestor of a sink: waiting on sinks suffices
            while True:
                pending = [self.futures[t] for t in sinks if not self.futures[t].done()]
                if not pending:
                    break
                try:
                    wait(pending, timeout=0.25, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                if any(self.futures[t].status == "error" for t in sinks):
                    self._raise_errors()
                if self.timeout is not None and time.perf_counter() - t0 > self.timeout:
                    raise TaskflowError(f"run did not finish within {self.timeout:g} s "
                                        f"({sum(not f.done() for f in self.futures.values())} task(s) pending)")
                if time.perf_counter() - last_check >= 1.0:  # an RPC that competes with the scheduler
                    last_check = time.perf_counter()
                    now_workers = set(workers_info(self.client))
                    if now_workers != known and (known - now_workers):
                        self._recover(now_workers)
                    known = now_workers
                if not self.quiet and time.perf_counter() - last >= 1.0:
                    done = sum(f.done() for f in self.futures.values())
                    last = _progress(done, len(self.futures), t0, last)
            if not self.quiet and time.perf_counter() - t0 >= 2.0:
                sys.stderr.write("\n")
            self._raise_errors()
            results = dict(zip(self.futures, self.client.gather(list(self.futures.values()))))
        return report_from_stream(self.graph, stream.data, scheduler=self.sch.name, client=self.client,
                                  model=self.model0, key_of=self.key_of, task_of=self.task_of, plan=plan,
                                  predicted=predicted, planned_worker=self.planned_worker, results=results,
                                  replans=self.replans, t_submit=t_submit, time_scale=self.time_scale,
                                  size_scale=self.size_scale)

    def _predict(self, plan, model):
        if plan is not None:
            return plan.makespan * self.time_scale
        from ..simulator import simulate
        return simulate(self.graph, model, "work-stealing", network="simple").makespan * self.time_scale

    def _raise_errors(self):
        """Raise TaskFailed for the first task (in topological order) that raised itself."""
        for t in self.graph.topological_order():
            f = self.futures[t]
            if f.status == "error":
                err = f.exception()
                done = {x: g.result() for x, g in self.futures.items() if g.status == "finished"}
                for g in self.futures.values():
                    g.cancel()
                raise TaskFailed(t, err, done)

    def _recover(self, workers_now):
        """A worker left: keep finished results still held somewhere, re-plan and resubmit the rest."""
        time.sleep(0.5)  # let the scheduler settle what it lost
        who = self.client.who_has(list(self.futures.values()))
        keep = set()
        for t, f in self.futures.items():
            if f.status == "finished" and who.get(f.key):
                keep.add(t)
        todo = [t for t in self.graph.ids if t not in keep]
        for t in todo:
            self.futures[t].cancel()
        if not todo:
            return
        self.gen += 1
        self.replans += 1
        model = self._model()
        if not model.workers:
            raise TaskflowError("every worker was lost")
        self._submit(todo, model)
