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
forward = ``2 x MACs x batch / device FLOP/s``, backward = 2 x forward, update = ``2 x params /
FLOP/s``; a gradient bucket is ``4 x params`` bytes (float32); activations are estimated at
``4 x batch x sqrt(MACs)`` bytes (the data file holds no activation shapes: a rough proxy);
loading stages cost ``load_cost`` seconds each and pass ``4 x batch x input_floats`` bytes.

``executable=True`` builds real numpy tasks for a small MLP (:mod:`workflows.mlp`) on a seeded
synthetic dataset that the generator writes to disk as one shard per worker; :func:`sgd_reference`
trains the same model sequentially on the same batches, which the data-parallel run must equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from ._builder import GraphBuilder, paused_gc
from .allreduce import COMPRESSIONS, allreduce_tasks, bucket_allreduce, sent_bytes
from .dataloading import loading_chain
from .mlp import (CLASSES, FEATURES, LOADERS, nothing, average_layer, backward, compress, flatten_grads, forward,
                  identity, init_layer, local_sgd_reference, local_update, loss_grad, sgd_reference, update_layer,
                  write_dataset)
from .models import DEVICES, device_flops, model_profile
from .pipeline import pipeline_order, pipeline_parallel

__all__ = ["TrainingSpec", "training_graph", "data_parallel", "local_sgd", "stale_synchronous", "pipeline_parallel",
           "pipeline_order", "model_profile", "write_dataset", "sgd_reference", "local_sgd_reference", "DEVICES",
           "allreduce_tasks"]

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
    batch : int
        Samples per rank and iteration.
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
    batch: int = 32
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
        if self.allreduce not in ("ring", "tree", "ps"):
            raise WorkflowError(f"allreduce must be 'ring', 'tree' or 'ps', got {self.allreduce!r}")
        if self.priority not in ("none", "layer-order"):
            raise WorkflowError(f"priority must be 'none' or 'layer-order', got {self.priority!r}")
        if self.compression not in (None, *COMPRESSIONS):
            raise WorkflowError(f"compression must be one of {', '.join(COMPRESSIONS)} or None, got "
                                f"{self.compression!r}")
        if isinstance(self.topk_ratio, bool) or not isinstance(self.topk_ratio, (int, float)) \
                or not 0 < self.topk_ratio <= 1:
            raise WorkflowError(f"topk_ratio must be in (0, 1], got {self.topk_ratio!r}")
        if self.mode not in _MODES:
            raise WorkflowError(f"mode must be one of {', '.join(_MODES)}, got {self.mode!r}")
        if (int(self.workers) < 1 or int(self.iterations) < 1 or self.buckets < 1 or int(self.sync_every) < 1
                or int(self.staleness) < 0):
            raise WorkflowError("workers, iterations, buckets and sync_every must be >= 1, staleness >= 0")
        if self.executable and self.mode == "stale":
            raise WorkflowError("stale-synchronous training is built for simulation only (executable=False)")
        device_flops(self.device)
        _layers(self.model, self.executable, self.hidden)
        if self.executable and self.dataset_dir is None:
            raise WorkflowError("executable=True needs dataset_dir (shards are written there)")


def _layers(model, executable: bool, hidden):
    """(layers, MLP sizes or None, floats per input sample)."""
    if executable:
        sizes = [FEATURES, *hidden, CLASSES]
        return ([{"name": f"dense{k}", "macs": float(sizes[k] * sizes[k + 1]),
                  "params": float(sizes[k] * sizes[k + 1] + sizes[k + 1])} for k in range(len(sizes) - 1)],
                sizes, FEATURES)
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
        return _build(spec)


