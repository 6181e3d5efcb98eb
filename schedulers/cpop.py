"""``cpop``: Critical-Path-On-a-Processor.

H. Topcuoglu, S. Hariri, M.-Y. Wu, IEEE TPDS 13(3):260-274, 2002. doi:10.1109/71.993206

Priority = upward rank + downward rank. The tasks on the critical path (priority equal to the
critical path's length, followed from the highest-priority entry) all go to the one worker that
runs the whole path fastest; every other task to its earliest-finish worker, with insertion.
Ready tasks are taken in decreasing priority.
"""

from __future__ import annotations

import numpy as np

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import critical_path_tasks, downward_rank, upward_rank

__all__ = ["CPOP"]


@register
class CPOP(Scheduler):
    """Critical-Path-On-a-Processor (Topcuoglu, Hariri, Wu 2002); the rule is in the module docstring."""

    name = "cpop"
    summary = "critical path on its fastest worker, the rest earliest finish (Topcuoglu et al. 2002)"

    def plan(self, cost_model):
        ru, rd = upward_rank(cost_model), downward_rank(cost_model)
        path = critical_path_tasks(cost_model, ru, rd)
        fixed = np.full(cost_model.arrays.n, -1, dtype=np.int64)
        if path:
            cp_worker = int(np.argmin(cost_model.durations[path].sum(axis=0)))
            fixed[path] = cp_worker  # a path task the worker cannot run falls back to earliest finish
        return to_schedule(cost_model, list_schedule(cost_model, ru + rd, fixed=fixed, insertion=True), self.name)
