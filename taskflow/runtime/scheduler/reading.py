"""What the scheduler plugin reads of Dask's own scheduler, changing nothing: the state Dask's own
scheduling decides from (:func:`dask_state`), the costs of Dask's tasks from what Dask and the
plugin measured (:func:`estimated_graph`, :func:`observe`), the cores and rates the workers
report (:func:`cpu_shares`, :func:`received_rates`), and whom Dask blames for an error
(:func:`blamed_key`). What it changes is :mod:`.patching`."""

from __future__ import annotations

import math

from ...graph import TaskGraph
from ..messages import CPU_METRIC, RATES_METRIC

__all__ = [
    "MAX_PREFIXES",
    "SCALING_EVIDENCE",
    "dask_state",
    "observe",
    "compared",
    "warm",
    "input_scaling",
    "input_factor",
    "estimated_graph",
    "P2P_PAIRS",
    "BARRIER_PREFIX",
    "placed_inputs",
    "cpu_shares",
    "received_rates",
    "blamed_key",
]


#: Task prefixes whose durations, sizes and inputs the plugin keeps (the oldest is dropped past this).
MAX_PREFIXES = 10_000


#: a prefix's durations scale with its tasks' input bytes only from this many tasks on, where the
#: inputs differ (coefficient of variation) and the durations follow them (correlation) at least so much
SCALING_EVIDENCE = (4, 0.1, 0.5)


def dask_state(dask_scheduler, prefixes=()) -> dict:
    """The state Dask's own scheduling decides from, read just before a graph is submitted, for
    :class:`schedulers.dask_model.DaskModel`: ``n_tasks`` (tasks it has sent to workers: where its
    round-robin starts), ``workers`` (addresses in its table's order), ``ties`` (addresses in the
    order a set of its workers lists them), ``durations`` (its estimate per prefix, None where it
    has none), ``unknown`` (its estimate for those), ``bandwidth`` (bytes/s), ``saturation``,
    ``rootish`` (its two root-ish group thresholds), ``steal_interval`` (None without stealing),
    ``steal_phase`` (seconds until its next balancing), ``steal_latency``.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    prefixes : iterable of str
    """
    import dask
    from distributed.stealing import LATENCY
    from tornado.ioloop import IOLoop

    pc = dask_scheduler.periodic_callbacks.get("stealing")
    stealing = dask_scheduler.extensions.get("stealing")
    interval = phase = None
    if pc is not None and stealing is not None:
        interval = float(pc.callback_time) / 1000.0
        nxt = getattr(pc, "_next_timeout", None)
        if nxt is not None:
            phase = max(0.0, float(nxt) - IOLoop.current().time())
    durations = {}
    for p in prefixes:
        tp = dask_scheduler.task_prefixes.get(p)
        durations[p] = float(tp.duration_average) if tp is not None and tp.duration_average >= 0 else None
    return {
        "n_tasks": int(dask_scheduler.n_tasks),
        "workers": list(dask_scheduler.workers),
        "ties": [ws.address for ws in set(dask_scheduler.workers.values())],
        "durations": durations,
        "unknown": float(dask_scheduler.UNKNOWN_TASK_DURATION),
        "bandwidth": float(dask_scheduler.bandwidth),
        "saturation": float(dask_scheduler.WORKER_SATURATION),
        "rootish": [
            int(
                getattr(
                    dask_scheduler, "rootish_tg_threshold", dask.config.get("distributed.scheduler.rootish-taskgroup")
                )
            ),
            int(
                getattr(
                    dask_scheduler,
                    "rootish_tg_dependencies_threshold",
                    dask.config.get("distributed.scheduler.rootish-taskgroup-dependencies"),
                )
            ),
        ],
        "steal_interval": interval,
        "steal_phase": phase,
        "steal_latency": float(LATENCY),
    }


def _bounded(table: dict, name: str, empty):
    """``table[name]``, made ``empty`` where new (the oldest prefix goes past :data:`MAX_PREFIXES`)."""
    if name not in table and len(table) >= MAX_PREFIXES:
        del table[next(iter(table))]
    return table.setdefault(name, empty)


