"""The executable side of the training generators: a small numpy MLP (tanh hidden layers, softmax
output) on a seeded synthetic 10-class dataset of 8x8 "images" (class prototypes plus noise),
written to disk as one shard per worker; the task bodies the graphs call, and sequential references
(:func:`sgd_reference`, :func:`local_sgd_reference`) that a distributed run must equal."""

from __future__ import annotations

import math
import os

import numpy as np

__all__ = [
    "FEATURES",
    "CLASSES",
    "LOADERS",
    "write_dataset",
    "sgd_reference",
    "local_sgd_reference",
    "augment",
    "average_layer",
    "backward",
    "chunk",
    "collate",
    "compress",
    "decode",
    "flatten_grads",
    "forward",
    "identity",
    "init_layer",
    "local_update",
    "loss_grad",
    "ps_sum",
    "read_shard",
    "ring_step",
    "tree_reduce",
    "update_layer",
    "nothing",
]

FEATURES, CLASSES = 64, 10


def write_dataset(directory, workers: int, iterations: int, rows: int, seed: int = 0) -> list:
    """Write the synthetic dataset: one ``shard{w}.npz`` per worker, rows for every iteration.

    Parameters
    ----------
    directory : path
        Created if missing.
    workers, iterations, rows : int
        Shards, iterations and samples per shard and iteration (a rank's part of the batch).
    seed : int
        Seeds the class prototypes and the samples.

    Returns
    -------
    list of str
        The shards' paths, in rank order.
    """
    rng = np.random.default_rng(seed)
    protos = rng.normal(0.0, 1.0, size=(CLASSES, FEATURES))
    os.makedirs(directory, exist_ok=True)
    paths = []
    for w in range(workers):
        y = rng.integers(0, CLASSES, size=iterations * rows)
        x = protos[y] + 0.8 * rng.normal(size=(y.size, FEATURES))
        raw = np.clip(np.round((x + 4.0) * 32.0), 0, 255).astype(np.uint8)  # stored like 8-bit pixels
        p = os.path.join(directory, f"shard{w}.npz")
        np.savez(p, x=raw, y=y)
        paths.append(p)
    return paths


def read_shard(path, t, rows):
    """Task body ``read``: iteration ``t``'s ``rows`` raw samples from a shard (a rank's part of
    the batch).

    Parameters
    ----------
    path : str
    t, rows : int

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        8-bit pixels and labels.
    """
    with np.load(path) as d:
        return d["x"][t * rows : (t + 1) * rows].copy(), d["y"][t * rows : (t + 1) * rows].copy()


def decode(raw):
    """Task body ``decode``: pixels back to features.

    Parameters
    ----------
    raw : (numpy.ndarray, numpy.ndarray)
        What :func:`read_shard` returned.
    """
    x, y = raw
    return x.astype(np.float64) / 32.0 - 4.0, y


def augment(sample):
    """Task body ``augment``: the identity, so the sequential reference sees the same batch.

    Parameters
    ----------
    sample : tuple
    """
    return sample  # deterministic so the sequential reference sees the same batch


def collate(sample):
    """Task body ``collate``: contiguous features and integer labels.

    Parameters
    ----------
    sample : (numpy.ndarray, numpy.ndarray)
    """
    x, y = sample
    return np.ascontiguousarray(x), y.astype(np.int64)


def init_layer(sizes, layer, seed):
    """Task body ``init``: a dense layer's initial ``(W, b)``, seeded by ``(seed, layer)``.

    Parameters
    ----------
    sizes : list of int
        The MLP's layer widths.
    layer : int
    seed : int
    """
    rng = np.random.default_rng([seed, layer])
    fan_in, fan_out = sizes[layer], sizes[layer + 1]
    return rng.normal(0.0, 1.0 / math.sqrt(fan_in), size=(fan_in, fan_out)), np.zeros(fan_out)


def forward(params, a_prev, last):
    """Task body ``forward``: one dense layer (tanh unless it is the last).

    Parameters
    ----------
    params : (numpy.ndarray, numpy.ndarray)
        The layer's ``(W, b)``.
    a_prev : numpy.ndarray or tuple
        The previous activations (or a collated batch).
    last : bool
    """
    x = a_prev[0] if isinstance(a_prev, tuple) else a_prev
    z = x @ params[0] + params[1]
    return z if last else np.tanh(z)


