"""``lookahead``: HEFT with one level of lookahead.

L. F. Bittencourt, R. Sakellariou, E. R. M. Madeira, "DAG scheduling using a lookahead variant
of the Heterogeneous Earliest Finish Time algorithm", 18th Euromicro International Conference on
Parallel, Distributed and Network-based Processing (PDP), 2010, 27-34. doi:10.1109/PDP.2010.56

Tasks go in decreasing upward rank, as in HEFT. Where HEFT puts a task on the worker where it
finishes earliest, this tries the task on every worker: it is placed there tentatively (earliest
finish, insertion), then each of its children, in decreasing rank, is placed tentatively by
HEFT's own rule given everything placed so far (the task and the earlier children included; a
child's parents not placed yet do not count in its data-ready time). The task goes to the worker
that minimises the latest finish among its children (its own finish when it has none); ties go
to the earlier own finish, then to the lower worker. The tentative placements are then dropped:
each child is placed for real in its own turn.

HEFT looks only at the task it places; lookahead sees what a placement does to the tasks that
need its output. The cost is a factor of about (children x workers) over HEFT's placement.
Tentative children are taken to hold their whole worker while they run (exact for one-core
workers, conservative for several cores).
"""

from __future__ import annotations

import numpy as np

from ._kernels import lookahead_schedule
from .base import Scheduler, kernel_inputs, register, to_schedule
from .ranks import upward_rank

__all__ = ["Lookahead"]


@register
class Lookahead(Scheduler):
    """Lookahead HEFT (Bittencourt, Sakellariou, Madeira 2010); the rule is in the module docstring."""

    name = "lookahead"
    summary = "HEFT choosing each worker by its children's earliest finish (Bittencourt et al. 2010)"

    def plan(self, model):
        result = lookahead_schedule(*kernel_inputs(model), np.asarray(upward_rank(model), dtype=np.float64))
        return to_schedule(model, result, self.name)