def observe(durations: dict, sizes: dict, inputs: dict, ts, worker: str, secs: float) -> None:
    """Task ``ts`` finished after ``secs`` of compute on ``worker``: add it to its prefix's
    ``durations`` ({worker: [seconds, tasks, the longest task's seconds]}), its output's bytes to
    ``sizes`` ([bytes, tasks]), and (seconds, input bytes) to ``inputs`` (sums for
    :func:`input_scaling`) where the sizes of all its inputs are known.

    Parameters
    ----------
    durations, sizes, inputs : dict
        The plugin's tables, by task-name prefix.
    ts : distributed.scheduler.TaskState
    worker : str
    secs : float
    """
    name = ts.prefix.name
    cell = _bounded(durations, name, {}).setdefault(worker, [0.0, 0, 0.0])
    cell[0] += secs
    cell[1] += 1
    cell[2] = max(cell[2], secs)
    if ts.nbytes >= 0:
        size = _bounded(sizes, name, [0.0, 0])
        size[0] += ts.nbytes
        size[1] += 1
    deps = [dts.nbytes for dts in ts.dependencies]
    if deps and min(deps) >= 0:
        x = sum(deps) / 1e6  # megabytes: the sums of squares stay well within a float's precision
        row = _bounded(inputs, name, [0.0] * 6)
        for i, v in enumerate((1.0, x, secs, x * x, x * secs, secs * secs)):
            row[i] += v


def compared(durations: dict) -> dict:
    """The rows of ``durations`` of the prefixes that ran on two workers or more: the only ones that
    say how one worker's speed compares with another's (a graph of uniquely named tasks has
    thousands of one-worker prefixes, and the speeds are learned again and again as it runs).

    Parameters
    ----------
    durations : dict
        ``{prefix: {worker: cell}}``.
    """
    return {name: row for name, row in durations.items() if len(row) >= 2}


def warm(durations: dict) -> dict:
    """``durations`` as ``{prefix: {worker: [seconds, tasks]}}`` without each worker's longest task
    of each prefix it ran twice or more: a worker's first tasks pay once for what later ones reuse
    (imports, caches, the first call of a library); one such task among a few made one of two
    identical workers look 2-7x slower (the suite's shuffle on workers alike). A worker slow
    throughout (held to part of a core) stays slow: its other tasks are. Cells without the longest
    task's seconds (``[seconds, tasks]``) are kept as they are.

    Parameters
    ----------
    durations : dict
        ``{prefix: {worker: [seconds, tasks, longest seconds]}}`` as :func:`observe` keeps them.
    """
    return {
        name: {
            w: ([cell[0] - cell[2], cell[1] - 1] if len(cell) > 2 and cell[1] >= 2 else list(cell[:2]))
            for w, cell in row.items()
        }
        for name, row in durations.items()
    }


def input_scaling(row) -> tuple | None:
    """``(a, b, mean seconds)`` of the least-squares line seconds = a + b * input megabytes over a
    prefix's tasks (``row``: the sums :func:`observe` keeps), or None where the evidence is too
    thin (:data:`SCALING_EVIDENCE`: few tasks, inputs alike, durations not following them, or a
    line that does not rise).

    Parameters
    ----------
    row : list of float
        ``[n, sum x, sum y, sum x^2, sum xy, sum y^2]``.
    """
    n, sx, sy, sxx, sxy, syy = row
    least, spread, follow = SCALING_EVIDENCE
    if n < least:
        return None
    mx, my = sx / n, sy / n
    vx, vy, cov = sxx / n - mx * mx, syy / n - my * my, sxy / n - mx * my
    if mx <= 0 or my <= 0 or vx <= (spread * mx) ** 2 or vy <= 0 or cov <= follow * math.sqrt(vx * vy):
        return None
    b = cov / vx
    return my - b * mx, b, my