def loss_grad(logits, batch):
    """Task body ``loss``: softmax cross-entropy and its gradient with respect to the logits.

    Parameters
    ----------
    logits : numpy.ndarray
    batch : (numpy.ndarray, numpy.ndarray)
        The collated batch (its labels are used).

    Returns
    -------
    (float, numpy.ndarray)
    """
    y = batch[1]
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(y.size), y]).mean()
    d = p
    d[np.arange(y.size), y] -= 1.0
    return loss, d / y.size


def backward(params, a_prev, a_out, upstream, last):
    """Task body ``backward``: one dense layer's gradients.

    Parameters
    ----------
    params : (numpy.ndarray, numpy.ndarray)
    a_prev, a_out : numpy.ndarray
        The layer's input and output activations.
    upstream : tuple or numpy.ndarray
        The loss task's ``(loss, grad)`` or the next layer's ``(dW, db, d_prev)``.
    last : bool

    Returns
    -------
    (numpy.ndarray, numpy.ndarray, numpy.ndarray)
        ``(dW, db, d_prev)``.
    """
    x = a_prev[0] if isinstance(a_prev, tuple) else a_prev
    g = upstream[1] if isinstance(upstream, tuple) and len(upstream) == 2 and np.isscalar(upstream[0]) else upstream
    if isinstance(g, tuple):  # from the next layer's backward: (dW, db, d_prev)
        g = g[2]
    dz = g if last else g * (1.0 - a_out**2)
    return x.T @ dz, dz.sum(axis=0), dz @ params[0].T


def flatten_grads(*grads):
    """Task body ``bucket``: the layers' ``(dW, db)`` flattened into one vector.

    Parameters
    ----------
    *grads : tuple
    """
    return np.concatenate([np.concatenate([g[0].ravel(), g[1].ravel()]) for g in grads])


def chunk(v, c, n):
    """Chunk ``c`` of ``n`` of a vector (``numpy.array_split``).

    Parameters
    ----------
    v : numpy.ndarray
    c, n : int
    """
    return np.array_split(v, n)[c]


def ring_step(partial, own, c, n):
    """Task body of a reduce-scatter step: the chunk that arrived (the sender's cut chunk, or its
    partial sum) plus this rank's chunk ``c``.

    Parameters
    ----------
    partial, own : numpy.ndarray
    c, n : int
    """
    return partial + chunk(own, c, n)


def identity(x):
    """Task body that passes its input on (all-gather steps, decompression).

    Parameters
    ----------
    x : object
    """
    return x


def nothing(*_):
    """Return None whatever it is given (a task that only orders others).

    Parameters
    ----------
    *_
        Ignored.
    """
    return None


def tree_reduce(own, *children):
    """Task body of a tree reduce: this rank's bucket plus its children's sums.

    Parameters
    ----------
    own : numpy.ndarray
    *children : numpy.ndarray
    """
    out = own.copy()
    for ch in children:
        out += ch
    return out


def ps_sum(*pushed):
    """Task body of the parameter server's sum of the pushed buckets.

    Parameters
    ----------
    *pushed : numpy.ndarray
    """
    return np.sum(pushed, axis=0)


def compress(v, ratio):
    """Task body ``compress``: values stay exact (the model shrinks the bytes moved), so training is
    unchanged.

    Parameters
    ----------
    v : numpy.ndarray
    ratio : float
    """
    return v  # the bytes moved shrink in the model; values stay exact so training is unchanged


def _unflatten(offset, shapes, order, pieces):
    """One layer's (W, b) out of a bucket's summed vector (its chunks in ``order``)."""
    flat = pieces[0] if order is None else np.concatenate([pieces[k] for k in np.argsort(order)])
    (wr, wc), bn = shapes
    return flat[offset : offset + wr * wc].reshape(wr, wc), flat[offset + wr * wc : offset + wr * wc + bn]


