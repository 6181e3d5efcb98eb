"""Data-parallel training iterations as task graphs.

``data_parallel(model, workers, iterations, allreduce="ring"|"tree"|"ps", buckets=B, ...)`` builds,
per iteration ``t`` and worker (rank) ``w``:

* the data-loading stages (``read -> decode -> [augment] -> collate`` by default);
* a forward task per layer, a loss task, a backward task per layer in reverse order;
* a gradient *bucket* task per bucket (layers split into ``B`` contiguous groups, the last layers
  first, as PyTorch DDP fills them);
* the bucket's allreduce:

  - ``ring``: reduce-scatter then all-gather over ``N`` chunks, ``N - 1`` steps each, one task per
    (step, worker): ``2 (N - 1) N`` tasks per bucket;
  - ``tree``: a reduce up a binary tree over the ranks (one task per rank) and a broadcast down it
    (one per rank): ``2 N`` tasks per bucket;
  - ``ps``: a push per rank, one sum on the parameter server, a pull per rank: ``2 N + 1``;

* an update task per layer and worker. Iteration ``t + 1``'s forward of layer ``l`` waits only for
  iteration ``t``'s update of layer ``l``, so communication overlaps computation.

``compression=r`` adds a compress task before and a decompress task after each (rank, bucket)
allreduce and multiplies the bytes moved by ``r``. Each allreduce has a reduce phase and a spread
phase (all-gather, broadcast, pull); ``barrier=True`` adds a task per iteration that holds every
spread phase until every bucket is reduced (a synchronous parameter server). ``priority=
"layer-order"`` gives the spread-phase and update tasks ``meta["priority"]`` so the buckets the next
forward pass needs first travel first on a max-min network (TicTac, Hashemi et al., MLSys 2019);
``"none"`` leaves the order to the scheduler and the network's fair sharing. The parameter-server
sum has ``rank = N``: a dedicated server on a cluster of ``N + 1`` workers.

Also here: :func:`local_sgd`, :func:`stale_synchronous` and :func:`pipeline_parallel` (see each).

Task counts per iteration (``S`` loading stages, ``L`` layers, ``B`` buckets, ``N`` workers):
``N (S + 2 L + 1 + B + L)`` plus the allreduce tasks above plus ``2 N B`` with compression; and
``N L`` parameter-initialisation tasks once.

Costs and sizes (``executable=False``): from ``workflows/data/models.json`` (per-layer forward
multiply-accumulates and parameters of ResNet-50, VGG-16, BERT-base, GPT-2 small, with sources):
forward = ``2 x MACs x batch / device FLOP/s``, backward = 2 x forward, update = ``2 x params /
FLOP/s``; a gradient bucket is ``4 x params`` bytes (float32); activations are estimated at
``4 x batch x sqrt(MACs)`` bytes (the data file holds no activation shapes: a rough proxy);
loading stages cost ``load_cost`` seconds each and pass ``4 x batch x input_floats`` bytes.

``executable=True`` builds real numpy tasks for a small MLP (tanh hidden layers, softmax output) on
a seeded synthetic 10-class dataset of 8x8 "images" (class prototypes plus noise) that the
generator writes to disk as one shard per worker; :func:`sgd_reference` trains the same model
sequentially on the same batches, which the data-parallel run must equal.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from taskflow.graph import TaskGraph

from ._builder import GraphBuilder, paused_gc
from .dataloading import loading_chain

__all__ = ["data_parallel", "local_sgd", "stale_synchronous", "model_profile", "write_dataset", "sgd_reference",
           "local_sgd_reference", "DEVICES", "allreduce_tasks"]

_DATA = Path(__file__).with_name("data") / "models.json"
FEATURES, CLASSES = 64, 10


def _profiles() -> dict:
    with open(_DATA) as f:
        return json.load(f)


DEVICES = {k: v["flops"] for k, v in _profiles()["devices"].items()}


def model_profile(name: str) -> list:
    """``[{"name", "macs", "params"}]`` per layer (group) of a known model."""
    models = _profiles()["models"]
    if name not in models:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(sorted(models))}")
    return models[name]["layers"]


def allreduce_tasks(kind: str, workers: int, buckets: int) -> int:
    """Tasks one iteration's allreduce adds (see the module docstring)."""
    n = workers
    per = {"ring": 2 * (n - 1) * n, "tree": 2 * n, "ps": 2 * n + 1}[kind]
    return per * buckets


