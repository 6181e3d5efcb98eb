"""Pipeline-parallel training (GPipe, 1F1B) as task graphs: :func:`pipeline_parallel`."""

from __future__ import annotations

import math

import numpy as np

from taskflow.errors import WorkflowError
from taskflow.graph import TaskGraph

from ._builder import GraphBuilder
from .models import device_flops, model_profile

__all__ = ["pipeline_parallel", "pipeline_order"]


def _split_stages(layers, stages: int) -> list:
    """Contiguous layer groups with forward work as even as a greedy cut makes it."""
    L = len(layers)
    if not 1 <= stages <= L:
        raise WorkflowError(f"stages must be between 1 and the model's {L} layers, got {stages}")
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

    Parameters
    ----------
    schedule : {"gpipe", "1f1b"}
    stage, stages, microbatches : int

    Raises
    ------
    WorkflowError
        An unknown schedule.

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
    raise WorkflowError(f"schedule must be 'gpipe' or '1f1b', got {schedule!r}")


def pipeline_parallel(
    model="gpt2-small",
    stages: int = 4,
    microbatches: int = 8,
    schedule: str = "1f1b",
    iterations: int = 1,
    batch: int = 32,
    device: str = "v100",
    load_cost: float = 1e-3,
    name: str | None = None,
) -> TaskGraph:
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

    Parameters
    ----------
    model : str or list of dict
        A model name (``workflows/data/models.json``) or per-layer ``{"name", "macs", "params"}``.
    stages, microbatches, iterations, batch : int
    schedule : {"gpipe", "1f1b"}
    device : str or float
    load_cost : float
    name : str, optional

    Raises
    ------
    WorkflowError
        Fewer than one microbatch or iteration, more stages than layers, an unknown schedule, model
        or device.

    Examples
    --------
    >>> g = pipeline_parallel("gpt2-small", stages=4, microbatches=8, schedule="gpipe")
    >>> len(g), sum(t.meta["category"] == "forward" for t in g.tasks())
    (80, 32)
    """
    S, M, T = int(stages), int(microbatches), int(iterations)
    if M < 1 or T < 1:
        raise WorkflowError("microbatches and iterations must be >= 1")
    layers = model_profile(model) if isinstance(model, str) else list(model)
    groups = _split_stages(layers, S)
    orders = [pipeline_order(schedule, s, S, M) for s in range(S)]
    flops = device_flops(device)
    mb = batch / M
    fwd = [sum(2.0 * layers[k]["macs"] * mb / flops for k in grp) for grp in groups]
    act = [4.0 * mb * math.sqrt(max(layers[grp[-1]]["macs"], 1.0)) for grp in groups]
    wbytes = [sum(4.0 * layers[k]["params"] for k in grp) for grp in groups]
    b = GraphBuilder(name or f"pp-{model if isinstance(model, str) else 'custom'}-{schedule}-s{S}-m{M}-t{T}")
    weights = [
        b.task(f"init.s{s}", wbytes[s] / 4.0 / flops, wbytes[s], {"category": "init", "stage": s}) for s in range(S)
    ]
    for t in range(T):
        loads = [
            b.task(
                f"it{t}.load.m{m}",
                load_cost,
                4.0 * mb * 224 * 224 * 3,
                {"category": "load", "iteration": t, "microbatch": m},
            )
            for m in range(M)
        ]
        F, Bk = {}, {}
        for s in range(S):
            for m in range(M):
                F[s, m] = b.task(
                    f"it{t}.s{s}.F{m}",
                    fwd[s],
                    act[s],
                    {"category": "forward", "iteration": t, "stage": s, "microbatch": m},
                    deps=[loads[m] if s == 0 else F[s - 1, m], weights[s]],
                )
        for s in range(S - 1, -1, -1):
            for m in range(M):
                deps = [F[s, m], weights[s]] + ([Bk[s + 1, m]] if s < S - 1 else [])
                Bk[s, m] = b.task(
                    f"it{t}.s{s}.B{m}",
                    2.0 * fwd[s],
                    act[s - 1] if s else 0.0,
                    {"category": "backward", "iteration": t, "stage": s, "microbatch": m},
                    deps=deps,
                )
        for s in range(S):
            ops = [F[s, m] if kind == "F" else Bk[s, m] for kind, m in orders[s]]
            stash = {(F[s, m], Bk[s, m]) for m in range(M)}
            for u, v in zip(ops, ops[1:]):
                if (u, v) not in stash:
                    b.edge(u, v, size=0.0)
        for s in range(S):
            weights[s] = b.task(
                f"it{t}.s{s}.update",
                2.0 * wbytes[s] / 4.0 / flops,
                wbytes[s],
                {"category": "update", "iteration": t, "stage": s},
                deps=[weights[s]] + [(Bk[s, m], wbytes[s]) for m in range(M)],
            )
    return b.graph()
