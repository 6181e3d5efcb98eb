"""The cluster model of a live Dask cluster, measured or declared.

:func:`cluster_from_dask` makes one :class:`~taskflow.Worker` per Dask worker (id = its name, cores =
its threads, address kept) and, with ``calibrate=True``, measures relative speeds (a short
single-threaded kernel per worker, scaled by a CPU limit its cgroup sets), bandwidth and latency (real transfers between two workers) and Dask's per-task
overhead (a chain of no-op tasks).
"""

from __future__ import annotations

import time

import numpy as np

from ...cluster import Cluster, Worker
from ...errors import ClusterError, RunFailed, UsageError, WorkersLost
from ..messages import workers_info
from ..worker.worker_plugin import cpu_limit

__all__ = ["measure_pairs", "discover_racks", "cluster_from_dask", "attach_addresses"]


def _kernel(n: int = 250_000) -> tuple:
    """``(wall seconds, CPU seconds)`` a fixed piece of single-threaded Python work takes on this
    worker (no BLAS threads to fight over, so it measures the worker's core, as Python tasks use it)."""
    t0, c0 = time.perf_counter(), time.thread_time()
    acc = 0
    for i in range(n):
        acc = (acc + i * i) % 1_000_003
    return time.perf_counter() - t0, time.thread_time() - c0


#: kernel runs per worker; its speed comes from the fastest (noise only ever adds time)
CALIBRATION_ROUNDS = 7


def _speeds(client, by_name, limits: dict | None = None) -> dict:
    """Each worker's speed relative to the median worker: the best of :data:`CALIBRATION_ROUNDS`
    runs of the kernel, the rounds interleaved across workers so that a burst of load hits all.
    Differences smaller than the measurement's own noise (the spread of a worker's runs: median over
    best) are not differences: such workers get one speed.

    A worker whose cgroup allows fewer cores than it has threads (``limits``: name -> cores) runs
    the short kernel at full speed until its quota is spent, so its wall time says little: its
    time is the kernel's CPU time over its share of a core (limit / threads)."""
    limits = limits or {}
    share = {
        str(w.get("name", addr)): min(1.0, limits[str(w.get("name", addr))] / max(1, int(w.get("nthreads", 1))))
        for addr, w in by_name
        if limits.get(str(w.get("name", addr)))
    }
    runs: dict = {}
    for _ in range(CALIBRATION_ROUNDS):
        for addr, w in by_name:
            wall, cpu = client.submit(_kernel, workers=[addr], pure=False, allow_other_workers=False).result()
            name = str(w.get("name", addr))
            runs.setdefault(name, []).append(cpu / share[name] if share.get(name, 1.0) < 1.0 else wall)
    best = {n: min(v) for n, v in runs.items()}
    noise = max(float(np.median(v)) / min(v) - 1.0 for v in runs.values())
    # workers whose best times lie within the noise of the fastest group's are grouped together
    order = sorted(best, key=best.get)
    groups, current = [], [order[0]]
    for n in order[1:]:
        if best[n] <= best[current[0]] * (1.0 + noise):
            current.append(n)
        else:
            groups.append(current)
            current = [n]
    groups.append(current)
    level = {n: float(np.mean([best[m] for m in g])) for g in groups for n in g}
    ref = float(np.median(list(level.values())))
    return {n: ref / level[n] for n in best}


def _limits(client, by_name) -> dict:
    """Worker name -> the cores its cgroup allows (:func:`cpu_limit`), for workers limited."""
    try:
        got = client.sync(client._run, cpu_limit, on_error="return", callback_timeout=30)
    except Exception:  # noqa: BLE001 - no limits known: the kernel's wall time decides
        return {}
    return {
        str(w.get("name", addr)): float(got[addr])
        for addr, w in by_name
        if isinstance(got.get(addr), (int, float)) and got[addr] > 0
    }


