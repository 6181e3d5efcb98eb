"""Real data-parallel training of a PyTorch model as a task graph, one graph per epoch.

``TorchTraining(model, data, workers=N, batch=B, allreduce="ring"|"tree"|"ps", ...)`` describes a
job: a model factory, a loss, an optimizer factory and an image dataset on disk
(:mod:`workflows.images`). :meth:`TorchTraining.graph` builds an epoch's graph; per iteration ``t``
and rank ``r``:

* ``it{t}.w{r}.read -> decode -> augment -> collate``: the rank's share of the global batch (a
  seeded permutation per epoch), read from its files, decoded by Pillow, augmented by seeded draws;
* ``it{t}.w{r}.forward-backward``: the loss of the micro-batch and its gradient, cut into buckets in
  backward order by bytes (as DDP does), scaled by the rank's share of the global batch;
* ``it{t}.w{r}.bucket{j}``: bucket ``j``; then the bucket's allreduce on real arrays
  (:func:`workflows.allreduce.bucket_allreduce`: ring reduce-scatter + all-gather over chunks, a
  binary tree, or a parameter server);
* ``it{t}.w{r}.update``: the optimizer's step on the rank's state (parameters, buffers, optimizer
  state), which the rank's next ``forward-backward`` takes as its input.

With ``fuse`` (what ``taskflow.train`` does under ``placed``, which keeps each rank on its worker)
a rank's loading is one task, ``it{t}.w{r}.load``, that waits for the rank's step ``prefetch + 1``
iterations before: it loads while the rank waits for the others' gradients, and ``prefetch``
batches are ready before the step that needs them (0, the default: each batch loads in its step's
task, where the gradient is reduced directly, else just before it); and a gradient of at most ``direct_mb`` MB is reduced
directly: each rank's next ``forward-backward`` takes every rank's ``forward-backward`` output, sums
the buckets in rank order and applies the optimizer's step before its own (a step's output carries
the state it started from), so an iteration is two tasks per rank and one hop; the epoch's last
``update`` applies the last gradient. The parameters are the same.

With a map-style ``torch.utils.data.Dataset`` as ``data`` (:mod:`workflows.torch_data`) a rank's
batch is ``it{t}.w{r}.fetch -> collate`` (one ``load`` task when fused), and ``e{e}.data.w{r}`` sends
the Dataset to each rank once an epoch.

``e{e}.init.w{r}`` starts each rank's state (seeded, or the state an earlier epoch ended with) and
``e{e}.eval`` measures rank 0's model on the held-out split. Every task's ``meta`` has its
``category``, ``iteration`` and ``rank``: the ``placed`` scheduler keeps rank ``r`` on worker ``r``;
any other scheduler may place tasks elsewhere, and then the state moves with them (its bytes are
the edge's). ``executable=False`` builds the same structure with costs only, for the simulator.

With ``shares`` the ranks take unequal parts of each global batch (a slow worker fewer samples);
each rank's gradient is weighted by its part, so the sum is the global batch's gradient and the
parameters still equal the single-process loop (:meth:`TorchTraining.reference`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from ._builder import GraphBuilder
from .allreduce import bucket_allreduce, sent_bytes
from .images import augment, batch_counts, collate, decode, epoch_batches, load_samples, read_files
from .torch_data import DatasetSplit, collate_items, fetch, load_items, open_data
from .torch_loaders import load_shard, merge_shards, shard_of

__all__ = ["TorchTraining", "DEFAULT_COSTS"]

#: seconds per task of each kind used to plan before anything was measured (a profile replaces them)
DEFAULT_COSTS = {
    "read": 2e-3,
    "decode": 5e-3,
    "augment": 2e-3,
    "collate": 1e-3,
    "load": 1e-2,
    "fetch": 5e-3,
    "data": 1e-4,
    "forward-backward": 0.05,
    "bucket": 1e-4,
    "update": 5e-3,
    "init": 0.02,
    "eval": 0.1,
}
#: fused graphs reduce a gradient of at most this many MB per rank directly: each rank's update sums
#: every rank's buckets (no bucket or chunk tasks); with two ranks the bytes moved are a ring's
DIRECT_MB = 4.0
_REDUCE_FLOPS = 1e9  # numbers a core adds per second, for the allreduce tasks' costs


@dataclass(frozen=True)
class TorchTraining:
    """A data-parallel training job (see the module docstring).

    Parameters
    ----------
    model : callable
        A factory returning a ``torch.nn.Module`` (a function or ``functools.partial``).
    data : path, Dataset or (Dataset, Dataset)
        A dataset root with ``train`` (and optionally ``val``) class folders, or a folder of class
        folders (no held-out split); or a map-style ``torch.utils.data.Dataset`` (``ds[i] ->
        (input, label)``; no held-out split), or a pair ``(train, val)`` of them
        (:mod:`workflows.torch_data`).
    loss, optimizer : callable, optional
        ``loss(output, labels)`` (default cross-entropy) and ``optimizer(parameters)`` (default SGD,
        lr 0.05, momentum 0.9).
    workers : int
        Ranks.
    batch : int
        Samples per iteration, over all ranks.
    shares : sequence of float, optional
        Each rank's part of the batch (default equal; the batch must then divide by ``workers``).
    allreduce : {"ring", "tree", "ps"}
    bucket_mb : float
        Gradient bucket capacity (DDP's ``bucket_cap_mb``).
    priority : {"none", "layer-order"}
        ``layer-order`` gives the spread phase of the bucket holding the first layers the highest
        ``meta["priority"]`` (TicTac).
    pad : int
        Random-crop padding in pixels (0: none).
    flip : bool
        Random horizontal flips.
    seed : int
        Seeds the initial model, the epochs' permutations and the augmentation.
    iterations : int, optional
        At most this many iterations per epoch (default: the whole epoch, the last partial batch
        dropped).
    threads : int
        Torch threads per task.
    mode, sync_every, staleness, compensation, compression, topk_ratio
        The variant (see :func:`taskflow.train`).
    fuse : bool
        A rank's loading one task, a small gradient reduced directly (see above).
    prefetch : int
        With ``fuse``: batches loaded ahead of the step that needs them.
    direct_mb : float
        With ``fuse``: the largest gradient (MB per rank) reduced directly.
    device : str
        Where the tasks compute and keep the ranks' states (``cpu``, ``cuda``, ``cuda:1``,
        ``auto``: :func:`workflows.torch_tasks.make_model`).
    size : int, optional
        Images resized to ``size`` x ``size`` as they are decoded (default: as they are).
    loaders : int
        Workers of their own that load the batches (:mod:`workflows.torch_loaders`; 0: each rank
        loads its own).
    cache_mb : float
        With ``loaders``: MB of decoded samples each loader keeps (0: none).

    Raises
    ------
    WorkflowError
        A model that is not a Module factory, an empty or unreadable dataset, a batch that cannot
        be cut as asked, an unknown allreduce.
    """

    model: object
    data: object
    loss: object = None
    optimizer: object = None
    workers: int = 2
    batch: int = 64
    shares: tuple | None = None
    allreduce: str = "ring"
    bucket_mb: float = 25.0
    priority: str = "none"
    pad: int = 0
    flip: bool = False
    seed: int = 0
    iterations: int | None = None
    threads: int = 1
    mode: str = "sync"
    sync_every: int = 1
    staleness: int = 0
    compensation: float = 0.0
    compression: str | None = None
    topk_ratio: float = 0.01
    fuse: bool = False
    prefetch: int = 0
    direct_mb: float = DIRECT_MB
    device: str = "cpu"
    size: int | None = None
    loaders: int = 0
    cache_mb: float = 0.0

    def __post_init__(self):
        from .torch_checks import check_options, check_sample
        from .torch_tasks import make_model

        check_options(self)
        counts = batch_counts(int(self.batch), int(self.workers), self.shares)
        train, val = open_data(self.data, self.pad, self.flip, self.size)
        if self.loaders and isinstance(train, DatasetSplit):
            raise WorkflowError("loaders load image folders; a Dataset is loaded on the ranks (leave loaders out)")
        if len(train) < self.batch:
            raise WorkflowError(
                f"batch {self.batch} is larger than the {len(train)} training images in {train.folder!r}"
            )
        ctx = make_model(self.model, self.loss, self.optimizer, self.bucket_mb, int(self.threads), self.device)
        check_sample(ctx, train, classes=self.loss is None)  # before any cluster starts
        for k, v in (("counts", counts), ("train", train), ("val", val), ("ctx", ctx)):
            object.__setattr__(self, k, v)

    @property
    def per_epoch(self) -> int:
        """Iterations per epoch."""
        n = len(self.train) // self.batch
        return n if self.iterations is None else min(n, int(self.iterations))

    def batches(self, epoch: int) -> list:
        """``[iteration][rank]`` -> the training samples each rank reads in ``epoch``."""
        return epoch_batches(len(self.train), self.batch, self.counts, epoch, self.seed, self.iterations)

    def params(self) -> int:
        """The model's parameter count."""
        return int(sum(self.ctx.sizes))

    def state_shapes(self) -> list:
        """Per rank, the shapes of its state's parameters (a checkpoint's states must have them)."""
        return [self.ctx.shapes] * int(self.workers)

    def graph(
        self, epoch: int = 0, states=None, executable: bool = True, costs: dict | None = None, evaluate: bool = True
    ) -> TaskGraph:
        """The graph of one epoch (see the module docstring).

        Parameters
        ----------
        epoch : int
        states : list of dict, optional
            Each rank's state to start from (default: the seeded initial one).
        executable : bool
            Real tasks; False: the same structure with costs only (the simulator's).
        costs : dict, optional
            Seconds per task kind (:data:`DEFAULT_COSTS` for the kinds not given).
        evaluate : bool
            Add the ``eval`` task (needs a ``val`` split).

        Returns
        -------
        TaskGraph
        """
        from . import torch_fused as tf
        from . import torch_tasks as tt

        N, ctx, X = int(self.workers), self.ctx, bool(executable)
        if states is not None and len(states) != N:
            raise WorkflowError(f"states must hold one state per rank ({N}), got {len(states)}")
        cost = dict(DEFAULT_COSTS, **(costs or {}))
        b = GraphBuilder(f"torch-{self.mode}-{self.allreduce}-n{N}-e{epoch}", executable=X)
        state_size = 8.0 * self.params()  # parameters and one optimizer buffer (momentum)
        bucket_bytes = [4.0 * sum(ctx.sizes[i] for i in bk) for bk in ctx.buckets]
        B = len(bucket_bytes)
        sent = [self._sent_bytes(z) for z in bucket_bytes]
        first_layers_first = sorted(range(B), key=lambda j: min(ctx.buckets[j]))
        prio = [B - first_layers_first.index(j) if self.priority == "layer-order" else None for j in range(B)]
        sample_bytes = 4.0 * math.prod(self.train.shape())
        direct = self.direct()
        own = isinstance(self.train, DatasetSplit)  # a Dataset, sent to each rank once an epoch
        data = (
            [
                b.task(
                    f"e{epoch}.data.w{r}",
                    cost["data"],
                    float(self.train.nbytes),
                    {"category": "data", "rank": r},
                    fn=tt.given_state,
                    args=(self.train.dataset,),
                )
                for r in range(N)
            ]
            if own
            else None
        )
        state = [
            b.task(
                f"e{epoch}.init.w{r}",
                cost["init"],
                state_size,
                {"category": "init", "rank": r},
                fn=tt.init_state if states is None else tt.given_state,
                args=(ctx, self.seed) if states is None else (states[r],),
            )
            for r in range(N)
        ]
        history = [[st] for st in state]  # stale: each rank's global model after each iteration of the epoch
        outs = [[] for _ in range(N)]  # stale: each rank's steps of the epoch
        s_ = int(self.staleness) if self.mode == "stale" else 0
        t0 = epoch * self.per_epoch

        def task(kind, t, r, size, deps, fn, args, suffix="", kwargs=None, **meta):
            return b.task(
                f"it{t}.w{r}.{kind}{suffix}",
                cost.get(kind, 1e-3),
                size,
                {"category": kind, "iteration": t, "rank": r, **meta},
                deps=deps,
                fn=fn,
                args=args,
                kwargs=kwargs,
            )

        for t_local, ranks in enumerate(self.batches(epoch)):
            t = t0 + t_local
            steps, send = {}, {}
            for r, samples in enumerate(ranks):
                nbytes = sample_bytes * len(samples)
                if own:
                    spec = (load_items, data[r], samples, epoch, self.seed)
                else:
                    paths = [self.train.paths[i] for i in samples]
                    spec = (
                        load_samples,
                        paths,
                        samples,
                        self.train.labels[samples],
                        epoch,
                        self.seed,
                        self.pad,
                        self.flip,
                        self.size,
                    )
                shards = self._shards(task, t, r, samples, epoch, nbytes) if self.loaders else []
                if shards:  # loaded on the loaders, put together on the rank: in its step, or a task
                    spec = (merge_shards, len(samples), *shards)
                    col = None if direct else task("collate", t, r, nbytes, shards, merge_shards, spec[1:])
                elif direct and not self.prefetch:
                    col = None  # loaded inside the rank's step: its whole chain is one task
                elif self.fuse:  # one task, after the step `prefetch + 1` iterations before: `prefetch`
                    # batches are loaded ahead of the step that needs them, in the waits for the others
                    k = int(self.prefetch) + 1
                    ahead = [(outs[r][t_local - k], 0.0)] if t_local >= k else []
                    col = task("load", t, r, nbytes, ahead + ([data[r]] if own else []), spec[0], spec[1:])
                elif own:  # a Dataset's interface allows two stages: its samples, then the batch
                    items = task("fetch", t, r, nbytes, [data[r]], fetch, (data[r], samples, epoch, self.seed))
                    col = task("collate", t, r, nbytes, [items], collate_items, (items,))
                else:
                    raw = task("read", t, r, nbytes / 4, [], read_files, (paths,))
                    img = task("decode", t, r, nbytes / 4, [raw], decode, (raw, paths, self.size))
                    aug = task(
                        "augment",
                        t,
                        r,
                        nbytes / 4,
                        [img],
                        augment,
                        (img, samples, epoch, self.seed, self.pad, self.flip),
                    )
                    col = task("collate", t, r, nbytes, [aug], collate, (aug, self.train.labels[samples]))
                base = state[r]
                if s_ and t_local:  # the global model of s iterations ago plus the rank's own steps since
                    lo = max(0, t_local - s_)
                    since = outs[r][lo:]
                    base = task(
                        "working", t, r, state_size, [history[r][lo], *since], tt.working, (history[r][lo], ctx, *since)
                    )
                weight = 1.0 if self.mode == "local" else self.counts[r] / self.batch
                if direct:  # the last iteration's update and this one's step in one task (one hop less)
                    last = [] if not t_local else [outs[q][-1] for q in range(N)]
                    steps[r] = task(
                        "forward-backward",
                        t,
                        r,
                        sum(bucket_bytes) + state_size,
                        [
                            outs[r][-1] if last else base,
                            *([col] if col else shards or ([data[r]] if own else [])),
                            *(o for q, o in enumerate(last) if q != r),
                        ],
                        tf.update_and_step,
                        (outs[r][-1] if last else base, col, ctx, weight, t, r, *last),
                        kwargs=None if col else {"load": spec},
                    )
                    continue
                steps[r] = task(
                    "forward-backward", t, r, sum(bucket_bytes), [base, col], tt.step, (base, col, ctx, weight, t, r)
                )
                outs[r].append(steps[r])
                for j in range(B if self.mode != "local" else 0):  # local SGD sends parameters, not gradients
                    bk = task(
                        "bucket",
                        t,
                        r,
                        bucket_bytes[j],
                        [(steps[r], bucket_bytes[j])],
                        tt.bucket,
                        (steps[r], j),
                        suffix=str(j),
                        bucket=j,
                    )
                    if self.mode != "local" and self.compression == "fp16":
                        bk = task("compress", t, r, sent[j], [bk], tt.compress_fp16, (bk,), suffix=str(j), bucket=j)
                    elif self.mode != "local" and self.compression == "topk":
                        bk = task(
                            "compress",
                            t,
                            r,
                            sent[j],
                            [bk, (state[r], 0.0)],
                            tt.compress_topk,
                            (bk, state[r], j, self.topk_ratio),
                            suffix=str(j),
                            bucket=j,
                        )
                    send[r, j] = bk
            if direct:  # each rank sums every rank's buckets itself: no bucket or chunk tasks
                for r in range(N):
                    outs[r].append(steps[r])
                continue
            if self.mode == "local":
                for r in range(N):
                    state[r] = task(
                        "update", t, r, state_size, [state[r], steps[r]], tt.update, (state[r], steps[r], ctx, None, t)
                    )
                if (t + 1) % int(self.sync_every):
                    continue
                for r in range(N):
                    for j in range(B):
                        send[r, j] = task(
                            "param-bucket",
                            t,
                            r,
                            bucket_bytes[j],
                            [state[r]],
                            tt.param_bucket,
                            (state[r], ctx, j, self.counts[r] / self.batch),
                            suffix=str(j),
                            bucket=j,
                        )
            received = self._reduce(b, t, send, bucket_bytes, sent, prio, N, B, cost)
            for r in range(N):
                layout, handles, deps = [], [], [state[r]]
                for j in range(B):
                    pieces = received[r, j]
                    layout.append((len(pieces), None if pieces[0][1] is None else [k for _, k in pieces]))
                    handles += [hd for hd, _ in pieces]
                    deps += [(hd, sent[j] / len(pieces)) for hd, _ in pieces]
                pm = {} if prio[0] is None else {"priority": max(prio)}
                if self.mode == "local":
                    state[r] = task(
                        "average", t, r, state_size, deps, tt.average, (state[r], ctx, tuple(layout), *handles), **pm
                    )
                    continue
                kw = {}
                if self.compression == "topk":
                    kw["sparse"] = tuple(send[r, j] for j in range(B))
                    deps += [(send[r, j], 0.0) for j in range(B)]
                if s_ and self.compensation:
                    kw.update(anchor=history[r][max(0, t_local - s_)], compensation=float(self.compensation))
                    if kw["anchor"] is not state[r]:  # at an epoch's start the anchor is the state itself
                        deps.append((kw["anchor"], 0.0))
                state[r] = task(
                    "update",
                    t,
                    r,
                    state_size,
                    deps + [(steps[r], 0.0)],
                    tt.update,
                    (state[r], steps[r], ctx, tuple(layout), t, *handles),
                    kwargs=kw or None,
                    **pm,
                )
                history[r].append(state[r])
        if direct and outs[0]:  # the epoch's last update: each rank's final state
            t = t0 + len(outs[0]) - 1
            last = [outs[q][-1] for q in range(N)]
            state = [
                task("update", t, r, state_size, [*last], tf.update_after, (outs[r][-1], ctx, t, *last))
                for r in range(N)
            ]
        if evaluate and self.val is not None:
            b.task(
                f"e{epoch}.eval",
                cost["eval"],
                64.0,
                {"category": "eval", "rank": 0},
                deps=[state[0]],
                fn=tt.evaluate,
                args=(state[0], ctx, self.val),
            )
        return b.graph()

    def _shards(self, task, t: int, r: int, samples, epoch: int, nbytes: float) -> list:
        """Rank ``r``'s batch of iteration ``t`` as one ``load`` task per loader holding samples
        of it (:func:`workflows.torch_loaders.shard_of`), each on its loader worker."""
        N, L = int(self.workers), int(self.loaders)
        out = []
        for s, pos in enumerate(shard_of(samples, L)):
            if not len(pos):
                continue
            ids = samples[pos]
            out.append(
                task(
                    "load",
                    t,
                    r,
                    nbytes / 4 * len(pos) / len(samples),
                    [],
                    load_shard,
                    (
                        [self.train.paths[i] for i in ids],
                        ids,
                        self.train.labels[ids],
                        pos,
                        epoch,
                        self.seed,
                        self.pad,
                        self.flip,
                        self.size,
                        float(self.cache_mb),
                    ),
                    suffix=str(s),
                    place=N + s,
                    shard=s,
                )
            )
        return out

    def direct(self) -> bool:
        """Whether the fused graph reduces the gradient directly (synchronous, uncompressed, at
        most :attr:`direct_mb` MB per rank)."""
        return (
            self.fuse
            and self.mode == "sync"
            and self.compression is None
            and 4.0 * self.params() <= self.direct_mb * 1e6
        )

    def _sent_bytes(self, bucket_bytes: float) -> float:
        """Bytes a bucket takes on the wire: halved by fp16; top-k sends an index (8 bytes) and a
        value (4) per entry kept."""
        return sent_bytes(bucket_bytes, None if self.mode == "local" else self.compression, self.topk_ratio)

    def _reduce(self, b, t: int, send: dict, bucket_bytes, sent, prio, N: int, B: int, cost: dict) -> dict:
        """Each bucket's allreduce over ``send``; ``(rank, bucket) -> [(handle, chunk or None)]``:
        the pieces whose sum (in chunk order) is the reduced bucket. Top-k gathers every rank's
        sparse bucket on every rank (a sparse all-gather) instead."""
        from . import torch_tasks as tt

        received = {}
        for j in range(B):
            if self.compression == "topk" and self.mode != "local":
                n = int(bucket_bytes[j] // 4)
                for r in range(N):
                    src = [send[q, j] for q in range(N)]
                    g = b.task(
                        f"it{t}.b{j}.gather.w{r}",
                        cost.get("gather", 1e-3),
                        bucket_bytes[j],
                        {"category": "topk-gather", "iteration": t, "rank": r, "bucket": j},
                        deps=[(x, sent[j]) for x in src],
                        fn=tt.sparse_sum,
                        args=(n, *src),
                    )
                    received[r, j] = [(g, None)]
                continue
            got, _, _, _ = bucket_allreduce(b, t, self.allreduce, N, send, j, sent[j], _REDUCE_FLOPS, prio[j])
            for r, pieces in got.items():
                received[r, j] = pieces
        return received

    def final_tasks(self, epoch: int) -> list:
        """The ids of each rank's last update in ``epoch`` (its state at the epoch's end)."""
        t = (epoch + 1) * self.per_epoch - 1
        last = "average" if self.mode == "local" and (t + 1) % int(self.sync_every) == 0 else "update"
        return [f"it{t}.w{r}.{last}" for r in range(int(self.workers))]

    def reference(self, epochs: int = 1, state=None, first_epoch: int = 0):
        """What the job computes, in one process without Dask, for ``epochs`` epochs: for plain
        synchronous training the single-process PyTorch loop on the global batches
        (:func:`workflows.torch_reference.reference_training`: ``(state, losses)``); for local SGD,
        stale-synchronous training or compression, the algorithm written out rank by rank in
        plain PyTorch (:func:`workflows.torch_reference.variant_reference`: ``(per-rank parameters,
        losses)``).

        Parameters
        ----------
        epochs : int
        state : dict, optional
            Start from this state (default: the seeded initial one; plain synchronous only).
        first_epoch : int
        """
        from .torch_reference import reference_training, variant_reference

        batches = [(e, ranks) for e in range(first_epoch, first_epoch + epochs) for ranks in self.batches(e)]
        if self.mode == "sync" and self.compression is None:
            return reference_training(self.ctx, self.train, batches, self.seed, self.pad, self.flip, state)
        return variant_reference(
            self.ctx,
            self.train,
            batches,
            self.seed,
            self.pad,
            self.flip,
            [c / self.batch for c in self.counts],
            mode=self.mode,
            sync_every=self.sync_every,
            staleness=self.staleness,
            compensation=self.compensation,
            compression=self.compression,
            topk_ratio=self.topk_ratio,
            first_iteration=first_epoch * self.per_epoch,
        )
