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

from dataclasses import dataclass

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from .images import batch_counts, epoch_batches
from .torch_data import DatasetSplit, open_data

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
        from ._torch_graph import build

        N = int(self.workers)
        if states is not None and len(states) != N:
            raise WorkflowError(f"states must hold one state per rank ({N}), got {len(states)}")
        return build(self, epoch, states, bool(executable), dict(DEFAULT_COSTS, **(costs or {})), evaluate)

    def direct(self) -> bool:
        """Whether the fused graph reduces the gradient directly (synchronous, uncompressed, at
        most :attr:`direct_mb` MB per rank)."""
        return (
            self.fuse
            and self.mode == "sync"
            and self.compression is None
            and 4.0 * self.params() <= self.direct_mb * 1e6
        )

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
