"""Graphs with real callables for the runtime tests (importable by workers: module:function)."""

import time

from taskflow import TaskGraph


def work(x, *rest):
    time.sleep(0.3)
    return x + sum(rest)


def layered(width=12, depth=4, name="layered"):
    g = TaskGraph(name)
    layer = [g.add_task(f"a{i}", fn=work, args=(i,), cost=0.3) for i in range(width)]
    for lvl in range(depth):
        layer = [
            g.add_task(f"l{lvl}_{i}", fn=work, args=(0, layer[i], layer[(i + 1) % width]), cost=0.3)
            for i in range(width)
        ]
    g.add_task("total", fn=work, args=(0, *layer), cost=0.3)
    return g


def expected_total(width=12, depth=4):
    vals = list(range(width))
    for _ in range(depth):
        vals = [vals[i] + vals[(i + 1) % width] for i in range(width)]
    return sum(vals)


def boom(x):
    raise ValueError(f"bad input {x}")


def failing():
    g = TaskGraph("failing")
    a = g.add_task("ok", fn=work, args=(1,), cost=0.3)
    g.add_task("explodes", fn=boom, args=(a,), cost=0.1)
    g.add_task("fine", fn=work, args=(2,), cost=0.3)
    return g


def slow(x, seconds):
    time.sleep(seconds)
    return x


def mixed_costs():
    """Declared costs all 1.0; 'big' tasks really take 0.6 s, 'small' ones 0.1 s."""
    g = TaskGraph("mixed")
    prev = []
    for i in range(6):
        b = g.add_task(f"big{i}", fn=slow, args=(i, 0.6), cost=1.0, meta={"category": "big"})
        s = g.add_task(f"small{i}", fn=slow, args=(i, 0.1), cost=1.0, meta={"category": "small"})
        prev.extend([b, s])
    g.add_task("join", fn=lambda *xs: sum(xs), args=tuple(prev), cost=1.0, meta={"category": "join"})
    return g


def emulated_chain(n: int, seconds: float, name: str = "chain", prefix: str = "c") -> TaskGraph:
    """``n`` emulated tasks of ``seconds`` each, one after the other (no callables)."""
    g = TaskGraph(name)
    prev = None
    for k in range(n):
        t = g.add_task(f"{prefix}{k}", cost=seconds)
        if prev is not None:
            g.add_edge(prev.id, t.id)
        prev = t
    return g
