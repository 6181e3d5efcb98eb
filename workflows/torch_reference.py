"""What real training computes, written out in plain PyTorch in one process, for the task graphs
to equal: :func:`reference_training` (the single-process loop on the global batches) and
:func:`variant_reference` (local SGD, stale-synchronous training and compressed gradients, rank by
rank). Both run torch on the tasks' threads: a convolution sums in another order on more threads,
float32 differences that fp16 rounding or top-k selection can magnify."""

from __future__ import annotations

import contextlib
import copy

import numpy as np
import torch

from .images import ImageFolder, load_batch
from .torch_tasks import TorchModel, init_state

__all__ = ["reference_training", "variant_reference"]


def reference_training(
    ctx: TorchModel, data: ImageFolder, batches, seed: int, pad: int = 0, flip: bool = False, state=None
):
    """The plain PyTorch loop on the same global batches: a module, its optimizer, ``loss.backward()``
    and ``optimizer.step()`` in one process; what the distributed graph must equal.

    Parameters
    ----------
    ctx : TorchModel
    data : ImageFolder
    batches : list of (epoch, list of numpy.ndarray)
        Per iteration its epoch and the ranks' sample indices (their concatenation is the global
        batch).
    seed, pad : int
    flip : bool
    state : dict, optional
        Start from this state instead of the seeded initial one.

    Returns
    -------
    (dict, list of float)
        The final state and the loss of each iteration.
    """
    with _threads(ctx.threads):
        return _reference_training(ctx, data, batches, seed, pad, flip, state)


