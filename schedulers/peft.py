"""``peft``: Predict Earliest Finish Time.

H. Arabnejad, J. G. Barbosa, "List scheduling algorithm for heterogeneous systems by an optimistic
cost table", IEEE TPDS 25(3):682-694, 2014. doi:10.1109/TPDS.2013.57

The optimistic cost table ``OCT[t, w]`` is the longest path from ``t``'s successors to an exit
when ``t`` runs on ``w`` and every later task gets its best worker (mean transfer times, none on
the same worker). Ready tasks go in decreasing ``rank_oct`` (the row mean), each to the worker
minimising ``EFT + OCT`` (insertion), looking one step ahead where HEFT looks only at itself.
O((V + E) W) for the table.
"""

from __future__ import annotations

from .base import Scheduler, list_schedule, register, to_schedule
from .ranks import optimistic_cost_table

__all__ = ["PEFT"]


@register
class PEFT(Scheduler):
    """Predict Earliest Finish Time (Arabnejad and Barbosa 2014); the rule is in the module docstring."""

    name = "peft"
    summary = "optimistic cost table look-ahead (Arabnejad & Barbosa 2014)"

    def plan(self, cost_model):
        table = optimistic_cost_table(cost_model)
        return to_schedule(
            cost_model, list_schedule(cost_model, table.mean(axis=1), bias=table, insertion=True), self.name
        )