def input_factor(line: tuple, megabytes: float) -> float:
    """A task's cost over its prefix's mean, for ``megabytes`` of input on the prefix's ``line``
    (:func:`input_scaling`), held within 0.1 to 10.

    Parameters
    ----------
    line : tuple
    megabytes : float
    """
    a, b, mean = line
    return min(10.0, max(0.1, (a + b * megabytes) / mean))


def estimated_graph(
    dask_scheduler,
    tss,
    durations: dict,
    sizes: dict,
    speeds: dict,
    prefix_costs: dict | None = None,
    inputs: dict | None = None,
):
    """A cost model of Dask tasks from what was measured: per task-name prefix, the seconds at
    speed 1 of the tasks the plugin saw finish (each duration times its worker's learned speed),
    scaled for each task by its input bytes where the prefix's durations follow them
    (:func:`input_scaling` of ``inputs``: the inputs in memory by their ``nbytes``, the others
    by their estimated outputs), else Dask's per-prefix duration average (its default for
    prefixes never run); outputs: ``nbytes`` of data in memory, else the prefix's mean output over
    the tasks the plugin saw finish, else Dask's default. ``prefix_costs`` (declared seconds per
    task-name prefix) win.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    tss : list of TaskState
    durations : dict
        Task prefix -> {worker name: [compute seconds, tasks]}.
    sizes : dict
        Task prefix -> [output bytes, tasks].
    speeds : dict
        Worker name -> learned relative speed.
    prefix_costs : dict, optional
    inputs : dict, optional
        Task prefix -> the sums :func:`observe` keeps.

    Returns
    -------
    TaskGraph
        Its task ids are the Dask keys.
    """
    declared = prefix_costs or {}
    index = {ts.key: i for i, ts in enumerate(tss)}
    known: dict = {}
    for name, row in durations.items():  # seconds at speed 1, from what ran where
        n = sum(cell[1] for cell in row.values())
        known[name] = sum(cell[0] * speeds.get(w, 1.0) for w, cell in row.items()) / n if n else None
    cost = [
        float(declared[ts.prefix.name])
        if ts.prefix.name in declared
        else known[ts.prefix.name]
        if known.get(ts.prefix.name) is not None
        else float(dask_scheduler._get_prefix_duration(ts.prefix))
        for ts in tss
    ]

    def size_of(ts) -> float:
        total, count = sizes.get(ts.prefix.name, (0.0, 0))
        return total / count if count else float(ts.get_nbytes())

    out = [float(ts.nbytes) if ts.nbytes >= 0 else size_of(ts) for ts in tss]
    lines = {name: input_scaling(row) for name, row in (inputs or {}).items()}
    for i, ts in enumerate(tss):
        line = lines.get(ts.prefix.name) if ts.prefix.name not in declared else None
        if line is not None and known.get(ts.prefix.name) is not None and ts.dependencies:
            x = sum(
                out[index[d.key]] if d.key in index else d.nbytes if d.nbytes >= 0 else size_of(d)
                for d in ts.dependencies
            )
            cost[i] *= input_factor(line, x / 1e6)
    # a prefix nothing has measured (Dask's 0.5 s default is a placeholder) costs what this graph's
    # measured tasks cost on average, where some were measured: mid-run, a first run's unfinished
    # tasks of prefixes not run yet would otherwise outweigh all it learned
    guessed = [
        i
        for i, ts in enumerate(tss)
        if ts.prefix.name not in declared
        and known.get(ts.prefix.name) is None
        and getattr(ts.prefix, "duration_average", -1) < 0
    ]
    if guessed and len(guessed) < len(tss):
        skip = set(guessed)
        measured = [c for i, c in enumerate(cost) if i not in skip and math.isfinite(c)]
        typical = sum(measured) / len(measured) if measured else None
        for i in guessed if typical is not None else ():
            cost[i] = typical
    src, dst, size = [], [], []
    via, meta = _p2p_traffic(dask_scheduler, tss, index, out, cost, size_of)
    for i, ts in enumerate(tss):
        for dts in ts.dependencies:
            j = index.get(dts.key)
            if j is not None:
                src.append(j)
                dst.append(i)
                size.append(via.pop((j, i), out[j]))
    for (j, i), nbytes in via.items():  # a shuffle's bytes, straight from each transfer task to each output
        src.append(j)
        dst.append(i)
        size.append(nbytes)
    cost = [c if math.isfinite(c) and c >= 0 else 0.0 for c in cost]
    # each task's kind is its Dask prefix (a tuple key's text would lead with "('"): what the model of
    # Dask's own scheduling looks up Dask's measured durations by
    kinds = [{"category": ts.prefix.name} for ts in tss]
    for i, md in enumerate(meta or ()):
        if md:
            kinds[i].update(md)
    return TaskGraph.from_arrays("dask", [ts.key for ts in tss], cost, out, src, dst, size, meta=kinds)