def update_layer(params, lr, n, offset, shapes, order, *pieces):
    """Task body ``update``: one layer's new parameters from the bucket's gradient summed over ``n`` ranks.

    Parameters
    ----------
    params : (numpy.ndarray, numpy.ndarray)
    lr : float
    n : int
    offset : int
        Where the layer starts in the bucket's vector.
    shapes : ((int, int), int)
        The layer's ``W`` and ``b`` shapes.
    order : list of int or None
        The chunk order of a ring allreduce (None: one piece).
    *pieces : numpy.ndarray
    """
    gw, gb = _unflatten(offset, shapes, order, pieces)
    return params[0] - lr * gw / n, params[1] - lr * gb / n


def local_update(params, grad, lr):
    """Task body ``local``: one local SGD step with this rank's own gradient.

    Parameters
    ----------
    params : (numpy.ndarray, numpy.ndarray)
    grad : tuple
        A backward task's ``(dW, db, d_prev)``.
    lr : float
    """
    return params[0] - lr * grad[0], params[1] - lr * grad[1]


def average_layer(n, offset, shapes, order, *pieces):
    """Task body ``average``: one layer's parameters averaged over ``n`` ranks, from the bucket's
    summed parameters.

    Parameters
    ----------
    n, offset : int
    shapes : ((int, int), int)
    order : list of int or None
    *pieces : numpy.ndarray
        As in :func:`update_layer`.
    """
    w, b = _unflatten(offset, shapes, order, pieces)
    return w / n, b / n


def _batch(paths, t, rows):
    parts = [collate(augment(decode(read_shard(p, t, rows)))) for p in paths]
    return np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts])


def _rows(batch: int, paths) -> int:
    """Each shard's part of the global ``batch``."""
    if batch % len(paths):
        from taskflow.errors import WorkflowError

        raise WorkflowError(f"batch {batch} is not divisible by {len(paths)} shards")
    return batch // len(paths)


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
    """Sequential mini-batch SGD on the same batches as the data-parallel graph: the global batch of
    iteration ``t`` is every worker's ``t``-th part of it, in rank order.

    Parameters
    ----------
    paths : list of str
        The shards (:func:`write_dataset`).
    iterations : int
    batch : int
        The global batch (each shard gives ``batch / len(paths)`` samples an iteration).
    sizes : list of int
        The MLP's layer widths.
    lr : float
    seed : int

    Returns
    -------
    (list, list of float)
        The layers' parameters and the loss per iteration.
    """
    params = [init_layer(sizes, k, seed) for k in range(len(sizes) - 1)]
    losses = []
    for t in range(iterations):
        params, loss = _sgd_step(params, *_batch(paths, t, _rows(batch, paths)), lr)
        losses.append(loss)
    return params, losses


def local_sgd_reference(paths, iterations, batch, sizes, lr, seed, sync_every):
    """Local SGD computed sequentially: every rank steps on its own ``t``-th part of the batch;
    every ``sync_every`` iterations the ranks' parameters are replaced by their mean.

    Parameters
    ----------
    paths : list of str
    iterations : int
    batch : int
        The global batch (each rank's part ``batch / len(paths)``).
    sizes : list of int
    lr : float
    seed : int
    sync_every : int

    Returns
    -------
    (list, list of float)
        Per rank the layers' parameters, and per iteration the ranks' mean loss.
    """
    ranks = [[init_layer(sizes, k, seed) for k in range(len(sizes) - 1)] for _ in paths]
    losses = []
    for t in range(iterations):
        step = [_sgd_step(ranks[r], *_batch([p], t, _rows(batch, paths)), lr) for r, p in enumerate(paths)]
        ranks = [s[0] for s in step]
        losses.append(float(np.mean([s[1] for s in step])))
        if (t + 1) % sync_every == 0:
            mean = [
                (sum(r[k][0] for r in ranks) / len(ranks), sum(r[k][1] for r in ranks) / len(ranks))
                for k in range(len(sizes) - 1)
            ]
            ranks = [list(mean) for _ in ranks]
    return ranks, losses


#: the data-loading stage name -> its task body
LOADERS = {"read": read_shard, "decode": decode, "augment": augment, "collate": collate}
