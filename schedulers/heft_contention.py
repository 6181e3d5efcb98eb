"""``heft-contention``: HEFT whose transfers wait for the links they share.

Order and placement rule of H. Topcuoglu, S. Hariri, M.-Y. Wu, "Performance-effective and
low-complexity task scheduling for heterogeneous computing", IEEE TPDS 13(3):260-274, 2002; the
communication is scheduled on the network as in O. Sinnen and L. A. Sousa, "Communication
contention in task scheduling", IEEE TPDS 16(6):503-515, 2005 (edge scheduling, end technique):

Tasks go in decreasing upward rank. For each candidate worker, every input the task still needs
there is scheduled, earliest producer first, on the ports its transfer passes: the sender's
upload, the receiver's download and, between racks (``Cluster(racks=, uplink=)``), the sending
rack's uplink and the receiving rack's downlink. A port carries one transfer at a time; a
transfer's bytes start a latency after its producer has finished, once every port on its route
is free, and take size / bandwidth(a, b). An output already sent to a worker is not sent again (Dask
keeps one copy per worker). The task goes to the worker where it finishes earliest (insertion
into idle gaps of the worker, as HEFT); the chosen transfers then hold their ports.

HEFT itself assumes that every transfer runs alone at its pair's bandwidth, so it spreads work
over a shared link as if it were free; here two transfers through one port cost twice the time,
which is what a max-min fair network (and a real one) does to their total. O((V + E) W) plus the
gap search, with an E-sized sort per task.
"""

from __future__ import annotations

import numpy as np

from ._kernels import list_schedule_contention
from .base import Scheduler, register, to_schedule
from .ranks import upward_rank

__all__ = ["HEFTContention"]


@register
class HEFTContention(Scheduler):
    """HEFT with transfers scheduled on the ports they share (Topcuoglu et al. 2002; Sinnen and
    Sousa 2005); the rule is in the module docstring."""

    name = "heft-contention"
    summary = "HEFT with transfers queued on shared ports and rack links (Sinnen & Sousa 2005)"

    def plan(self, model):
        a = model.arrays
        cluster = model.cluster
        racks = cluster.rack_count
        rack = np.ascontiguousarray(cluster.rack_index if racks else np.zeros(len(cluster), np.int64))
        result = list_schedule_contention(
            np.ascontiguousarray(model.durations), a.cores, cluster.cores, a.pred_ptr, a.pred_idx,
            np.ascontiguousarray(a.size[a.pred_eid]), a.succ_ptr, a.succ_idx, model.latency_matrix,
            model.inv_bandwidth, np.asarray(upward_rank(model), dtype=np.float64), rack, racks, True)
        return to_schedule(model, result, self.name)
