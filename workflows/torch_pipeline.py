"""Pipeline-parallel training of a real PyTorch model: GPipe and 1F1B on real activations and their
gradients between stage workers, one task graph per epoch.

``TorchPipeline(model, data, stages=S, microbatches=M, schedule="gpipe"|"1f1b", ...)``: the model
(a factory returning a ``torch.nn.Sequential``) is cut into ``S`` contiguous stages of its
children, with parameter counts as even as a cut makes them (or where ``cuts`` says); each global
batch into ``M`` microbatches. Per iteration ``t``:

* ``it{t}.m{m}.read -> decode -> augment -> collate``: microbatch ``m``, loaded where stage 0 runs;
* ``it{t}.s{s}.F{m}``: stage ``s``'s forward of microbatch ``m`` (its input: the previous stage's
  ``F`` or the collated batch); the output activation goes to the next stage;
* ``it{t}.s{s}.B{m}``: stage ``s``'s backward: the stage's forward again from its stashed input
  (re-materialisation, as GPipe does: no autograd graph has to outlive a task, so any scheduler
  may place any task), then backward from the next stage's gradient (the last stage: the loss of
  the microbatch's labels, weighted by its share of the batch); its output is the stage's
  parameter gradients and ``it{t}.s{s}.dx{m}``, the gradient of its input, which goes to the
  previous stage;
* ``it{t}.s{s}.update``: the optimizer's step on the stage's state with the summed gradients.

The ops of a stage are chained in its schedule's order (:func:`workflows.pipeline.pipeline_order`):
GPipe all forwards then all backwards; 1F1B warm-up forwards, then one forward and one backward in
turn. ``meta["stage"]`` says which worker: ``placed`` keeps stage ``s`` on worker ``s``. Summed
over microbatches, the weighted gradients are the global batch's: the parameters equal the plain
single-process loop's (:meth:`TorchPipeline.reference`), whichever schedule.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import cloudpickle
import numpy as np
import torch

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from ._builder import GraphBuilder
from .images import ImageFolder, augment, collate, decode, epoch_batches, open_dataset, read_files
from .pipeline import pipeline_order
from .torch_checks import check_sample
from .torch_tasks import fresh_state, make_model, optimizer_step, score

__all__ = [
    "TorchPipeline",
    "StageModel",
    "stage_init",
    "stage_forward",
    "stage_backward",
    "input_grad",
    "stage_update",
    "pipeline_evaluate",
]

_STAGES: dict = {}  # (token, stage) -> the stage's module in this process (a skeleton, as in torch_tasks)


@dataclass(frozen=True)
class StageModel:
    """What a stage's tasks know: the factories, the slice of the model's children, its parameter
    and buffer names, and the torch threads."""

    model: object
    loss: object
    optimizer: object
    token: str
    lo: int
    hi: int
    names: tuple
    buffer_names: tuple
    threads: int = 1

    def module(self) -> torch.nn.Module:
        """The stage's module, built once per process (only its structure is used)."""
        key = (self.token, self.lo, self.hi)
        mod = _STAGES.get(key)
        if mod is None:
            mod = _STAGES[key] = self.model()[self.lo : self.hi]
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        return mod


def stage_init(ctx: StageModel, seed: int) -> dict:
    """Task body ``init``: the stage's slice of the model built from ``torch.manual_seed(seed)``.

    Parameters
    ----------
    ctx : StageModel
    seed : int
    """
    torch.manual_seed(seed)
    return fresh_state(ctx.model()[ctx.lo : ctx.hi], ctx.optimizer)


def _run(ctx: StageModel, state: dict, x, params=None):
    mod = ctx.module()
    mod.train()
    tensors = dict(zip(ctx.names, state["params"] if params is None else params))
    tensors.update(zip(ctx.buffer_names, [b.clone() for b in state["buffers"]]))
    return torch.func.functional_call(mod, tensors, (x,))


def _input(x):
    return torch.from_numpy(x[0]) if isinstance(x, tuple) else x


