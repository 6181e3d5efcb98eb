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

import heapq

import numpy as np
from taskflow.jit import kernel

from ._profile import INF, earliest_start, empty_plan, max_degree, place, ready_heap
from .base import Scheduler, register, to_schedule
from .ranks import upward_rank

__all__ = ["HEFTContention"]


@register
class HEFTContention(Scheduler):
    """HEFT with transfers scheduled on the ports they share (Topcuoglu et al. 2002; Sinnen and
    Sousa 2005); the rule is in the module docstring."""

    name = "heft-contention"
    summary = "HEFT with transfers queued on shared ports and rack links (Sinnen & Sousa 2005)"

    def plan(self, cost_model):
        a = cost_model.arrays
        cluster = cost_model.cluster
        racks = cluster.rack_count
        rack = np.ascontiguousarray(cluster.rack_index if racks else np.zeros(len(cluster), np.int64))
        result = _contention_loop(
            np.ascontiguousarray(cost_model.durations),
            a.cores,
            cluster.cores,
            a.pred_ptr,
            a.pred_idx,
            np.ascontiguousarray(a.size[a.pred_eid]),
            a.succ_ptr,
            a.succ_idx,
            cost_model.latency_matrix,
            cost_model.inv_bandwidth,
            np.asarray(upward_rank(cost_model), dtype=np.float64),
            rack,
            racks,
            True,
        )
        return to_schedule(cost_model, result, self.name)


@kernel(cache=True)
def _route_ready(
    i, w, W, R, pred_ptr, pred_idx, pred_size, worker, finish, lat, inv, rack, free, tfree, avail, order, commit
):
    """Data-ready time of task ``i`` on worker ``w`` when every transfer it needs is scheduled on
    the ports it passes (the sender's upload, the receiver's download and, across racks, the two
    racks' uplink and downlink), each port busy with one transfer at a time, a transfer's bytes
    starting a latency after its producer has finished, once all its ports are free (Sinnen and Sousa's edge
    scheduling, end technique). An output already sent to ``w`` is not sent again. With
    ``commit``, the ports and ``avail`` keep what was scheduled; else ``free`` is untouched."""
    P = pred_ptr[i + 1] - pred_ptr[i]
    for k in range(P):
        order[k] = pred_ptr[i] + k
    # earliest producer first: that is the order in which the transfers can start
    for a in range(1, P):
        x = order[a]
        b = a - 1
        while b >= 0 and finish[pred_idx[order[b]]] > finish[pred_idx[x]]:
            order[b + 1] = order[b]
            b -= 1
        order[b + 1] = x
    nports = free.shape[0]
    for q in range(nports):
        tfree[q] = free[q]
    ready = 0.0
    for a in range(P):
        k = order[a]
        p = pred_idx[k]
        wp = worker[p]
        fp = finish[p]
        if wp == w:
            t = fp
        elif avail[p, w] < INF:  # already sent there (but never sooner than this edge's own bytes allow)
            t = avail[p, w]
            alone = fp + lat[wp, w] + pred_size[k] * inv[wp, w]
            if alone > t:
                t = alone
        else:
            sz = pred_size[k] * inv[wp, w]  # seconds of bytes; the latency comes first and holds no port
            if sz <= 0.0:
                t = fp + lat[wp, w]
            else:
                s = fp + lat[wp, w]
                if tfree[wp] > s:
                    s = tfree[wp]
                if tfree[W + w] > s:
                    s = tfree[W + w]
                cross = R > 0 and rack[wp] != rack[w]
                if cross:
                    if tfree[2 * W + rack[wp]] > s:
                        s = tfree[2 * W + rack[wp]]
                    if tfree[2 * W + R + rack[w]] > s:
                        s = tfree[2 * W + R + rack[w]]
                t = s + sz
                tfree[wp] = t
                tfree[W + w] = t
                if cross:
                    tfree[2 * W + rack[wp]] = t
                    tfree[2 * W + R + rack[w]] = t
            if commit:
                avail[p, w] = t
        if t > ready:
            ready = t
    if commit:
        for q in range(nports):
            free[q] = tfree[q]
    return ready


@kernel(cache=True)
def _contention_loop(
    durations, tcores, wcores, pred_ptr, pred_idx, pred_size, succ_ptr, succ_idx, lat, inv, priority, rack, R, insertion
):
    """The shared list-scheduling loop (no forced workers, no bias) with the data-ready time of each
    candidate worker from :func:`_route_ready`: transfers wait for the ports they share."""
    n, W, worker, start, finish, times, usage, K = empty_plan(durations)
    remaining = np.empty(n, np.int64)
    free = np.zeros(2 * W + 2 * R)
    tfree = np.zeros(2 * W + 2 * R)
    avail = np.full((n, W), INF)
    order = np.empty(max_degree(pred_ptr), np.int64)
    heap = ready_heap(pred_ptr, priority, remaining)
    while len(heap) > 0:
        i = heapq.heappop(heap)[1]  # the ready task of highest priority
        c = tcores[i]
        best_w = -1
        best_s = 0.0
        best_key = INF
        for w in range(W):
            d = durations[i, w]
            if d == INF:
                continue
            drt = _route_ready(
                i,
                w,
                W,
                R,
                pred_ptr,
                pred_idx,
                pred_size,
                worker,
                finish,
                lat,
                inv,
                rack,
                free,
                tfree,
                avail,
                order,
                False,
            )
            s = earliest_start(times[w], usage[w], K[w], drt, d, c, wcores[w], insertion)
            if best_w < 0 or s + d < best_key:
                best_key = s + d
                best_w = w
                best_s = s
        _route_ready(
            i,
            best_w,
            W,
            R,
            pred_ptr,
            pred_idx,
            pred_size,
            worker,
            finish,
            lat,
            inv,
            rack,
            free,
            tfree,
            avail,
            order,
            True,
        )
        place(
            i,
            best_w,
            best_s,
            durations[i, best_w],
            c,
            worker,
            start,
            finish,
            times,
            usage,
            K,
            succ_ptr,
            succ_idx,
            remaining,
            priority,
            heap,
        )
    return worker, start, finish
