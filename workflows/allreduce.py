"""Allreduce over the ranks of a training graph, as tasks: ring (reduce-scatter + all-gather), tree
(reduce up a binary tree + broadcast down) and parameter server (push, sum, pull)."""

from __future__ import annotations

from ._builder import GraphBuilder
from .mlp import chunk, identity, ps_sum, ring_step, tree_reduce

__all__ = ["allreduce_tasks", "bucket_allreduce", "sent_bytes", "COMPRESSIONS"]

#: the gradient compressions of every training builder (simulated and PyTorch)
COMPRESSIONS = ("fp16", "topk")


def sent_bytes(bucket_bytes: float, compression: str | None = None, topk_ratio: float = 0.01) -> float:
    """Bytes a gradient bucket of ``bucket_bytes`` (float32) takes on the wire: all of them; half
    with ``fp16``; with ``topk``, an index (8 bytes) and a value (4) per entry kept, the
    ``topk_ratio`` largest (at least one).

    Parameters
    ----------
    bucket_bytes : float
    compression : {None, "fp16", "topk"}
    topk_ratio : float
        In (0, 1].
    """
    if compression is None:
        return bucket_bytes
    if compression == "fp16":
        return bucket_bytes / 2
    return 12.0 * max(1, round(topk_ratio * bucket_bytes / 4))


def allreduce_tasks(kind: str, workers: int, buckets: int) -> int:
    """Tasks one iteration's allreduce adds: per bucket, ring ``N + 2 (N - 1) N`` (each rank cuts
    the chunk it sends first, then the reduce-scatter and all-gather steps), tree ``2 N``, parameter
    server ``2 N + 1``.

    Parameters
    ----------
    kind : {"ring", "tree", "ps"}
    workers, buckets : int
    """
    n = workers
    per = {"ring": 2 * (n - 1) * n + n if n > 1 else 2, "tree": 2 * n, "ps": 2 * n + 1}[kind]
    return per * buckets


def bucket_allreduce(
    b: GraphBuilder, t: int, kind: str, N: int, bucket_task: dict, bkt: int, size: float, flops: float, prio=None
):
    """One bucket's allreduce over ranks 0..N-1, in two phases: reduce (reduce-scatter, reduce up
    the tree, push + sum) and spread (all-gather, broadcast down, pull). Returns
    ``(received, mids, spread, ends)``: ``received[w]`` lists (handle, chunk index or None) whose
    sum is the reduced bucket at rank w; ``mids`` the tasks that end the reduce phase; ``spread``
    and ``ends`` per rank the first and last task of the spread phase.

    Parameters
    ----------
    b : GraphBuilder
    t : int
        The iteration.
    kind : {"ring", "tree", "ps"}
    N : int
        Ranks.
    bucket_task : dict
        ``(rank, bucket) -> handle`` of the bucket's task on each rank.
    bkt : int
        The bucket.
    size : float
        The bucket's bytes.
    flops : float
        The device's FLOP/s (reduction costs).
    prio : float, optional
        ``meta["priority"]`` of the spread phase.
    """
    extra_ = {} if prio is None else {"priority": prio}

    def meta(cat, rank, **extra):
        spread = cat in ("ring-all-gather", "tree-broadcast", "ps-pull")
        return {"category": cat, "iteration": t, "rank": rank, "bucket": bkt, **extra, **(extra_ if spread else {})}

    received, starts, ends = {}, [], []
    if kind == "ring" and N > 1:
        cb = size / N
        cost = cb / 4.0 / flops
        # each rank cuts the chunk it sends first, so that a chunk, not the bucket, crosses the network
        cut = {
            w: b.task(
                f"it{t}.b{bkt}.chunk.w{w}",
                cost,
                cb,
                meta("chunk", w),
                deps=[(bucket_task[w, bkt], size)],
                fn=chunk,
                args=(bucket_task[w, bkt], w, N),
            )
            for w in range(N)
        }
        rs = {}
        for s in range(N - 1):
            for w in range(N):
                c, nxt = (w - s) % N, (w + 1) % N
                prev = cut[w] if s == 0 else rs[s - 1, (w - 1) % N]
                rs[s, w] = b.task(
                    f"it{t}.b{bkt}.rs{s}.w{w}",
                    cost,
                    cb,
                    meta("ring-reduce-scatter", nxt, step=s),
                    deps=[prev, (bucket_task[nxt, bkt], 0.0)],
                    fn=ring_step,
                    args=(prev, bucket_task[nxt, bkt], c, N),
                )
        # rs[N-2, w] holds the full chunk (w + 2) mod N, at rank w + 1
        ag = {}
        for s in range(N - 1):
            for w in range(N):
                src = rs[N - 2, (w - 1) % N] if s == 0 else ag[s - 1, (w - 1) % N]
                ag[s, w] = b.task(
                    f"it{t}.b{bkt}.ag{s}.w{w}",
                    cost,
                    cb,
                    meta("ring-all-gather", (w + 1) % N, step=s),
                    deps=[src],
                    fn=identity,
                    args=(src,),
                )
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
            red[w] = b.task(
                f"it{t}.b{bkt}.reduce.w{w}",
                size * (1 + len(kids)) / 4.0 / flops,
                size,
                meta("tree-reduce", w),
                deps=[bucket_task[w, bkt], *kids],
                fn=tree_reduce,
                args=(bucket_task[w, bkt], *kids),
            )
        for w in range(N):
            src = red[0] if w == 0 else ends[(w - 1) // 2]
            h = b.task(
                f"it{t}.b{bkt}.bcast.w{w}",
                size / 4.0 / flops,
                size,
                meta("tree-broadcast", w),
                deps=[src],
                fn=identity,
                args=(src,),
            )
            ends.append(h)
            received[w] = [(h, None)]
        mids, spread = [red[0]], ends
    else:  # parameter server
        for w in range(N):
            starts.append(
                b.task(
                    f"it{t}.b{bkt}.push.w{w}",
                    size / 4.0 / flops,
                    size,
                    meta("ps-push", w),
                    deps=[bucket_task[w, bkt]],
                    fn=identity,
                    args=(bucket_task[w, bkt],),
                )
            )
        total = b.task(
            f"it{t}.b{bkt}.ps-sum",
            N * size / 4.0 / flops,
            size,
            {"category": "ps-sum", "iteration": t, "rank": N, "bucket": bkt},
            deps=starts,
            fn=ps_sum,
            args=tuple(starts),
        )
        for w in range(N):
            h = b.task(
                f"it{t}.b{bkt}.pull.w{w}",
                size / 4.0 / flops,
                size,
                meta("ps-pull", w),
                deps=[total],
                fn=identity,
                args=(total,),
            )
            ends.append(h)
            received[w] = [(h, None)]
        mids, spread = [total], ends
    return received, mids, spread, ends
