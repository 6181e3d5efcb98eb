"""A :class:`~workflows.torch_training.TorchTraining` epoch wired into its task graph (:func:`build`):
the PyTorch payload of :class:`workflows._wiring.Wiring`, which wires the iterations. Per iteration
each rank's loading (read, decode, augment, collate; a Dataset's fetch and collate; one ``load``
task when fused; shards on loader workers), its ``forward-backward`` step (from the global model of
``staleness`` iterations ago plus its own steps since, stale-synchronous), its local ``update``
(local SGD), its buckets (compressed where asked; local SGD's of its parameters), then each rank's
``update`` or ``average`` of its whole state. A fused small gradient is reduced inside the ranks'
next steps (:meth:`~workflows.torch_training.TorchTraining.direct`). See
:mod:`workflows.torch_training` for the tasks."""

from __future__ import annotations

import math

from taskflow.graph import TaskGraph

from ._builder import GraphBuilder
from ._wiring import Wiring
from .allreduce import sent_bytes
from .images import augment, collate, decode, load_samples, read_files
from .torch_data import DatasetSplit, collate_items, fetch, load_items
from .torch_loaders import load_shard, merge_shards, shard_of

__all__ = ["build"]

_REDUCE_FLOPS = 1e9  # numbers a core adds per second, for the allreduce tasks' costs


def build(job, epoch: int, states, executable: bool, cost: dict, evaluate: bool) -> TaskGraph:
    """The graph of ``job``'s epoch ``epoch``, as :meth:`~workflows.torch_training.TorchTraining.graph`
    describes it (its arguments checked there; ``cost`` complete).

    Parameters
    ----------
    job : TorchTraining
    epoch : int
    states : list of dict or None
    executable : bool
    cost : dict
        Seconds per task kind.
    evaluate : bool
    """
    return _TorchWiring(job, epoch, states, executable, cost, evaluate).graph()


