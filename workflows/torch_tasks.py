"""The task bodies of real training (PyTorch), and the plain single-process loop they must equal.

A rank's state is data: ``{"params", "buffers", "opt", "log"}`` (parameter and buffer tensors in
the module's order, the optimizer's ``state_dict``, and ``(iteration, loss, samples)`` of each step
so far this run). :func:`init_state` makes it; :func:`step` runs forward and backward on the rank's
micro-batch with :func:`torch.func.functional_call` (the module built once per process is only a
skeleton: every tensor comes from the state) and returns the gradient cut into buckets (flat
``float32`` numpy arrays, each scaled by the rank's share of the global batch, so their sum over
ranks is the global batch's gradient); the allreduce sums the buckets (``workflows.allreduce``);
:func:`update` applies the optimizer to a copy of the state. No task mutates its inputs, so Dask
can run any task again (a lost worker) and get the same result.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass, field

import cloudpickle
import numpy as np
import torch

from taskflow.errors import WorkflowError

from .images import ImageFolder, load_batch

__all__ = ["TorchModel", "make_model", "init_state", "step", "bucket", "update", "evaluate", "average_states",
           "reference_training", "state_bytes"]

_SKELETONS: dict = {}  # token -> a module built by the factory, in this process (no state: a shape)


@dataclass(frozen=True)
class TorchModel:
    """What every task of one training job needs to know about its model: the factories, the
    module's parameter and buffer names and shapes, and the gradient buckets (lists of parameter
    indices, backward order)."""

    model: object
    loss: object
    optimizer: object
    token: str
    names: tuple
    shapes: tuple
    buffer_names: tuple
    buckets: tuple
    threads: int = 1
    sizes: tuple = field(default=())

    def skeleton(self) -> torch.nn.Module:
        """The module this process built from the factory (once): only its structure is used,
        every tensor comes from a state. Sets torch's threads to :attr:`threads`."""
        mod = _SKELETONS.get(self.token)
        if mod is None:
            mod = _SKELETONS[self.token] = self.model()
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        return mod


def _cut_buckets(numels, cap_bytes: float, first_bytes: float) -> tuple:
    """Parameter indices in buckets, as DDP fills them: parameters in reverse order, a bucket
    closed once it holds ``cap_bytes`` (the first one ``first_bytes``)."""
    buckets, cur, size = [], [], 0.0
    limit = min(first_bytes, cap_bytes)
    for i in range(len(numels) - 1, -1, -1):
        cur.append(i)
        size += 4.0 * numels[i]
        if size >= limit:
            buckets.append(tuple(cur))
            cur, size, limit = [], 0.0, cap_bytes
    if cur:
        buckets.append(tuple(cur))
    return tuple(buckets)


