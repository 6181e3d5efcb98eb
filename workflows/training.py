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
allreduce and multiplies the bytes moved by ``r``. ``priority="layer-order"`` adds ordering edges so
that buckets are reduced in the order the next forward pass needs them (first layers first; TicTac,
Hashemi et al., MLSys 2019); ``"none"`` leaves the order to the scheduler.

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

__all__ = ["data_parallel", "model_profile", "write_dataset", "sgd_reference", "DEVICES", "allreduce_tasks"]

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


def tree_reduce(own, *children):
    out = own.copy()
    for ch in children:
        out += ch
    return out


def ps_sum(*pushed):
    return np.sum(pushed, axis=0)


def compress(v, ratio):
    return v  # the bytes moved shrink in the model; values stay exact so training is unchanged


def update_layer(params, lr, n, offset, shapes, order, *pieces):
    """New parameters of one layer from the bucket's summed gradient (chunks in ``order``)."""
    if order is None:
        flat = pieces[0]
    else:
        flat = np.concatenate([pieces[k] for k in np.argsort(order)])
    (wr, wc), bn = shapes
    gw = flat[offset:offset + wr * wc].reshape(wr, wc)
    gb = flat[offset + wr * wc:offset + wr * wc + bn]
    return params[0] - lr * gw / n, params[1] - lr * gb / n


def sgd_reference(paths, iterations, batch, sizes, lr, seed):
    """Sequential mini-batch SGD on the same batches: the global batch of iteration t is every
    worker's t-th batch, in rank order. Returns (layers' parameters, loss per iteration)."""
    params = [init_layer(sizes, k, seed) for k in range(len(sizes) - 1)]
    losses = []
    L = len(params)
    for t in range(iterations):
        parts = [collate(augment(decode(read_shard(p, t, batch)))) for p in paths]
        x = np.concatenate([q[0] for q in parts])
        y = np.concatenate([q[1] for q in parts])
        acts = [x]
        for k in range(L):
            acts.append(forward(params[k], acts[-1], k == L - 1))
        loss, d = loss_grad(acts[-1], (x, y))
        losses.append(loss)
        g = d
        for k in range(L - 1, -1, -1):
            dz = g if k == L - 1 else g * (1.0 - acts[k + 1] ** 2)
            gw, gb = acts[k].T @ dz, dz.sum(axis=0)
            g = dz @ params[k][0].T
            params[k] = (params[k][0] - lr * gw, params[k][1] - lr * gb)
    return params, losses


