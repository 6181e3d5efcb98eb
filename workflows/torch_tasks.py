"""The task bodies of real training (PyTorch); :mod:`.torch_reference` has what they must equal.

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

from .images import load_batch
from .torch_checks import built, check_size

__all__ = [
    "TorchModel",
    "make_model",
    "init_state",
    "given_state",
    "fresh_state",
    "optimizer_step",
    "step",
    "bucket",
    "update",
    "evaluate",
    "state_bytes",
    "compress_fp16",
    "compress_topk",
    "sparse_sum",
    "param_bucket",
    "average",
    "working",
    "score",
]

_SKELETONS: dict = {}  # token -> a module built by the factory, in this process (no state: a shape)
_DEVICES: dict = {}  # a device option -> the torch.device it means in this process


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
    device: str = "cpu"

    def where(self) -> torch.device:
        """The device this process computes on: :attr:`device`, ``auto`` being CUDA where torch
        sees a device and the CPU where not.

        Raises
        ------
        WorkflowError
            CUDA asked for where this process's torch sees no CUDA device.
        """
        d = _DEVICES.get(self.device)
        if d is None:
            name = ("cuda" if torch.cuda.is_available() else "cpu") if self.device == "auto" else self.device
            d = torch.device(name)
            if d.type == "cuda" and not torch.cuda.is_available():
                raise WorkflowError(
                    f"device {self.device!r}: the torch of this worker sees no CUDA device (use device='auto' or 'cpu')"
                )
            _DEVICES[self.device] = d
        return d

    def skeleton(self) -> torch.nn.Module:
        """The module this process built from the factory (once): only its structure is used,
        every tensor comes from a state. Sets torch's threads to :attr:`threads`."""
        mod = _SKELETONS.get(self.token)
        if mod is None:
            mod = _SKELETONS[self.token] = self.model().to(self.where())
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


