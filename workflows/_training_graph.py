"""A :class:`~workflows.training.TrainingSpec` wired into its task graph (:func:`build`): the
costs-only (or small numpy MLP) payload of :class:`workflows._wiring.Wiring`, which wires the
iterations. Per iteration each rank's loading, forward, loss and backward per layer; its local step
(local SGD) per layer; its buckets (compressed where asked); then each rank's update, or average,
of every layer. Iterations whose tasks depend on the iteration only are built once and copied
(:meth:`~workflows._builder.GraphBuilder.tile`)."""

from __future__ import annotations

import math

from taskflow.graph import TaskGraph

from ._builder import GraphBuilder
from ._wiring import Wiring
from .allreduce import sent_bytes
from .dataloading import loading_chain
from .mlp import (
    CLASSES,
    LOADERS,
    average_layer,
    backward,
    compress,
    flatten_grads,
    forward,
    identity,
    init_layer,
    local_update,
    loss_grad,
    update_layer,
    write_dataset,
)
from .models import device_flops

__all__ = ["build"]


def build(spec, layers: list, sizes, input_floats: int) -> TaskGraph:
    """The graph of ``spec``.

    Parameters
    ----------
    spec : TrainingSpec
    layers : list of dict
        Per layer ``{"macs", "params"}``.
    sizes : list of int or None
        The executable MLP's widths.
    input_floats : int
        Floats per input sample.
    """
    return _CostWiring(spec, layers, sizes, input_floats).graph()


