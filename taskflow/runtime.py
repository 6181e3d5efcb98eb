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

import json
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .cluster import Cluster, Worker
from .errors import TaskflowError
from .graph import TaskGraph, TaskHandle
from .schedule import Schedule
from .trace import Run, Trace, Transfer

__all__ = ["run", "compute", "execute", "RunReport", "TaskFailed", "cluster_from_dask", "learn_costs"]


class TaskFailed(TaskflowError):
    """A task raised. ``task`` is its id, ``error`` the exception, ``results`` what had finished."""

    def __init__(self, task, error, results):
        self.task = task
        self.error = error
        self.results = results
        super().__init__(f"task {task!r} failed: {type(error).__name__}: {error}")


# ---------------------------------------------------------------------- what runs on the workers
class _Ref:
    """Stands for the result of the task's ``pos``-th dependency inside its arguments."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __reduce__(self):
        return (_Ref, (self.key,))


class _Opaque:
    """Carries a task's parameters past Dask untouched (Dask replaces strings that equal a key
    anywhere in a task tuple; it does not look inside other objects)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (_Opaque, (self.value,))


def _map_leaves(obj, leaf):
    """``obj`` with ``leaf(x)`` applied to every item of nested lists, tuples, sets and dict values."""
    if isinstance(obj, list):
        return [_map_leaves(x, leaf) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_map_leaves(x, leaf) for x in obj)
    if isinstance(obj, dict):
        return {k: _map_leaves(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return type(obj)(_map_leaves(x, leaf) for x in obj)
    return leaf(obj)


def _substitute(obj, values):
    return _map_leaves(obj, lambda x: values[x.key] if isinstance(x, _Ref) else x)


def _execute(payload, *dep_values):
    fn, args, kwargs = payload.value
    return fn(*_substitute(args, dep_values), **_substitute(kwargs, dep_values))


def _emulate(payload, *deps):
    """Sleep for this task's duration on the worker running it; return ``nbytes`` real bytes."""
    from distributed import get_worker

    cost, costs, speeds, time_scale, nbytes = payload.value
    name = str(get_worker().name)
    seconds = costs[name] if name in costs else cost / speeds.get(name, 1.0)
    time.sleep(seconds * time_scale)
    return np.zeros(int(nbytes), dtype=np.uint8)


def _to_refs(obj, key_of):
    """Handles -> _Ref(position of the dependency); ``key_of`` maps a task id to that position."""
    return _map_leaves(obj, lambda x: _Ref(key_of[x.id]) if isinstance(x, TaskHandle) else x)


def execute(graph: TaskGraph) -> dict:
    """Run an executable graph in this process, one task at a time in topological order (no Dask):
    for debugging a graph and for a reference result. Returns ``{task id: result}``.

    >>> g = TaskGraph()
    >>> a = g.add_task("a", fn=lambda: 2)
    >>> b = g.add_task("b", fn=lambda x, y: x * y, args=(a, 21))
    >>> execute(g)["b"]
    42
    """
    if not graph.executable:
        raise TaskflowError(f"graph {graph.name!r} has tasks without a callable; it can only be emulated (run())")
    results: dict = {}

    def value(x):
        return results[x.id] if isinstance(x, TaskHandle) else x

    for t in graph.topological_order():
        fn, args, kwargs = graph.call(t)
        try:
            results[t] = fn(*_map_leaves(args, value), **_map_leaves(kwargs, value))
        except Exception as exc:
            raise TaskFailed(t, exc, results) from exc
    return results


# ---------------------------------------------------------------------- the cluster model
def _workers_info(client) -> dict:
    return client.scheduler_info(n_workers=-1)["workers"] if _takes_n_workers(client) else \
        client.scheduler_info()["workers"]


def _takes_n_workers(client) -> bool:
    import inspect
    try:
        return "n_workers" in inspect.signature(client.scheduler_info).parameters
    except (TypeError, ValueError):
        return False


def _kernel(n=200):
    a = np.random.default_rng(0).random((n, n))
    t0 = time.perf_counter()
    for _ in range(5):
        a = a @ a
        a /= np.abs(a).max()
    return time.perf_counter() - t0


def cluster_from_dask(client, calibrate: bool = False, speeds: dict | None = None,
                      bandwidth: float | None = None, latency: float | None = None) -> Cluster:
    """The cluster model of a live Dask cluster: one worker per Dask worker (id = its name,
    ``cores`` = its threads, ``address`` kept).

    ``speeds`` declares relative speeds by worker name (default 1.0). ``calibrate=True`` measures
    each worker's speed with a short matrix kernel (relative to the median worker), the bandwidth
    and latency with real transfers between two workers, and Dask's per-task overhead
    (``task_overhead``) with a chain of no-op tasks.
    """
    info = _workers_info(client)
    if not info:  # workers may be (re)starting: give them a moment before giving up
        try:
            client.wait_for_workers(1, timeout=15)
        except Exception:  # noqa: BLE001 - a timeout of any kind means: still none
            pass
        info = _workers_info(client)
    if not info:
        raise TaskflowError("the Dask cluster has no workers")
    declared = {str(k): float(v) for k, v in (speeds or {}).items()}
    by_name = sorted(info.items(), key=lambda kv: str(kv[1].get("name", kv[0])))
    names = [str(w.get("name", a)) for a, w in by_name]
    unknown = set(declared) - set(names)
    if unknown:
        raise TaskflowError(f"speeds name unknown worker(s) {sorted(unknown)}; workers: {', '.join(names)}")
    measured = {}
    bw, lat = bandwidth, latency
    overhead = 0.0
    if calibrate:
        times = {}
        for addr, w in by_name:
            times[str(w.get("name", addr))] = client.submit(_kernel, workers=[addr], pure=False,
                                                            allow_other_workers=False).result()
        ref = float(np.median(list(times.values())))
        measured = {n: ref / t for n, t in times.items()}
        overhead = _measure_overhead(client, by_name[0][0])
        if len(by_name) > 1 and (bw is None or lat is None):
            mbw, mlat = _measure_network(client, by_name[0][0], by_name[1][0])
            bw = mbw if bw is None else bw
            lat = mlat if lat is None else lat
    workers = []
    for addr, w in by_name:
        name = str(w.get("name", addr))
        workers.append(Worker(name, declared.get(name, measured.get(name, 1.0)), int(w.get("nthreads", 1)),
                              address=addr))
    return Cluster(workers, bandwidth=bw or 1e9, latency=lat or 0.0, name="dask", task_overhead=overhead)


def _nothing(*_):
    return None


def _measure_overhead(client, addr, n: int = 40) -> float:
    """Seconds Dask spends per task besides its work: a chain of ``n`` no-op tasks on one worker,
    each waiting for the previous, against a chain of 1 (the median of 3 each)."""
    import uuid

    def chain(k):
        token = uuid.uuid4().hex[:8]
        dsk = {(f"ovh-{token}", 0): (_nothing,)}
        for j in range(1, k):
            dsk[(f"ovh-{token}", j)] = (_nothing, (f"ovh-{token}", j - 1))
        t0 = time.perf_counter()
        import dask
        with dask.annotate(workers=[addr], allow_other_workers=False):
            client.get(dsk, (f"ovh-{token}", k - 1))
        return time.perf_counter() - t0

    one = float(np.median([chain(1) for _ in range(3)]))
    many = float(np.median([chain(n) for _ in range(3)]))
    return max(0.0, (many - one) / (n - 1))


def _measure_network(client, a, b, nbytes=64 << 20, repeat=3):
    """Bytes/s and seconds of latency, from moving a 64 MiB and a 1-byte buffer from a to b (the
    median of ``repeat`` tries each). The latency includes Dask's dispatch of one task; when the big
    transfer is not clearly longer than that (a fast local network), the bandwidth is taken from the
    whole time of the big transfer instead, a conservative figure."""
    from distributed import wait

    def make(n):
        return np.ones(n, dtype=np.uint8)

    def size(x):
        return x.nbytes

    def once(n):
        src = client.submit(make, n, workers=[a], pure=False)
        wait(src)
        t0 = time.perf_counter()
        client.submit(size, src, workers=[b], pure=False, allow_other_workers=False).result()
        dt = time.perf_counter() - t0
        del src
        return dt

    lat = float(np.median([once(1) for _ in range(repeat)]))
    big = float(np.median([once(nbytes) for _ in range(repeat)]))
    moved = big - lat
    bw = nbytes / moved if moved > 0.2 * big else nbytes / big
    return bw, lat


# ---------------------------------------------------------------------- the report
@dataclass
class RunReport:
    """What a run on Dask produced and how it compares with the plan."""

    scheduler: str
    results: dict
    trace: Trace
    predicted_makespan: float
    measured_makespan: float
    placement_fidelity: float
    plan: Schedule | None
    cluster: Cluster
    tasks: list = field(default_factory=list)
    replans: int = 0
    dispatch_overhead: float = 0.0
    time_scale: float = 1.0

    @property
    def prediction_error(self) -> float:
        """|measured - predicted| / predicted."""
        return abs(self.measured_makespan - self.predicted_makespan) / self.predicted_makespan \
            if self.predicted_makespan > 0 else float("nan")

    def to_dict(self) -> dict:
        return {"scheduler": self.scheduler, "predicted_makespan": self.predicted_makespan,
                "measured_makespan": self.measured_makespan, "placement_fidelity": self.placement_fidelity,
                "prediction_error": self.prediction_error, "replans": self.replans,
                "dispatch_overhead": self.dispatch_overhead, "time_scale": self.time_scale,
                "workers": [{"id": w.id, "address": w.address, "speed": w.speed, "cores": w.cores}
                            for w in self.cluster.workers],
                "tasks": self.tasks,
                "transfers": [t._asdict() for t in self.trace.transfers]}

    def save(self, path) -> None:
        from .formats._util import atomic_write
        atomic_write(path, json.dumps(self.to_dict(), indent=1, default=str) + "\n")

    def gantt(self, path) -> None:
        from .plot import gantt_compare
        gantt_compare(self, path)


# ---------------------------------------------------------------------- building the Dask graph
def _keys_for(graph: TaskGraph, run_token: str, gen: int) -> dict:
    """Dask keys unique to this run and submission (a key still in memory from an earlier run
    would otherwise be reused instead of computed)."""
    suffix = f"~{run_token}.{gen}"
    return {t: (f"{t}{suffix}" if isinstance(t, str) else f"#{t}{suffix}") for t in graph.ids}


def _dask_graph(graph: TaskGraph, todo, key_of: dict, cluster: Cluster, time_scale: float, size_scale: float,
                kept=None):
    """The Dask graph of the tasks ``todo``; a dependency outside ``todo`` is its kept Future."""
    a = graph.arrays
    inside = set(todo)
    kept = kept or {}
    speeds = {str(w.id): w.speed for w in cluster.workers}
    dsk = {}
    for t in todo:
        i = a.index[t]
        preds = [a.ids[p] for p in a.preds(i).tolist()]
        deps = [key_of[p] if p in inside else kept[p] for p in preds]
        call = graph._calls.get(i)
        if call is not None:
            fn, args, kwargs = call
            pos = {p: k for k, p in enumerate(preds)}
            dsk[key_of[t]] = (_execute, _Opaque((fn, _to_refs(args, pos), _to_refs(kwargs, pos))), *deps)
        else:
            costs = {str(w): v for w, v in (graph._costs.get(i) or {}).items()}
            dsk[key_of[t]] = (_emulate, _Opaque((float(a.cost[i]), costs, speeds, float(time_scale),
                                                 float(a.output_size[i]) * size_scale)), *deps)
    return dsk


def _progress(done, total, t0, last):
    now = time.perf_counter()
    if now - t0 < 2.0 or now - last < 1.0:
        return last
    width = 30
    fill = int(width * done / max(total, 1))
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} tasks  {now - t0:5.1f} s")
    sys.stderr.flush()
    return now


# ---------------------------------------------------------------------- running
def _connect(client, address, scheduler_file, workers, threads_per_worker, work_stealing):
    """(client, things to close). Without a client or address, an embedded LocalCluster."""
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
    import schedulers

    sch = schedulers.get_scheduler(scheduler, seed=seed)
    dynamic = sch.kind == "dynamic"
    if dynamic and sch.name != "work-stealing":
        raise TaskflowError(f"scheduler {sch.name!r} runs in the simulator only; on Dask use a static "
                            f"scheduler or 'work-stealing' (Dask's own)")
    graph.validate()
    c, owned = _connect(client, address, scheduler_file, workers, threads_per_worker, work_stealing=dynamic)
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
            model = _attach_addresses(self.model_given, self.client)
        elif self.model_given is None:
            model = cluster_from_dask(self.client, calibrate=self.calibrate and self.gen == 0, speeds=self.speeds)
            if self.gen == 0:
                self.measured_overhead = model.task_overhead
            else:  # a re-plan keeps what the first calibration measured
                model = model.with_task_overhead(self.measured_overhead)
        else:
            model = _attach_addresses(self.model_given, self.client, subset=True)
        if model.task_overhead and self.time_scale != 1.0:
            # predictions are scaled by time_scale; Dask's per-task overhead is not
            model = model.with_task_overhead(model.task_overhead / self.time_scale)
        return model

    def _submit(self, todo: list, model: Cluster):
        import dask

        sub = self.graph if len(todo) == len(self.graph) else self.graph.subgraph(todo)
        sub = sub.restrict_costs(w.id for w in model.workers)  # workers that are gone no longer count
        keys = _keys_for(self.graph, self.run_token, self.gen)
        for t in todo:
            self.key_of[t] = keys[t]
            self.task_of[keys[t]] = t
        dsk = _dask_graph(self.graph, todo, self.key_of, model, self.time_scale, self.size_scale, kept=self.futures)
        annotations = {"retries": self.retries} if self.retries else {}
        if self.sch.kind == "static":
            plan = self.sch.schedule(sub, model)
            addr = {w.id: w.address for w in model.workers}
            order = np.argsort(np.lexsort((plan.finish, plan.start)))
            where = {self.key_of[t]: addr[w] for t, w in zip(plan.tasks, plan.workers)}
            prio = {self.key_of[t]: int(len(plan) - r) for t, r in zip(plan.tasks, order.tolist())}
            for t, w in zip(plan.tasks, plan.workers):
                self.planned_worker[t] = w
            annotations.update(workers=lambda k: [where[k]], priority=lambda k: prio[k], allow_other_workers=False)
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
            known = set(_workers_info(self.client))
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
                    now_workers = set(_workers_info(self.client))
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
        return self._report(plan, predicted, results, stream.data, t_submit)

    def _predict(self, plan, model):
        if plan is not None:
            return plan.makespan * self.time_scale
        from .simulator import simulate
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

    # ------------------------------------------------------------------ measuring
    def _report(self, plan, predicted, results, records, t_submit):
        worker_of_addr = {}
        for w in self.model0.workers:
            worker_of_addr[w.address] = w.id
        for addr, w in _workers_info(self.client).items():
            worker_of_addr.setdefault(addr, str(w.get("name", addr)))
        current = {self.key_of[t] for t in self.graph.ids}
        runs, transfers = [], []
        start_of = {}
        a = self.graph.arrays
        for r in records:
            key = r["key"]
            key = key if isinstance(key, str) else str(key)
            if key not in current:
                continue
            t = self.task_of[key]
            comp = [s for s in r["startstops"] if s["action"] == "compute"]
            if not comp:
                continue
            start_of[t] = (comp[0]["start"], comp[-1]["stop"], worker_of_addr.get(r["worker"], r["worker"]))
            for s in r["startstops"]:
                if s["action"] == "transfer":
                    src = worker_of_addr.get(s.get("source"), s.get("source"))
                    nbytes = sum(float(a.size[int(a.pred_eid[k])]) * self.size_scale
                                 for k in range(int(a.pred_ptr[a.index[t]]), int(a.pred_ptr[a.index[t] + 1])))
                    transfers.append((t, src, start_of[t][2], nbytes, s["start"], s["stop"]))
        if not start_of:
            raise TaskflowError("the task stream recorded no task of this run")
        origin = min(v[0] for v in start_of.values())
        for t in self.graph.ids:
            if t in start_of:
                s, f, w = start_of[t]
                runs.append(Run(t, t, w, s - origin, f - origin))
        trace = Trace(runs, [Transfer(t, s, d, b, x - origin, y - origin) for t, s, d, b, x, y in transfers],
                      scheduler=self.sch.name, network="dask")
        measured = max(r.finish for r in runs)
        planned = {}
        if plan is not None:
            planned = {t: (w, s * self.time_scale, f * self.time_scale)
                       for t, w, s, f in zip(plan.tasks, plan.workers, plan.start.tolist(), plan.finish.tolist())}
        rows = []
        same = 0
        for r in runs:
            pw = self.planned_worker.get(r.task)
            same += (pw is not None and str(pw) == str(r.worker))
            row = {"task": r.task, "worker": r.worker, "planned_worker": pw, "start": r.start, "finish": r.finish}
            if r.task in planned:
                row["predicted_start"] = planned[r.task][1]
                row["predicted_finish"] = planned[r.task][2]
                row["deviation"] = r.finish - planned[r.task][2]
            rows.append(row)
        fidelity = same / len(runs) if self.planned_worker else 0.0
        return RunReport(self.sch.name, results, trace, predicted, measured, fidelity, plan, self.model0, rows,
                         self.replans, origin - t_submit, self.time_scale)


def _attach_addresses(model: Cluster, client, subset: bool = False) -> Cluster:
    """The declared model with each worker's Dask address (matched by name)."""
    info = _workers_info(client)
    by_name = {str(w.get("name", a)): a for a, w in info.items()}
    workers = []
    for w in model.workers:
        addr = by_name.get(str(w.id))
        if addr is None:
            if subset:
                continue
            raise TaskflowError(f"cluster model names worker {w.id!r} but Dask has {sorted(by_name)}")
        workers.append(Worker(w.id, w.speed, w.cores, address=addr))
    return Cluster(workers, model.bandwidth, {a: r for a, r in model.bandwidths.items()
                                              if any(x.id == a for x in workers)}, model.latency, model.name,
                   task_overhead=model.task_overhead)


# ---------------------------------------------------------------------- Dask collections
def compute(*collections, scheduler="heft", client=None, costs: dict | None = None, cluster: Cluster | None = None,
            **run_options):
    """Plan the task graph of Dask collections with ``scheduler`` and return exactly what
    ``dask.compute(*collections)`` returns.

    ``costs`` maps a task-name prefix (the part of a key before its token) to seconds, e.g. from
    :func:`learn_costs` on a previous run; otherwise every task costs 1.0.
    """
    import dask
    from dask._expr import FinalizeCompute
    from dask.base import collections_to_expr, unpack_collections
    from dask.core import flatten

    import schedulers

    colls, repack = unpack_collections(*collections)
    if not colls:
        return collections
    expr = FinalizeCompute(collections_to_expr(colls, True)).optimize()
    keys = list(flatten(expr.__dask_keys__()))
    dsk = dict(expr.__dask_graph__())
    g = TaskGraph("dask-collection")
    name_of = {}
    for k in dsk:
        name = str(k)
        if name in name_of.values():
            name = repr(k)
        name_of[k] = name
    for k, v in dsk.items():
        prefix = _prefix(k)
        g.add_task(name_of[k], cost=(costs or {}).get(prefix, 1.0), meta={"category": prefix})
    for k, v in dsk.items():
        for d in _dependencies(v, dsk):
            g.add_edge(name_of[d], name_of[k], size=0)
    c, owned = _connect(client, run_options.pop("address", None), run_options.pop("scheduler_file", None),
                        run_options.pop("workers", 2), run_options.pop("threads_per_worker", 1),
                        work_stealing=scheduler == "work-stealing")
    try:
        sch = schedulers.get_scheduler(scheduler)
        if sch.kind == "static":
            model = _attach_addresses(cluster, c) if cluster is not None else cluster_from_dask(c)
            plan = sch.schedule(g, model)
            addr = {w.id: w.address for w in model.workers}
            where = {t: addr[w] for t, w in zip(plan.tasks, plan.workers)}
            order = np.argsort(np.lexsort((plan.finish, plan.start)))
            rank = {t: int(len(plan) - r) for t, r in zip(plan.tasks, order.tolist())}
            with dask.annotate(workers=lambda k: [where[name_of[k]]] if k in name_of else None,
                               priority=lambda k: rank.get(name_of.get(k), 0), allow_other_workers=False):
                results = c.get(expr, keys)
        else:
            results = c.get(expr, keys)
    finally:
        for x in owned:
            x.close()
    return repack(results)


def _prefix(key) -> str:
    from dask.utils import key_split
    return key_split(key)


def _dependencies(task, dsk) -> set:
    deps = getattr(task, "dependencies", None)
    if deps is not None:
        return {d for d in deps if d in dsk}
    from dask.core import get_dependencies
    return set(get_dependencies(dsk, task=task))


# ---------------------------------------------------------------------- calibration
def learn_costs(graph: TaskGraph, report, cluster: Cluster | None = None) -> TaskGraph:
    """A copy of ``graph`` whose costs are what ``report`` (a RunReport or Trace) measured, per task
    name prefix (``meta['category']``, else the id up to its first ``-``/``_``/digit) and per worker:
    a task gets exact costs on the workers where its prefix ran (their mean duration, in unscaled
    seconds), and ``cost`` = the prefix's mean duration x speed elsewhere."""
    trace = report.trace if hasattr(report, "trace") else report
    scale = getattr(report, "time_scale", 1.0) or 1.0
    cluster = cluster or getattr(report, "cluster", None)
    speed = {str(w.id): w.speed for w in cluster.workers} if cluster is not None else {}
    by = {}
    for r in trace.runs:
        p = _task_prefix(graph, r.task)
        by.setdefault(p, {}).setdefault(str(r.worker), []).append((r.finish - r.start) / scale)
    cost, costs = {}, {}
    for t in graph.ids:
        p = _task_prefix(graph, t)
        if p not in by:
            continue
        per = {w: float(np.mean(v)) for w, v in by[p].items()}
        norm = [d * speed.get(w, 1.0) for w, d in per.items()]
        cost[t] = float(np.mean(norm))
        wid = {str(w.id): w.id for w in cluster.workers} if cluster is not None else {w: w for w in per}
        costs[t] = {wid[w]: d for w, d in per.items() if w in wid}
    return graph.with_costs(cost=cost, costs=costs)


def _task_prefix(graph: TaskGraph, t) -> str:
    md = graph.task(t).meta or {}
    if md.get("category"):
        return str(md["category"])
    s = str(t)
    for k, ch in enumerate(s):
        if ch in "-_#" or ch.isdigit():
            return s[:k] or s
    return s