def make_model(
    model, loss=None, optimizer=None, bucket_mb: float = 25.0, threads: int = 1, device: str = "cpu"
) -> TorchModel:
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
    device : str
        Where the tasks compute and keep the model's state: ``cpu``, ``cuda``, ``cuda:1`` (any
        name ``torch.device`` takes), or ``auto`` (CUDA where a worker's torch sees a device).
        Gradients are reduced on the CPU (as gloo does).

    Raises
    ------
    WorkflowError
        A device torch does not know, a factory that is not callable, a model that is not a Module or has no parameter, an
        optimizer factory that returns no Optimizer.
    """
    import functools

    if not isinstance(device, str) or not device:
        raise WorkflowError(f"device must be a device's name ('cpu', 'cuda', 'cuda:1', 'auto'), got {device!r}")
    if device != "auto":
        try:
            torch.device(device)
        except (RuntimeError, ValueError) as e:
            raise WorkflowError(f"device {device!r} is not a device torch knows: {str(e).splitlines()[0]}") from None
    if not callable(model):
        raise WorkflowError(
            f"model must be a factory (a callable returning a torch.nn.Module), got {type(model).__name__}"
        )
    if isinstance(model, torch.nn.Module):
        raise WorkflowError(
            "model must be a factory returning a torch.nn.Module, not a module: pass "
            "functools.partial(MyModel, ...) or a function"
        )
    if not (bucket_mb > 0 and math.isfinite(bucket_mb)):
        raise WorkflowError(f"bucket_mb must be a positive number, got {bucket_mb!r}")
    loss = torch.nn.functional.cross_entropy if loss is None else loss
    optimizer = functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9) if optimizer is None else optimizer
    if not callable(loss) or not callable(optimizer):
        raise WorkflowError("loss and optimizer must be callables (loss(output, labels), optimizer(parameters))")
    check_size(model)
    torch.manual_seed(0)
    mod = built(model)
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
    return TorchModel(
        model,
        loss,
        optimizer,
        token,
        tuple(n for n, _ in named),
        tuple(tuple(p.shape) for _, p in named),
        tuple(n for n, _ in mod.named_buffers()),
        _cut_buckets(numels, bucket_mb * 1024 * 1024, 1024 * 1024),
        int(threads),
        tuple(numels),
        device,
    )


def given_state(state):
    """Task body ``init`` of a later epoch: the state an earlier epoch ended with.

    Parameters
    ----------
    state : dict
    """
    return state


def init_state(ctx: TorchModel, seed: int) -> dict:
    """Task body ``init``: the model's initial state, from ``torch.manual_seed(seed)`` (every rank
    makes the same).

    Parameters
    ----------
    ctx : TorchModel
    seed : int
    """
    dev = ctx.where()
    torch.manual_seed(seed)
    return fresh_state(ctx.model().to(dev), ctx.optimizer)


def fresh_state(mod: torch.nn.Module, optimizer) -> dict:
    """A state of ``mod``'s tensors (copies) and a new optimizer's ``state_dict`` (empty when the
    module has no parameters).

    Parameters
    ----------
    mod : torch.nn.Module
    optimizer : callable
    """
    params = [p.detach().clone() for p in mod.parameters()]
    opt = optimizer([p.clone().requires_grad_(True) for p in params]).state_dict() if params else {}
    return {"params": params, "buffers": [b.detach().clone() for b in mod.buffers()], "opt": opt, "log": []}


def optimizer_step(state: dict, optimizer, grads) -> tuple:
    """The optimizer's step on copies of ``state``'s parameters with ``grads`` (one per
    parameter): ``(new parameters, the optimizer's new state_dict)``; the state is not changed.

    Parameters
    ----------
    state : dict
    optimizer : callable
    grads : sequence of torch.Tensor
    """
    params = [p.detach().to(g.device, copy=True).requires_grad_(True) for p, g in zip(state["params"], grads)]
    opt = optimizer(params)
    opt.load_state_dict(copy.deepcopy(state["opt"]))  # its buffers follow the parameters' device
    for p, g in zip(params, grads):
        p.grad = g.to(p.dtype)
    opt.step()
    return [p.detach() for p in params], opt.state_dict()


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
    dev = ctx.where()
    buffers = [b.to(dev, copy=True) for b in state["buffers"]]  # batch norm updates its running stats in place
    tensors = dict(zip(ctx.names, [p.to(dev) for p in (state["params"] if params is None else params)]))
    tensors.update(zip(ctx.buffer_names, buffers))
    return torch.func.functional_call(mod, tensors, (torch.from_numpy(x).to(dev),)), buffers


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
    dev = ctx.where()
    params = [p.detach().to(dev).requires_grad_(True) for p in state["params"]]
    with torch.enable_grad():
        out, buffers = _call(ctx, state, batch[0], True, params)
        loss = ctx.loss(out, torch.from_numpy(batch[1]).to(dev))
        value = float(loss.detach())
        if not math.isfinite(value):
            raise WorkflowError(
                f"iteration {iteration}, rank {rank}: the loss is {value}; training stopped "
                f"(lower the learning rate, or check the data)"
            )
        grads = torch.autograd.grad(loss, params, allow_unused=True)
    grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
    buckets = [(torch.cat([grads[i].reshape(-1) for i in b]) * weight).cpu().numpy() for b in ctx.buckets]
    return {"loss": value, "n": int(len(batch[1])), "buckets": buckets, "buffers": buffers, "weight": weight}


def bucket(out: dict, j: int):
    """Task body ``bucket``: gradient bucket ``j`` of a :func:`step`'s output.

    Parameters
    ----------
    out : dict
    j : int
    """
    return out["buckets"][j]


def _flat(order, pieces):
    flat = pieces[0] if order is None else np.concatenate([pieces[k] for k in np.argsort(order)])
    return flat.astype(np.float32, copy=False)  # fp16-compressed sums come back to float32 here


def _grads(ctx: TorchModel, layout, pieces) -> list:
    """Per parameter, its summed gradient out of the buckets' pieces (``layout``: per bucket, the
    number of its pieces and their chunk order, or None for one whole piece)."""
    grads = [None] * len(ctx.names)
    at = 0
    for b, (count, order) in zip(ctx.buckets, layout):
        flat = torch.from_numpy(np.ascontiguousarray(_flat(order, pieces[at : at + count])))
        at += count
        off = 0
        for i in b:
            n = ctx.sizes[i]
            grads[i] = flat[off : off + n].reshape(ctx.shapes[i])
            off += n
    return grads


def _own_buckets(out: dict) -> list:
    """The rank's own mean gradient per bucket (a step's buckets carry its share's weight)."""
    return [b / out["weight"] for b in out["buckets"]]


