"""The profile of a trace's real jobs that lets the job simulator predict their run
(:func:`taskflow.training.jobrun.run_jobs`): :func:`profile_jobs` measures, per kind of job (model,
workers, batch), the seconds a start costs and the seconds an epoch takes alone, per pair of kinds
how much slower an epoch is beside the other (an :class:`~taskflow.jobs.Interference` table; where
the workers run on this machine, also the cores each kind keeps busy alone and the cores the machine
gives them, which the pairs' slowdowns say), and on a cluster of racks each kind's epoch spread over them too (:meth:`JobProfile.iteration`, the
timing a :class:`~taskflow.jobs.JobNetwork` of shared uplinks takes); :func:`predicted_trace` turns
a trace into the simulator's durations.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import threading
import time

from ..errors import UsageError
from ..jobs import Interference, JobCluster, JobTrace
from ..jobplacement import place
from .jobrun import JOIN_SECONDS, check_jobs, epochs_of
from .jobworkers import check_racks, workers_of

__all__ = [
    "profile_jobs",
    "predicted_trace",
    "warm_up",
    "JobProfile",
    "one_machine",
    "racks_machine",
    "machine_capacity",
]


@dataclasses.dataclass
class JobProfile:
    """What :func:`profile_jobs` measured."""

    #: (model, workers, batch) -> seconds a start costs beyond its epochs
    start: dict
    #: (model, workers, batch) -> seconds an epoch takes alone
    epoch: dict
    #: the slowdowns of kinds beside each other (every worker on one machine: ``machine``)
    interference: Interference
    #: iterations per epoch
    epoch_iterations: int
    #: the batch of a job that names none
    batch: int = 32
    #: (model, workers, batch) -> seconds an epoch takes alone spread over the racks (a cluster of racks)
    across: dict = dataclasses.field(default_factory=dict)
    #: bytes per second of each rack's uplink while ``across`` was measured
    uplink: float | None = None
    #: each pass's own measurements of the kinds alone, ``{kind: (start, epoch, across or None)}``
    #: (``start``, ``epoch`` and ``across`` are their medians over the passes)
    passes: list = dataclasses.field(default_factory=list)

    def joined(self, other: JobProfile) -> JobProfile:
        """This profile with ``other``'s passes of the kinds alone added (the same kinds measured
        again, later in a run): each kind's start, epoch and spread epoch the median over all the
        passes; the interference table (its speeds are ratios within one pass) this one's.

        Parameters
        ----------
        other : JobProfile
            Of the same kinds, iterations per epoch and batch.

        Raises
        ------
        UsageError
            Another set of kinds, iterations per epoch or batch.
        """
        if set(other.epoch) != set(self.epoch) or (other.epoch_iterations, other.batch) != (
            self.epoch_iterations,
            self.batch,
        ):
            raise UsageError("a profile joins only another pass of the same kinds, iterations per epoch and batch")
        passes = (self.passes or [_pass_of(self)]) + (other.passes or [_pass_of(other)])

        def median(k, i):
            got = [p[k][i] for p in passes if p[k][i] is not None]
            return statistics.median(got) if got else None

        return dataclasses.replace(
            self,
            start={k: median(k, 0) for k in self.epoch},
            epoch={k: median(k, 1) for k in self.epoch},
            across={k: median(k, 2) for k in self.across},
            passes=passes,
        )

    def iteration(self, model: str, counts: tuple, uplink: float) -> float:
        """Seconds per iteration of a job of kind ``model`` (its label, as :func:`predicted_trace`
        names it) with ``counts`` workers per rack, ``uplink`` bytes per second through each of its
        racks' uplinks: inside one rack, its epoch alone; over racks, what the measured spread
        epoch added to it, stretched by how much less of the uplink it gets (the timing a
        :class:`~taskflow.jobs.JobNetwork` takes).

        Parameters
        ----------
        model : str
        counts : tuple of int
        uplink : float
        """
        kind = {_label(k): k for k in self.epoch}[model]
        inside = self.epoch[kind] / self.epoch_iterations
        if len(counts) < 2 or kind not in self.across:
            return inside
        extra = max(0.0, self.across[kind] / self.epoch_iterations - inside)
        return inside + extra * (self.uplink or uplink) / uplink

    def to_dict(self) -> dict:
        """What was measured, as JSON (``taskflow jobs run -o`` writes it beside the runs)."""
        return {
            "epoch_iterations": self.epoch_iterations,
            "batch": self.batch,
            "uplink": self.uplink,
            "kinds": [
                {
                    "kind": _label(k),
                    "start": self.start[k],
                    "epoch": self.epoch[k],
                    **({"across": self.across[k]} if k in self.across else {}),
                    **({"epochs": [p[k][1] for p in self.passes]} if len(self.passes) > 1 else {}),
                }
                for k in sorted(self.epoch)
            ],
            "interference": self.interference.to_dict(),
        }

    def duration(self, job) -> float:
        """Seconds ``job`` takes alone from its start.

        Parameters
        ----------
        job : Job
        """
        k = _kind(job, self.batch)
        return self.start[k] + epochs_of(job, self.epoch_iterations) * self.epoch[k]


def _pass_of(profile: JobProfile) -> dict:
    return {k: (profile.start[k], profile.epoch[k], profile.across.get(k)) for k in profile.epoch}


def _kind(job, batch) -> tuple:
    return (job.model, job.workers, job.batch or batch)


def _label(kind) -> str:
    return f"{kind[0]}/{kind[1]}w/b{kind[2]}"


def profile_jobs(
    trace,
    models: dict,
    data,
    *,
    client,
    epoch_iterations: int = 4,
    epochs: int = 8,
    pairs: bool = True,
    racks: dict | None = None,
    uplink: float | None = None,
    warm: bool = True,
    **train_options,
) -> JobProfile:
    """Measure each kind of job in ``trace`` alone, and each pair of kinds side by side, as a real
    run trains them (a checkpoint after every epoch; the cluster warmed up first).

    Parameters
    ----------
    trace, models, data, client, epoch_iterations, train_options
        As :func:`run_jobs`.
    epochs : int
        Epochs per measurement: the first includes the start; the median of the others is an
        epoch's seconds (side by side: of those that ran while the other job was in its epochs
        too, not starting).
    pairs : bool
        Measure the pairs too (else no interference).
    racks : dict, optional
        Dask worker name -> its rack: each kind is measured on its consolidated workers (one rack
        where one holds it) and, if it has two workers or more, spread over the racks too.
    uplink : float, optional
        With ``racks``: bytes per second of each rack's uplink.
    warm : bool
        Warm the cluster up first (:func:`warm_up`; a pass that follows others needs not).

    Returns
    -------
    JobProfile

    Raises
    ------
    TaskflowError
        As :func:`run_jobs`.
    """
    from . import train

    trace = trace if isinstance(trace, JobTrace) else JobTrace(list(trace))
    check_jobs(trace.jobs, models)
    batch = train_options.pop("batch", 32)
    names = workers_of(client)
    kinds = sorted({_kind(j, batch) for j in trace.jobs})
    check_racks(racks, names)
    labels: dict = {}
    rack = tuple(labels.setdefault(racks[n], len(labels)) for n in names) if racks else ()

    def on(n, how="consolidated", free=tuple(range(len(names)))):
        return [names[w] for w in place(free, n, rack or (0,) * len(names), how, rack)]

    with tempfile.TemporaryDirectory(prefix="taskflow-profile-") as work:

        def measure(kind, on, out, n=epochs):
            """``out``: ``[(start, [(time an epoch began, its seconds) ...], cores)]``, an epoch's
            seconds from one epoch's end to the next (its graph, its run, its checkpoint); the
            cluster's cores busy over them where its processes are ``local``."""
            ck = os.path.join(work, f"{threading.get_ident()}-{time.perf_counter_ns()}.ckpt")
            ends: list = []
            t = time.perf_counter()
            train(
                models[kind[0]],
                data,
                epochs=n,
                iterations=epoch_iterations,
                workers=kind[1],
                batch=kind[2],
                client=client,
                on_workers=on,
                checkpoint=ck,
                quiet=True,
                on_epoch=lambda h: ends.append((time.perf_counter(), _busy(local) if local else 0.0)),
                **train_options,
            )
            cores = (ends[-1][1] - ends[0][1]) / (ends[-1][0] - ends[0][0]) if local and len(ends) > 1 else None
            out.append((t, list(zip([e for e, _ in ends], [b[0] - a[0] for a, b in zip(ends, ends[1:])])), cores))

        local = _processes(client) if pairs else None
        if warm:
            warm_up(trace, models, data, client=client, batch=batch, **train_options)
        start, epoch, across, cores = {}, {}, {}, {}
        for kind in kinds:
            got: list = []
            measure(kind, on(kind[1]), got)
            t, eps, cores[_label(kind)] = got[0]
            epoch[kind] = statistics.median(x for _, x in eps)
            start[kind] = max(0.0, eps[0][0] - t - epoch[kind])  # to the first epoch's end, less an epoch
            if rack and kind[1] > 1:
                got = []
                measure(kind, on(kind[1], "spread"), got)
                across[kind] = statistics.median(x for _, x in got[0][1])
        shares = {}
        for a in kinds if pairs else ():
            for b in kinds:
                if (_label(b), _label(a)) in shares or a[1] + b[1] > len(names):
                    continue
                got_a: list = []
                got_b: list = []
                first = on(a[1])
                ta = threading.Thread(target=measure, args=(a, first, got_a), daemon=True)
                ta.start()
                measure(b, on(b[1], free=tuple(w for w in range(len(names)) if names[w] not in first)), got_b)
                ta.join(JOIN_SECONDS)
                if got_a and got_b:  # the epochs run while both were past their first epoch and not done
                    lo = max(got_a[0][1][0][0], got_b[0][1][0][0])
                    hi = min(got_a[0][1][-1][0], got_b[0][1][-1][0])
                    for x, y, got in ((a, b, got_a), (b, a, got_b)):
                        # (a pair that barely overlapped, on a loaded machine: all its epochs)
                        inside = [d for t0, d in got[0][1] if t0 >= lo and t0 + d <= hi] or [d for _, d in got[0][1]]
                        shares[(_label(x), _label(y))] = min(1.0, epoch[x] / statistics.median(inside))
    busy = {k: c for k, c in cores.items() if c} if local else {}
    table = Interference(
        shares, machine=True, **({"cores": busy, "capacity": machine_capacity(shares, busy)} if busy else {})
    )
    return JobProfile(start, epoch, table, epoch_iterations, batch, across, uplink if rack else None)


