"""The real-workload suite (``taskflow bench --suite dask``): ordinary Dask code
(:mod:`.dask_workloads`) under Dask's own scheduling and under ``taskflow.use`` with a scheduler, on
the same cluster, alternating. Under the scheduler, each run's prediction (the makespan the plan, or
the guard's choice of Dask's own scheduling, predicted) is compared with the run's makespan as the
scheduler plugin saw it (from the graph's arrival to its last result): ``prediction_error``,
the median over the later runs (``first_prediction_error``: the first run).

For each cluster and workload: each side's *first run* on a fresh cluster of its own (nothing
measured yet: Dask's defaults and taskflow's priors), ``firsts`` times, alternating (their median
is reported: one first run differs from the next by up to 2x here); then on one more fresh
cluster a warm-up run of each side (not counted) and ``repeat`` runs of each side, alternating,
whose median and spread are reported. Every result is checked against the other side's.

Each ratio (ours / Dask's, of the medians) comes with its 95% interval (:func:`ratio_interval`: a
bootstrap over the pairs of runs made one after the other), so that a ratio above 1 can be told
from this machine's noise: a workload is *longer* only where the whole interval is above the
target.

Clusters: ``homogeneous`` (``workers`` processes of one thread); ``heterogeneous`` (the same, the
last worker held to a quarter of a core by a cgroup CPU quota: needs root and a cgroup cpu
controller, else skipped with the reason); ``two-racks`` (``workers`` Dask workers of one thread on
the network testbed, each on a 1 Gbit/s link, the first and the second half in two racks joined by
one 100 Mbit/s link: needs root and network namespaces, else skipped with the reason). On the
testbed the client runs in the testbed's client namespace: each measurement step (a side's first
run, or the warm-up and the alternating runs) is a process there that writes its times and
results to a file this one reads.
"""

from __future__ import annotations

import json
import os
import pickle
import statistics
import sys
import tempfile
import time

from ..errors import RunFailed, TestbedError, UsageError
from .dask_workloads import WORKLOADS, workload

__all__ = ["CLUSTERS", "DEFAULT_SCHEDULER", "BOOTSTRAP", "run_suite", "format_rows", "summarise", "ratio_interval"]

CLUSTERS = ("homogeneous", "heterogeneous", "two-racks")
#: the two-rack cluster's links (each worker's, and the one between the racks)
RACK_LINK, INTER_RACK = "1gbit", "100mbit"
#: what ``taskflow.use(client)`` places with when no scheduler is named
DEFAULT_SCHEDULER = "adaptive"
#: the quota of the slow worker of the heterogeneous cluster, in cores
SLOW_CORES = 0.25
#: resamples of the bootstrap behind each ratio's 95% interval
BOOTSTRAP = 4000