def _build(spec: TrainingSpec) -> TaskGraph:
    model, allreduce, buckets, priority, compression = (spec.model, spec.allreduce, spec.buckets, spec.priority,
                                                        spec.compression)
    batch, stages, load_cost, executable, dataset_dir = (spec.batch, spec.stages, spec.load_cost, spec.executable,
                                                         spec.dataset_dir)
    hidden, lr, seed, name, mode, barrier, tile = (spec.hidden, spec.lr, spec.seed, spec.name, spec.mode,
                                                   spec.barrier, spec.tile)
    N, T, H, s_ = int(spec.workers), int(spec.iterations), int(spec.sync_every), int(spec.staleness)
    flops = device_flops(spec.device)
    layers, sizes, input_floats = _layers(model, executable, hidden)
    L = len(layers)
    paths = write_dataset(dataset_dir, N, T, batch, seed) if executable else None
    B = min(buckets, L)
    order = list(range(L - 1, -1, -1))  # bucket 0 holds the last layers (filled first by backward)
    groups = [sorted(order[i * L // B:(i + 1) * L // B]) for i in range(B)]
    X = bool(executable)
    tag = {"sync": "dp", "local": f"localsgd{H}", "stale": f"ssp{s_}"}[mode]
    b = GraphBuilder(name or f"{tag}-{'mlp' if X else model}-{allreduce}-n{N}-t{T}", executable=X)

    t_fwd = [2.0 * ly["macs"] * batch / flops for ly in layers]
    act_bytes = [4.0 * batch * math.sqrt(max(ly["macs"], 1.0)) for ly in layers]
    grad_bytes = [4.0 * ly["params"] for ly in layers]
    upd_cost = [2.0 * ly["params"] / flops for ly in layers]
    bucket_bytes = [sum(grad_bytes[k] for k in grp) for grp in groups]
    # each bucket's bytes on the wire over its bytes (the compress task's body keeps values exact)
    ratio = [sent_bytes(nb, compression, spec.topk_ratio) / nb if nb else 1.0 for nb in bucket_bytes]
    load_bytes = 4.0 * batch * input_floats
    shapes = [((sizes[k], sizes[k + 1]), sizes[k + 1]) for k in range(L)] if X else None
    # layer order: the transfers of the bucket holding the first layers go first (meta priority)
    first_layers_first = sorted(range(B), key=lambda k: groups[k][0])
    prio = [B - first_layers_first.index(k) if priority == "layer-order" else None for k in range(B)]

    params = {}
    for w in range(N):
        for k in range(L):
            params[w, k] = b.task(f"init.w{w}.l{k}", upd_cost[k], grad_bytes[k],
                                  {"category": "init", "rank": w, "layer": k}, fn=init_layer, args=(sizes, k, seed))
    init = dict(params)
    history = {}  # (iteration, w, layer) -> global update (stale)
    prev_bwd = {}
    # Without callables, iterations repeat: build the first ones (up to the first period whose
    # tasks depend on iterations only), then let the builder copy that period for the rest.
    period = H if mode == "local" else 1
    explicit = T if X or not tile else min(T, (2 * H if mode == "local" else s_ + 2 if mode == "stale" else 2))
    floor = b.mark()[0]

    def iteration(t):
        sync = mode != "local" or (t + 1) % H == 0
        bucket_task = {}
        for w in range(N):
            def stage_meta(stage, t=t, w=w):
                return {"category": stage, "iteration": t, "rank": w}
            batch_h = loading_chain(b, f"it{t}.w{w}", stages, lambda _: load_cost, lambda _: load_bytes, stage_meta,
                                    fns=LOADERS if X else None, first_args=(paths[w], t, batch) if X else ())
            if mode == "stale":
                v = t - 1 - s_
                use = [history[v, w, k] if v >= 0 else init[w, k] for k in range(L)]
            else:
                use = [params[w, k] for k in range(L)]
            acts = [batch_h]
            for k in range(L):
                deps = [acts[-1], (use[k], grad_bytes[k])]
                if mode == "stale" and s_ > 0 and t > 0:
                    deps.append((prev_bwd[w, k], 0.0))  # the rank applies its own gradient first (DC-S3GD)
                acts.append(b.task(f"it{t}.w{w}.fwd.l{k}", t_fwd[k], act_bytes[k],
                                   {"category": "forward", "iteration": t, "rank": w, "layer": k},
                                   deps=deps, fn=forward, args=(use[k], acts[-1], k == L - 1)))
            up = b.task(f"it{t}.w{w}.loss", 10.0 * batch * CLASSES / flops, act_bytes[-1],
                        {"category": "loss", "iteration": t, "rank": w}, deps=[acts[-1]],
                        fn=loss_grad, args=(acts[-1], batch_h))
            grads = {}
            for k in range(L - 1, -1, -1):
                up = grads[k] = b.task(f"it{t}.w{w}.bwd.l{k}", 2.0 * t_fwd[k], grad_bytes[k] + act_bytes[k],
                                       {"category": "backward", "iteration": t, "rank": w, "layer": k},
                                       deps=[up, acts[k], acts[k + 1], use[k]],
                                       fn=backward, args=(use[k], acts[k], acts[k + 1], up, k == L - 1))
                prev_bwd[w, k] = up
            if mode == "local":  # a local SGD step on every layer
                for k in range(L):
                    params[w, k] = b.task(f"it{t}.w{w}.local.l{k}", upd_cost[k], grad_bytes[k],
                                          {"category": "local-update", "iteration": t, "rank": w, "layer": k},
                                          deps=[params[w, k], grads[k]], fn=local_update,
                                          args=(params[w, k], grads[k], lr))
                if not sync:
                    continue
                send = params  # the models are averaged
            else:
                send = {(w, k): grads[k] for k in range(L)}
            for j in range(B):
                parts = [send[w, k] for k in groups[j]]
                hb = b.task(f"it{t}.w{w}.bucket{j}", bucket_bytes[j] / 4.0 / flops, bucket_bytes[j],
                            {"category": "bucket", "iteration": t, "rank": w, "bucket": j},
                            deps=parts, fn=flatten_grads, args=tuple(parts))
                if compression is not None:
                    hb = b.task(f"it{t}.w{w}.compress{j}", bucket_bytes[j] / flops * 10, bucket_bytes[j] * ratio[j],
                                {"category": "compress", "iteration": t, "rank": w, "bucket": j},
                                deps=[hb], fn=compress, args=(hb, ratio[j]))
                bucket_task[w, j] = hb
        if not sync:
            return
        received, mids, spread, ends = {}, [], {}, {}
        for j in range(B):
            got, mid, spread[j], ends[j] = bucket_allreduce(b, t, allreduce, N, bucket_task, j,
                                                            bucket_bytes[j] * ratio[j], flops, prio[j])
            mids += mid
            for w, pieces in got.items():
                received[w, j] = pieces
        if barrier:  # every spread phase waits until every bucket is reduced
            gate = b.task(f"it{t}.barrier", 0.0, 0.0, {"category": "barrier", "iteration": t},
                          deps=[(h, 0.0) for h in mids], fn=nothing, args=())
            for j in range(B):
                for h in spread[j]:
                    b.edge(gate, h, size=0.0)
        for w in range(N):
            for j in range(B):
                pieces = received[w, j]
                hs = [h for h, _ in pieces]
                pm = {} if prio[j] is None else {"priority": prio[j]}
                deco = None
                if compression is not None:
                    deco = b.task(f"it{t}.w{w}.decompress{j}", bucket_bytes[j] / flops * 10, bucket_bytes[j],
                                  {"category": "decompress", "iteration": t, "rank": w, "bucket": j, **pm},
                                  deps=[(h, 0.0) for h in hs], fn=identity, args=(hs[0],))
                chunk_order = None if pieces[0][1] is None else [c for _, c in pieces]
                offset = 0
                for k in groups[j]:
                    piece_deps = [(h, grad_bytes[k] * ratio[j] / len(hs)) for h in hs] + (
                        [(deco, 0.0)] if deco is not None else [])
                    where = (offset, shapes[k] if X else None, chunk_order)
                    if mode == "local":
                        u = b.task(f"it{t}.w{w}.average.l{k}", upd_cost[k], grad_bytes[k],
                                   {"category": "average", "iteration": t, "rank": w, "layer": k, **pm},
                                   deps=piece_deps, fn=average_layer, args=(N, *where, *hs))
                    else:
                        u = b.task(f"it{t}.w{w}.update.l{k}", upd_cost[k], grad_bytes[k],
                                   {"category": "update", "iteration": t, "rank": w, "layer": k, **pm},
                                   deps=[params[w, k]] + piece_deps, fn=update_layer,
                                   args=(params[w, k], lr, N, *where, *hs))
                    offset += int(layers[k]["params"])
                    params[w, k] = u
                    if mode == "stale":
                        history[t, w, k] = u
    for t in range(explicit):
        if t == explicit - period:
            block = b.mark()
        iteration(t)
    if explicit < T:
        times = (T - explicit) // period
        shift = times * (b.mark()[0] - block[0])
        parts = [i.split(".", 1) for i in b.ids[block[0]:]]  # "it{t}.rest"
        parts = [(int(h[2:]), r) for h, r in parts]
        b.tile(block, times, lambda _, k: [f"it{t + k * period}.{r}" for t, r in parts],
               lambda metas, k: [dict(m, iteration=m["iteration"] + k * period) for m in metas], floor=floor)
        for key, h in params.items():  # the state now lives in the last copy
            assert h >= block[0]
            params[key] = h + shift
        for t in range(explicit + times * period, T):  # a partial last period (local SGD)
            iteration(t)
    return b.graph()


def data_parallel(model="resnet50", workers: int = 4, iterations: int = 2, allreduce: str = "ring",
                  buckets: int = 2, priority: str = "none", compression: str | None = None, topk_ratio: float = 0.01,
                  batch: int = 32,
                  device: str = "v100", stages=_LOADING, load_cost: float = 5e-3,
                  executable: bool = False, dataset_dir=None, hidden=(32,), lr: float = 0.5, seed: int = 0,
                  name: str | None = None, barrier: bool = False) -> TaskGraph:
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
    return training_graph(TrainingSpec(
        model=model, workers=workers, iterations=iterations, allreduce=allreduce, buckets=buckets, priority=priority,
        compression=compression, topk_ratio=topk_ratio, batch=batch, device=device, stages=stages,
        load_cost=load_cost, executable=executable, dataset_dir=dataset_dir, hidden=hidden, lr=lr, seed=seed,
        name=name, barrier=barrier))


def local_sgd(model="resnet50", workers: int = 4, iterations: int = 4, sync_every: int = 2, allreduce: str = "ring",
              buckets: int = 2, priority: str = "none", compression: str | None = None, topk_ratio: float = 0.01,
              batch: int = 32,
              device: str = "v100", stages=_LOADING, load_cost: float = 5e-3,
              executable: bool = False, dataset_dir=None, hidden=(32,), lr: float = 0.5, seed: int = 0,
              name: str | None = None, barrier: bool = False) -> TaskGraph:
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
    return training_graph(TrainingSpec(
        model=model, workers=workers, iterations=iterations, sync_every=sync_every, allreduce=allreduce,
        buckets=buckets, priority=priority, compression=compression, topk_ratio=topk_ratio, batch=batch,
        device=device, stages=stages, load_cost=load_cost, executable=executable, dataset_dir=dataset_dir,
        hidden=hidden, lr=lr, seed=seed, name=name, barrier=barrier, mode="local"))


def stale_synchronous(model="resnet50", workers: int = 4, iterations: int = 4, staleness: int = 1,
                      allreduce: str = "ring", buckets: int = 2, priority: str = "none",
                      compression: str | None = None, topk_ratio: float = 0.01, batch: int = 32,
                      device: str = "v100",
                      stages=_LOADING, load_cost: float = 5e-3,
                      name: str | None = None, barrier: bool = False) -> TaskGraph:
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
    return training_graph(TrainingSpec(
        model=model, workers=workers, iterations=iterations, staleness=staleness, allreduce=allreduce,
        buckets=buckets, priority=priority, compression=compression, topk_ratio=topk_ratio, batch=batch,
        device=device, stages=stages, load_cost=load_cost, name=name, barrier=barrier, mode="stale"))