# ---------------------------------------------------------------------- executable task bodies
def write_dataset(directory, workers: int, iterations: int, batch: int, seed: int = 0) -> list:
    """Write one ``shard{w}.npz`` per worker (rows for every iteration); return their paths."""
    rng = np.random.default_rng(seed)
    protos = rng.normal(0.0, 1.0, size=(CLASSES, FEATURES))
    os.makedirs(directory, exist_ok=True)
    paths = []
    for w in range(workers):
        y = rng.integers(0, CLASSES, size=iterations * batch)
        x = protos[y] + 0.8 * rng.normal(size=(y.size, FEATURES))
        raw = np.clip(np.round((x + 4.0) * 32.0), 0, 255).astype(np.uint8)  # stored like 8-bit pixels
        p = os.path.join(directory, f"shard{w}.npz")
        np.savez(p, x=raw, y=y)
        paths.append(p)
    return paths


def read_shard(path, t, batch):
    with np.load(path) as d:
        return d["x"][t * batch:(t + 1) * batch].copy(), d["y"][t * batch:(t + 1) * batch].copy()


def decode(raw):
    x, y = raw
    return x.astype(np.float64) / 32.0 - 4.0, y


def augment(sample):
    return sample  # deterministic so the sequential reference sees the same batch


def collate(sample):
    x, y = sample
    return np.ascontiguousarray(x), y.astype(np.int64)


def init_layer(sizes, layer, seed):
    rng = np.random.default_rng([seed, layer])
    fan_in, fan_out = sizes[layer], sizes[layer + 1]
    return rng.normal(0.0, 1.0 / math.sqrt(fan_in), size=(fan_in, fan_out)), np.zeros(fan_out)


def forward(params, a_prev, last):
    x = a_prev[0] if isinstance(a_prev, tuple) else a_prev
    z = x @ params[0] + params[1]
    return z if last else np.tanh(z)


def loss_grad(logits, batch):
    y = batch[1]
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(y.size), y]).mean()
    d = p
    d[np.arange(y.size), y] -= 1.0
    return loss, d / y.size


def backward(params, a_prev, a_out, upstream, last):
    x = a_prev[0] if isinstance(a_prev, tuple) else a_prev
    g = upstream[1] if isinstance(upstream, tuple) and len(upstream) == 2 and np.isscalar(upstream[0]) else upstream
    if isinstance(g, tuple):  # from the next layer's backward: (dW, db, d_prev)
        g = g[2]
    dz = g if last else g * (1.0 - a_out ** 2)
    return x.T @ dz, dz.sum(axis=0), dz @ params[0].T


def flatten_grads(*grads):
    return np.concatenate([np.concatenate([g[0].ravel(), g[1].ravel()]) for g in grads])


def chunk(v, c, n):
    return np.array_split(v, n)[c]


def ring_first(own, other, c, n):
    return chunk(own, c, n) + chunk(other, c, n)


def ring_step(partial, own, c, n):
    return partial + chunk(own, c, n)


def identity(x):
    return x


def _nothing(*_):
    return None


def tree_reduce(own, *children):
    out = own.copy()
    for ch in children:
        out += ch
    return out


def ps_sum(*pushed):
    return np.sum(pushed, axis=0)


def compress(v, ratio):
    return v  # the bytes moved shrink in the model; values stay exact so training is unchanged