def machine_capacity(shares: dict, cores: dict) -> float:
    """The cores a machine gives its jobs, from pairs of jobs side by side: a job keeping ``c``
    cores busy alone that keeps ``s`` of its speed beside another, the two ``total`` cores, says
    the machine gives ``s * total`` (where ``s < 1`` and that is at least ``c``); the median over
    the pairs, at most the machine's cores, and those where no pair slowed (the operating system
    and other programs take their part of them: the capacity is below the cores the machine has).

    Parameters
    ----------
    shares : dict
        ``(label, beside) -> speed share`` (:class:`~taskflow.jobs.Interference`'s pairs).
    cores : dict
        ``label -> cores`` busy alone.
    """
    said = [
        s * (cores[a] + cores[b])
        for (a, b), s in shares.items()
        if s < 1.0 and a in cores and b in cores and s * (cores[a] + cores[b]) >= cores[a]
    ]
    cpus = float(os.cpu_count() or 1)
    return min(cpus, statistics.median(said)) if said else cpus


def _busy(processes: list) -> float:
    """Seconds of the cores the cluster's ``processes`` have used (those gone count no more)."""
    import psutil

    total = 0.0
    for p in processes:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _boot() -> str | None:
    """This kernel's boot id and this process's PID namespace: processes that share both are on
    one machine and see each other's ids (a container's would not)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() + " " + os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _processes(client) -> list | None:
    """The processes of ``client``'s cluster (its workers, its scheduler, this one), where every
    one runs on this machine (its kernel and its process ids: network namespaces count), else None:
    the cores the jobs keep busy, not other programs'."""
    import psutil

    mine = _boot()
    if mine is None or set(client.run(_boot).values()) != {mine} or client.run_on_scheduler(_boot) != mine:
        return None
    pids = {os.getpid(), client.run_on_scheduler(os.getpid), *client.run(os.getpid).values()}
    try:
        return [psutil.Process(pid) for pid in sorted(pids)]
    except psutil.Error:  # one of them just ended (a lost worker): no cores measured
        return None