def update(
    state: dict,
    out: dict,
    ctx: TorchModel,
    layout,
    iteration: int,
    *pieces,
    sparse=None,
    anchor=None,
    compensation: float = 0.0,
) -> dict:
    """Task body ``update``: the optimizer's step on a copy of the state; the step's loss joins the
    log, its batch-norm statistics the buffers.

    Parameters
    ----------
    state : dict
    out : dict
        The rank's :func:`step` output.
    ctx : TorchModel
    layout : tuple or None
        Per bucket ``(pieces, chunk order or None)``; None: the rank's own gradient (a local SGD
        step), no pieces.
    iteration : int
    *pieces : numpy.ndarray
        Every bucket's reduced pieces, bucket after bucket.
    sparse : tuple, optional
        Top-k compression: this rank's :func:`compress_topk` output per bucket; the state's error
        feedback becomes what the compression left out.
    anchor : dict, optional
        Delay compensation (DC-S3GD): the state the gradient's parameters were built from; the
        gradient ``g`` becomes ``g + compensation x g x g x (params - anchor's params)``.
    compensation : float
    """
    ctx.skeleton()
    if layout is None:
        own = _own_buckets(out)
        grads = _grads(ctx, ((1, None),) * len(own), own)
    else:
        grads = _grads(ctx, layout, pieces)
    dev = ctx.where()
    grads = [g.to(dev, p.dtype) for g, p in zip(grads, state["params"])]
    if anchor is not None and compensation:
        grads = [
            g + compensation * g * g * (p.to(dev) - a.to(dev))
            for g, p, a in zip(grads, state["params"], anchor["params"])
        ]
    params, opt = optimizer_step(state, ctx.optimizer, grads)
    new = {
        "params": params,
        "buffers": out["buffers"],
        "opt": opt,
        "log": state["log"] + [(iteration, out["loss"], out["n"], out.get("loading", 0.0))],
    }
    if "residual" in state or sparse is not None:
        new["residual"] = state.get("residual")
    if sparse is not None:
        new["residual"] = [
            _residual(v, state.get("residual"), j, sp) for j, (v, sp) in enumerate(zip(out["buckets"], sparse))
        ]
    return new


def _residual(v, residual, j, sp):
    """Error feedback: the bucket plus the carried residual, less what top-k sent."""
    w = v if residual is None else v + residual[j]
    w = w.copy()
    w[sp[0]] = 0.0
    return w


def compress_fp16(v):
    """Task body ``compress`` (fp16): the bucket in half precision (half the bytes on the wire;
    the allreduce sums in half precision, the update casts back).

    Parameters
    ----------
    v : numpy.ndarray
    """
    return v.astype(np.float16)