def stage_forward(state: dict, x, ctx: StageModel):
    """Task body ``F``: the stage's output activation (no autograd graph kept).

    Parameters
    ----------
    state : dict
    x : torch.Tensor or (numpy.ndarray, numpy.ndarray)
        The previous stage's activation, or the collated microbatch.
    ctx : StageModel
    """
    with torch.no_grad():
        return _run(ctx, state, _input(x)).contiguous()


def stage_backward(state: dict, x, upstream, ctx: StageModel, weight: float, iteration: int, microbatch: int):
    """Task body ``B``: the stage's forward again from its input, then backward: ``{"dx": the
    gradient of its input (None at stage 0), "grads": its parameters' gradients, "loss", "n"}``.

    Parameters
    ----------
    state : dict
    x : torch.Tensor or tuple
        The stage's input (as :func:`stage_forward` got it).
    upstream : torch.Tensor or numpy.ndarray
        The next stage's ``dx``; at the last stage, the microbatch's labels.
    ctx : StageModel
    weight : float
        The microbatch's share of the global batch (its loss is weighted by it).
    iteration, microbatch : int
        To name a loss that is not finite.

    Raises
    ------
    WorkflowError
        The loss is NaN or infinite.
    """
    first = isinstance(x, tuple)
    inp = _input(x).detach().requires_grad_(not first)
    params = [p.detach().requires_grad_(True) for p in state["params"]]
    loss_value = None
    with torch.enable_grad():
        out = _run(ctx, state, inp, params)
        if isinstance(upstream, np.ndarray):  # the last stage: the loss
            loss = ctx.loss(out, torch.from_numpy(upstream))
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value):
                raise WorkflowError(
                    f"iteration {iteration}, microbatch {microbatch}: the loss is {loss_value}; training stopped"
                )
            target, seed_grad = loss * weight, None
        else:
            target, seed_grad = out, upstream
        wrt = params + ([] if first else [inp])
        grads = torch.autograd.grad(target, wrt, grad_outputs=seed_grad, allow_unused=True)
    pg = [torch.zeros_like(p) if g is None else g for g, p in zip(grads[: len(params)], params)]
    return {
        "dx": None if first else grads[-1].contiguous(),
        "grads": pg,
        "loss": loss_value,
        "n": int(_input(x).shape[0]),
    }


def input_grad(out: dict):
    """Task body ``dx``: the gradient a ``B`` sends to the previous stage.

    Parameters
    ----------
    out : dict
    """
    return out["dx"]


def stage_update(state: dict, ctx: StageModel, iteration: int, *outs) -> dict:
    """Task body ``update``: the optimizer's step with the gradients summed over the microbatches.

    Parameters
    ----------
    state : dict
    ctx : StageModel
    iteration : int
    *outs : dict
        The stage's :func:`stage_backward` outputs.
    """
    ctx.module()
    log = list(state["log"])
    if outs[0]["loss"] is not None:  # the last stage logs the iteration's loss
        n = sum(o["n"] for o in outs)
        log.append((iteration, sum(o["loss"] * o["n"] for o in outs) / n, n))
    if not state["params"]:  # a stage of parameter-free layers
        return dict(state, log=log)
    grads = []
    for k in range(len(state["params"])):  # summed in microbatch order
        g = outs[0]["grads"][k].clone()
        for o in outs[1:]:
            g += o["grads"][k]
        grads.append(g)
    params, opt = optimizer_step(state, ctx.optimizer, grads)
    return {"params": params, "buffers": state["buffers"], "opt": opt, "log": log}


def pipeline_evaluate(ctx_states, data: ImageFolder, batch: int = 256) -> dict:
    """Task body ``eval``: the held-out loss and accuracy of the stages' model, run in turn.

    Parameters
    ----------
    ctx_states : list of (StageModel, dict)
    data : ImageFolder
    batch : int
    """

    def forward(x):
        a = torch.from_numpy(x)
        for ctx, st in ctx_states:
            mod = ctx.module()
            mod.eval()
            tensors = dict(zip(ctx.names, st["params"]))
            tensors.update(zip(ctx.buffer_names, st["buffers"]))
            a = torch.func.functional_call(mod, tensors, (a,))
        return a

    return score(data, ctx_states[-1][0].loss, forward, batch)