def ratio_interval(ours, dask, level: float = 0.95, resamples: int = BOOTSTRAP, seed: int = 0) -> tuple:
    """The percentile-bootstrap interval of ``median(ours) / median(dask)``.

    The i-th runs of the two sides ran one after the other, so they are resampled as pairs: a
    drift of the machine's speed over the session moves both. With few runs the interval is
    coarse (three pairs have ten distinct resamples) and wide where the runs spread.

    Parameters
    ----------
    ours, dask : sequence of float
        Seconds of each run, paired by position (the same number of each).
    level : float
        The interval's coverage.
    resamples : int
    seed : int
        The resampling's seed: the same runs give the same interval.

    Returns
    -------
    (float, float)

    Raises
    ------
    TaskflowError
        The two sides have different numbers of runs, or none.

    Examples
    --------
    >>> ratio_interval([2.0, 2.1, 1.9], [1.0, 1.1, 0.9])[0] > 1.5
    True
    """
    import numpy as np

    o, d = np.asarray(ours, dtype=float), np.asarray(dask, dtype=float)
    if len(o) != len(d) or not len(o):
        raise UsageError(f"ratio_interval: needs runs of both sides in pairs (got {len(o)} and {len(d)})")
    idx = np.random.default_rng(seed).integers(0, len(o), size=(resamples, len(o)))
    ratios = np.median(o[idx], axis=1) / np.median(d[idx], axis=1)
    lo, hi = np.quantile(ratios, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


class _Cluster:
    """A fresh LocalCluster of ``workers`` one-thread processes, the last one CPU-limited when
    ``kind`` is heterogeneous; a client on it."""

    def __init__(self, kind: str, workers: int):
        from distributed import Client

        from ..runtime.launch.local import local_cluster
        from ..testbed import CpuLimits

        self.lc = local_cluster(workers, 1, work_stealing=True)
        self.client = Client(self.lc)
        self.client.wait_for_workers(workers, timeout=60)
        self.limits = None
        if kind == "heterogeneous":
            import os

            pids = self.client.run(os.getpid)
            slow = sorted(pids)[-1]
            self.limits = CpuLimits({pids[slow]: SLOW_CORES}).apply()

    def session(self, w, folder, sides, scheduler_options) -> list:
        """``[(seconds, results, seen)]`` of ``w`` under each side of ``sides`` in turn (see :func:`_timed`)."""
        return [_timed(self.client, w, folder, s, scheduler_options) for s in sides]

    def close(self) -> None:
        if self.limits is not None:
            self.limits.release()
        self.client.close()
        self.lc.close()


class _RackCluster:
    """A fresh testbed of ``workers`` Dask workers in two racks; each session a process in its
    client namespace."""

    def __init__(self, workers: int):
        from ..testbed import Testbed

        self.tb = Testbed(
            workers=max(2, workers), topology="two-racks", bandwidth=RACK_LINK, inter_rack=INTER_RACK, timeout=120
        ).start()

    def session(self, w, folder, sides, scheduler_options) -> list:
        """As :meth:`_Cluster.session`, run in the testbed's client namespace."""
        out = os.path.join(folder, f"session-{time.monotonic_ns()}.pkl")
        spec = json.dumps(
            {"workload": w.name, "folder": folder, "sides": sides, "options": scheduler_options, "out": out}
        )
        p = self.tb.exec([sys.executable, "-m", __name__, spec], timeout=1800)
        if p.returncode != 0:
            raise TestbedError(
                f"{w.name} on the two-rack testbed failed: {(p.stderr.strip().splitlines() or ['no output'])[-1]}"
            )
        with open(out, "rb") as f:
            return pickle.load(f)

    def close(self) -> None:
        self.tb.stop()


def _cluster(kind: str, workers: int):
    return _RackCluster(workers) if kind == "two-racks" else _Cluster(kind, workers)


def _inside(spec: dict) -> None:
    """In the testbed's client namespace: one session, its ``[(seconds, results, seen)]`` pickled."""
    from distributed import Client

    w = workload(spec["workload"])
    with Client(timeout="60s") as client:
        res = [_timed(client, w, spec["folder"], s, spec["options"]) for s in spec["sides"]]
    with open(spec["out"], "wb") as f:
        pickle.dump(res, f)


def _timed(client, w, folder, scheduler, options=None):
    """One run of workload ``w``: seconds from submission to results, the results, and (under a
    scheduler) what the scheduler plugin predicted and measured of the run: ``{"predicted",
    "makespan", "decision"}`` (seconds from the graph's arrival to its last result; the decision
    as each one the run took in turn: ``plan>dask``)."""
    import taskflow
    from taskflow.runtime.client.session import call

    taskflow.use(client, scheduler, **(options or {}) if scheduler else {})
    colls = w.build(folder)
    t0 = time.perf_counter()
    out = client.compute(colls, sync=True)
    secs = time.perf_counter() - t0
    seen = {}
    if scheduler:
        status = call(client, "taskflow_status", client=client.id)
        seen = {k: status.get(k) for k in ("predicted", "makespan", "decision")}
        if status.get("path"):  # a try given up shows as what it tried, then what it fell back to
            seen["decision"] = ">".join(status["path"])
    taskflow.use(client, None)
    return secs, out, seen


def run_suite(
    clusters=("homogeneous",),
    names=None,
    repeat: int = 5,
    workers: int = 2,
    scheduler: str = DEFAULT_SCHEDULER,
    progress: bool = True,
    options: dict | None = None,
    firsts: int = 1,
) -> list:
    """Run the suite; one row per cluster and workload.

    Parameters
    ----------
    clusters : list of str
        From :data:`CLUSTERS`.
    names : list of str, optional
        Workloads (default: all).
    repeat : int
        Runs of each side after the first (at least 1).
    workers : int
    scheduler : str
        The scheduler ``taskflow.use`` places with.
    progress : bool
        Print a line per workload.
    options : dict, optional
        The scheduler's options (``taskflow.use(client, scheduler, **options)``).
    firsts : int
        First runs of each side, each on a fresh cluster, alternating (their median is reported).

    Returns
    -------
    list of dict

    Raises
    ------
    TaskflowError
        An unknown cluster or workload, a bad count, or two sides that disagree on a result.
    """
    bad = [c for c in clusters if c not in CLUSTERS]
    if bad:
        raise UsageError(f"unknown cluster {bad[0]!r}; known: {', '.join(CLUSTERS)}")
    for name, n in (("repeat", repeat), ("firsts", firsts)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise UsageError(f"{name} must be an integer >= 1, got {n!r}")
    chosen = [workload(n) for n in names] if names else list(WORKLOADS)
    if "heterogeneous" in clusters:
        from ..testbed import cpu_limits_available

        why = cpu_limits_available()
        if why:
            print(f"heterogeneous cluster skipped: {why}")
            clusters = [c for c in clusters if c != "heterogeneous"]
    if "two-racks" in clusters:
        from ..testbed import available

        why = available()
        if why:
            print(f"two-racks cluster skipped: {why}")
            clusters = [c for c in clusters if c != "two-racks"]
    rows = []
    with _same_shuffles_quiet():
        for kind in clusters:
            for k, w in enumerate(chosen):
                with tempfile.TemporaryDirectory(prefix="taskflow-suite-") as folder:
                    if w.prepare is not None:
                        w.prepare(folder)
                    rows.append(_measure(kind, w, folder, repeat, workers, scheduler, k % 2, options, firsts))
                if progress:
                    print(format_rows([rows[-1]], header=False), flush=True)
    return rows


#: Dask's P2P shuffle logs a warning each time a shuffle it ran before is run again, as the suite
#: does by design (the same collection, many times)
_SHUFFLE_LOGGER = "distributed.shuffle._scheduler_plugin"


class _same_shuffles_quiet:
    """While the suite runs, that logger (in this process: the embedded clusters' scheduler) shows
    errors only."""

    def __enter__(self):
        import logging

        self.logger = logging.getLogger(_SHUFFLE_LOGGER)
        self.level = self.logger.level
        self.logger.setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        self.logger.setLevel(self.level)


def _measure(kind, w, folder, repeat, workers, scheduler, first_side: int, options, firsts: int = 1) -> dict:
    sides = [None, scheduler]  # None: Dask's own scheduling
    first = {None: [], scheduler: []}
    first_seen = []  # what the plugin saw of the scheduler's first runs
    results = {}
    for i in range(firsts):  # each side's first run on a fresh cluster of its own, alternating
        for s in (sides[(first_side + i) % 2], sides[(first_side + i + 1) % 2]):
            c = _cluster(kind, workers)
            try:
                ((secs, results[s], seen),) = c.session(w, folder, [s], options)
            finally:
                c.close()
            first[s].append(secs)
            if s is not None:
                first_seen.append(seen)
    times = {None: [], scheduler: []}
    order = list(sides)  # the warm-up of each, not counted; then alternating
    for r in range(repeat):
        order += sides if r % 2 == 0 else sides[::-1]
    c = _cluster(kind, workers)
    try:
        timed = c.session(w, folder, order, options)
    finally:
        c.close()
    errors = []  # the scheduler's runs: (predicted - measured) / measured, measured by the plugin
    decisions = []  # what the scheduler chose for each of its counted runs (plan, dask, subset)
    for s, (secs, _, seen) in list(zip(order, timed))[len(sides) :]:
        times[s].append(secs)
        if s is not None:
            decisions.append(seen.get("decision"))
        if s is not None and seen.get("predicted") and seen.get("makespan"):
            errors.append((seen["predicted"] - seen["makespan"]) / seen["makespan"])
    if not w.same(results[None], results[scheduler]):
        raise RunFailed(f"{w.name}: {scheduler} and Dask's own scheduling computed different results")
    dask_med, ours_med = statistics.median(times[None]), statistics.median(times[scheduler])
    dask_first, ours_first = statistics.median(first[None]), statistics.median(first[scheduler])
    low, high = ratio_interval(times[scheduler], times[None])
    first_low, first_high = ratio_interval(first[scheduler], first[None])
    first_errors = [e for e in map(_error, first_seen) if e == e]
    return {
        "cluster": kind,
        "workload": w.name,
        "scheduler": scheduler,
        "runs": repeat,
        "firsts": firsts,
        "dask_first": dask_first,
        "ours_first": ours_first,
        "dask_first_min": min(first[None]),
        "dask_first_max": max(first[None]),
        "ours_first_min": min(first[scheduler]),
        "ours_first_max": max(first[scheduler]),
        "dask_median": dask_med,
        "dask_min": min(times[None]),
        "dask_max": max(times[None]),
        "ours_median": ours_med,
        "ours_min": min(times[scheduler]),
        "ours_max": max(times[scheduler]),
        "ratio": ours_med / dask_med,
        "first_ratio": ours_first / dask_first,
        "ratio_low": low,
        "ratio_high": high,
        "first_ratio_low": first_low,
        "first_ratio_high": first_high,
        "prediction_error": statistics.median(errors) if errors else float("nan"),
        "first_prediction_error": statistics.median(first_errors) if first_errors else float("nan"),
        "dask_runs": " ".join(f"{t:.3f}" for t in times[None]),
        "ours_runs": " ".join(f"{t:.3f}" for t in times[scheduler]),
        "dask_first_runs": " ".join(f"{t:.3f}" for t in first[None]),
        "ours_first_runs": " ".join(f"{t:.3f}" for t in first[scheduler]),
        "decisions": " ".join(d or "-" for d in decisions),
        "first_decision": " ".join(seen.get("decision") or "-" for seen in first_seen),
    }


def _pct(x: float) -> str:
    """``+4.9%``, or ``-`` for no figure."""
    return "-" if x != x else f"{x:+.1%}"


def _last(decisions: str) -> str:
    """What the scheduler chose in its last counted run (``-``: nothing to choose, a named scheduler)."""
    return (decisions.split() or ["-"])[-1]


def _error(seen: dict) -> float:
    """(predicted - measured) / measured of one run, or NaN."""
    if seen.get("predicted") and seen.get("makespan"):
        return (seen["predicted"] - seen["makespan"]) / seen["makespan"]
    return float("nan")


def _interval(r: dict, field: str) -> str:
    """``0.95-1.08``: a row's 95% interval of ``field`` (``-`` where the row has none)."""
    lo, hi = r.get(f"{field}_low", float("nan")), r.get(f"{field}_high", float("nan"))
    return "-" if lo != lo or hi != hi else f"{lo:.2f}-{hi:.2f}"


def format_rows(rows, header: bool = True) -> str:
    """The suite's rows as a fixed-width table (seconds; ratio: ours / Dask's, with its 95%
    interval).

    Parameters
    ----------
    rows : list of dict
    header : bool
    """
    lines = []
    if header:
        lines.append(
            f"{'cluster':<14} {'workload':<17} {'Dask 1st':>8} {'ours 1st':>8} {'ratio (95%)':>17}   "
            f"{'Dask median (min-max)':>22} {'ours median (min-max)':>22} {'ratio (95%)':>17} {'pred.err':>8}"
            f"  chose"
        )
    for r in rows:
        first = f"{r['first_ratio']:.2f} ({_interval(r, 'first_ratio')})"
        later = f"{r['ratio']:.2f} ({_interval(r, 'ratio')})"
        lines.append(
            f"{r['cluster']:<14} {r['workload']:<17} {r['dask_first']:>8.2f} {r['ours_first']:>8.2f} "
            f"{first:>17}   {r['dask_median']:>8.2f} ({r['dask_min']:.2f}-{r['dask_max']:.2f})"
            f" {r['ours_median']:>8.2f} ({r['ours_min']:.2f}-{r['ours_max']:.2f}) {later:>17}"
            f" {_pct(r.get('prediction_error', float('nan'))):>8}  {_last(r.get('decisions', ''))}"
        )
    return "\n".join(lines)


def _longer(rows, field: str) -> str:
    """``0 of 9`` or ``1 of 9 (array-svd)``: the rows whose whole 95% interval of ``field`` is above 1."""
    above = [r["workload"] for r in rows if r.get(f"{field}_low", 0.0) > 1.0]
    return f"{len(above)} of {len(rows)}" + (f" ({', '.join(above)})" if above else "")


def summarise(rows) -> str:
    """One line per cluster of the suite's rows: the geometric means of the ratios (later runs,
    first runs), the worst and best later ratio, on how many workloads ours is longer beyond the
    runs' spread (the whole 95% interval above 1; later runs, first runs), and the predictions'
    median absolute error.

    Parameters
    ----------
    rows : list of dict
    """
    import math

    lines = []
    for kind in dict.fromkeys(r["cluster"] for r in rows):
        mine = [r for r in rows if r["cluster"] == kind]

        def geomean(field):
            return math.exp(sum(math.log(r[field]) for r in mine) / len(mine))

        errors = [abs(r["prediction_error"]) for r in mine if r["prediction_error"] == r["prediction_error"]]
        said = (
            f"predictions on {len(errors)} of {len(mine)}, median |error| {statistics.median(errors):.1%}"
            if errors
            else "no predictions"
        )
        lines.append(
            f"{kind}: ours / Dask's geomean {geomean('ratio'):.3f} (first runs {geomean('first_ratio'):.3f}), "
            f"worst {max(r['ratio'] for r in mine):.2f}, best {min(r['ratio'] for r in mine):.2f}; "
            f"longer beyond the spread on {_longer(mine, 'ratio')} (first runs {_longer(mine, 'first_ratio')}); "
            f"{said}"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # a session in the testbed's client namespace (see _RackCluster)
    _inside(json.loads(sys.argv[1]))
