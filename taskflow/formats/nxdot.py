"""networkx conversion (both ways) and Graphviz DOT output."""

from __future__ import annotations

import json

import networkx as nx

from ..graph import TaskGraph

__all__ = ["from_networkx", "to_dot", "to_networkx"]


def to_networkx(graph: TaskGraph) -> "nx.DiGraph":
    """A ``networkx.DiGraph``: node attributes ``cost``, ``output_size``, ``cores`` (and ``costs``,
    ``meta`` when set); edge attribute ``size``.

    Parameters
    ----------
    graph : TaskGraph
    """
    G = nx.DiGraph(name=graph.name)
    for i, tid in enumerate(graph._ids):
        attrs = {"cost": graph._cost[i], "output_size": graph._output_size[i], "cores": graph._cores[i]}
        if i in graph._costs:
            attrs["costs"] = dict(graph._costs[i])
        if i in graph._meta:
            attrs["meta"] = dict(graph._meta[i])
        G.add_node(tid, **attrs)
    for s, d, z in graph.edges():
        G.add_edge(s, d, size=z)
    return G


def from_networkx(G, name: str | None = None) -> TaskGraph:
    """A TaskGraph from a directed networkx graph; missing ``cost`` is 1.0, missing edge ``size``
    is the producer's ``output_size``.

    Parameters
    ----------
    G : networkx.DiGraph
    name : str, optional
    """
    ids = list(G.nodes)
    nodes = G.nodes
    out = [nodes[t].get("output_size", 0) for t in ids]
    pos = {t: i for i, t in enumerate(ids)}
    src, dst, size = [], [], []
    for s, d, attrs in G.edges(data=True):
        src.append(s)
        dst.append(d)
        size.append(attrs.get("size", out[pos[s]]))
    return TaskGraph.from_columns(
        name or G.graph.get("name") or "graph",
        ids,
        [nodes[t].get("cost", 1.0) for t in ids],
        out,
        [nodes[t].get("cores", 1) for t in ids],
        src,
        dst,
        size,
        costs={t: nodes[t]["costs"] for t in ids if nodes[t].get("costs")},
        meta={t: nodes[t]["meta"] for t in ids if nodes[t].get("meta")},
    )


def _q(s) -> str:
    return json.dumps(str(s))  # a valid DOT quoted string: escapes quotes and backslashes


def to_dot(graph: TaskGraph) -> str:
    """Graphviz DOT text: nodes labelled with id and cost, edges with their size in bytes.

    Parameters
    ----------
    graph : TaskGraph
    """
    lines = [f"digraph {_q(graph.name)} {{", "  node [shape=box];"]
    for i, tid in enumerate(graph._ids):
        label = f"{tid}\\ncost={graph._cost[i]:g}"
        lines.append(f'  {_q(tid)} [label="{label.replace(chr(34), chr(92) + chr(34))}"];')
    for s, d, z in graph.edges():
        attr = f' [label="{z:g} B"]' if z else ""
        lines.append(f"  {_q(s)} -> {_q(d)}{attr};")
    lines.append("}")
    return "\n".join(lines) + "\n"