def _unflatten(offset, shapes, order, pieces):
    """One layer's (W, b) out of a bucket's summed vector (its chunks in ``order``)."""
    flat = pieces[0] if order is None else np.concatenate([pieces[k] for k in np.argsort(order)])
    (wr, wc), bn = shapes
    return flat[offset:offset + wr * wc].reshape(wr, wc), flat[offset + wr * wc:offset + wr * wc + bn]


def update_layer(params, lr, n, offset, shapes, order, *pieces):
    """New parameters of one layer from the bucket's summed gradient over ``n`` ranks."""
    gw, gb = _unflatten(offset, shapes, order, pieces)
    return params[0] - lr * gw / n, params[1] - lr * gb / n


def local_update(params, grad, lr):
    """One local SGD step with this rank's own gradient (a backward task's ``(dW, db, d_prev)``)."""
    return params[0] - lr * grad[0], params[1] - lr * grad[1]


def average_layer(n, offset, shapes, order, *pieces):
    """One layer's parameters averaged over ``n`` ranks (from the bucket's summed parameters)."""
    w, b = _unflatten(offset, shapes, order, pieces)
    return w / n, b / n


def _batch(paths, t, batch):
    parts = [collate(augment(decode(read_shard(p, t, batch)))) for p in paths]
    return np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts])


def _sgd_step(params, x, y, lr):
    """One mini-batch SGD step of the MLP on (x, y): (new parameters, loss before the step)."""
    L = len(params)
    acts = [x]
    for k in range(L):
        acts.append(forward(params[k], acts[-1], k == L - 1))
    loss, d = loss_grad(acts[-1], (x, y))
    new = list(params)
    g = d
    for k in range(L - 1, -1, -1):
        dz = g if k == L - 1 else g * (1.0 - acts[k + 1] ** 2)
        gw, gb = acts[k].T @ dz, dz.sum(axis=0)
        g = dz @ params[k][0].T
        new[k] = (params[k][0] - lr * gw, params[k][1] - lr * gb)
    return new, loss


def sgd_reference(paths, iterations, batch, sizes, lr, seed):
    """Sequential mini-batch SGD on the same batches: the global batch of iteration t is every
    worker's t-th batch, in rank order. Returns (layers' parameters, loss per iteration)."""
    params = [init_layer(sizes, k, seed) for k in range(len(sizes) - 1)]
    losses = []
    for t in range(iterations):
        params, loss = _sgd_step(params, *_batch(paths, t, batch), lr)
        losses.append(loss)
    return params, losses


def local_sgd_reference(paths, iterations, batch, sizes, lr, seed, sync_every):
    """Local SGD computed sequentially: every rank steps on its own t-th batch; every ``sync_every``
    iterations the ranks' parameters are replaced by their mean. Returns (per rank the layers'
    parameters, per iteration the ranks' mean loss)."""
    ranks = [[init_layer(sizes, k, seed) for k in range(len(sizes) - 1)] for _ in paths]
    losses = []
    for t in range(iterations):
        step = [_sgd_step(ranks[r], *_batch([p], t, batch), lr) for r, p in enumerate(paths)]
        ranks = [s[0] for s in step]
        losses.append(float(np.mean([s[1] for s in step])))
        if (t + 1) % sync_every == 0:
            mean = [(sum(r[k][0] for r in ranks) / len(ranks), sum(r[k][1] for r in ranks) / len(ranks))
                    for k in range(len(sizes) - 1)]
            ranks = [list(mean) for _ in ranks]
    return ranks, losses


# ---------------------------------------------------------------------- the graph
_LOADERS = {"read": read_shard, "decode": decode, "augment": augment, "collate": collate}


def _layers(model, executable: bool, hidden):
    """(layers, MLP sizes or None, floats per input sample)."""
    if executable:
        sizes = [FEATURES, *hidden, CLASSES]
        return ([{"name": f"dense{k}", "macs": float(sizes[k] * sizes[k + 1]),
                  "params": float(sizes[k] * sizes[k + 1] + sizes[k + 1])} for k in range(len(sizes) - 1)],
                sizes, FEATURES)
    return (model_profile(model) if isinstance(model, str) else list(model)), None, 224 * 224 * 3