#: a peer-to-peer shuffle with more (transfer task, output task) pairs than this is modelled as
#: passing its bytes through its barrier task (one edge per task), not straight from each to each
P2P_PAIRS = 10_000


#: the task-name prefix of a peer-to-peer shuffle's barrier (Dask's shuffle extension finds it by name)
BARRIER_PREFIX = "shuffle-barrier"


def placed_inputs(tasks: dict, keys, worker_ids: dict, sizes: dict) -> dict:
    """The inputs of ``keys`` (a run's unfinished Dask keys) that are not among them and sit on a
    worker (in memory there, or running there): key -> ``(worker id, bytes, [keys reading it])``,
    for :func:`.predict.with_inputs`. An output in memory counts by its ``nbytes``, one still
    being computed by its prefix's mean output (``sizes``), else Dask's default.

    Parameters
    ----------
    tasks : dict
        The scheduler's task states by key.
    keys : iterable
    worker_ids : dict
        Worker address -> its id in the cluster predicted.
    sizes : dict
        Task prefix -> [output bytes, tasks] (the plugin's).
    """
    keys = list(keys)
    inside = set(keys)
    out: dict = {}
    for k in keys:  # in the keys' order: the predictions made from it are reproducible
        ts = tasks.get(k)
        for d in ts.dependencies if ts is not None else ():
            if d.key in inside:
                continue
            cell = out.get(d.key)
            if cell is None:
                holders = sorted(ws.address for ws in d.who_has or ()) or (
                    [d.processing_on.address] if d.processing_on is not None else []
                )
                wid = next((worker_ids[a] for a in holders if a in worker_ids), None)
                if wid is None:
                    continue
                total, count = sizes.get(d.prefix.name, (0.0, 0))
                nbytes = d.nbytes if d.nbytes >= 0 else total / count if count else d.get_nbytes()
                cell = out[d.key] = (wid, float(nbytes), [])
            cell[2].append(k)
    return out


def _partition(key) -> tuple:
    """The partition index in a Dask key (``(name, i, j, ...)``: ``(i, j, ...)``)."""
    return tuple(x for x in key[1:] if isinstance(x, int)) if isinstance(key, tuple) else ()


