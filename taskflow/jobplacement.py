"""Where a job's workers go on a shared cluster: :func:`place`, every job scheduler's placement
(its ``placement`` option, :data:`PLACEMENTS`), and :func:`uplink_load`, the jobs crossing each
rack's uplink that a contention-aware placement avoids."""

from __future__ import annotations

from .errors import SchedulerError

__all__ = ["PLACEMENTS", "place", "uplink_load"]


#: the placements every job scheduler takes (option ``placement``)
PLACEMENTS = ("consolidated", "spread", "contention-aware", "interference-aware")


def uplink_load(running, racks) -> dict:
    """Rack -> how many of the ``running`` jobs span more than one rack and use its uplink.

    Parameters
    ----------
    running : iterable of JobState
    racks : sequence
        ``racks[w]``: worker ``w``'s rack (empty: one rack, no uplink).
    """
    load: dict = {}
    if not racks:
        return load
    for j in running:
        rs = {racks[w] for w in j.workers}
        if len(rs) > 1:
            for r in rs:
                load[r] = load.get(r, 0) + 1
    return load


def place(free, n: int, nodes, how: str = "consolidated", racks=(), load=None, cost=None) -> tuple:
    """``n`` of the ``free`` workers, placed ``how``:

    * ``consolidated`` (Tiresias, Gandiva): one node if one holds it (the fullest that does),
      else one rack (the fullest that does, its fullest nodes first), else the racks with the
      most free workers first: the fewest nodes and racks;
    * ``spread``: one worker per node in turn, the nodes taken from each rack in turn (the most
      nodes and racks);
    * ``contention-aware`` (Wang, Shi, Chu et al.): as consolidated within a node or a rack; a job
      that must span racks takes as few as consolidated does, but those whose uplinks carry the
      fewest jobs (``load``) where that still holds it;
    * ``interference-aware`` (Gandiva's packing): the node where what it and its neighbours lose
      (``cost``, per node) plus the share of the node it would leave idle is least; a job no node
      holds takes the idlest, quietest nodes first.

    Parameters
    ----------
    free : sequence of int
    n : int
    nodes : sequence
        ``nodes[w]``: worker ``w``'s node.
    how : str
        One of :data:`PLACEMENTS`.
    racks : sequence
        ``racks[w]``: worker ``w``'s rack (empty: one rack).
    load : dict, optional
        Rack -> jobs crossing its uplink (:func:`uplink_load`).
    cost : dict, optional
        Node -> the slowdown placing the job there costs.

    Raises
    ------
    SchedulerError
        Fewer than ``n`` free workers.
    """
    if n > len(free):
        raise SchedulerError(f"{n} workers asked for, {len(free)} free")
    by_node: dict = {}
    for w in sorted(free):
        by_node.setdefault(nodes[w], []).append(w)
    groups = sorted(by_node.values(), key=lambda ws: (-len(ws), ws[0]))
    if how == "spread":
        if racks:  # the nodes of each rack in turn: the most racks as well
            per_rack: dict = {}
            for ws in groups:
                per_rack.setdefault(racks[ws[0]], []).append(ws)
            lanes = sorted(per_rack.values(), key=lambda g: (-sum(map(len, g)), g[0][0]))  # the freest first
            groups = [g[i] for i in range(max(len(g) for g in lanes)) for g in lanes if i < len(g)]
        out, k = [], 0
        while len(out) < n:
            for ws in groups:
                if k < len(ws) and len(out) < n:
                    out.append(ws[k])
            k += 1
        return tuple(sorted(out))
    if how == "interference-aware":
        return _packed(groups, n, nodes, cost or {})
    fit = [ws for ws in groups if len(ws) >= n]
    if fit:  # the fullest node that holds it alone: the smallest that fits
        return tuple(min(fit, key=lambda ws: (len(ws), ws[0]))[:n])
    rack_of = (lambda ws: racks[ws[0]]) if racks else (lambda ws: 0)
    by_rack: dict = {}
    for ws in groups:  # (fullest nodes first within a rack)
        by_rack.setdefault(rack_of(ws), []).append(ws)
    size = {r: sum(len(ws) for ws in g) for r, g in by_rack.items()}
    whole = [r for r in by_rack if size[r] >= n]
    if whole:
        return _take(by_rack[min(whole, key=lambda r: (size[r], r))], n)
    order = sorted(by_rack, key=lambda r: (-size[r], r))  # the fewest racks: the fullest first
    if how == "contention-aware":
        order = _quiet_racks(order, size, n, load or {})
    return _take([ws for r in order for ws in by_rack[r]], n)


def _packed(groups, n: int, nodes, cost: dict) -> tuple:
    """Gandiva's packing: the node where the slowdown it costs (``cost``) plus the share of the
    node it would leave idle is least, if one holds the job; else nodes by their cost less their
    free share (idle, quiet nodes first)."""
    per: dict = {}
    for node in nodes:
        per[node] = per.get(node, 0) + 1
    fit = [ws for ws in groups if len(ws) >= n]
    if fit:
        return tuple(
            min(fit, key=lambda ws: (cost.get(nodes[ws[0]], 0.0) + (len(ws) - n) / per[nodes[ws[0]]], ws[0]))[:n]
        )
    return _take(sorted(groups, key=lambda ws: (cost.get(nodes[ws[0]], 0.0) - len(ws) / per[nodes[ws[0]]], ws[0])), n)


def _quiet_racks(order: list, size: dict, n: int, load: dict) -> list:
    """The fewest racks that hold ``n`` workers (the fullest first, ``order``), each swapped for a
    rack whose uplink carries fewer jobs where the rest still hold ``n``; the racks' order after."""
    k, got = 0, 0
    while got < n:
        got += size[order[k]]
        k += 1
    chosen, rest = order[:k], sorted(order[k:], key=lambda r: (load.get(r, 0), -size[r], r))
    for i in sorted(range(k), key=lambda i: -load.get(chosen[i], 0)):
        for j, r in enumerate(rest):
            if load.get(r, 0) < load.get(chosen[i], 0) and got - size[chosen[i]] + size[r] >= n:
                got += size[r] - size[chosen[i]]
                chosen[i], rest[j] = r, chosen[i]
                break
    return sorted(chosen, key=lambda r: (load.get(r, 0), -size[r], r)) + rest


def _take(groups, n: int) -> tuple:
    """The first ``n`` workers of ``groups`` (lists of workers) in their order."""
    out: list = []
    for ws in groups:
        out += ws[: n - len(out)]
        if len(out) == n:
            break
    return tuple(sorted(out))