def warm_up(trace, models: dict, data, *, client, batch: int = 32, **train_options) -> None:
    """Train each model of ``trace`` for two short epochs on every worker of ``client``'s cluster:
    each worker's first torch, model and data, which no job's start should be charged with.

    Parameters
    ----------
    trace, models, data, client, batch, train_options
        As :func:`run_jobs`.
    """
    from . import train

    names = workers_of(client)
    with tempfile.TemporaryDirectory(prefix="taskflow-warm-") as work:
        for k, model in enumerate(sorted({j.model for j in trace.jobs})):
            n = len(names)
            train(
                models[model],
                data,
                epochs=2,
                iterations=2,
                workers=n,
                batch=n * max(1, batch // n),
                client=client,
                on_workers=names,
                checkpoint=os.path.join(work, f"{k}.ckpt"),
                quiet=True,
                **train_options,
            )


def predicted_trace(trace, profile: JobProfile, label: bool = True) -> JobTrace:
    """``trace`` with each job's ``duration`` from ``profile`` and, with ``label``, its ``model``
    its kind's label (the key of the profile's interference table): what the job simulator is
    fed. Without ``label``: what a real run's schedulers that know durations read.

    Parameters
    ----------
    trace : JobTrace
    profile : JobProfile
    label : bool
    """
    jobs = [
        dataclasses.replace(
            j, duration=profile.duration(j), **({"model": _label(_kind(j, profile.batch))} if label else {})
        )
        for j in trace.jobs
    ]
    return JobTrace(jobs, trace.cluster, trace.name)


def one_machine(workers: int) -> JobCluster:
    """The job cluster of a single machine's Dask workers: one node of ``workers``.

    Parameters
    ----------
    workers : int
    """
    return JobCluster(1, 1, workers, name=f"{workers} workers on one machine")


def racks_machine(names, racks: dict, uplink: float) -> JobCluster:
    """The job cluster of one machine's Dask workers in racks (the testbed's): each rack one node
    of its workers, as the real runner places them; its ``uplink`` shared by the jobs crossing it.

    Parameters
    ----------
    names : list of str
        The Dask workers, in the runner's order.
    racks : dict
        Worker name -> rack.
    uplink : float
        Bytes per second.

    Raises
    ------
    UsageError
        Racks of unequal sizes, or whose workers are not consecutive in ``names`` (the simulator's
        clusters are racks of equal nodes).
    """
    order = list(dict.fromkeys(racks[n] for n in names))
    size = len(names) // len(order)
    if any(racks[n] != order[k // size] for k, n in enumerate(names)) or size * len(order) != len(names):
        raise UsageError(
            f"the simulator needs racks of equal size, of consecutive workers; these are "
            f"{', '.join(f'{r}: {sum(racks[n] == r for n in names)}' for r in order)} "
            f"(run without the prediction)"
        )
    return JobCluster(len(order), 1, size, uplink=uplink, name=f"{len(names)} workers in {len(order)} racks")