def _p2p_traffic(dask_scheduler, tss, index: dict, out: list, cost: list, size_of) -> tuple:
    """The bytes of Dask's peer-to-peer shuffles among ``tss``, which no task edge carries: each
    transfer task (a dependency of a ``shuffle-barrier`` task) splits its inputs' bytes evenly
    among the shuffle's output tasks (the barrier's dependents), which Dask's shuffle extension
    spreads over the workers in ranges of partitions. Returns ``(edges, meta)``: ``{(transfer,
    output): bytes}`` (above :data:`P2P_PAIRS` pairs, ``{(transfer, barrier): its bytes, (barrier,
    output): a share of all}`` instead), and per task a meta dict (``{"p2p": (position, outputs)}``
    for an output, the place :class:`schedulers.dask_model.DaskModel` spreads it by; None for the
    others), or None where there is no shuffle. A barrier computes nothing (what Dask measured of
    it is the wait for the shuffle's bytes), so its cost becomes 0; a transfer task's measured
    cost keeps the share of it its thread spent on the CPU (Dask's per-prefix ``thread-cpu`` and
    ``thread-noncpu`` metrics: the rest was waiting for the network), where Dask has them.

    ``out`` and ``cost`` are the tasks' estimated output bytes and costs, by position in ``tss``
    (``cost`` is changed in place); ``size_of(ts)`` estimates an output not in ``tss`` or memory.
    """
    edges: dict = {}
    meta = None
    metrics = None
    for b, bts in enumerate(tss):
        if not bts.prefix.name.startswith(BARRIER_PREFIX):
            continue
        senders = [index[d.key] for d in bts.dependencies if d.key in index]
        outputs = sorted(
            (ts for ts in bts.dependents if ts.key in index), key=lambda ts: (_partition(ts.key), str(ts.key))
        )
        if not senders or not outputs:
            continue
        if metrics is None:
            metrics = getattr(dask_scheduler, "cumulative_worker_metrics", None) or {}
        cost[b] = 0.0
        sent = {}
        for t in senders:
            ts = tss[t]
            sent[t] = sum(
                out[index[d.key]] if d.key in index else d.nbytes if d.nbytes >= 0 else size_of(d)
                for d in ts.dependencies
            )
            cpu = metrics.get(("execute", ts.prefix.name, "thread-cpu", "seconds"), 0.0)
            idle = metrics.get(("execute", ts.prefix.name, "thread-noncpu", "seconds"), 0.0)
            if cpu + idle > 0:
                cost[t] *= cpu / (cpu + idle)
        n = len(outputs)
        meta = meta or [None] * len(tss)
        for pos, ots in enumerate(outputs):
            o = index[ots.key]
            meta[o] = {"p2p": (pos, n)}
            if len(senders) * n > P2P_PAIRS:
                edges[(b, o)] = sum(sent.values()) / n
        for t, nbytes in sent.items():
            if len(senders) * n > P2P_PAIRS:
                edges[(t, b)] = nbytes
            else:
                for ots in outputs:
                    edges[(t, index[ots.key])] = nbytes / n
    return edges, meta


def cpu_shares(dask_scheduler) -> dict:
    """Worker name -> the share of a core each of its threads may use, as the CPU limit of its
    cgroup says (its :class:`~.worker_plugin.CpuLimit` heartbeat metric over its threads, at most
    1): a prior on the workers' speeds before any task has run. Empty where no worker is limited
    below its threads (then nothing tells the workers apart).

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    """
    shares = {}
    for ws in dask_scheduler.workers.values():
        limit = (getattr(ws, "metrics", None) or {}).get(CPU_METRIC)
        ok = isinstance(limit, (int, float)) and limit > 0
        shares[str(ws.name)] = min(1.0, float(limit) / max(1, int(ws.nthreads))) if ok else 1.0
    return shares if any(s < 1.0 for s in shares.values()) else {}


def received_rates(dask_scheduler) -> dict:
    """Sender name -> receiver name -> bytes per second that the receiver really took in, as its
    :class:`~.worker_plugin.IncomingRates` heartbeat metric says (a receiver busy computing, or held
    to part of a core, takes bytes in far slower than an idle calibration shows).

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    """
    workers = dask_scheduler.workers
    out: dict = {}
    for dst, ws in workers.items():
        for src, (nbytes, secs) in ((getattr(ws, "metrics", None) or {}).get(RATES_METRIC) or {}).items():
            if src in workers and src != dst and secs > 0 and nbytes > 0:
                out.setdefault(str(workers[src].name), {})[str(ws.name)] = nbytes / secs
    return out


def blamed_key(key, dask_scheduler=None):
    """Run in Dask's scheduler: the key of the task whose exception ``key`` holds (itself, or the
    ancestor Dask blames).

    Parameters
    ----------
    key : str
    dask_scheduler : distributed.Scheduler
        Given by ``client.run_on_scheduler``.
    """
    ts = dask_scheduler.tasks.get(key)
    blame = getattr(ts, "exception_blame", None)
    return key if blame is None else blame.key