def _reference_training(ctx, data, batches, seed, pad, flip, state):
    torch.manual_seed(seed)
    mod = ctx.model()
    start = init_state(ctx, seed) if state is None else state
    with torch.no_grad():
        for p, v in zip(mod.parameters(), start["params"]):
            p.copy_(v)
        for b, v in zip(mod.buffers(), start["buffers"]):
            b.copy_(v)
    opt = ctx.optimizer(list(mod.parameters()))
    opt.load_state_dict(copy.deepcopy(start["opt"]))
    mod.train()
    losses = []
    for epoch, ranks in batches:
        x, y = load_batch(data, np.concatenate(ranks), epoch, seed, pad, flip)
        opt.zero_grad()
        loss = ctx.loss(mod(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return (
        {
            "params": [p.detach().clone() for p in mod.parameters()],
            "buffers": [b.detach().clone() for b in mod.buffers()],
            "opt": opt.state_dict(),
            "log": [],
        },
        losses,
    )


def variant_reference(
    ctx: TorchModel,
    data: ImageFolder,
    batches,
    seed: int,
    pad: int,
    flip: bool,
    weights,
    mode: str = "sync",
    sync_every: int = 1,
    staleness: int = 0,
    compensation: float = 0.0,
    compression=None,
    topk_ratio: float = 0.01,
    first_iteration: int = 0,
):
    """Local SGD, stale-synchronous training and compressed gradients, written out rank by rank in
    plain PyTorch (modules, ``loss.backward()``, optimizers), for the task graph to equal.

    * ``sync``: every rank's gradient at the shared model, times its weight, summed (fp16: each
      rank's bucket rounded to half precision, summed in half precision in rank order; top-k: the
      ``topk_ratio`` largest entries of bucket plus residual, the rest carried as the residual),
      then one optimizer step.
    * ``local``: each rank steps its own model with its own gradient; every ``sync_every``
      iterations (counted from the job's first) every model becomes the weighted mean.
    * ``stale``: the shared model ``u`` takes the summed gradient of each iteration; a rank computes
      iteration ``t`` at ``u`` of iteration ``t - s`` (not before the epoch's first) less the learning
      rate times its own gradients since; ``compensation`` adds ``compensation x g x g x (u_t -
      u_(t-s))`` to the summed gradient (DC-S3GD).

    Parameters
    ----------
    ctx : TorchModel
    data : ImageFolder
    batches : list of (epoch, list of numpy.ndarray)
    seed, pad : int
    flip : bool
    weights : list of float
        Each rank's share of the global batch.
    mode, sync_every, staleness, compensation, compression, topk_ratio
        As :class:`~workflows.torch_training.TorchTraining`'s.
    first_iteration : int
        The first batch's iteration number (local SGD's sync points).

    Returns
    -------
    (list of list of torch.Tensor, list of float)
        Each rank's parameters at the end, and each iteration's loss (the ranks' weighted mean).
    """
    with _threads(ctx.threads):
        return _variant_reference(
            ctx,
            data,
            batches,
            seed,
            pad,
            flip,
            weights,
            mode,
            sync_every,
            staleness,
            compensation,
            compression,
            topk_ratio,
            first_iteration,
        )


@contextlib.contextmanager
def _threads(n: int):
    """Torch's threads set to the tasks' ``n`` (a convolution sums in another order on more
    threads: float32 differences that fp16 rounding or top-k selection can magnify)."""
    was = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(was)


def _variant_reference(
    ctx,
    data,
    batches,
    seed,
    pad,
    flip,
    weights,
    mode,
    sync_every,
    staleness,
    compensation,
    compression,
    topk_ratio,
    first_iteration,
):
    N = len(weights)

    def module():
        torch.manual_seed(seed)
        return ctx.model()

    nets = [module() for _ in range(N)]  # a rank's module: its gradients (and, local SGD, its model)
    shared = module()
    opts = [ctx.optimizer(list(m.parameters())) for m in nets] if mode == "local" else None
    opt = ctx.optimizer(list(shared.parameters()))
    lr = opt.param_groups[0]["lr"]

    def flat(tensors, j):
        return torch.cat([tensors[i].reshape(-1) for i in ctx.buckets[j]])

    def unflat(flats):
        out = [None] * len(ctx.sizes)
        for j, b in enumerate(ctx.buckets):
            off = 0
            for i in b:
                out[i] = flats[j][off : off + ctx.sizes[i]].reshape(ctx.shapes[i])
                off += ctx.sizes[i]
        return out

    def grads(net, params, x, y):
        with torch.no_grad():
            for p, v in zip(net.parameters(), params):
                p.copy_(v)
        net.train()
        net.zero_grad()
        loss = ctx.loss(net(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        return [p.grad.detach().clone() for p in net.parameters()], float(loss.detach())

    def current(net):
        return [p.detach().clone() for p in net.parameters()]

    residual = [[None] * len(ctx.buckets) for _ in range(N)]
    history, pending, losses = [current(shared)], [[] for _ in range(N)], []
    epoch_start, last_epoch = 0, None
    for t_job, (epoch, ranks) in enumerate(batches):
        t = first_iteration + t_job
        if epoch != last_epoch:  # stale: the window restarts with each epoch's graph
            epoch_start, last_epoch = len(history) - 1, epoch
            pending = [[] for _ in range(N)]
        step_loss, sums = 0.0, None
        for r in range(N):
            x, y = load_batch(data, ranks[r], epoch, seed, pad, flip)
            if mode == "local":
                g, loss = grads(nets[r], current(nets[r]), x, y)
                for p, gi in zip(nets[r].parameters(), g):
                    p.grad = gi
                opts[r].step()
                step_loss += loss * len(y)
                continue
            params = current(shared)
            if mode == "stale" and staleness:
                lo = max(epoch_start, len(history) - 1 - staleness)
                params = [p.clone() for p in history[lo]]
                for own in pending[r][lo - epoch_start :]:
                    for p, gi in zip(params, own):
                        p -= lr * gi
            g, loss = grads(nets[r], params, x, y)
            step_loss += loss * len(y)
            pending[r].append(g)
            buckets = [flat(g, j) * weights[r] for j in range(len(ctx.buckets))]
            for j, v in enumerate(buckets):
                v = v.numpy()
                if compression == "fp16":
                    v = v.astype(np.float16)
                elif compression == "topk":
                    w = v if residual[r][j] is None else v + residual[r][j]
                    k = max(1, int(round(topk_ratio * w.size)))
                    idx = np.argsort(-np.abs(w), kind="stable")[:k]
                    dense = np.zeros_like(w)
                    dense[idx] = w[idx]
                    residual[r][j] = w - dense
                    v = dense
                buckets[j] = v
            sums = buckets if sums is None else [a + v for a, v in zip(sums, buckets)]
        losses.append(step_loss / sum(len(r_) for r_ in ranks))
        if mode == "local":
            if (t + 1) % sync_every == 0:
                mean = [sum(current(nets[r])[k] * weights[r] for r in range(N)) for k in range(len(ctx.sizes))]
                for net in nets:
                    with torch.no_grad():
                        for p, v in zip(net.parameters(), mean):
                            p.copy_(v)
            continue
        g = unflat([torch.from_numpy(np.asarray(v, dtype=np.float32)) for v in sums])
        if mode == "stale" and staleness and compensation:
            lo = max(epoch_start, len(history) - 1 - staleness)
            g = [gi + compensation * gi * gi * (u - a) for gi, u, a in zip(g, current(shared), history[lo])]
        for p, gi in zip(shared.parameters(), g):
            p.grad = gi
        opt.step()
        history.append(current(shared))
    if mode == "local":
        return [current(net) for net in nets], losses
    return [current(shared) for _ in range(N)], losses
