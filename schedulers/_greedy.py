"""Glue from a CostModel to the compiled ETF / min-min loop."""

import numpy as np

from ._kernels import greedy_schedule
from .ranks import b_level


def greedy(model, mode: int):
    a = model.arrays
    return greedy_schedule(np.ascontiguousarray(model.durations), a.cores, model.cluster.cores, a.pred_ptr,
                           a.pred_idx, np.ascontiguousarray(a.size[a.pred_eid]), a.succ_ptr, a.succ_idx,
                           model.latency_matrix, model.inv_bandwidth, b_level(model), mode)