def compress_topk(v, state: dict, j: int, ratio: float):
    """Task body ``compress`` (top-k with error feedback, Stich et al. 2018): the ``ratio`` largest
    entries by magnitude of the bucket plus the residual the rank carried, as ``(indices,
    values)``.

    Parameters
    ----------
    v : numpy.ndarray
        The bucket.
    state : dict
        The rank's state (its ``residual``, if any).
    j : int
        The bucket.
    ratio : float
        The share of entries sent.
    """
    residual = state.get("residual")
    w = v if residual is None else v + residual[j]
    k = max(1, int(round(ratio * w.size)))
    idx = np.sort(np.argpartition(np.abs(w), w.size - k)[w.size - k :]).astype(np.int64)
    return idx, w[idx].astype(np.float32)


def sparse_sum(n: int, *sparse):
    """Task body of a top-k all-gather: every rank's ``(indices, values)`` summed into a dense
    vector of ``n`` (in rank order).

    Parameters
    ----------
    n : int
    *sparse : (numpy.ndarray, numpy.ndarray)
    """
    out = np.zeros(n, dtype=np.float32)
    for idx, vals in sparse:
        out[idx] += vals
    return out


def param_bucket(state: dict, ctx: TorchModel, j: int, weight: float):
    """Task body of local SGD's sync: bucket ``j`` of the rank's parameters, times ``weight``.

    Parameters
    ----------
    state : dict
    ctx : TorchModel
    j : int
    weight : float
    """
    return (torch.cat([state["params"][i].reshape(-1) for i in ctx.buckets[j]]) * weight).cpu().numpy()


def average(state: dict, ctx: TorchModel, layout, *pieces) -> dict:
    """Task body ``average`` (local SGD): the rank's state with its parameters replaced by the
    allreduced weighted sum of every rank's (their weighted mean).

    Parameters
    ----------
    state : dict
    ctx : TorchModel
    layout : tuple
        As :func:`update`'s.
    *pieces : numpy.ndarray
    """
    return dict(state, params=[g.to(ctx.where(), copy=True) for g in _grads(ctx, layout, pieces)])


def working(base: dict, ctx: TorchModel, *outs) -> dict:
    """Task body ``working`` (stale-synchronous): the parameters a rank computes with, the global
    model of ``s`` iterations ago (``base``) less the learning rate times each of the rank's own
    gradients since (the local steps whose global update has not arrived).

    Parameters
    ----------
    base : dict
        A state (its optimizer's first learning rate is used).
    ctx : TorchModel
    *outs : dict
        The rank's :func:`step` outputs since, oldest first.
    """
    lr = float(base["opt"]["param_groups"][0]["lr"])
    params = [p.to(ctx.where(), copy=True) for p in base["params"]]
    for out in outs:
        own = _own_buckets(out)
        for p, g in zip(params, _grads(ctx, ((1, None),) * len(own), own)):
            p -= lr * g.to(p.device)
    return dict(base, params=params)


def evaluate(state: dict, ctx: TorchModel, data, batch: int = 256) -> dict:
    """Task body ``eval``: mean loss and accuracy of the state's model on a held-out split (no
    augmentation; batch norm in inference mode).

    Parameters
    ----------
    state : dict
    ctx : TorchModel
    data : ImageFolder or DatasetSplit
    batch : int
    """
    return score(data, ctx.loss, lambda x: _call(ctx, state, x, False)[0], batch)


def score(data, loss, forward, batch: int = 256) -> dict:
    """Mean loss and accuracy of ``forward`` (a collated batch's images -> outputs) over ``data``,
    batch by batch, without gradients.

    Parameters
    ----------
    data : ImageFolder or DatasetSplit
    loss : callable
    forward : callable
    batch : int
    """
    total, correct, n = 0.0, 0, 0
    with torch.no_grad():
        for lo in range(0, len(data), batch):
            x, y = load_batch(data, range(lo, min(lo + batch, len(data))))
            out = forward(x)
            yt = torch.from_numpy(y).to(out.device)
            total += float(loss(out, yt)) * len(y)
            correct += int((out.argmax(1) == yt).sum())
            n += len(y)
    return {"loss": total / n, "accuracy": correct / n, "samples": n}