# ---------------------------------------------------------------------- the graph
def data_parallel(model="resnet50", workers: int = 4, iterations: int = 2, allreduce: str = "ring",
                  buckets: int = 2, priority: str = "none", compression: float | None = None, batch: int = 32,
                  device: str = "v100", stages=("read", "decode", "augment", "collate"), load_cost: float = 5e-3,
                  executable: bool = False, dataset_dir=None, hidden=(32,), lr: float = 0.5, seed: int = 0,
                  name: str | None = None) -> TaskGraph:
    """A data-parallel training graph (see the module docstring).

    ``model`` is a name from ``workflows/data/models.json`` or, with ``executable=True``, ignored in
    favour of an MLP ``64 -> hidden... -> 10``. Task ids read ``it{t}.w{w}.{kind}...``; every task's
    ``meta`` has ``category``, ``rank`` and ``iteration``.

    Examples
    --------
    >>> g = data_parallel("resnet50", workers=4, iterations=1, allreduce="ring", buckets=2)
    >>> sum(1 for t in g.tasks() if t.meta["category"].startswith("ring"))
    48
    """
    if allreduce not in ("ring", "tree", "ps"):
        raise ValueError(f"allreduce must be 'ring', 'tree' or 'ps', got {allreduce!r}")
    if priority not in ("none", "layer-order"):
        raise ValueError(f"priority must be 'none' or 'layer-order', got {priority!r}")
    N = int(workers)
    if N < 1 or iterations < 1 or buckets < 1:
        raise ValueError("workers, iterations and buckets must be >= 1")
    flops = DEVICES[device] if isinstance(device, str) else float(device)
    if executable:
        sizes = [FEATURES, *hidden, CLASSES]
        L = len(sizes) - 1
        layers = [{"name": f"dense{k}", "macs": float(sizes[k] * sizes[k + 1]), "params": float(sizes[k] * sizes[k + 1] + sizes[k + 1])}
                  for k in range(L)]
        if dataset_dir is None:
            raise ValueError("executable=True needs dataset_dir (shards are written there)")
        paths = write_dataset(dataset_dir, N, iterations, batch, seed)
        input_floats = FEATURES
    else:
        layers = model_profile(model) if isinstance(model, str) else list(model)
        L = len(layers)
        paths = None
        input_floats = 224 * 224 * 3
    B = min(buckets, L)
    # bucket b holds a contiguous group of layers, the last layers in bucket 0
    order = list(range(L - 1, -1, -1))
    groups = [sorted(order[i * L // B:(i + 1) * L // B]) for i in range(B)]
    bucket_of = {l: b for b, ls in enumerate(groups) for l in ls}
    ratio = 1.0 if compression is None else float(compression)
    g = TaskGraph(name or f"dp-{'mlp' if executable else model}-{allreduce}-n{N}-t{iterations}")

    def meta(cat, t=None, w=None, **extra):
        d = {"category": cat}
        if t is not None:
            d["iteration"] = t
        if w is not None:
            d["rank"] = w
        d.update(extra)
        return d

    def fn(f):
        return f if executable else None

    def t_fwd(l):
        return 2.0 * layers[l]["macs"] * batch / flops

    act_bytes = [4.0 * batch * math.sqrt(max(layers[l]["macs"], 1.0)) for l in range(L)]
    grad_bytes = [4.0 * layers[l]["params"] for l in range(L)]
    bucket_bytes = [sum(grad_bytes[l] for l in groups[b]) for b in range(B)]
    params = {}
    for w in range(N):
        for l in range(L):
            params[w, l] = g.add_task(f"init.w{w}.l{l}", fn=fn(init_layer), args=(sizes, l, seed) if executable else (),
                                      cost=2.0 * layers[l]["params"] / flops, output_size=grad_bytes[l],
                                      meta=meta("init", None, w, layer=l))
    for t in range(iterations):
        bucket_task = {}
        for w in range(N):
            # data loading
            h = None
            for k, stage in enumerate(stages):
                f = {"read": read_shard, "decode": decode, "augment": augment, "collate": collate}.get(stage, identity)
                if executable:
                    args = (paths[w], t, batch) if k == 0 else (h,)
                else:
                    args = ()
                h_new = g.add_task(f"it{t}.w{w}.{stage}", fn=fn(f), args=args, cost=load_cost,
                                   output_size=4.0 * batch * input_floats, meta=meta(stage, t, w))
                if not executable and h is not None:
                    g.add_edge(h, h_new)
                h = h_new
            batch_h = h
            acts = [batch_h]
            for l in range(L):
                a = g.add_task(f"it{t}.w{w}.fwd.l{l}", fn=fn(forward),
                               args=(params[w, l], acts[-1], l == L - 1) if executable else (),
                               cost=t_fwd(l), output_size=act_bytes[l], meta=meta("forward", t, w, layer=l))
                if not executable:
                    g.add_edge(acts[-1], a)
                    g.add_edge(params[w, l], a, size=grad_bytes[l])
                acts.append(a)
            loss = g.add_task(f"it{t}.w{w}.loss", fn=fn(loss_grad), args=(acts[-1], batch_h) if executable else (),
                              cost=10.0 * batch * CLASSES / flops, output_size=act_bytes[-1], meta=meta("loss", t, w))
            if not executable:
                g.add_edge(acts[-1], loss)
            up = loss
            grads = {}
            for l in range(L - 1, -1, -1):
                d = g.add_task(f"it{t}.w{w}.bwd.l{l}", fn=fn(backward),
                               args=(params[w, l], acts[l], acts[l + 1], up, l == L - 1) if executable else (),
                               cost=2.0 * t_fwd(l), output_size=grad_bytes[l] + act_bytes[l],
                               meta=meta("backward", t, w, layer=l))
                if not executable:
                    for src in (up, acts[l], acts[l + 1], params[w, l]):
                        g.add_edge(src, d)
                grads[l] = d
                up = d
            for b in range(B):
                hb = g.add_task(f"it{t}.w{w}.bucket{b}", fn=fn(flatten_grads),
                                args=tuple(grads[l] for l in groups[b]) if executable else (),
                                cost=bucket_bytes[b] / 4.0 / flops, output_size=bucket_bytes[b],
                                meta=meta("bucket", t, w, bucket=b))
                if not executable:
                    for l in groups[b]:
                        g.add_edge(grads[l], hb)
                if compression is not None:
                    hc = g.add_task(f"it{t}.w{w}.compress{b}", fn=fn(compress), args=(hb, ratio) if executable else (),
                                    cost=bucket_bytes[b] / flops * 10, output_size=bucket_bytes[b] * ratio,
                                    meta=meta("compress", t, w, bucket=b))
                    if not executable:
                        g.add_edge(hb, hc)
                    hb = hc
                bucket_task[w, b] = hb
        # allreduce per bucket: reduce in layer order when asked (buckets holding early layers first)
        reduce_order = sorted(range(B), key=lambda b: min(groups[b])) if priority == "layer-order" else list(range(B))
        received = {}  # (w, b) -> list of (handle, chunk index or None)
        first_tasks = {}
        for b in reduce_order:
            size = bucket_bytes[b] * ratio
            if allreduce == "ring" and N > 1:
                chunk_bytes = size / N
                rs = {}
                for s in range(N - 1):
                    for w in range(N):
                        c = (w - s) % N
                        nxt = (w + 1) % N
                        if s == 0:
                            h = g.add_task(f"it{t}.b{b}.rs{s}.w{w}", fn=fn(ring_first),
                                           args=(bucket_task[w, b], bucket_task[nxt, b], c, N) if executable else (),
                                           cost=chunk_bytes / 4.0 / flops, output_size=chunk_bytes,
                                           meta=meta("ring-reduce-scatter", t, nxt, bucket=b, step=s))
                            if not executable:
                                g.add_edge(bucket_task[w, b], h, size=chunk_bytes)
                                g.add_edge(bucket_task[nxt, b], h, size=0)
                        else:
                            h = g.add_task(f"it{t}.b{b}.rs{s}.w{w}", fn=fn(ring_step),
                                           args=(rs[s - 1, (w - 1) % N], bucket_task[nxt, b], c, N) if executable else (),
                                           cost=chunk_bytes / 4.0 / flops, output_size=chunk_bytes,
                                           meta=meta("ring-reduce-scatter", t, nxt, bucket=b, step=s))
                            if not executable:
                                g.add_edge(rs[s - 1, (w - 1) % N], h)
                                g.add_edge(bucket_task[nxt, b], h, size=0)
                        rs[s, w] = h
                        first_tasks.setdefault(b, h)
                # rs[N-2, w] holds the full chunk (w + 2) mod N, at rank w + 1
                ag = {}
                for s in range(N - 1):
                    for w in range(N):
                        src = rs[N - 2, (w - 1) % N] if s == 0 else ag[s - 1, (w - 1) % N]
                        h = g.add_task(f"it{t}.b{b}.ag{s}.w{w}", fn=fn(identity), args=(src,) if executable else (),
                                       cost=chunk_bytes / 4.0 / flops, output_size=chunk_bytes,
                                       meta=meta("ring-all-gather", t, (w + 1) % N, bucket=b, step=s))
                        if not executable:
                            g.add_edge(src, h)
                        ag[s, w] = h
                for u in range(N):
                    pieces = [(rs[N - 2, (u - 1) % N], (u + 1) % N)]
                    pieces += [(ag[s, (u - 1) % N], ((u - 1) + 1 - s) % N) for s in range(N - 1)]
                    received[u, b] = pieces
            elif allreduce == "tree" or (allreduce == "ring" and N == 1):
                red = {}
                for w in range(N - 1, -1, -1):
                    kids = [k for k in (2 * w + 1, 2 * w + 2) if k < N]
                    h = g.add_task(f"it{t}.b{b}.reduce.w{w}", fn=fn(tree_reduce),
                                   args=(bucket_task[w, b], *[red[k] for k in kids]) if executable else (),
                                   cost=size * (1 + len(kids)) / 4.0 / flops, output_size=size,
                                   meta=meta("tree-reduce", t, w, bucket=b))
                    if not executable:
                        g.add_edge(bucket_task[w, b], h)
                        for k in kids:
                            g.add_edge(red[k], h)
                    red[w] = h
                    first_tasks.setdefault(b, h)
                bc = {}
                for w in range(N):
                    src = red[0] if w == 0 else bc[(w - 1) // 2]
                    h = g.add_task(f"it{t}.b{b}.bcast.w{w}", fn=fn(identity), args=(src,) if executable else (),
                                   cost=size / 4.0 / flops, output_size=size, meta=meta("tree-broadcast", t, w, bucket=b))
                    if not executable:
                        g.add_edge(src, h)
                    bc[w] = h
                    received[w, b] = [(h, None)]
            else:  # parameter server
                pushes = []
                for w in range(N):
                    h = g.add_task(f"it{t}.b{b}.push.w{w}", fn=fn(identity), args=(bucket_task[w, b],) if executable else (),
                                   cost=size / 4.0 / flops, output_size=size, meta=meta("ps-push", t, w, bucket=b))
                    if not executable:
                        g.add_edge(bucket_task[w, b], h)
                    pushes.append(h)
                    first_tasks.setdefault(b, h)
                s_h = g.add_task(f"it{t}.b{b}.ps-sum", fn=fn(ps_sum), args=tuple(pushes) if executable else (),
                                 cost=N * size / 4.0 / flops, output_size=size, meta=meta("ps-sum", t, None, bucket=b))
                if not executable:
                    for h in pushes:
                        g.add_edge(h, s_h)
                for w in range(N):
                    h = g.add_task(f"it{t}.b{b}.pull.w{w}", fn=fn(identity), args=(s_h,) if executable else (),
                                   cost=size / 4.0 / flops, output_size=size, meta=meta("ps-pull", t, w, bucket=b))
                    if not executable:
                        g.add_edge(s_h, h)
                    received[w, b] = [(h, None)]
        if priority == "layer-order":  # a bucket's reduction starts only after the previous one's
            for a_b, b_b in zip(reduce_order, reduce_order[1:]):
                last_of_a = received[0, a_b][-1][0]
                g.add_edge(last_of_a, first_tasks[b_b], size=0)
        # decompress and update
        for w in range(N):
            for b in range(B):
                pieces = received[w, b]
                if compression is not None:
                    hs = [h for h, _ in pieces]
                    d = g.add_task(f"it{t}.w{w}.decompress{b}", fn=fn(identity), args=(hs[0],) if executable else (),
                                   cost=bucket_bytes[b] / flops * 10, output_size=bucket_bytes[b],
                                   meta=meta("decompress", t, w, bucket=b))
                    for h in (hs[1:] if executable else hs):
                        g.add_edge(h, d, size=0)
                    deco = d
                else:
                    deco = None
                offset = 0
                for l in groups[b]:
                    n_w = int(layers[l]["params"])
                    if executable:
                        shapes = ((sizes[l], sizes[l + 1]), sizes[l + 1])
                        order_idx = None if pieces[0][1] is None else [c for _, c in pieces]
                        args = (params[w, l], lr, N, offset, shapes, order_idx, *[h for h, _ in pieces])
                    else:
                        args = ()
                    u = g.add_task(f"it{t}.w{w}.update.l{l}", fn=fn(update_layer), args=args,
                                   cost=2.0 * layers[l]["params"] / flops, output_size=grad_bytes[l],
                                   meta=meta("update", t, w, layer=l))
                    if not executable:
                        g.add_edge(params[w, l], u)
                        for h, _ in pieces:
                            g.add_edge(h, u, size=grad_bytes[l] * ratio / max(len(pieces), 1))
                    if deco is not None:
                        g.add_edge(deco, u, size=0)
                    offset += n_w
                    params[w, l] = u
    return g