class _CostWiring(Wiring):
    """The costs, sizes and handles of one training graph as it is built (see the module docstring)."""

    def __init__(self, spec, layers, sizes, input_floats):
        self.spec = spec
        self.workers, self.iterations = int(spec.workers), int(spec.iterations)
        self.sync_every, self.staleness = int(spec.sync_every), int(spec.staleness)
        self.mode, self.compression, self.batch = spec.mode, spec.compression, spec.rank_batch
        self.executable = bool(spec.executable)
        self.flops = flops = device_flops(spec.device)
        self.layers, self.sizes = layers, sizes
        n_layers = self.n_layers = len(layers)
        self.paths = (
            write_dataset(spec.dataset_dir, self.workers, self.iterations, spec.rank_batch, spec.seed)
            if self.executable
            else None
        )
        n_buckets = self.n_buckets = min(spec.buckets, n_layers)
        order = list(range(n_layers - 1, -1, -1))  # bucket 0 holds the last layers (filled first by backward)
        self.groups = [
            sorted(order[i * n_layers // n_buckets : (i + 1) * n_layers // n_buckets]) for i in range(n_buckets)
        ]
        tag = {"sync": "dp", "local": f"localsgd{self.sync_every}", "stale": f"ssp{self.staleness}"}[self.mode]
        model = "mlp" if self.executable else spec.model
        self.b = GraphBuilder(
            spec.name or f"{tag}-{model}-{spec.allreduce}-n{self.workers}-t{self.iterations}",
            executable=self.executable,
        )
        batch = spec.rank_batch
        self.t_fwd = [2.0 * ly["macs"] * batch / flops for ly in layers]
        self.act_bytes = [4.0 * batch * math.sqrt(max(ly["macs"], 1.0)) for ly in layers]
        self.grad_bytes = [4.0 * ly["params"] for ly in layers]
        self.upd_cost = [2.0 * ly["params"] / flops for ly in layers]
        self.bucket_bytes = [sum(self.grad_bytes[k] for k in grp) for grp in self.groups]
        # each bucket's bytes on the wire over its bytes (the compress task's body keeps values exact)
        self.ratio = [sent_bytes(nb, spec.compression, spec.topk_ratio) / nb if nb else 1.0 for nb in self.bucket_bytes]
        self.sent = [nb * r for nb, r in zip(self.bucket_bytes, self.ratio)]
        self.allreduce, self.reduce_flops, self.barrier = spec.allreduce, flops, bool(spec.barrier)
        self.first, self.count = 0, self.iterations
        self.load_bytes = 4.0 * batch * input_floats
        self.shapes = [((sizes[k], sizes[k + 1]), sizes[k + 1]) for k in range(n_layers)] if self.executable else None
        # layer order: the transfers of the bucket holding the first layers go first (meta priority)
        first_layers_first = sorted(range(n_buckets), key=lambda k: self.groups[k][0])
        self.prio = [
            n_buckets - first_layers_first.index(k) if spec.priority == "layer-order" else None
            for k in range(n_buckets)
        ]
        self.params: dict = {}  # (rank, layer) -> the task holding its parameters now
        self.init: dict = {}  # (rank, layer) -> its initialisation
        self.history: dict = {}  # (iteration, rank, layer) -> that iteration's update (stale)
        self.prev_bwd: dict = {}  # (rank, layer) -> its last backward

    def task(self, id, cost, size, meta, **how):
        """A task of the graph (:meth:`~workflows._builder.GraphBuilder.task`)."""
        return self.b.task(id, cost, size, meta, **how)

    def begin(self) -> None:
        """Initialise the parameters."""
        spec = self.spec
        for w in range(self.workers):
            for k in range(self.n_layers):
                self.params[w, k] = self.task(
                    f"init.w{w}.l{k}",
                    self.upd_cost[k],
                    self.grad_bytes[k],
                    {"category": "init", "rank": w, "layer": k},
                    fn=init_layer,
                    args=(self.sizes, k, spec.seed),
                )
        self.init = dict(self.params)

    def build_iterations(self) -> None:
        """Build the iterations: the first ones, then copies."""
        b, spec = self.b, self.spec
        # Without callables, iterations repeat: build the first ones (up to the first period whose
        # tasks depend on iterations only), then let the builder copy that period for the rest.
        mode, T = self.mode, self.iterations
        period = self.sync_every if mode == "local" else 1
        steady = 2 * self.sync_every if mode == "local" else self.staleness + 2 if mode == "stale" else 2
        explicit = T if self.executable or not spec.tile else min(T, steady)
        floor = b.mark()[0]
        for t in range(explicit):
            if t == explicit - period:
                block = b.mark()
            self.iteration(t)
        if explicit < T:
            times = (T - explicit) // period
            shift = times * (b.mark()[0] - block[0])
            parts = [i.split(".", 1) for i in b.ids[block[0] :]]  # "it{t}.rest"
            parts = [(int(h[2:]), r) for h, r in parts]
            b.tile(
                block,
                times,
                lambda _, k: [f"it{t + k * period}.{r}" for t, r in parts],
                lambda metas, k: [dict(m, iteration=m["iteration"] + k * period) for m in metas],
                floor=floor,
            )
            for key, h in self.params.items():  # the state now lives in the last copy
                assert h >= block[0]
                self.params[key] = h + shift
            for t in range(explicit + times * period, T):  # a partial last period (local SGD)
                self.iteration(t)

    def compute(self, t: int, k: int, w: int) -> dict:
        """Rank ``w``'s loading, forward, loss and backward in iteration ``t``: its gradient's task
        per layer."""
        X, L = self.executable, self.n_layers

        def stage_meta(stage):
            return {"category": stage, "iteration": t, "rank": w}

        batch_h = loading_chain(
            self.b,
            f"it{t}.w{w}",
            self.spec.stages,
            lambda _: self.spec.load_cost,
            lambda _: self.load_bytes,
            stage_meta,
            fns=LOADERS if X else None,
            first_args=(self.paths[w], t, self.batch) if X else (),
        )
        if self.mode == "stale":
            v = t - 1 - self.staleness
            use = [self.history[v, w, k] if v >= 0 else self.init[w, k] for k in range(L)]
        else:
            use = [self.params[w, k] for k in range(L)]
        acts = [batch_h]
        for k in range(L):
            deps = [acts[-1], (use[k], self.grad_bytes[k])]
            if self.mode == "stale" and self.staleness > 0 and t > 0:
                deps.append((self.prev_bwd[w, k], 0.0))  # the rank applies its own gradient first (DC-S3GD)
            acts.append(
                self.task(
                    f"it{t}.w{w}.fwd.l{k}",
                    self.t_fwd[k],
                    self.act_bytes[k],
                    {"category": "forward", "iteration": t, "rank": w, "layer": k},
                    deps=deps,
                    fn=forward,
                    args=(use[k], acts[-1], k == L - 1),
                )
            )
        up = self.task(
            f"it{t}.w{w}.loss",
            10.0 * self.batch * CLASSES / self.flops,
            self.act_bytes[-1],
            {"category": "loss", "iteration": t, "rank": w},
            deps=[acts[-1]],
            fn=loss_grad,
            args=(acts[-1], batch_h),
        )
        grads = {}
        for k in range(L - 1, -1, -1):
            up = grads[k] = self.task(
                f"it{t}.w{w}.bwd.l{k}",
                2.0 * self.t_fwd[k],
                self.grad_bytes[k] + self.act_bytes[k],
                {"category": "backward", "iteration": t, "rank": w, "layer": k},
                deps=[up, acts[k], acts[k + 1], use[k]],
                fn=backward,
                args=(use[k], acts[k], acts[k + 1], up, k == L - 1),
            )
            self.prev_bwd[w, k] = up
        return grads

    def local_step(self, t: int, w: int, grads: dict) -> None:
        """Local SGD: rank ``w`` steps every layer with its own gradient."""
        for k in range(self.n_layers):
            self.params[w, k] = self.task(
                f"it{t}.w{w}.local.l{k}",
                self.upd_cost[k],
                self.grad_bytes[k],
                {"category": "local-update", "iteration": t, "rank": w, "layer": k},
                deps=[self.params[w, k], grads[k]],
                fn=local_update,
                args=(self.params[w, k], grads[k], self.spec.lr),
            )

    def bucket(self, t: int, w: int, j: int, grads):
        """Rank ``w``'s bucket ``j`` of its gradients (None: its parameters, to average),
        compressed where asked: the task its allreduce sends."""
        source = self.params if grads is None else {(w, k): grads[k] for k in self.groups[j]}
        parts = [source[w, k] for k in self.groups[j]]
        nbytes = self.bucket_bytes[j]
        hb = self.task(
            f"it{t}.w{w}.bucket{j}",
            nbytes / 4.0 / self.flops,
            nbytes,
            {"category": "bucket", "iteration": t, "rank": w, "bucket": j},
            deps=parts,
            fn=flatten_grads,
            args=tuple(parts),
        )
        if self.compression is not None:
            hb = self.task(
                f"it{t}.w{w}.compress{j}",
                nbytes / self.flops * 10,
                nbytes * self.ratio[j],
                {"category": "compress", "iteration": t, "rank": w, "bucket": j},
                deps=[hb],
                fn=compress,
                args=(hb, self.ratio[j]),
            )
        return hb

    def apply(self, t: int, k: int, w: int, received: dict, send: dict) -> None:
        """Rank ``w`` applies every bucket it received."""
        for j in range(self.n_buckets):
            self.apply_bucket(t, w, j, received[w, j])

    def apply_bucket(self, t: int, w: int, j: int, pieces: list) -> None:
        """Rank ``w`` applies what it received of bucket ``j`` to each layer of it: an update of
        its parameters (or, local SGD, an average of the ranks' models)."""
        hs = [h for h, _ in pieces]
        pm = {} if self.prio[j] is None else {"priority": self.prio[j]}
        deco = None
        nbytes = self.bucket_bytes[j]
        if self.compression is not None:
            deco = self.task(
                f"it{t}.w{w}.decompress{j}",
                nbytes / self.flops * 10,
                nbytes,
                {"category": "decompress", "iteration": t, "rank": w, "bucket": j, **pm},
                deps=[(h, 0.0) for h in hs],
                fn=identity,
                args=(hs[0],),
            )
        chunk_order = None if pieces[0][1] is None else [c for _, c in pieces]
        offset = 0
        for k in self.groups[j]:
            piece_deps = [(h, self.grad_bytes[k] * self.ratio[j] / len(hs)) for h in hs]
            piece_deps += [(deco, 0.0)] if deco is not None else []
            where = (offset, self.shapes[k] if self.executable else None, chunk_order)
            meta = {"iteration": t, "rank": w, "layer": k, **pm}
            if self.mode == "local":
                u = self.task(
                    f"it{t}.w{w}.average.l{k}",
                    self.upd_cost[k],
                    self.grad_bytes[k],
                    {"category": "average", **meta},
                    deps=piece_deps,
                    fn=average_layer,
                    args=(self.workers, *where, *hs),
                )
            else:
                u = self.task(
                    f"it{t}.w{w}.update.l{k}",
                    self.upd_cost[k],
                    self.grad_bytes[k],
                    {"category": "update", **meta},
                    deps=[self.params[w, k]] + piece_deps,
                    fn=update_layer,
                    args=(self.params[w, k], self.spec.lr, self.workers, *where, *hs),
                )
            offset += int(self.layers[k]["params"])
            self.params[w, k] = u
            if self.mode == "stale":
                self.history[t, w, k] = u
