"""Input pipelines: shards read, decoded, augmented and collated ahead of the training steps.

``input_pipeline(shards, workers, stages, prefetch, cache, epochs, locality, ...)`` builds, for each
rank ``w`` (0..N-1) and each epoch, one step per shard the rank owns (shard ``s`` belongs to rank
``s mod N``): the loading stages of that shard, one task each, chained, then the rank's ``train``
task for the step. A rank's train tasks form a chain (one device consumes its batches in order).

* ``prefetch=d`` bounds the batches a rank loads ahead: the first stage of step ``k`` waits (an
  ordering edge, no bytes) for the rank's train task of step ``k - d - 1``. ``d = 0`` loads a batch
  only after the previous one is consumed; ``None`` does not bound it.
* ``cache="decode"`` (any stage name) keeps the output of that stage from the first epoch: later
  epochs skip the stages up to and including it and start from the cached task (an edge that carries
  its bytes when the consumer runs elsewhere).
* ``locality={shard: worker_id}`` with ``worker_ids`` (the cluster's worker ids) makes a shard's read
  cheap where the shard is held: exact per-worker costs, ``read`` on the holder and ``read +
  shard_bytes / remote_bandwidth`` elsewhere, so a cost-aware scheduler puts reads next to the data.

Costs and sizes (seconds at speed 1.0; bytes): ``read`` = ``shard_bytes / read_bandwidth`` and
outputs ``shard_bytes``; ``decode`` outputs ``expansion x shard_bytes``; every later stage keeps that
size; each stage but ``read`` costs ``stage_costs[stage]`` (defaults below); ``train`` costs
``step_cost`` and outputs ``train_bytes``.

Counts (``S`` shards, ``E`` epochs, ``K`` stages, ``C`` stages covered by the cache, 0 without;
``N'`` ranks that own a shard): tasks ``S (E K - (E - 1) C) + S E``; edges
``S K + S (E - 1) (K - C + [C > 0]) + (S E - N') + P``, where ``P`` counts the steps ``k >= d + 1``
of a rank that load something (one prefetch edge each).
"""

from __future__ import annotations

from taskflow.errors import WorkflowError

from ._builder import GraphBuilder

__all__ = ["input_pipeline", "loading_chain", "STAGE_COSTS"]

#: Default per-step cost of each stage after ``read`` (seconds on a speed-1.0 worker).
STAGE_COSTS = {"decode": 4e-3, "augment": 2e-3, "collate": 1e-3}


def loading_chain(
    b: GraphBuilder, prefix: str, stages, cost_of, size_of, meta_of, first_deps=(), fns=None, first_args=()
):
    """Add ``prefix.stage`` tasks for ``stages`` in a chain; returns the last handle.

    ``cost_of(stage)``, ``size_of(stage)``, ``meta_of(stage)`` give each task's numbers; ``fns``
    (stage -> callable) makes them executable, the first stage called with ``first_args`` and each
    later one with the previous stage's result.

    Parameters
    ----------
    b : GraphBuilder
    prefix : str
        Task ids are ``{prefix}.{stage}``.
    stages : sequence of str
    cost_of, size_of, meta_of : callable
        Stage -> cost, output bytes, meta.
    first_deps : sequence
        Dependencies of the first stage.
    fns : dict, optional
        Stage -> callable.
    first_args : tuple
        Arguments of the first stage's callable.
    """
    h = None
    for k, stage in enumerate(stages):
        deps = list(first_deps) if k == 0 else [h]
        if fns is not None:
            fn = fns[stage]
            args = tuple(first_args) if k == 0 else (h,)
        else:
            fn, args = None, ()
        h = b.task(f"{prefix}.{stage}", cost_of(stage), size_of(stage), meta_of(stage), deps=deps, fn=fn, args=args)
    return h


