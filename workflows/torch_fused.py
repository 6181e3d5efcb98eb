"""The task bodies of a fused training graph (:class:`~workflows.torch_training.TorchTraining` with
``fuse``): a gradient small enough is summed by every rank from every rank's step output, in rank
order, so no bucket or chunk task is needed; and a rank's iteration is one task, its batch loaded,
the last gradient applied, then its step (:func:`update_and_step`), whose output carries the state it
started from. The epoch ends with :func:`update_after`."""

from __future__ import annotations

import functools
import time

import numpy as np

from .torch_tasks import TorchModel, step, update

__all__ = ["update_direct", "update_and_step", "update_after"]


def update_direct(state: dict, out: dict, ctx: TorchModel, iteration: int, *outs) -> dict:
    """Task body ``update`` of a directly reduced gradient: each bucket the sum, in rank order, of
    every rank's :func:`step` bucket (each already weighted by its share), then :func:`update`.

    Parameters
    ----------
    state : dict
    out : dict
        The rank's own :func:`step` output.
    ctx : TorchModel
    iteration : int
    *outs : dict
        Every rank's :func:`step` output, rank 0 first.
    """
    sums = [functools.reduce(np.add, (o["buckets"][j] for o in outs)) for j in range(len(ctx.buckets))]
    return update(state, out, ctx, ((1, None),) * len(sums), iteration, *sums)


def update_and_step(
    prev: dict, batch, ctx: TorchModel, weight: float, iteration: int, rank: int, *outs, load=None
) -> dict:
    """Task body ``forward-backward`` of a fused graph: the last iteration's update (every rank's
    :func:`step` buckets summed, :func:`update_direct`) and then this iteration's :func:`step`, in
    one task; its output carries the state the step started from (``"state"``).

    Parameters
    ----------
    prev : dict
        The rank's last ``update_and_step`` output, or its initial state (no ``outs``).
    batch : (numpy.ndarray, numpy.ndarray) or None
        :func:`~workflows.images.collate`'s; None: ``load`` it here.
    ctx : TorchModel
    weight : float
    iteration, rank : int
    *outs : dict
        Every rank's last output, rank 0 first (none at the epoch's first iteration).
    load : tuple, optional
        ``(function, *arguments)`` that loads the batch (:func:`~workflows.images.load_samples`,
        :func:`~workflows.torch_data.load_items`): the rank's whole chain in one task.
    """
    loading = 0.0
    if batch is None:
        t0 = time.perf_counter()
        batch = load[0](*load[1:])
        loading = time.perf_counter() - t0
    state = update_direct(prev["state"], prev, ctx, iteration - 1, *outs) if outs else prev
    out = step(state, batch, ctx, weight, iteration, rank)
    out["state"], out["loading"] = state, loading  # the seconds loading took inside, for the breakdown
    return out


def update_after(prev: dict, ctx: TorchModel, iteration: int, *outs) -> dict:
    """Task body ``update`` ending a fused epoch: the last gradient applied to the state of the
    rank's last :func:`update_and_step` output.

    Parameters
    ----------
    prev : dict
    ctx : TorchModel
    iteration : int
    *outs : dict
        Every rank's last output, rank 0 first.
    """
    return update_direct(prev["state"], prev, ctx, iteration, *outs)
