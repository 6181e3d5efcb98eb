"""Seeded job traces shaped like the production traces of the DL-cluster papers:
:func:`generate_trace`.

* **Durations**: log-normal, heavy-tailed (most jobs minutes, a few days), as the run times of
  Microsoft's Philly trace (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN
  Training Workloads", USENIX ATC'19, Fig. 3) and SenseTime's Helios traces (Hu et al.,
  "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU Datacenters",
  SC'21, Section 3) spread over five orders of magnitude; ``median_duration`` and ``sigma`` set it,
  ``max_duration`` cuts the tail.
* **Sizes**: powers of two, most jobs on one worker (Philly: most jobs use one GPU, a few use 16 or
  more); ``sizes`` maps each size to its weight.
* **Arrivals**: a Poisson process, or ``diurnal``: its rate swinging by ``swing`` over a day (the
  day-night cycle both traces show). The rate is ``rate`` jobs an hour, or, given a cluster, what
  offers ``load`` times its workers on average.

The same seed gives the same trace.
"""

from __future__ import annotations

import math

import numpy as np

from ..checks import seed as check_seed
from ..errors import UsageError
from ..jobscheduling import Job
from .model import JobCluster, JobTrace

__all__ = ["generate_trace", "PHILLY_SIZES"]

#: workers asked for -> weight (most jobs on one worker, as in Philly and Helios)
PHILLY_SIZES = {1: 0.60, 2: 0.14, 4: 0.12, 8: 0.09, 16: 0.04, 32: 0.01}


def generate_trace(
    n: int,
    seed: int = 0,
    cluster: JobCluster | None = None,
    *,
    rate: float | None = None,
    load: float = 0.9,
    arrivals: str = "poisson",
    swing: float = 0.5,
    median_duration: float = 1200.0,
    sigma: float = 1.8,
    max_duration: float = 7 * 86400.0,
    sizes: dict | None = None,
    models=(),
) -> JobTrace:
    """``n`` jobs (see the module docstring).

    Parameters
    ----------
    n : int
    seed : int
    cluster : JobCluster, optional
        Sizes above its workers are left out of the draw; with no ``rate``, arrivals offer ``load``
        of its workers.
    rate : float, optional
        Jobs an hour (default from ``cluster`` and ``load``).
    load : float
        Offered load as a share of the cluster's workers.
    arrivals : {"poisson", "diurnal"}
    swing : float
        ``diurnal``: the rate is ``rate x (1 + swing x sin(2 pi t / day))``.
    median_duration, sigma, max_duration : float
        The log-normal's median (seconds), the spread of its logarithm, the cut.
    sizes : dict, optional
        Workers -> weight (default :data:`PHILLY_SIZES`).
    models : sequence of str
        Names drawn for the jobs' ``model`` (none: no model, a duration alone).

    Returns
    -------
    JobTrace

    Raises
    ------
    UsageError
        A count, rate, load or distribution out of range.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"n must be an integer >= 1, got {n!r}")
    rng = np.random.default_rng(check_seed(seed))
    sizes = dict(PHILLY_SIZES if sizes is None else sizes)
    if cluster is not None:
        sizes = {k: v for k, v in sizes.items() if k <= cluster.workers} or {1: 1.0}
    if not sizes or any(not (isinstance(k, int) and k >= 1 and v > 0) for k, v in sizes.items()):
        raise UsageError(f"sizes must map workers (integers >= 1) to weights > 0, got {sizes!r}")
    for name, v in (
        ("median_duration", median_duration),
        ("sigma", sigma),
        ("max_duration", max_duration),
        ("load", load),
    ):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise UsageError(f"{name} must be a number > 0, got {v!r}")
    if arrivals not in ("poisson", "diurnal") or not 0 <= swing < 1:
        raise UsageError(f"arrivals must be 'poisson' or 'diurnal' (swing in [0, 1)), got {arrivals!r}, {swing!r}")
    ks = np.array(sorted(sizes))
    p = np.array([sizes[k] for k in ks], dtype=float)
    p /= p.sum()
    workers = rng.choice(ks, size=n, p=p)
    durations = np.minimum(rng.lognormal(math.log(median_duration), sigma, size=n), max_duration)
    durations = np.maximum(np.round(durations, 1), 1.0)
    if rate is None:
        if cluster is None:
            raise UsageError("give rate (jobs an hour) or a cluster (the rate then offers load of its workers)")
        mean_service = float((ks * p).sum()) * median_duration * math.exp(sigma**2 / 2)
        rate = load * cluster.workers / mean_service * 3600.0
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise UsageError(f"rate must be jobs an hour > 0, got {rate!r}")
    per_s = rate / 3600.0
    times, t = [], 0.0
    top = per_s * (1 + swing) if arrivals == "diurnal" else per_s
    while len(times) < n:  # thinning: a Poisson process of the highest rate, kept at rate(t) / top
        t += rng.exponential(1.0 / top)
        if arrivals == "poisson" or rng.random() < (1 + swing * math.sin(2 * math.pi * t / 86400.0)) / (1 + swing):
            times.append(round(t, 1))
    names = list(models)
    jobs = [
        Job(
            f"j{k}",
            float(times[k]),
            int(workers[k]),
            float(durations[k]),
            model=names[int(rng.integers(len(names)))] if names else None,
        )
        for k in range(n)
    ]
    return JobTrace(jobs, cluster, f"generated-{arrivals}-n{n}-seed{seed}")