def cluster_from_dask(
    client,
    calibrate: bool = False,
    speeds: dict | None = None,
    bandwidth: float | None = None,
    latency: float | None = None,
    pairs: bool = False,
) -> Cluster:
    """The cluster model of a live Dask cluster: one worker per Dask worker (id = its name,
    ``cores`` = its threads, ``address`` kept).

    ``speeds`` declares relative speeds by worker name (default 1.0). ``calibrate=True`` measures
    each worker's speed with a short single-threaded kernel (the best of seven runs, relative to the
    median worker; differences within the runs' own spread are reported as equal speeds; a worker
    whose cgroup limits its CPU below its threads, :func:`cpu_limit`, by the kernel's CPU time over
    its share of a core), the bandwidth
    and latency with real transfers between two workers, and Dask's per-task overhead
    (``task_overhead``) with a chain of no-op tasks. ``pairs=True`` measures the bandwidth of
    every ordered pair of workers (:func:`measure_pairs`): the model's ``bandwidth`` is then the
    median pair and ``bandwidths`` holds the pairs that differ from it by more than 10%; groups of
    workers joined by fast pairs whose traffic to each other shares one slower link become racks
    with that link's rate as ``uplink`` (:func:`discover_racks`).

    Parameters
    ----------
    client : distributed.Client
    calibrate : bool
        Measure speeds, network and per-task overhead.
    speeds : dict or list, optional
        Worker name -> declared relative speed (wins over a measured one), or one speed per
        worker in the order of their names (numbers in numeric order).
    bandwidth, latency : float, optional
        Declared network figures (win over measured ones).
    pairs : bool
        Measure the bandwidth of every ordered pair of workers (a declared ``bandwidth`` still
        wins for the scalar).

    Returns
    -------
    Cluster

    Raises
    ------
    TaskflowError
        The cluster has no workers (after waiting up to 15 s for one), or ``speeds`` names an
        unknown worker.
    """
    info = workers_info(client)
    if not info:  # workers may be (re)starting: give them a moment before giving up
        try:
            client.wait_for_workers(1, timeout=15)
        except Exception:  # noqa: BLE001 - a timeout of any kind means: still none
            pass
        info = workers_info(client)
    if not info:
        raise WorkersLost("the Dask cluster has no workers")
    by_name = sorted(info.items(), key=lambda kv: str(kv[1].get("name", kv[0])))
    names = [str(w.get("name", a)) for a, w in by_name]
    if isinstance(speeds, (list, tuple)):  # in the order of the workers' names (0, 1, 2, ..., 10)
        if len(speeds) != len(names):
            raise UsageError(
                f"speeds lists {len(speeds)} speeds for {len(names)} workers ({', '.join(names)}); "
                "give one per worker, or NAME=SPEED pairs"
            )
        speeds = dict(
            zip(sorted(names, key=lambda n: (0, int(n), "") if n.isascii() and n.isdigit() else (1, 0, n)), speeds)
        )
    declared = {str(k): float(v) for k, v in (speeds or {}).items()}
    unknown = set(declared) - set(names)
    if unknown:
        raise UsageError(f"speeds name unknown worker(s) {sorted(unknown)}; workers: {', '.join(names)}")
    measured = {}
    bw, lat = bandwidth, latency
    overhead = 0.0
    if calibrate:
        measured = _speeds(client, by_name, _limits(client, by_name))
        overhead = _measure_overhead(client, by_name[0][0])
        if len(by_name) > 1 and (bw is None or lat is None):
            # with pairs, the bandwidth comes from them: only the latency is wanted here
            mbw, mlat = _measure_network(client, by_name[0][0], by_name[1][0], nbytes=(1 << 20) if pairs else 64 << 20)
            bw = mbw if bw is None else bw
            lat = mlat if lat is None else lat
    per_pair = {}
    racks = uplink = None
    if pairs and len(by_name) > 1:
        addrs = {str(w.get("name", a)): a for a, w in by_name}
        rates = measure_pairs(client, addrs)
        median = float(np.median([r for row in rates.values() for r in row.values()]))
        bw = median if bandwidth is None else bandwidth
        per_pair = {a: {b: r for b, r in row.items() if abs(r - bw) > 0.1 * bw} for a, row in rates.items()}
        per_pair = {a: row for a, row in per_pair.items() if row}
        racks, uplink = discover_racks(client, addrs, rates)
    workers = []
    for addr, w in by_name:
        name = str(w.get("name", addr))
        workers.append(
            Worker(name, declared.get(name, measured.get(name, 1.0)), int(w.get("nthreads", 1)), address=addr)
        )
    return Cluster(
        workers,
        bandwidth=bw or 1e9,
        bandwidths=per_pair,
        latency=lat or 0.0,
        name="dask",
        task_overhead=overhead,
        racks=racks,
        uplink=uplink,
    )


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


def measure_pairs(
    client, workers: dict, seconds: float = 0.4, repeat: int = 3, smallest: int = 1 << 20, largest: int = 64 << 20
) -> dict:
    """Bytes/s of every ordered pair of workers, one pair at a time (pairs measured together
    would share links): a buffer made on ``a`` is read by a task on ``b``, and the time is the
    receiving worker's own record of the transfer (Dask's ``transfer_incoming_log``: the request
    and the bytes, without task dispatch). A 1 MiB probe sizes the buffer to take about
    ``seconds`` (``smallest``..``largest`` bytes); the result is the median of ``repeat``.

    Parameters
    ----------
    client : distributed.Client
    workers : dict
        Worker name -> Dask address.
    seconds : float
    repeat : int
    smallest, largest : int
        Bytes.

    Returns
    -------
    dict
        ``{a: {b: bytes_per_s}}`` by worker name.

    Raises
    ------
    TaskflowError
        A transfer left no record (a worker lost meanwhile).
    """
    from distributed import wait

    def make(n):
        return np.ones(n, dtype=np.uint8)

    def size(x):
        return x.nbytes

    def record(key, dask_worker=None):
        for e in reversed(dask_worker.transfer_incoming_log):
            if key in e["keys"]:
                return e["stop"] - e["start"], e["total"]
        return None

    def once(a, b, n):
        src = client.submit(make, n, workers=[a], pure=False)
        wait(src)
        client.submit(size, src, workers=[b], pure=False, allow_other_workers=False).result()
        got = client.run(record, src.key, workers=[b]).get(b)
        del src
        if not got:
            raise RunFailed(f"no record of a transfer from {a} to {b}")
        dt, total = got
        return total / max(dt, 1e-6)

    out = {}
    for a, addr_a in workers.items():
        for b, addr_b in workers.items():
            if a == b:
                continue
            probe = once(addr_a, addr_b, smallest)
            n = int(min(largest, max(smallest, probe * seconds)))
            out.setdefault(a, {})[b] = float(np.median([once(addr_a, addr_b, n) for _ in range(repeat)]))
    return out


