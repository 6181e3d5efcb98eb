"""``heft``: Heterogeneous Earliest Finish Time.

H. Topcuoglu, S. Hariri, M.-Y. Wu, "Performance-effective and low-complexity task scheduling for
heterogeneous computing", IEEE TPDS 13(3):260-274, 2002. doi:10.1109/71.993206

Tasks go in decreasing upward rank (mean duration over workers + mean transfer time over pairs of
distinct workers, see :mod:`schedulers.ranks`), each to the worker where it would finish earliest,
using idle gaps (insertion). Ties: the lower task index first, then the lower worker index.
O((V + E) W) plus gap search.
"""

from __future__ import annotations

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import upward_rank

__all__ = ["HEFT", "HEFTAppend"]


@register
class HEFT(Scheduler):
    """Heterogeneous Earliest Finish Time (Topcuoglu, Hariri, Wu 2002); the rule is in the module docstring."""

    name = "heft"
    summary = "upward rank order, earliest finish with insertion (Topcuoglu et al. 2002)"
    plans_lazily = True  # a row of durations at a time: a million tasks need no 8 GB matrix

    def plan(self, cost_model):
        return to_schedule(cost_model, list_schedule(cost_model, upward_rank(cost_model), insertion=True), self.name)


@register
class HEFTAppend(HEFT):
    """HEFT's order and earliest finish, each task appended after its worker's last task (no search
    for idle gaps): the bounded variant for graphs of a million tasks. The insertion search costs
    time that grows with the tasks on each worker (on a layered graph of a million tasks on 1,000
    workers, HEFT takes minutes); appending, a worker's earliest start is known exactly without a
    search, and the plan takes O((V + E) W)."""

    name = "heft-append"
    summary = "HEFT without the gap search: each task after its worker's last (bounded, for a million tasks)"

    def plan(self, cost_model):
        return to_schedule(cost_model, list_schedule(cost_model, upward_rank(cost_model), insertion=False), self.name)
