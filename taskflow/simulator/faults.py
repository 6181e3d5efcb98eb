"""The simulated world's departures from the cost model: noise, stragglers and worker failures.

* ``noise``: each task's true duration is multiplied by ``exp(N(0, noise))`` (seeded by ``seed``).
* ``stragglers``: ``{worker: (factor, t)}``: tasks starting on that worker at or after ``t`` take
  ``factor`` times longer.
* ``fail``: ``{worker: t}``: the worker is lost at ``t`` (what that means is the simulator's
  business; see :mod:`taskflow.simulator.engine`). At least one worker must survive.
"""

from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..errors import UsageError

__all__ = ["Perturbations", "MAX_NOISE"]


#: the largest noise (the spread of log durations): exp(N(0, 10)) already spans 10^+-20 at 4.6 sigma;
#: beyond it durations overflow to infinity or vanish
MAX_NOISE = 10.0


class Perturbations:
    """Checked noise, stragglers and failures of one run, by worker index.

    Parameters
    ----------
    cluster : Cluster
    n : int
        Tasks in the graph (one noise factor each).
    noise : float
    stragglers : dict, optional
        Worker id -> ``(factor, t)``.
    fail : dict, optional
        Worker id -> time of loss.
    seed : int

    Raises
    ------
    TaskflowError
        A bad number, an unknown worker, or every worker lost.
    """

    def __init__(self, cluster: Cluster, n: int, noise: float = 0.0, stragglers=None, fail=None, seed: int = 0):
        try:
            noise = float(noise)
        except (TypeError, ValueError):
            raise UsageError(f"noise must be a number, got {noise!r}") from None
        rng = np.random.default_rng(seed)
        if not 0 <= noise <= MAX_NOISE:
            raise UsageError(
                f"noise must be from 0 to {MAX_NOISE:g} (a duration times exp(N(0, noise))), got {noise!r}"
            )
        #: per task: the factor on its true duration (None: no noise)
        self.noise = np.exp(rng.normal(0.0, noise, n)).tolist() if noise > 0 else None
        #: worker index -> (factor, from time)
        self.stragglers = {}
        for wid, spec in (stragglers or {}).items():
            factor, t = spec
            if wid not in cluster.index:
                raise UsageError(f"straggler: unknown worker {wid!r}")
            if not (factor > 0 and math.isfinite(factor)) or not (t >= 0 and math.isfinite(t)):
                raise UsageError(f"straggler {wid!r}: need a finite factor > 0 and a finite time >= 0, got {spec!r}")
            self.stragglers[cluster.index[wid]] = (float(factor), float(t))
        #: worker index -> time of loss
        self.fail = {}
        for wid, t in (fail or {}).items():
            if wid not in cluster.index:
                raise UsageError(f"fail: unknown worker {wid!r}")
            if not (t >= 0 and math.isfinite(t)):
                raise UsageError(f"fail {wid!r}: time must be finite and >= 0, got {t!r}")
            self.fail[cluster.index[wid]] = float(t)
        if len(self.fail) >= len(cluster):
            raise UsageError("fail: every worker would be lost; at least one must survive")

    def duration(self, d: float, task: int, worker: int, now: float) -> float:
        """The true duration of ``task`` starting on ``worker`` at ``now``, from its modelled ``d``."""
        if self.noise is not None:
            d *= self.noise[task]
        st = self.stragglers.get(worker)
        if st is not None and now >= st[1]:
            d *= st[0]
        return d