def discover_racks(client, workers: dict, rates: dict, seconds: float = 0.4) -> tuple:
    """Racks, if the network has them: ``(racks, uplink)`` or ``(None, None)``.

    Workers whose pair rates both ways are at least half the fastest pair's are joined into
    groups. With two or more groups, flows from every worker of the first group to a distinct
    worker of the second run at once (each about ``seconds`` long alone): if together they get
    no more than 1.5x what one cross pair gets alone, they share one link, and the groups are
    racks with that aggregate as ``uplink``; otherwise the pairs are independent and per-pair
    rates already say everything.

    Parameters
    ----------
    client : distributed.Client
    workers : dict
        Worker name -> Dask address.
    rates : dict
        ``{a: {b: bytes_per_s}}`` from :func:`measure_pairs`.
    seconds : float
    """
    from distributed import wait

    names = list(workers)
    top = max(r for row in rates.values() for r in row.values())
    group = {n: n for n in names}

    def root(n):
        while group[n] != n:
            n = group[n]
        return n

    for a in names:
        for b in names:
            if a < b and min(rates[a][b], rates[b][a]) >= 0.5 * top:
                group[root(a)] = root(b)
    groups = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    if len(groups) < 2:
        return None, None
    first, second = sorted(groups.values(), key=lambda g: (-len(g), g))[:2]
    senders = list(zip(first, second))
    if len(senders) < 2:  # one flow cannot tell a shared link from a slow pair
        return None, None
    single = float(np.median([rates[a][b] for a, b in senders]))
    n = int(max(1 << 20, single * seconds))

    def make(k):
        return np.ones(k, dtype=np.uint8)

    def size(x):
        return x.nbytes

    def spans(keys, dask_worker=None):
        return [
            (e["start"], e["stop"], e["total"])
            for e in dask_worker.transfer_incoming_log
            if any(k in e["keys"] for k in keys)
        ]

    srcs = [client.submit(make, n, workers=[workers[a]], pure=False) for a, _ in senders]
    wait(srcs)
    outs = [
        client.submit(size, f, workers=[workers[b]], pure=False, allow_other_workers=False)
        for f, (_, b) in zip(srcs, senders)
    ]
    wait(outs)
    keys = [f.key for f in srcs]
    got = client.run(spans, keys, workers=[workers[b] for _, b in senders])
    records = [r for rs in got.values() for r in rs]
    if len(records) < len(senders):
        return None, None
    t0 = min(r[0] for r in records)
    t1 = max(r[1] for r in records)
    aggregate = sum(r[2] for r in records) / max(t1 - t0, 1e-6)
    if aggregate > 1.5 * single:
        return None, None
    racks = {w: k for k, g in enumerate(sorted(groups.values())) for w in g}
    return racks, aggregate


def attach_addresses(cluster: Cluster, client, subset: bool = False) -> Cluster:
    """The declared cluster model with each worker's Dask address (matched by name).

    Parameters
    ----------
    cluster : Cluster
    client : distributed.Client
    subset : bool
        Leave out the model's workers Dask does not have (after a loss) instead of failing.

    Raises
    ------
    TaskflowError
        The cluster model names a worker Dask does not have (and ``subset`` is False).
    """
    info = workers_info(client)
    by_name = {str(w.get("name", a)): a for a, w in info.items()}
    workers = []
    for w in cluster.workers:
        addr = by_name.get(str(w.id))
        if addr is None:
            if subset:
                continue
            raise ClusterError(f"cluster model names worker {w.id!r} but Dask has {sorted(by_name)}")
        workers.append(Worker(w.id, w.speed, w.cores, address=addr))
    kept = {x.id for x in workers}
    return cluster.replace(
        workers=workers,
        bandwidths={a: r for a, r in cluster.bandwidths.items() if a in kept},
        racks={a: r for a, r in cluster.racks.items() if a in kept} if cluster.racks else None,
    )