class _TorchWiring(Wiring):
    """One epoch's tasks and handles as they are made (see the module docstring)."""

    def __init__(self, job, epoch, states, executable, cost, evaluate):
        from . import torch_fused, torch_tasks

        self.tt, self.tf = torch_tasks, torch_fused
        self.job, self.epoch, self.states, self.cost, self.evaluate = job, epoch, states, cost, evaluate
        N = self.workers = int(job.workers)
        ctx = self.ctx = job.ctx
        self.b = GraphBuilder(f"torch-{job.mode}-{job.allreduce}-n{N}-e{epoch}", executable=bool(executable))
        self.mode, self.sync_every, self.allreduce = job.mode, int(job.sync_every), job.allreduce
        self.compression = job.compression
        self.state_size = 8.0 * job.params()  # parameters and one optimizer buffer (momentum)
        self.bucket_bytes = [4.0 * sum(ctx.sizes[i] for i in bk) for bk in ctx.buckets]
        B = self.n_buckets = len(self.bucket_bytes)
        # bytes a bucket takes on the wire: halved by fp16; top-k sends an index (8 bytes) and a value (4) per entry kept
        codec = None if job.mode == "local" else job.compression
        self.sent = [sent_bytes(z, codec, job.topk_ratio) for z in self.bucket_bytes]
        first_layers_first = sorted(range(B), key=lambda j: min(ctx.buckets[j]))
        self.prio = [B - first_layers_first.index(j) if job.priority == "layer-order" else None for j in range(B)]
        self.reduce_flops = _REDUCE_FLOPS
        self.gathers = codec == "topk"  # every rank sums every rank's sparse bucket (a sparse all-gather)
        self.sample_bytes = 4.0 * math.prod(job.train.shape())
        self.direct = job.direct()
        self.own = isinstance(job.train, DatasetSplit)  # a Dataset, sent to each rank once an epoch
        self.staleness = int(job.staleness) if job.mode == "stale" else 0
        self.ranks = job.batches(epoch)
        self.first, self.count = epoch * job.per_epoch, len(self.ranks)
        self.steps: dict = {}  # rank -> its step in the iteration being built

    def task(self, kind, t, r, size, deps, fn, args, suffix="", kwargs=None, **meta):
        """Rank ``r``'s task of ``kind`` in iteration ``t``, its cost the kind's."""
        return self.b.task(
            f"it{t}.w{r}.{kind}{suffix}",
            self.cost.get(kind, 1e-3),
            size,
            {"category": kind, "iteration": t, "rank": r, **meta},
            deps=deps,
            fn=fn,
            args=args,
            kwargs=kwargs,
        )

    def begin(self) -> None:
        """Each rank's Dataset (where the data is one) and its initial state."""
        job, b, e, N, states = self.job, self.b, self.epoch, self.workers, self.states
        self.data = (
            [
                b.task(
                    f"e{e}.data.w{r}",
                    self.cost["data"],
                    float(job.train.nbytes),
                    {"category": "data", "rank": r},
                    fn=self.tt.given_state,
                    args=(job.train.dataset,),
                )
                for r in range(N)
            ]
            if self.own
            else None
        )
        self.state = [
            b.task(
                f"e{e}.init.w{r}",
                self.cost["init"],
                self.state_size,
                {"category": "init", "rank": r},
                fn=self.tt.init_state if states is None else self.tt.given_state,
                args=(self.ctx, job.seed) if states is None else (states[r],),
            )
            for r in range(N)
        ]
        self.history = [[st] for st in self.state]  # stale: each rank's global model after each iteration
        self.outs = [[] for _ in range(N)]  # each rank's steps of the epoch

    def loading(self, t: int, k: int, r: int):
        """Rank ``r``'s batch of iteration ``t``: ``(spec, col, shards)``, how its step loads it
        (``spec``, where ``col`` is None), the task holding it, the loaders' shards."""
        job, own, task = self.job, self.own, self.task
        samples = self.ranks[k][r]
        nbytes = self.sample_bytes * len(samples)
        data = self.data
        if own:
            spec = (load_items, data[r], samples, self.epoch, job.seed)
        else:
            paths = [job.train.paths[i] for i in samples]
            labels = job.train.labels[samples]
            spec = (load_samples, paths, samples, labels, self.epoch, job.seed, job.pad, job.flip, job.size)
        shards = self.shards(t, r, samples, nbytes) if job.loaders else []
        if shards:  # loaded on the loaders, put together on the rank: in its step, or a task
            spec = (merge_shards, len(samples), *shards)
            col = None if self.direct else task("collate", t, r, nbytes, shards, merge_shards, spec[1:])
        elif self.direct and not job.prefetch:
            col = None  # loaded inside the rank's step: its whole chain is one task
        elif job.fuse:  # one task, after the step `prefetch + 1` iterations before: `prefetch`
            # batches are loaded ahead of the step that needs them, in the waits for the others
            ahead = int(job.prefetch) + 1
            after = [(self.outs[r][k - ahead], 0.0)] if k >= ahead else []
            col = task("load", t, r, nbytes, after + ([data[r]] if own else []), spec[0], spec[1:])
        elif own:  # a Dataset's interface allows two stages: its samples, then the batch
            items = task("fetch", t, r, nbytes, [data[r]], fetch, (data[r], samples, self.epoch, job.seed))
            col = task("collate", t, r, nbytes, [items], collate_items, (items,))
        else:
            raw = task("read", t, r, nbytes / 4, [], read_files, (paths,))
            img = task("decode", t, r, nbytes / 4, [raw], decode, (raw, paths, job.size))
            aug = task(
                "augment", t, r, nbytes / 4, [img], augment, (img, samples, self.epoch, job.seed, job.pad, job.flip)
            )
            col = task("collate", t, r, nbytes, [aug], collate, (aug, labels))
        return spec, col, shards

    def compute(self, t: int, k: int, r: int):
        """Rank ``r``'s loading and ``forward-backward`` step: the step, or None where the
        gradient is reduced inside the ranks' next steps."""
        job, task, tt, ctx, N = self.job, self.task, self.tt, self.ctx, self.workers
        spec, col, shards = self.loading(t, k, r)
        base = self.state[r]
        s = self.staleness
        if s and k:  # the global model of s iterations ago plus the rank's own steps since
            lo = max(0, k - s)
            since = self.outs[r][lo:]
            base = task(
                "working",
                t,
                r,
                self.state_size,
                [self.history[r][lo], *since],
                tt.working,
                (self.history[r][lo], ctx, *since),
            )
        weight = 1.0 if self.mode == "local" else job.counts[r] / job.batch
        if self.direct:  # the last iteration's update and this one's step in one task (one hop less)
            outs = self.outs
            last = [] if not k else [outs[q][-1] for q in range(N)]
            own = [self.data[r]] if self.own else []
            self.steps[r] = task(
                "forward-backward",
                t,
                r,
                sum(self.bucket_bytes) + self.state_size,
                [
                    outs[r][-1] if last else base,
                    *([col] if col else shards or own),
                    *(o for q, o in enumerate(last) if q != r),
                ],
                self.tf.update_and_step,
                (outs[r][-1] if last else base, col, ctx, weight, t, r, *last),
                kwargs=None if col else {"load": spec},
            )
            return None
        step = self.steps[r] = task(
            "forward-backward", t, r, sum(self.bucket_bytes), [base, col], tt.step, (base, col, ctx, weight, t, r)
        )
        self.outs[r].append(step)
        return step

    def computed(self, t: int, k: int) -> None:
        if self.direct:  # (each rank's next step takes every rank's last one)
            for r in range(self.workers):
                self.outs[r].append(self.steps[r])

    def local_step(self, t: int, r: int, grads) -> None:
        """Local SGD: the rank's optimizer step on its own gradient."""
        state = self.state
        state[r] = self.task(
            "update", t, r, self.state_size, [state[r], grads], self.tt.update, (state[r], grads, self.ctx, None, t)
        )

    def bucket(self, t: int, r: int, j: int, grads):
        """Rank ``r``'s bucket ``j`` of its step's gradient (None: of its parameters, weighted by
        its part of the batch, to average), compressed where asked."""
        job, task, tt, nbytes = self.job, self.task, self.tt, self.bucket_bytes[j]
        if grads is None:
            st = self.state[r]
            weight = job.counts[r] / job.batch
            return task(
                "param-bucket", t, r, nbytes, [st], tt.param_bucket, (st, self.ctx, j, weight), suffix=str(j), bucket=j
            )
        bk = task("bucket", t, r, nbytes, [(grads, nbytes)], tt.bucket, (grads, j), suffix=str(j), bucket=j)
        sent = self.sent[j]
        if self.compression == "fp16":
            bk = task("compress", t, r, sent, [bk], tt.compress_fp16, (bk,), suffix=str(j), bucket=j)
        elif self.compression == "topk":
            st = self.state[r]
            deps = [bk, (st, 0.0)]
            args = (bk, st, j, job.topk_ratio)
            bk = task("compress", t, r, sent, deps, tt.compress_topk, args, suffix=str(j), bucket=j)
        return bk

    def gather(self, t: int, r: int, j: int, send: dict):
        """Rank ``r``'s sum of every rank's sparse bucket ``j`` (top-k: a sparse all-gather)."""
        src = [send[q, j] for q in range(self.workers)]
        return self.b.task(
            f"it{t}.b{j}.gather.w{r}",
            self.cost.get("gather", 1e-3),
            self.bucket_bytes[j],
            {"category": "topk-gather", "iteration": t, "rank": r, "bucket": j},
            deps=[(x, self.sent[j]) for x in src],
            fn=self.tt.sparse_sum,
            args=(int(self.bucket_bytes[j] // 4), *src),
        )

    def apply(self, t: int, k: int, r: int, received: dict, send: dict) -> None:
        """Rank ``r``'s ``update`` (``average``, local SGD) of its whole state from every bucket's
        pieces, in chunk order."""
        job, tt, state, B = self.job, self.tt, self.state, self.n_buckets
        layout, handles, deps = [], [], [state[r]]
        for j in range(B):
            pieces = received[r, j]
            layout.append((len(pieces), None if pieces[0][1] is None else [c for _, c in pieces]))
            handles += [hd for hd, _ in pieces]
            deps += [(hd, self.sent[j] / len(pieces)) for hd, _ in pieces]
        pm = {} if self.prio[0] is None else {"priority": max(self.prio)}
        if self.mode == "local":
            state[r] = self.task(
                "average", t, r, self.state_size, deps, tt.average, (state[r], self.ctx, tuple(layout), *handles), **pm
            )
            return
        kw = {}
        if self.compression == "topk":
            kw["sparse"] = tuple(send[r, j] for j in range(B))
            deps += [(send[r, j], 0.0) for j in range(B)]
        s = self.staleness
        if s and job.compensation:
            kw.update(anchor=self.history[r][max(0, k - s)], compensation=float(job.compensation))
            if kw["anchor"] is not state[r]:  # at an epoch's start the anchor is the state itself
                deps.append((kw["anchor"], 0.0))
        step = self.steps[r]
        state[r] = self.task(
            "update",
            t,
            r,
            self.state_size,
            deps + [(step, 0.0)],
            tt.update,
            (state[r], step, self.ctx, tuple(layout), t, *handles),
            kwargs=kw or None,
            **pm,
        )
        self.history[r].append(state[r])

    def end(self) -> None:
        """The epoch's last update where gradients were reduced directly (each rank's final
        state), and rank 0's evaluation."""
        job, outs, N = self.job, self.outs, self.workers
        if self.direct and outs[0]:
            t = self.first + len(outs[0]) - 1
            last = [outs[q][-1] for q in range(N)]
            self.state = [
                self.task(
                    "update", t, r, self.state_size, [*last], self.tf.update_after, (outs[r][-1], self.ctx, t, *last)
                )
                for r in range(N)
            ]
        if self.evaluate and job.val is not None:
            self.b.task(
                f"e{self.epoch}.eval",
                self.cost["eval"],
                64.0,
                {"category": "eval", "rank": 0},
                deps=[self.state[0]],
                fn=self.tt.evaluate,
                args=(self.state[0], self.ctx, job.val),
            )

    def shards(self, t: int, r: int, samples, nbytes: float) -> list:
        """Rank ``r``'s batch of iteration ``t`` as one ``load`` task per loader holding samples
        of it (:func:`workflows.torch_loaders.shard_of`), each on its loader worker."""
        job, N = self.job, self.workers
        out = []
        for s, pos in enumerate(shard_of(samples, int(job.loaders))):
            if not len(pos):
                continue
            ids = samples[pos]
            paths = [job.train.paths[i] for i in ids]
            args = (paths, ids, job.train.labels[ids], pos, self.epoch, job.seed, job.pad, job.flip, job.size)
            out.append(
                self.task(
                    "load",
                    t,
                    r,
                    nbytes / 4 * len(pos) / len(samples),
                    [],
                    load_shard,
                    (*args, float(job.cache_mb)),
                    suffix=str(s),
                    place=N + s,
                    shard=s,
                )
            )
        return out