def input_pipeline(
    shards=16,
    workers: int = 2,
    stages=("read", "decode", "augment", "collate"),
    prefetch: int | None = 2,
    cache: str | None = None,
    epochs: int = 1,
    locality=None,
    worker_ids=None,
    shard_bytes: float = 64e6,
    read_bandwidth: float = 500e6,
    remote_bandwidth: float = 100e6,
    expansion: float = 4.0,
    stage_costs=None,
    step_cost: float = 0.05,
    train_bytes: float = 1e3,
    name: str | None = None,
):
    """An input pipeline feeding ``workers`` training ranks (see the module docstring).

    ``shards`` is a count or a list of per-shard sizes in bytes.

    Parameters
    ----------
    shards : int or list of float
        A count or per-shard sizes in bytes.
    workers : int
        Training ranks.
    stages : tuple of str
        The loading stages, in order.
    prefetch : int or None
        Batches a rank may load ahead (None: unbounded).
    cache : str, optional
        A stage whose output is kept from the first epoch.
    epochs : int
    locality : dict, optional
        Shard -> the worker id that holds it (needs ``worker_ids``).
    worker_ids : list, optional
        The cluster's worker ids.
    shard_bytes, read_bandwidth, remote_bandwidth, expansion : float
        Sizes and rates of the cost model above.
    stage_costs : dict, optional
        Stage -> seconds, for stages after ``read``.
    step_cost, train_bytes : float
        A train step's cost and output.
    name : str, optional

    Returns
    -------
    TaskGraph

    Raises
    ------
    WorkflowError
        A count below 1, repeated stages, a bad prefetch or cache, a stage without a cost, or a
        locality that names an unknown shard or comes without ``worker_ids``.

    Examples
    --------
    >>> g = input_pipeline(shards=8, workers=2, prefetch=1)
    >>> len(g), sum(t.meta["category"] == "train" for t in g.tasks())
    (40, 8)
    """
    sizes = [float(shard_bytes)] * int(shards) if isinstance(shards, (int, float)) else [float(x) for x in shards]
    S, N, E = len(sizes), int(workers), int(epochs)
    stages = tuple(stages)
    if S < 1 or N < 1 or E < 1 or not stages:
        raise WorkflowError("shards, workers, epochs and stages must be >= 1")
    if len(set(stages)) != len(stages):
        raise WorkflowError(f"stages must be distinct, got {stages}")
    if prefetch is not None and prefetch < 0:
        raise WorkflowError(f"prefetch must be >= 0 or None, got {prefetch}")
    if cache is not None and cache not in stages:
        raise WorkflowError(f"cache must name a stage ({', '.join(stages)}), got {cache!r}")
    costs = {**STAGE_COSTS, **(stage_costs or {})}
    unknown = [s for s in stages if s != "read" and s not in costs]
    if unknown:
        raise WorkflowError(f"no cost for stage {unknown[0]!r}: pass stage_costs={{{unknown[0]!r}: seconds}}")
    holders = dict(locality or {})
    if holders and not worker_ids:
        raise WorkflowError("locality needs worker_ids (the cluster's worker ids) to price remote reads")
    bad = [s for s in holders if not (isinstance(s, int) and 0 <= s < S)]
    if bad:
        raise WorkflowError(f"locality names shard {bad[0]!r}, but shards are 0..{S - 1}")
    C = stages.index(cache) + 1 if cache is not None else 0

    b = GraphBuilder(name or f"input-pipeline-s{S}-n{N}-e{E}")
    exact = {}  # task id -> per-worker costs (locality)
    cached = {}  # shard -> handle of its cached stage output
    for w in range(N):
        own = [s for s in range(S) if s % N == w]
        trains = []
        for e in range(E):
            for s in own:
                k = len(trains)
                decoded = expansion * sizes[s]

                def cost_of(stage, s=s):
                    return sizes[s] / read_bandwidth if stage == "read" else costs[stage]

                def size_of(stage, s=s, decoded=decoded):
                    return sizes[s] if stage == "read" else decoded

                def meta_of(stage, s=s, e=e, k=k):
                    return {"category": stage, "rank": w, "shard": s, "epoch": e, "step": k}

                gate = [(trains[k - prefetch - 1], 0.0)] if prefetch is not None and k - prefetch - 1 >= 0 else []
                prefix = f"e{e}.s{s}"
                if C and e == 0:  # load the cached stages once, then the rest
                    cached[s] = loading_chain(b, prefix, stages[:C], cost_of, size_of, meta_of, first_deps=gate)
                    loaded, tail, start = stages, stages[C:], [cached[s]]
                elif C:
                    loaded = tail = stages[C:]
                    start = [cached[s]] + (gate if tail else [])
                else:
                    loaded = tail = stages
                    start = gate
                last = loading_chain(b, prefix, tail, cost_of, size_of, meta_of, first_deps=start) if tail else start[0]
                if "read" in loaded and holders.get(s) is not None:
                    local = sizes[s] / read_bandwidth
                    exact[f"{prefix}.read"] = {
                        x: local if str(x) == str(holders[s]) else local + sizes[s] / remote_bandwidth
                        for x in worker_ids
                    }
                deps = [last] + ([trains[-1]] if trains else [])
                trains.append(
                    b.task(
                        f"{prefix}.train",
                        step_cost,
                        train_bytes,
                        {"category": "train", "rank": w, "shard": s, "epoch": e, "step": k},
                        deps=deps,
                    )
                )
    g = b.graph()
    if exact:
        g = g.with_costs(costs=exact)
    return g