def make_model(model, loss=None, optimizer=None, bucket_mb: float = 25.0, threads: int = 1) -> TorchModel:
    """Check the factories and describe the model (built once here).

    Parameters
    ----------
    model : callable
        Returns a ``torch.nn.Module``.
    loss : callable, optional
        ``loss(output, labels)`` -> a scalar tensor, the mean over the batch (default cross-entropy).
    optimizer : callable, optional
        ``optimizer(parameters)`` -> a ``torch.optim.Optimizer`` (default SGD, lr 0.05, momentum 0.9).
    bucket_mb : float
        Gradient bucket capacity in MB (DDP's ``bucket_cap_mb``; the first bucket holds 1 MB, as DDP's).
    threads : int
        Torch threads per task.

    Raises
    ------
    WorkflowError
        A factory that is not callable, a model that is not a Module or has no parameter, an
        optimizer factory that returns no Optimizer.
    """
    import functools

    if not callable(model):
        raise WorkflowError(f"model must be a factory (a callable returning a torch.nn.Module), got "
                            f"{type(model).__name__}")
    if isinstance(model, torch.nn.Module):
        raise WorkflowError("model must be a factory returning a torch.nn.Module, not a module: pass "
                            "functools.partial(MyModel, ...) or a function")
    if not (bucket_mb > 0 and math.isfinite(bucket_mb)):
        raise WorkflowError(f"bucket_mb must be a positive number, got {bucket_mb!r}")
    loss = torch.nn.functional.cross_entropy if loss is None else loss
    optimizer = functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9) if optimizer is None else optimizer
    if not callable(loss) or not callable(optimizer):
        raise WorkflowError("loss and optimizer must be callables (loss(output, labels), optimizer(parameters))")
    torch.manual_seed(0)
    mod = model()
    if not isinstance(mod, torch.nn.Module):
        raise WorkflowError(f"model factory returned {type(mod).__name__}, not a torch.nn.Module")
    named = list(mod.named_parameters())
    if not named:
        raise WorkflowError("the model has no parameters to train")
    opt = optimizer([p for _, p in named])
    if not isinstance(opt, torch.optim.Optimizer):
        raise WorkflowError(f"optimizer factory returned {type(opt).__name__}, not a torch.optim.Optimizer")
    try:
        token = hashlib.sha1(cloudpickle.dumps((model, loss, optimizer))).hexdigest()[:16]
    except Exception as e:  # noqa: BLE001 - any pickling failure is the user's factory
        raise WorkflowError(f"the model, loss or optimizer cannot be sent to the workers (pickled): {e}") from None
    numels = [p.numel() for _, p in named]
    return TorchModel(model, loss, optimizer, token, tuple(n for n, _ in named), tuple(tuple(p.shape) for _, p in named),
                      tuple(n for n, _ in mod.named_buffers()),
                      _cut_buckets(numels, bucket_mb * 1024 * 1024, 1024 * 1024), int(threads), tuple(numels))


def init_state(ctx: TorchModel, seed: int) -> dict:
    """Task body ``init``: the model's initial state, from ``torch.manual_seed(seed)`` (every rank
    makes the same).

    Parameters
    ----------
    ctx : TorchModel
    seed : int
    """
    torch.manual_seed(seed)
    mod = ctx.model()
    params = [p.detach().clone() for p in mod.parameters()]
    opt = ctx.optimizer([p.clone().requires_grad_(True) for p in params])
    return {"params": params, "buffers": [b.detach().clone() for b in mod.buffers()], "opt": opt.state_dict(),
            "log": []}


def state_bytes(state: dict) -> int:
    """Bytes of a state's tensors (parameters, buffers, optimizer state).

    Parameters
    ----------
    state : dict
    """
    n = sum(t.numel() * t.element_size() for t in state["params"] + state["buffers"])
    for s in state["opt"].get("state", {}).values():
        n += sum(v.numel() * v.element_size() for v in s.values() if isinstance(v, torch.Tensor))
    return int(n)


def _call(ctx: TorchModel, state: dict, x, train: bool, params=None):
    mod = ctx.skeleton()
    mod.train(train)
    buffers = [b.clone() for b in state["buffers"]]  # batch norm updates its running stats in place
    tensors = dict(zip(ctx.names, state["params"] if params is None else params))
    tensors.update(zip(ctx.buffer_names, buffers))
    return torch.func.functional_call(mod, tensors, (torch.from_numpy(x),)), buffers


def step(state: dict, batch, ctx: TorchModel, weight: float, iteration: int, rank: int) -> dict:
    """Task body ``forward-backward``: the loss of the rank's micro-batch and its gradient, cut into
    buckets and scaled by ``weight`` (the rank's share of the global batch).

    Parameters
    ----------
    state : dict
    batch : (numpy.ndarray, numpy.ndarray)
        :func:`~workflows.images.collate`'s.
    ctx : TorchModel
    weight : float
    iteration, rank : int
        To name a loss that is not finite.

    Raises
    ------
    WorkflowError
        The loss is NaN or infinite (training stops there).
    """
    params = [p.detach().requires_grad_(True) for p in state["params"]]
    with torch.enable_grad():
        out, buffers = _call(ctx, state, batch[0], True, params)
        loss = ctx.loss(out, torch.from_numpy(batch[1]))
        value = float(loss.detach())
        if not math.isfinite(value):
            raise WorkflowError(f"iteration {iteration}, rank {rank}: the loss is {value}; training stopped "
                                f"(lower the learning rate, or check the data)")
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
    buckets = [(torch.cat([grads[i].reshape(-1) for i in b]) * weight).numpy() for b in ctx.buckets]
    return {"loss": value, "n": int(len(batch[1])), "buckets": buckets, "buffers": buffers}