def _cuts(sizes, stages: int) -> list:
    """Where to cut ``len(sizes)`` children into ``stages`` contiguous groups with parameter counts
    as even as a greedy cut makes them (each group at least one child)."""
    total = np.cumsum(sizes)
    cuts = [0]
    for s in range(1, stages):
        k = int(np.searchsorted(total, total[-1] * s / stages)) + 1
        cuts.append(min(max(k, cuts[-1] + 1), len(sizes) - (stages - s)))
    return cuts + [len(sizes)]


@dataclass(frozen=True)
class TorchPipeline:
    """A pipeline-parallel training job (see the module docstring).

    Parameters
    ----------
    model : callable
        A factory returning a ``torch.nn.Sequential``.
    data : path
        As :class:`~workflows.torch_training.TorchTraining`'s.
    loss, optimizer : callable, optional
    stages, microbatches : int
    schedule : {"gpipe", "1f1b"}
    batch : int
        Samples per iteration (cut into ``microbatches`` as evenly as it divides).
    cuts : sequence of int, optional
        Where stage ``s`` starts among the model's children (``S + 1`` numbers from 0 to the
        number of children; default: even parameter counts).
    pad, flip, seed, iterations, threads
        As :class:`~workflows.torch_training.TorchTraining`'s.

    Raises
    ------
    WorkflowError
        A model that is not a ``Sequential`` factory, more stages than children, bad cuts, fewer
        samples than microbatches, an unknown schedule, an empty dataset.
    """

    model: object
    data: object
    loss: object = None
    optimizer: object = None
    stages: int = 2
    microbatches: int = 4
    schedule: str = "1f1b"
    batch: int = 64
    cuts: tuple | None = None
    pad: int = 0
    flip: bool = False
    seed: int = 0
    iterations: int | None = None
    threads: int = 1

    def __post_init__(self):
        for name in ("stages", "microbatches", "batch", "threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise WorkflowError(f"{name} must be an integer >= 1, got {v!r}")
        if self.schedule not in ("gpipe", "1f1b"):
            raise WorkflowError(f"schedule must be 'gpipe' or '1f1b', got {self.schedule!r}")
        if self.microbatches > self.batch:
            raise WorkflowError(f"batch {self.batch} cannot be cut into {self.microbatches} microbatches")
        whole = make_model(self.model, self.loss, self.optimizer, threads=int(self.threads))
        torch.manual_seed(0)
        seq = self.model()
        if not isinstance(seq, torch.nn.Sequential):
            raise WorkflowError(
                f"pipeline parallelism cuts a torch.nn.Sequential into stages; the factory returned "
                f"{type(seq).__name__}"
            )
        children = list(seq.children())
        sizes = [sum(p.numel() for p in c.parameters()) for c in children]
        S = int(self.stages)
        if S > len(children):
            raise WorkflowError(f"{S} stages for a model of {len(children)} children: at most one stage per child")
        cuts = list(self.cuts) if self.cuts is not None else _cuts(sizes, S)
        if (
            len(cuts) != S + 1
            or cuts[0] != 0
            or cuts[-1] != len(children)
            or any(b <= a for a, b in zip(cuts, cuts[1:]))
        ):
            raise WorkflowError(f"cuts must rise from 0 to {len(children)} in {S + 1} steps, got {cuts!r}")
        token = hashlib.sha1(cloudpickle.dumps((self.model, whole.loss, whole.optimizer))).hexdigest()[:16]
        stage_ctx = []
        for s in range(S):
            part = seq[cuts[s] : cuts[s + 1]]
            stage_ctx.append(
                StageModel(
                    self.model,
                    whole.loss,
                    whole.optimizer,
                    token,
                    cuts[s],
                    cuts[s + 1],
                    tuple(n for n, _ in part.named_parameters()),
                    tuple(n for n, _ in part.named_buffers()),
                    int(self.threads),
                )
            )
        from .torch_data import is_dataset

        if is_dataset(self.data) or isinstance(self.data, (tuple, list)):
            raise WorkflowError(
                "pipeline parallelism (stages) reads image folders; a Dataset trains data-parallel (leave stages out)"
            )
        train, val = open_dataset(self.data)
        if len(train) < self.batch:
            raise WorkflowError(f"batch {self.batch} is larger than the {len(train)} training images")
        check_sample(whole, train, classes=self.loss is None)  # before any cluster starts
        M = int(self.microbatches)
        counts = tuple(self.batch // M + (1 if m < self.batch % M else 0) for m in range(M))
        for k, v in (
            ("ctx", whole),
            ("stage_ctx", tuple(stage_ctx)),
            ("train", train),
            ("val", val),
            ("counts", counts),
            ("stage_cuts", tuple(cuts)),
            (
                "stage_param_shapes",
                tuple(tuple(tuple(p.shape) for p in seq[cuts[s] : cuts[s + 1]].parameters()) for s in range(S)),
            ),
            ("stage_sizes", tuple(sum(sizes[cuts[s] : cuts[s + 1]]) for s in range(S))),
        ):
            object.__setattr__(self, k, v)

    # the interface taskflow.train uses (as TorchTraining's)
    @property
    def workers(self) -> int:
        """One worker per stage."""
        return int(self.stages)

    mode = "pipeline"
    allreduce = "none"
    compression = None
    sync_every, staleness = 1, 0
    compensation = topk_ratio = 0.0
    shares = None

    @property
    def per_epoch(self) -> int:
        """Iterations per epoch."""
        n = len(self.train) // self.batch
        return n if self.iterations is None else min(n, int(self.iterations))

    def params(self) -> int:
        """The model's parameter count."""
        return int(sum(self.stage_sizes))

    def state_shapes(self) -> list:
        """Per stage, the shapes of its state's parameters (a checkpoint's states must have them)."""
        return list(self.stage_param_shapes)

    def batches(self, epoch: int) -> list:
        """``[iteration][microbatch]`` -> the samples of each microbatch in ``epoch``."""
        return epoch_batches(len(self.train), self.batch, self.counts, epoch, self.seed, self.iterations)

    def final_tasks(self, epoch: int) -> list:
        """Each stage's last update in ``epoch``."""
        t = (epoch + 1) * self.per_epoch - 1
        return [f"it{t}.s{s}.update" for s in range(int(self.stages))]

    def graph(
        self, epoch: int = 0, states=None, executable: bool = True, costs: dict | None = None, evaluate: bool = True
    ) -> TaskGraph:
        """The graph of one epoch (see the module docstring); ``states``: each stage's state to
        start from. ``costs``: seconds per task kind (F, B are ``forward``, ``backward``).

        Parameters
        ----------
        epoch : int
        states : list of dict, optional
        executable : bool
        costs : dict, optional
        evaluate : bool
        """
        from .torch_tasks import given_state
        from .torch_training import DEFAULT_COSTS

        S, M = int(self.stages), int(self.microbatches)
        cost = dict(DEFAULT_COSTS, forward=0.02, backward=0.04, dx=1e-4, **(costs or {}))
        if states is not None and len(states) != S:
            raise WorkflowError(f"states must hold one state per stage ({S}), got {len(states)}")
        b = GraphBuilder(f"torch-pipeline-{self.schedule}-s{S}-m{M}-e{epoch}", executable=bool(executable))
        c, h, w = self.train.shape()
        wbytes = [8.0 * z for z in self.stage_sizes]
        state = [
            b.task(
                f"e{epoch}.init.s{s}",
                cost["init"],
                wbytes[s],
                {"category": "init", "stage": s},
                fn=stage_init if states is None else given_state,
                args=(self.stage_ctx[s], self.seed) if states is None else (states[s],),
            )
            for s in range(S)
        ]
        orders = [pipeline_order(self.schedule, s, S, M) for s in range(S)]
        act = 4.0 * max(self.counts) * c * h * w  # a boundary activation's bytes: a rough bound
        for t_local, mbs in enumerate(self.batches(epoch)):
            t = epoch * self.per_epoch + t_local
            F, B, DX, inputs = {}, {}, {}, {}
            for m, samples in enumerate(mbs):
                paths = [self.train.paths[i] for i in samples]
                meta = {"iteration": t, "stage": 0, "microbatch": m}
                nbytes = 4.0 * len(samples) * c * h * w
                raw = b.task(
                    f"it{t}.m{m}.read",
                    cost["read"],
                    nbytes / 4,
                    {"category": "read", **meta},
                    fn=read_files,
                    args=(paths,),
                )
                img = b.task(
                    f"it{t}.m{m}.decode",
                    cost["decode"],
                    nbytes / 4,
                    {"category": "decode", **meta},
                    deps=[raw],
                    fn=decode,
                    args=(raw, paths),
                )
                aug = b.task(
                    f"it{t}.m{m}.augment",
                    cost["augment"],
                    nbytes / 4,
                    {"category": "augment", **meta},
                    deps=[img],
                    fn=augment,
                    args=(img, samples, epoch, self.seed, self.pad, self.flip),
                )
                inputs[0, m] = b.task(
                    f"it{t}.m{m}.collate",
                    cost["collate"],
                    nbytes,
                    {"category": "collate", **meta},
                    deps=[aug],
                    fn=collate,
                    args=(aug, self.train.labels[samples]),
                )
            for s in range(S):
                for m in range(M):
                    F[s, m] = b.task(
                        f"it{t}.s{s}.F{m}",
                        cost["forward"],
                        act,
                        {"category": "forward", "iteration": t, "stage": s, "microbatch": m},
                        deps=[inputs[s, m], state[s]],
                        fn=stage_forward,
                        args=(state[s], inputs[s, m], self.stage_ctx[s]),
                    )
                    if s + 1 < S:
                        inputs[s + 1, m] = F[s, m]
            for s in range(S - 1, -1, -1):
                for m in range(M):
                    up = self.train.labels[mbs[m]] if s == S - 1 else DX[s + 1, m]
                    deps = [state[s], inputs[s, m], (F[s, m], 0.0)] + ([] if s == S - 1 else [up])
                    B[s, m] = b.task(
                        f"it{t}.s{s}.B{m}",
                        cost["backward"],
                        wbytes[s] / 2,
                        {"category": "backward", "iteration": t, "stage": s, "microbatch": m},
                        deps=deps,
                        fn=stage_backward,
                        args=(state[s], inputs[s, m], up, self.stage_ctx[s], len(mbs[m]) / self.batch, t, m),
                    )
                    if s:
                        DX[s, m] = b.task(
                            f"it{t}.s{s}.dx{m}",
                            cost["dx"],
                            act,
                            {"category": "dx", "iteration": t, "stage": s, "microbatch": m},
                            deps=[(B[s, m], act)],
                            fn=input_grad,
                            args=(B[s, m],),
                        )
            for s in range(S):  # each stage is one worker's program, in its schedule's order
                ops = [(kind, m) for kind, m in orders[s]]
                for (k1, m1), (k2, m2) in zip(ops, ops[1:]):
                    if not (k1 == "F" and k2 == "B" and m1 == m2):  # F(m) -> B(m) is a data edge already
                        b.edge((F if k1 == "F" else B)[s, m1], (F if k2 == "F" else B)[s, m2], size=0.0)
            for s in range(S):
                state[s] = b.task(
                    f"it{t}.s{s}.update",
                    cost["update"],
                    wbytes[s],
                    {"category": "update", "iteration": t, "stage": s},
                    deps=[state[s]] + [(B[s, m], 0.0) for m in range(M)],
                    fn=stage_update,
                    args=(state[s], self.stage_ctx[s], t, *[B[s, m] for m in range(M)]),
                )
        if evaluate and self.val is not None:
            b.task(
                f"e{epoch}.eval",
                cost["eval"],
                64.0,
                {"category": "eval", "stage": S - 1},
                deps=list(state),
                fn=pipeline_evaluate,
                args=([(self.stage_ctx[s], state[s]) for s in range(S)], self.val),
            )
        return b.graph()

    def reference(self, epochs: int = 1, first_epoch: int = 0):
        """The plain single-process loop on the same global batches (the whole model):
        ``(state, losses)`` (:func:`workflows.torch_reference.reference_training`).

        Parameters
        ----------
        epochs, first_epoch : int
        """
        from .torch_reference import reference_training

        batches = [(e, mbs) for e in range(first_epoch, first_epoch + epochs) for mbs in self.batches(e)]
        return reference_training(self.ctx, self.train, batches, self.seed, self.pad, self.flip)
