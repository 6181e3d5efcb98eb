"""Data-parallel training iterations as task graphs.

``data_parallel(model, workers, iterations, allreduce="ring"|"tree"|"ps", buckets=B, ...)`` builds,
per iteration ``t`` and worker (rank) ``w``:

* the data-loading stages (``read -> decode -> [augment] -> collate`` by default);
* a forward task per layer, a loss task, a backward task per layer in reverse order;
* a gradient *bucket* task per bucket (layers split into ``B`` contiguous groups, the last layers
  first, as PyTorch DDP fills them);
* the bucket's allreduce:

  - ``ring``: each rank cuts the chunk it sends first (a ``chunk`` task), then reduce-scatter and
    all-gather over ``N`` chunks, ``N - 1`` steps each, one task per (step, worker):
    ``N + 2 (N - 1) N`` tasks per bucket;
  - ``tree``: a reduce up a binary tree over the ranks (one task per rank) and a broadcast down it
    (one per rank): ``2 N`` tasks per bucket;
  - ``ps``: a push per rank, one sum on the parameter server, a pull per rank: ``2 N + 1``;

* an update task per layer and worker. Iteration ``t + 1``'s forward of layer ``l`` waits only for
  iteration ``t``'s update of layer ``l``, so communication overlaps computation.

``compression="fp16"`` or ``"topk"`` (with ``topk_ratio``) adds a compress task before and a
decompress task after each (rank, bucket) allreduce, and the bytes moved are what the compressed
bucket takes on the wire (:func:`~workflows.allreduce.sent_bytes`, as the PyTorch jobs send it).
Each allreduce has a reduce phase and a spread phase (all-gather, broadcast, pull); ``barrier=True``
adds a task per iteration that holds every spread phase until every bucket is reduced (a synchronous
parameter server). ``priority=
"layer-order"`` gives the spread-phase and update tasks ``meta["priority"]`` so the buckets the next
forward pass needs first travel first on a max-min network (TicTac, Hashemi et al., MLSys 2019);
``"none"`` leaves the order to the scheduler and the network's fair sharing. The parameter-server
sum has ``rank = N``: a dedicated server on a cluster of ``N + 1`` workers.

Also here: :func:`local_sgd` and :func:`stale_synchronous` (see each); every one of them builds a
:class:`TrainingSpec`, checked once, and :func:`training_graph` turns a spec into a graph.
:func:`pipeline_parallel` (:mod:`workflows.pipeline`) is re-exported here.

Task counts per iteration (``S`` loading stages, ``L`` layers, ``B`` buckets, ``N`` workers):
``N (S + 2 L + 1 + B + L)`` plus the allreduce tasks above plus ``2 N B`` with compression; and
``N L`` parameter-initialisation tasks once.

Costs and sizes (``executable=False``): from ``workflows/data/models.json`` (per-layer forward
multiply-accumulates and parameters of ResNet-50, VGG-16, BERT-base, GPT-2 small, with sources):
forward = ``2 x MACs x b / device FLOP/s`` for a rank's ``b = batch / workers`` samples (``batch``
is the global batch, as everywhere in the project), backward = 2 x forward, update = ``2 x params /
FLOP/s``; a gradient bucket is ``4 x params`` bytes (float32); activations are estimated at
``4 x b x sqrt(MACs)`` bytes (the data file holds no activation shapes: a rough proxy);
loading stages cost ``load_cost`` seconds each and pass ``4 x b x input_floats`` bytes.

``executable=True`` builds real numpy tasks for a small MLP (:mod:`workflows.mlp`) on a seeded
synthetic dataset that the generator writes to disk as one shard per worker; :func:`sgd_reference`
trains the same model sequentially on the same batches, which the data-parallel run must equal.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from ._builder import paused_gc
from ._training_graph import build
from .allreduce import COMPRESSIONS, allreduce_tasks
from .mlp import CLASSES, FEATURES, local_sgd_reference, sgd_reference, write_dataset
from .models import DEVICES, device_flops, model_profile
from .pipeline import pipeline_order, pipeline_parallel

__all__ = [
    "TrainingSpec",
    "training_graph",
    "data_parallel",
    "local_sgd",
    "stale_synchronous",
    "pipeline_parallel",
    "pipeline_order",
    "model_profile",
    "write_dataset",
    "sgd_reference",
    "local_sgd_reference",
    "DEVICES",
    "allreduce_tasks",
]

_LOADING = ("read", "decode", "augment", "collate")
_MODES = ("sync", "local", "stale")


@dataclass(frozen=True)
class TrainingSpec:
    """Everything that defines a data-parallel training graph; checked once, when made.

    Parameters
    ----------
    model : str or list of dict
        A name from ``workflows/data/models.json`` or per-layer ``{"name", "macs", "params"}``;
        ignored with ``executable=True`` (an MLP ``64 -> hidden... -> 10``).
    workers, iterations : int
        Ranks and training iterations (>= 1).
    allreduce : {"ring", "tree", "ps"}
    buckets : int
        Gradient buckets (>= 1; at most one per layer is used).
    priority : {"none", "layer-order"}
        ``layer-order`` gives spread-phase and update tasks ``meta["priority"]`` (TicTac).
    compression : {None, "fp16", "topk"}
        Compress the gradients (half precision, or the largest entries); adds compress and
        decompress tasks.
    topk_ratio : float
        ``topk``: the share of a bucket's entries sent, in (0, 1] (default 0.01).
    barrier : bool
        Every spread phase waits until every bucket is reduced (a synchronous parameter server).
    batch : int, optional
        Samples per iteration over all ranks (the global batch, as :class:`~workflows.torch_training.TorchTraining`
        and ``taskflow train --batch`` take it): each rank takes ``batch / workers`` (it must divide).
        Default 32 per rank: ``32 x workers``.
    device : str or float
        A device name from :data:`DEVICES` or FLOP/s.
    stages : tuple of str
        The data-loading stages per rank and iteration.
    load_cost : float
        Seconds per loading stage.
    executable : bool
        Real numpy tasks (needs ``dataset_dir``; not with ``mode="stale"``).
    dataset_dir : path, optional
        Where the executable graph's shards are written.
    hidden : tuple of int
        The executable MLP's hidden layer widths.
    lr : float
        The executable MLP's learning rate.
    seed : int
        Seeds the dataset and the initial parameters.
    name : str, optional
        The graph's name (default from the mode, model, allreduce, workers, iterations).
    mode : {"sync", "local", "stale"}
        Synchronous data parallelism, local SGD, stale-synchronous.
    sync_every : int
        Local SGD: average the models every ``sync_every`` iterations (>= 1).
    staleness : int
        Stale-synchronous: the compute of ``t + 1`` waits for the allreduce of ``t - staleness`` (>= 0).
    tile : bool
        Build the first iterations and copy the steady state for the rest (same graph, faster);
        False builds every iteration explicitly.

    Raises
    ------
    WorkflowError
        A parameter out of range, an unknown model or device, or a combination that cannot be built.
    """

    model: object = "resnet50"
    workers: int = 4
    iterations: int = 2
    allreduce: str = "ring"
    buckets: int = 2
    priority: str = "none"
    compression: str | None = None
    topk_ratio: float = 0.01
    barrier: bool = False
    batch: int | None = None
    device: object = "v100"
    stages: tuple = _LOADING
    load_cost: float = 5e-3
    executable: bool = False
    dataset_dir: object = None
    hidden: tuple = (32,)
    lr: float = 0.5
    seed: int = 0
    name: str | None = None
    mode: str = "sync"
    sync_every: int = 1
    staleness: int = 0
    tile: bool = True

    def __post_init__(self):
        n = int(self.workers)
        if n < 1:
            raise WorkflowError(f"workers must be >= 1, got {self.workers!r}")
        if self.batch is None:
            object.__setattr__(self, "batch", 32 * n)
        if isinstance(self.batch, bool) or not isinstance(self.batch, numbers.Integral) or self.batch < 1:
            raise WorkflowError(f"batch must be a whole number of samples >= 1, got {self.batch!r}")
        if self.batch % n:
            raise WorkflowError(
                f"batch {self.batch} is not divisible by {n} workers (each rank takes batch / workers samples)"
            )
        if self.allreduce not in ("ring", "tree", "ps"):
            raise WorkflowError(f"allreduce must be 'ring', 'tree' or 'ps', got {self.allreduce!r}")
        if self.priority not in ("none", "layer-order"):
            raise WorkflowError(f"priority must be 'none' or 'layer-order', got {self.priority!r}")
        if self.compression not in (None, *COMPRESSIONS):
            raise WorkflowError(
                f"compression must be one of {', '.join(COMPRESSIONS)} or None, got {self.compression!r}"
            )
        if (
            isinstance(self.topk_ratio, bool)
            or not isinstance(self.topk_ratio, (int, float))
            or not 0 < self.topk_ratio <= 1
        ):
            raise WorkflowError(f"topk_ratio must be in (0, 1], got {self.topk_ratio!r}")
        if self.mode not in _MODES:
            raise WorkflowError(f"mode must be one of {', '.join(_MODES)}, got {self.mode!r}")
        if (
            int(self.workers) < 1
            or int(self.iterations) < 1
            or self.buckets < 1
            or int(self.sync_every) < 1
            or int(self.staleness) < 0
        ):
            raise WorkflowError("workers, iterations, buckets and sync_every must be >= 1, staleness >= 0")
        if self.executable and self.mode == "stale":
            raise WorkflowError("stale-synchronous training is built for simulation only (executable=False)")
        device_flops(self.device)
        _layers(self.model, self.executable, self.hidden)
        if self.executable and self.dataset_dir is None:
            raise WorkflowError("executable=True needs dataset_dir (shards are written there)")

    @property
    def rank_batch(self) -> int:
        """Samples per rank and iteration: ``batch / workers``."""
        return int(self.batch) // int(self.workers)


def _layers(model, executable: bool, hidden):
    """(layers, MLP sizes or None, floats per input sample)."""
    if executable:
        sizes = [FEATURES, *hidden, CLASSES]
        return (
            [
                {
                    "name": f"dense{k}",
                    "macs": float(sizes[k] * sizes[k + 1]),
                    "params": float(sizes[k] * sizes[k + 1] + sizes[k + 1]),
                }
                for k in range(len(sizes) - 1)
            ],
            sizes,
            FEATURES,
        )
    return (model_profile(model) if isinstance(model, str) else list(model)), None, 224 * 224 * 3


def training_graph(spec: TrainingSpec) -> TaskGraph:
    """The training graph a :class:`TrainingSpec` describes (see the module docstring).

    Parameters
    ----------
    spec : TrainingSpec

    Returns
    -------
    TaskGraph
    """
    with paused_gc():
        return build(spec, *_layers(spec.model, spec.executable, spec.hidden))


def data_parallel(
    model="resnet50",
    workers: int = 4,
    iterations: int = 2,
    allreduce: str = "ring",
    buckets: int = 2,
    priority: str = "none",
    compression: str | None = None,
    topk_ratio: float = 0.01,
    batch: int | None = None,
    device: str = "v100",
    stages=_LOADING,
    load_cost: float = 5e-3,
    executable: bool = False,
    dataset_dir=None,
    hidden=(32,),
    lr: float = 0.5,
    seed: int = 0,
    name: str | None = None,
    barrier: bool = False,
) -> TaskGraph:
    """A synchronous data-parallel training graph (see the module docstring).

    ``model`` is a name from ``workflows/data/models.json`` or, with ``executable=True``, ignored in
    favour of an MLP ``64 -> hidden... -> 10``. Task ids read ``it{t}.w{w}.{kind}...``; every task's
    ``meta`` has ``category``, ``rank`` and ``iteration``.

    Parameters
    ----------
    model, workers, iterations, allreduce, buckets, priority, compression, topk_ratio, batch, device, stages, load_cost, executable, dataset_dir, hidden, lr, seed, name, barrier
        As in :class:`TrainingSpec`.

    Returns
    -------
    TaskGraph

    Raises
    ------
    WorkflowError
        A parameter :class:`TrainingSpec` refuses.

    Examples
    --------
    >>> g = data_parallel("resnet50", workers=4, iterations=1, allreduce="ring", buckets=2)
    >>> sum(1 for t in g.tasks() if t.meta["category"].startswith("ring"))
    48
    """
    return training_graph(
        TrainingSpec(
            model=model,
            workers=workers,
            iterations=iterations,
            allreduce=allreduce,
            buckets=buckets,
            priority=priority,
            compression=compression,
            topk_ratio=topk_ratio,
            batch=batch,
            device=device,
            stages=stages,
            load_cost=load_cost,
            executable=executable,
            dataset_dir=dataset_dir,
            hidden=hidden,
            lr=lr,
            seed=seed,
            name=name,
            barrier=barrier,
        )
    )


def local_sgd(
    model="resnet50",
    workers: int = 4,
    iterations: int = 4,
    sync_every: int = 2,
    allreduce: str = "ring",
    buckets: int = 2,
    priority: str = "none",
    compression: str | None = None,
    topk_ratio: float = 0.01,
    batch: int | None = None,
    device: str = "v100",
    stages=_LOADING,
    load_cost: float = 5e-3,
    executable: bool = False,
    dataset_dir=None,
    hidden=(32,),
    lr: float = 0.5,
    seed: int = 0,
    name: str | None = None,
    barrier: bool = False,
) -> TaskGraph:
    """Local SGD: each rank takes an SGD step on its own batch every iteration (a ``local`` task per
    layer) and the ranks average their models every ``sync_every`` iterations (bucket the parameters,
    allreduce, an ``average`` task per layer). ``sync_every=1`` computes exactly what
    :func:`data_parallel` computes. :func:`local_sgd_reference` is the sequential reference.

    Parameters
    ----------
    model, workers, iterations, allreduce, buckets, priority, compression, topk_ratio, batch, device, stages, load_cost, executable, dataset_dir, hidden, lr, seed, name, barrier
        As in :class:`TrainingSpec`.
    sync_every : int
        Average the models every ``sync_every`` iterations.

    Returns
    -------
    TaskGraph

    Raises
    ------
    WorkflowError
        A parameter :class:`TrainingSpec` refuses.

    Examples
    --------
    >>> g = local_sgd("resnet50", workers=2, iterations=4, sync_every=2, allreduce="tree")
    >>> sum(t.meta["category"] == "average" for t in g.tasks())  # 2 syncs x 2 ranks x 6 layers
    24
    """
    return training_graph(
        TrainingSpec(
            model=model,
            workers=workers,
            iterations=iterations,
            sync_every=sync_every,
            allreduce=allreduce,
            buckets=buckets,
            priority=priority,
            compression=compression,
            topk_ratio=topk_ratio,
            batch=batch,
            device=device,
            stages=stages,
            load_cost=load_cost,
            executable=executable,
            dataset_dir=dataset_dir,
            hidden=hidden,
            lr=lr,
            seed=seed,
            name=name,
            barrier=barrier,
            mode="local",
        )
    )


def stale_synchronous(
    model="resnet50",
    workers: int = 4,
    iterations: int = 4,
    staleness: int = 1,
    allreduce: str = "ring",
    buckets: int = 2,
    priority: str = "none",
    compression: str | None = None,
    topk_ratio: float = 0.01,
    batch: int | None = None,
    device: str = "v100",
    stages=_LOADING,
    load_cost: float = 5e-3,
    name: str | None = None,
    barrier: bool = False,
) -> TaskGraph:
    """Stale-synchronous data parallelism (DC-S3GD, Rigazzi et al. 2019): the compute of iteration
    ``t + 1`` waits for the allreduce of iteration ``t - s`` only, so up to ``s`` allreduces overlap
    the following compute; a rank's forward of layer ``l`` also waits for its own backward of ``l``
    in the previous iteration (it applies its local gradient). ``staleness=0`` is
    :func:`data_parallel`. Same tasks as :func:`data_parallel`; for simulation (no callables).

    Parameters
    ----------
    model, workers, iterations, allreduce, buckets, priority, compression, topk_ratio, batch, device, stages, load_cost, name, barrier
        As in :class:`TrainingSpec`.
    staleness : int
        How many allreduces may overlap the following compute.

    Returns
    -------
    TaskGraph

    Raises
    ------
    WorkflowError
        A parameter :class:`TrainingSpec` refuses.

    Examples
    --------
    >>> g = stale_synchronous("resnet50", workers=2, iterations=3, staleness=1, allreduce="ps")
    >>> sorted(g.predecessors("it2.w0.fwd.l1"))
    ['it0.w0.update.l1', 'it1.w0.bwd.l1', 'it2.w0.fwd.l0']
    """
    return training_graph(
        TrainingSpec(
            model=model,
            workers=workers,
            iterations=iterations,
            staleness=staleness,
            allreduce=allreduce,
            buckets=buckets,
            priority=priority,
            compression=compression,
            topk_ratio=topk_ratio,
            batch=batch,
            device=device,
            stages=stages,
            load_cost=load_cost,
            name=name,
            barrier=barrier,
            mode="stale",
        )
    )