def _allreduce(b: GraphBuilder, t: int, kind: str, N: int, bucket_task: dict, bkt: int, size: float,
               flops: float, prio=None):
    """One bucket's allreduce over ranks 0..N-1, in two phases: reduce (reduce-scatter, reduce up
    the tree, push + sum) and spread (all-gather, broadcast down, pull). Returns
    ``(received, mids, spread, ends)``: ``received[w]`` lists (handle, chunk index or None) whose
    sum is the reduced bucket at rank w; ``mids`` the tasks that end the reduce phase; ``spread``
    and ``ends`` per rank the first and last task of the spread phase."""
    extra_ = {} if prio is None else {"priority": prio}

    def meta(cat, rank, **extra):
        spread = cat in ("ring-all-gather", "tree-broadcast", "ps-pull")
        return {"category": cat, "iteration": t, "rank": rank, "bucket": bkt, **extra, **(extra_ if spread else {})}

    received, starts, ends = {}, [], []
    if kind == "ring" and N > 1:
        cb = size / N
        cost = cb / 4.0 / flops
        rs = {}
        for s in range(N - 1):
            for w in range(N):
                c, nxt = (w - s) % N, (w + 1) % N
                if s == 0:
                    h = b.task(f"it{t}.b{bkt}.rs0.w{w}", cost, cb, meta("ring-reduce-scatter", nxt, step=0),
                               deps=[(bucket_task[w, bkt], cb), (bucket_task[nxt, bkt], 0.0)],
                               fn=ring_first, args=(bucket_task[w, bkt], bucket_task[nxt, bkt], c, N))
                else:
                    prev = rs[s - 1, (w - 1) % N]
                    h = b.task(f"it{t}.b{bkt}.rs{s}.w{w}", cost, cb, meta("ring-reduce-scatter", nxt, step=s),
                               deps=[prev, (bucket_task[nxt, bkt], 0.0)],
                               fn=ring_step, args=(prev, bucket_task[nxt, bkt], c, N))
                rs[s, w] = h
        # rs[N-2, w] holds the full chunk (w + 2) mod N, at rank w + 1
        ag = {}
        for s in range(N - 1):
            for w in range(N):
                src = rs[N - 2, (w - 1) % N] if s == 0 else ag[s - 1, (w - 1) % N]
                ag[s, w] = b.task(f"it{t}.b{bkt}.ag{s}.w{w}", cost, cb, meta("ring-all-gather", (w + 1) % N, step=s),
                                  deps=[src], fn=identity, args=(src,))
        for u in range(N):
            pieces = [(rs[N - 2, (u - 1) % N], (u + 1) % N)]
            pieces += [(ag[s, (u - 1) % N], (u - s) % N) for s in range(N - 1)]
            received[u] = pieces
            ends.append(ag[N - 2, u])
        mids, spread = [rs[N - 2, w] for w in range(N)], [ag[0, w] for w in range(N)]
    elif kind in ("tree", "ring"):  # a ring of one rank is a tree of one
        red = {}
        for w in range(N - 1, -1, -1):
            kids = [red[k] for k in (2 * w + 1, 2 * w + 2) if k < N]
            red[w] = b.task(f"it{t}.b{bkt}.reduce.w{w}", size * (1 + len(kids)) / 4.0 / flops, size,
                            meta("tree-reduce", w), deps=[bucket_task[w, bkt], *kids],
                            fn=tree_reduce, args=(bucket_task[w, bkt], *kids))
        for w in range(N):
            src = red[0] if w == 0 else ends[(w - 1) // 2]
            h = b.task(f"it{t}.b{bkt}.bcast.w{w}", size / 4.0 / flops, size, meta("tree-broadcast", w),
                       deps=[src], fn=identity, args=(src,))
            ends.append(h)
            received[w] = [(h, None)]
        mids, spread = [red[0]], ends
    else:  # parameter server
        for w in range(N):
            starts.append(b.task(f"it{t}.b{bkt}.push.w{w}", size / 4.0 / flops, size, meta("ps-push", w),
                                 deps=[bucket_task[w, bkt]], fn=identity, args=(bucket_task[w, bkt],)))
        total = b.task(f"it{t}.b{bkt}.ps-sum", N * size / 4.0 / flops, size,
                       {"category": "ps-sum", "iteration": t, "rank": N, "bucket": bkt}, deps=starts, fn=ps_sum, args=tuple(starts))
        for w in range(N):
            h = b.task(f"it{t}.b{bkt}.pull.w{w}", size / 4.0 / flops, size, meta("ps-pull", w),
                       deps=[total], fn=identity, args=(total,))
            ends.append(h)
            received[w] = [(h, None)]
        mids, spread = [total], ends
    return received, mids, spread, ends


def _training(*args, **kwargs) -> TaskGraph:
    with paused_gc():
        return _build_training(*args, **kwargs)


def _build_training(model, workers, iterations, allreduce, buckets, priority, compression, batch, device, stages,
                    load_cost, executable, dataset_dir, hidden, lr, seed, name, mode="sync", sync_every=1,
                    staleness=0, barrier=False, tile=True):
    if allreduce not in ("ring", "tree", "ps"):
        raise ValueError(f"allreduce must be 'ring', 'tree' or 'ps', got {allreduce!r}")
    if priority not in ("none", "layer-order"):
        raise ValueError(f"priority must be 'none' or 'layer-order', got {priority!r}")
    N, T, H, s_ = int(workers), int(iterations), int(sync_every), int(staleness)
    if N < 1 or T < 1 or buckets < 1 or H < 1 or s_ < 0:
        raise ValueError("workers, iterations, buckets and sync_every must be >= 1, staleness >= 0")
    if executable and mode == "stale":
        raise ValueError("stale-synchronous training is built for simulation only (executable=False)")
    flops = DEVICES[device] if isinstance(device, str) else float(device)
    layers, sizes, input_floats = _layers(model, executable, hidden)
    L = len(layers)
    paths = None
    if executable:
        if dataset_dir is None:
            raise ValueError("executable=True needs dataset_dir (shards are written there)")
        paths = write_dataset(dataset_dir, N, T, batch, seed)
    B = min(buckets, L)
    order = list(range(L - 1, -1, -1))  # bucket 0 holds the last layers (filled first by backward)
    groups = [sorted(order[i * L // B:(i + 1) * L // B]) for i in range(B)]
    ratio = 1.0 if compression is None else float(compression)
    X = bool(executable)
    tag = {"sync": "dp", "local": f"localsgd{H}", "stale": f"ssp{s_}"}[mode]
    b = GraphBuilder(name or f"{tag}-{'mlp' if X else model}-{allreduce}-n{N}-t{T}", executable=X)

    t_fwd = [2.0 * ly["macs"] * batch / flops for ly in layers]
    act_bytes = [4.0 * batch * math.sqrt(max(ly["macs"], 1.0)) for ly in layers]
    grad_bytes = [4.0 * ly["params"] for ly in layers]
    upd_cost = [2.0 * ly["params"] / flops for ly in layers]
    bucket_bytes = [sum(grad_bytes[k] for k in grp) for grp in groups]
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
                                    fns=_LOADERS if X else None, first_args=(paths[w], t, batch) if X else ())
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
                    hb = b.task(f"it{t}.w{w}.compress{j}", bucket_bytes[j] / flops * 10, bucket_bytes[j] * ratio,
                                {"category": "compress", "iteration": t, "rank": w, "bucket": j},
                                deps=[hb], fn=compress, args=(hb, ratio))
                bucket_task[w, j] = hb
        if not sync:
            return
        received, mids, spread, ends = {}, [], {}, {}
        for j in range(B):
            got, mid, spread[j], ends[j] = _allreduce(b, t, allreduce, N, bucket_task, j, bucket_bytes[j] * ratio,
                                                      flops, prio[j])
            mids += mid
            for w, pieces in got.items():
                received[w, j] = pieces
        if barrier:  # every spread phase waits until every bucket is reduced
            gate = b.task(f"it{t}.barrier", 0.0, 0.0, {"category": "barrier", "iteration": t},
                          deps=[(h, 0.0) for h in mids], fn=_nothing, args=())
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
                    piece_deps = [(h, grad_bytes[k] * ratio / len(hs)) for h in hs] + ([(deco, 0.0)] if deco is not None else [])
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
                  buckets: int = 2, priority: str = "none", compression: float | None = None, batch: int = 32,
                  device: str = "v100", stages=("read", "decode", "augment", "collate"), load_cost: float = 5e-3,
                  executable: bool = False, dataset_dir=None, hidden=(32,), lr: float = 0.5, seed: int = 0,
                  name: str | None = None, barrier: bool = False) -> TaskGraph:
    """A synchronous data-parallel training graph (see the module docstring).

    ``model`` is a name from ``workflows/data/models.json`` or, with ``executable=True``, ignored in
    favour of an MLP ``64 -> hidden... -> 10``. Task ids read ``it{t}.w{w}.{kind}...``; every task's
    ``meta`` has ``category``, ``rank`` and ``iteration``.

    Examples
    --------
    >>> g = data_parallel("resnet50", workers=4, iterations=1, allreduce="ring", buckets=2)
    >>> sum(1 for t in g.tasks() if t.meta["category"].startswith("ring"))
    48
    """
    return _training(model, workers, iterations, allreduce, buckets, priority, compression, batch, device, stages,
                     load_cost, executable, dataset_dir, hidden, lr, seed, name, barrier=barrier)


def local_sgd(model="resnet50", workers: int = 4, iterations: int = 4, sync_every: int = 2, allreduce: str = "ring",
              buckets: int = 2, priority: str = "none", compression: float | None = None, batch: int = 32,
              device: str = "v100", stages=("read", "decode", "augment", "collate"), load_cost: float = 5e-3,
              executable: bool = False, dataset_dir=None, hidden=(32,), lr: float = 0.5, seed: int = 0,
              name: str | None = None, barrier: bool = False) -> TaskGraph:
    """Local SGD: each rank takes an SGD step on its own batch every iteration (a ``local`` task per
    layer) and the ranks average their models every ``sync_every`` iterations (bucket the parameters,
    allreduce, an ``average`` task per layer). ``sync_every=1`` computes exactly what
    :func:`data_parallel` computes. :func:`local_sgd_reference` is the sequential reference.

    Examples
    --------
    >>> g = local_sgd("resnet50", workers=2, iterations=4, sync_every=2, allreduce="tree")
    >>> sum(t.meta["category"] == "average" for t in g.tasks())  # 2 syncs x 2 ranks x 6 layers
    24
    """
    return _training(model, workers, iterations, allreduce, buckets, priority, compression, batch, device, stages,
                     load_cost, executable, dataset_dir, hidden, lr, seed, name, mode="local", sync_every=sync_every,
                     barrier=barrier)


def stale_synchronous(model="resnet50", workers: int = 4, iterations: int = 4, staleness: int = 1,
                      allreduce: str = "ring", buckets: int = 2, priority: str = "none",
                      compression: float | None = None, batch: int = 32, device: str = "v100",
                      stages=("read", "decode", "augment", "collate"), load_cost: float = 5e-3,
                      name: str | None = None, barrier: bool = False) -> TaskGraph:
    """Stale-synchronous data parallelism (DC-S3GD, Rigazzi et al. 2019): the compute of iteration
    ``t + 1`` waits for the allreduce of iteration ``t - s`` only, so up to ``s`` allreduces overlap
    the following compute; a rank's forward of layer ``l`` also waits for its own backward of ``l``
    in the previous iteration (it applies its local gradient). ``staleness=0`` is
    :func:`data_parallel`. Same tasks as :func:`data_parallel`; for simulation (no callables).

    Examples
    --------
    >>> g = stale_synchronous("resnet50", workers=2, iterations=3, staleness=1, allreduce="ps")
    >>> sorted(g.predecessors("it2.w0.fwd.l1"))
    ['it0.w0.update.l1', 'it1.w0.bwd.l1', 'it2.w0.fwd.l0']
    """
    return _training(model, workers, iterations, allreduce, buckets, priority, compression, batch, device, stages,
                     load_cost, False, None, (32,), 0.5, 0, name, mode="stale", staleness=staleness,
                     barrier=barrier)


# ---------------------------------------------------------------------- pipeline parallelism
def _split_stages(layers, stages: int) -> list:
    """Contiguous layer groups with forward work as even as a greedy cut makes it."""
    L = len(layers)
    if not 1 <= stages <= L:
        raise ValueError(f"stages must be between 1 and the model's {L} layers, got {stages}")
    work = np.cumsum([ly["macs"] for ly in layers])
    cuts = [0]
    for s in range(1, stages):
        k = int(np.searchsorted(work, work[-1] * s / stages)) + 1  # first layer past the s-th share
        cuts.append(min(max(k, cuts[-1] + 1), L - (stages - s)))
    cuts.append(L)
    return [list(range(cuts[s], cuts[s + 1])) for s in range(stages)]


def pipeline_order(schedule: str, stage: int, stages: int, microbatches: int) -> list:
    """The order in which one stage runs its ops: ``[("F" | "B", microbatch), ...]``.

    ``gpipe`` (Huang et al., NeurIPS 2019): every forward, then every backward (microbatch order).
    ``1f1b`` (PipeDream-Flush; Narayanan et al., SC 2021): ``min(S - s - 1, M)`` warm-up forwards,
    then one forward and one backward in turn, then the remaining backwards.

    >>> pipeline_order("1f1b", 0, 3, 4)
    [('F', 0), ('F', 1), ('F', 2), ('B', 0), ('F', 3), ('B', 1), ('B', 2), ('B', 3)]
    """
    M = microbatches
    if schedule == "gpipe":
        return [("F", m) for m in range(M)] + [("B", m) for m in range(M)]
    if schedule == "1f1b":
        warm = min(stages - stage - 1, M)
        ops = [("F", m) for m in range(warm)]
        for i in range(M - warm):
            ops += [("F", warm + i), ("B", i)]
        return ops + [("B", m) for m in range(M - warm, M)]
    raise ValueError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")


def pipeline_parallel(model="gpt2-small", stages: int = 4, microbatches: int = 8, schedule: str = "1f1b",
                      iterations: int = 1, batch: int = 32, device: str = "v100", load_cost: float = 1e-3,
                      name: str | None = None) -> TaskGraph:
    """Pipeline-parallel training: the model's layers split into ``stages`` contiguous groups (even
    forward FLOPs), the global ``batch`` into ``microbatches``.

    Per iteration ``t``: a ``load`` task per microbatch; per stage ``s`` and microbatch ``m`` a
    forward ``F`` and a backward ``B``; per stage an ``update`` after its last backward. Data edges:
    ``load -> F(0, m)``, ``F(s-1, m) -> F(s, m)`` (boundary activations), ``F(s, m) -> B(s, m)``
    (stashed activations), ``B(s+1, m) -> B(s, m)`` (their gradients), the stage's weights (its init
    or last update) into each of its ``F``/``B`` and into its update, every ``B(s, m)`` into the
    update. ``schedule`` adds ordering edges (no bytes) between a stage's consecutive ops in
    :func:`pipeline_order`, so each stage is one device's program; ``meta["stage"]`` says which
    device (the ``placed`` scheduler keeps it).

    Costs as in :func:`data_parallel` with the microbatch ``batch / microbatches``: ``F`` =
    ``2 x MACs x mb / FLOP/s`` over the stage's layers, ``B = 2 F``; a boundary activation is the
    stage's last layer's ``4 x mb x sqrt(MACs)`` bytes; weights and gradients ``4 x params``.

    Counts: tasks ``S + T (M + 2 S M + S)``; edges per iteration ``M`` (load) ``+ 2 (S - 1) M``
    (boundaries) ``+ S M`` (stash) ``+ 2 S M + S`` (weights) ``+ S M`` (gradients) ``+ S (2 M - 1)``
    (order) minus the order edges that coincide with a stash edge: ``S`` when ``M = 1``, else ``M``
    for 1F1B (the last stage's ``F(m) -> B(m)``) and none for GPipe.

    Examples
    --------
    >>> g = pipeline_parallel("gpt2-small", stages=4, microbatches=8, schedule="gpipe")
    >>> len(g), sum(t.meta["category"] == "forward" for t in g.tasks())
    (80, 32)
    """
    S, M, T = int(stages), int(microbatches), int(iterations)
    if M < 1 or T < 1:
        raise ValueError("microbatches and iterations must be >= 1")
    layers = model_profile(model) if isinstance(model, str) else list(model)
    groups = _split_stages(layers, S)
    orders = [pipeline_order(schedule, s, S, M) for s in range(S)]
    flops = DEVICES[device] if isinstance(device, str) else float(device)
    mb = batch / M
    fwd = [sum(2.0 * layers[k]["macs"] * mb / flops for k in grp) for grp in groups]
    act = [4.0 * mb * math.sqrt(max(layers[grp[-1]]["macs"], 1.0)) for grp in groups]
    wbytes = [sum(4.0 * layers[k]["params"] for k in grp) for grp in groups]
    b = GraphBuilder(name or f"pp-{model if isinstance(model, str) else 'custom'}-{schedule}-s{S}-m{M}-t{T}")
    weights = [b.task(f"init.s{s}", wbytes[s] / 4.0 / flops, wbytes[s], {"category": "init", "stage": s})
               for s in range(S)]
    for t in range(T):
        loads = [b.task(f"it{t}.load.m{m}", load_cost, 4.0 * mb * 224 * 224 * 3,
                        {"category": "load", "iteration": t, "microbatch": m}) for m in range(M)]
        F, Bk = {}, {}
        for s in range(S):
            for m in range(M):
                F[s, m] = b.task(f"it{t}.s{s}.F{m}", fwd[s], act[s],
                                 {"category": "forward", "iteration": t, "stage": s, "microbatch": m},
                                 deps=[loads[m] if s == 0 else F[s - 1, m], weights[s]])
        for s in range(S - 1, -1, -1):
            for m in range(M):
                deps = [F[s, m], weights[s]] + ([Bk[s + 1, m]] if s < S - 1 else [])
                Bk[s, m] = b.task(f"it{t}.s{s}.B{m}", 2.0 * fwd[s], act[s - 1] if s else 0.0,
                                  {"category": "backward", "iteration": t, "stage": s, "microbatch": m}, deps=deps)
        for s in range(S):
            ops = [F[s, m] if kind == "F" else Bk[s, m] for kind, m in orders[s]]
            stash = {(F[s, m], Bk[s, m]) for m in range(M)}
            for u, v in zip(ops, ops[1:]):
                if (u, v) not in stash:
                    b.edge(u, v, size=0.0)
        for s in range(S):
            weights[s] = b.task(f"it{t}.s{s}.update", 2.0 * wbytes[s] / 4.0 / flops, wbytes[s],
                                {"category": "update", "iteration": t, "stage": s},
                                deps=[weights[s]] + [(Bk[s, m], wbytes[s]) for m in range(M)])
    return b.graph()
