"""``heft-dup``: HEFT with critical-parent duplication.

HEFT's order and insertion policy (H. Topcuoglu, S. Hariri, M.-Y. Wu, IEEE TPDS 13(3), 2002), with
the duplication step of the "critical parent" family of duplication-based list schedulers:
T. Hagras, J. Janeček, "A high performance, low complexity algorithm for compile-time task
scheduling in heterogeneous systems", Parallel Computing 31(7):653-670, 2005 (HCPFD), and
Y. Dai, X. Zhang, "A synthesized heuristic task scheduling algorithm", The Scientific World
Journal 2014, 465702, doi:10.1155/2014/465702 (HCPPEFT, steps 7-11 of its Algorithm 1).

Tasks go in decreasing upward rank. For each worker ``w`` the task's earliest start is found as in
HEFT (its data-ready time on ``w``, then the earliest idle gap). Then, up to ``max_copies`` times
(option, default 4): the task's *critical parent* on ``w``, the input that arrives last there
(the first such input on a tie), is copied onto ``w``, unless it already runs there, into the
earliest idle gap after that parent's own inputs can be on ``w`` (each from whichever of its
executions has it there first). The candidate keeps the copies up to the last one that made the
task start earlier; a copy that changes nothing (another input arrives as late) lets the next
critical parent be tried; the copying stops at a copy that makes the task start later, or when
the parent's copy would not finish before its output would have arrived. The task goes to the worker of the
earliest finish (ties: fewer copies, then the lower worker), with the copies that got it there.

The plan's :attr:`~taskflow.schedule.Schedule.copies` are these further executions; a consumer
takes each input from whichever execution has it on its worker first, and
:meth:`~taskflow.schedule.Schedule.validate` checks exactly that. Copies pay off where transfers
are long next to the work (high communication-to-computation ratio); on compute-bound workflows
the plan is HEFT's. A plan with copies is a plan only: the simulator and the Dask runtime run each
task once and refuse this policy with a one-line error. Cost: about twice HEFT's placement, plus
a copy's own data-ready time per copy tried.
"""

from __future__ import annotations

import numpy as np

from ._kernels import list_schedule_dup
from .base import Scheduler, kernel_inputs, register
from .ranks import upward_rank
from taskflow.schedule import Schedule

__all__ = ["HEFTDup", "DEFAULT_MAX_COPIES"]

#: copies tried per task and worker by default
DEFAULT_MAX_COPIES = 4


@register
class HEFTDup(Scheduler):
    """HEFT with critical-parent duplication (after Hagras and Janeček 2005); the rule is in the
    module docstring."""

    name = "heft-dup"
    summary = "HEFT, copying a task's critical parents onto its worker when that starts it earlier"
    duplicates = True

    def plan(self, model):
        k = self.options.get("max_copies", DEFAULT_MAX_COPIES)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"heft-dup: max_copies must be a whole number >= 0, got {k!r}")
        res = list_schedule_dup(*kernel_inputs(model), np.asarray(upward_rank(model), dtype=np.float64), int(k))
        worker, start, finish = res[:3]
        return Schedule.from_indices(model.graph, model.cluster, worker, start, finish, scheduler=self.name,
                                     extra={"copies_made": len(res[3])}, copies=res[3:])