def bucket(out: dict, j: int):
    """Task body ``bucket``: gradient bucket ``j`` of a :func:`step`'s output.

    Parameters
    ----------
    out : dict
    j : int
    """
    return out["buckets"][j]


def _flat(order, pieces):
    return pieces[0] if order is None else np.concatenate([pieces[k] for k in np.argsort(order)])


def _grads(ctx: TorchModel, layout, pieces) -> list:
    """Per parameter, its summed gradient out of the buckets' pieces (``layout``: per bucket, the
    number of its pieces and their chunk order, or None for one whole piece)."""
    grads = [None] * len(ctx.names)
    at = 0
    for b, (count, order) in zip(ctx.buckets, layout):
        flat = torch.from_numpy(np.ascontiguousarray(_flat(order, pieces[at:at + count])))
        at += count
        off = 0
        for i in b:
            n = ctx.sizes[i]
            grads[i] = flat[off:off + n].reshape(ctx.shapes[i])
            off += n
    return grads


def update(state: dict, out: dict, ctx: TorchModel, layout, iteration: int, *pieces) -> dict:
    """Task body ``update``: the optimizer's step on a copy of the state with the allreduced
    gradient; the step's loss joins the log, its batch-norm statistics the buffers.

    Parameters
    ----------
    state : dict
    out : dict
        The rank's :func:`step` output.
    ctx : TorchModel
    layout : tuple
        Per bucket ``(pieces, chunk order or None)``.
    iteration : int
    *pieces : numpy.ndarray
        Every bucket's reduced pieces, bucket after bucket.
    """
    ctx.skeleton()
    params = [p.detach().clone().requires_grad_(True) for p in state["params"]]
    opt = ctx.optimizer(params)
    opt.load_state_dict(copy.deepcopy(state["opt"]))
    for p, g in zip(params, _grads(ctx, layout, pieces)):
        p.grad = g.to(p.dtype)
    opt.step()
    return {"params": [p.detach() for p in params], "buffers": out["buffers"], "opt": opt.state_dict(),
            "log": state["log"] + [(iteration, out["loss"], out["n"])]}


def average_states(*states) -> dict:
    """The mean of several ranks' parameters (local SGD's average; buffers and optimizer state of
    the first).

    Parameters
    ----------
    *states : dict
    """
    first = states[0]
    params = [sum(s["params"][k] for s in states) / len(states) for k in range(len(first["params"]))]
    return dict(first, params=params)


def evaluate(state: dict, ctx: TorchModel, data: ImageFolder, batch: int = 256) -> dict:
    """Task body ``eval``: mean loss and accuracy of the state's model on a held-out split (no
    augmentation; batch norm in inference mode).

    Parameters
    ----------
    state : dict
    ctx : TorchModel
    data : ImageFolder
    batch : int
    """
    total, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for lo in range(0, len(data), batch):
            x, y = load_batch(data, range(lo, min(lo + batch, len(data))))
            out, _ = _call(ctx, state, x, False)
            yt = torch.from_numpy(y)
            total += float(ctx.loss(out, yt)) * len(y)
            correct += int((out.argmax(1) == yt).sum())
            n += len(y)
    return {"loss": total / n, "accuracy": correct / n, "samples": n}


def reference_training(ctx: TorchModel, data: ImageFolder, batches, seed: int, pad: int = 0,
                       flip: bool = False, state=None):
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
    return ({"params": [p.detach().clone() for p in mod.parameters()],
             "buffers": [b.detach().clone() for b in mod.buffers()], "opt": opt.state_dict(), "log": []}, losses)
