import math

import numpy as np
import pytest

from taskflow import CycleError, GraphError, TaskflowError, TaskGraph


def test_handles_in_args_make_data_edges_with_producer_output_size():
    g = TaskGraph()
    a = g.add_task("a", fn=lambda: 1, cost=2.0, output_size=64)
    b = g.add_task("b", fn=lambda: 2, output_size=8)
    c = g.add_task("c", fn=lambda xs, y: sum(xs) + y, args=([a, b],), kwargs={"y": a})
    assert c.id == "c"
    assert g.num_edges == 2  # a used twice: one edge
    assert g.edge_size("a", "c") == 64.0
    assert g.edge_size("b", "c") == 8.0
    assert sorted(g.predecessors("c")) == ["a", "b"]
    fn, args, kwargs = g.call("c")
    assert args == ([a, b],) and kwargs == {"y": a}
    assert g.executable


def test_add_edge_size_defaults_to_output_size_and_can_be_given(diamond):
    assert diamond.edge_size("a", "b") == 100.0
    assert diamond.edge_size("a", "c") == 200.0
    assert diamond.edge_size("c", "d") == 10.0
    assert list(diamond.edges())[1] == ("a", "c", 200.0)


def test_arrays_csr_and_topological_order(diamond):
    a = diamond.arrays
    assert a.n == 4 and a.m == 4
    assert [a.ids[i] for i in a.topo] == ["a", "b", "c", "d"]
    d = a.index["d"]
    assert sorted(a.ids[p] for p in a.preds(d)) == ["b", "c"]
    assert sorted(a.ids[s] for s in a.succs(a.index["a"])) == ["b", "c"]
    assert np.allclose(a.cost, [2, 3, 1, 2])
    # edge numbers in pred_eid point at the right sizes
    sizes = {(a.ids[int(a.src[e])], a.ids[int(a.dst[e])]): a.size[e] for e in range(a.m)}
    assert sizes[("a", "c")] == 200.0
    with pytest.raises(ValueError):
        a.cost[0] = 5  # frozen
    assert diamond.sources() == ["a"] and diamond.sinks() == ["d"]


def test_arrays_are_recomputed_after_a_change(diamond):
    assert diamond.arrays.n == 4
    diamond.add_task("e", cost=1)
    diamond.add_edge("d", "e")
    assert diamond.arrays.n == 5 and diamond.topological_order()[-1] == "e"


def test_cycle_is_named():
    g = TaskGraph()
    for t in "abcd":
        g.add_task(t)
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", "d")
    g.add_edge("d", "b")
    with pytest.raises(CycleError) as e:
        g.validate()
    cyc = e.value.cycle
    assert cyc[0] == cyc[-1] and set(cyc) == {"b", "c", "d"}
    assert (
        "b -> c -> d -> b" in str(e.value) or "c -> d -> b -> c" in str(e.value) or "d -> b -> c -> d" in str(e.value)
    )


def test_self_loop_is_a_cycle():
    g = TaskGraph()
    g.add_task("x")
    with pytest.raises(CycleError, match="x -> x"):
        g.add_edge("x", "x")


def test_duplicate_id_and_unknown_task():
    g = TaskGraph()
    g.add_task("a")
    with pytest.raises(GraphError, match="duplicate task id 'a'"):
        g.add_task("a")
    with pytest.raises(GraphError, match="edge 'a' -> 'zz': unknown task 'zz'"):
        g.add_edge("a", "zz")
    g.add_task("b")
    g.add_edge("a", "b")
    with pytest.raises(GraphError, match="duplicate edge 'a' -> 'b'"):
        g.add_edge("a", "b")


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "x", None])
@pytest.mark.parametrize("field", ["cost", "output_size"])
def test_bad_numbers_name_task_and_field(field, bad):
    g = TaskGraph()
    with pytest.raises(GraphError, match=f"task 't7': {field} must be"):
        g.add_task("t7", **{field: bad})
    assert len(g) == 0  # nothing half-added


@pytest.mark.parametrize("bad", [-5, math.nan, math.inf])
def test_bad_edge_size_and_exact_costs(bad):
    g = TaskGraph()
    g.add_task("a")
    g.add_task("b")
    with pytest.raises(GraphError, match="edge 'a' -> 'b': size must be"):
        g.add_edge("a", "b", size=bad)
    with pytest.raises(GraphError, match=r"task 'c': costs\['w0'\] must be"):
        g.add_task("c", costs={"w0": bad})


def test_bad_cores():
    g = TaskGraph()
    with pytest.raises(GraphError, match="cores must be an integer from 1"):
        g.add_task("a", cores=0)
    with pytest.raises(GraphError, match="cores must be an integer from 1"):
        g.add_task("a", cores=1.5)


def test_handle_of_another_graph_is_refused():
    g1, g2 = TaskGraph(), TaskGraph()
    h = g1.add_task("a", fn=int)
    with pytest.raises(GraphError, match="another graph"):
        g2.add_task("b", fn=int, args=(h,))


def test_delayed_builder():
    g = TaskGraph()

    @g.delayed(cost=3.0, output_size=16)
    def add(x, y):
        return x + y

    s = add(add(1, 2), add(3, 4))
    assert len(g) == 3 and g.num_edges == 2
    assert s.id == "add-2"
    assert g.task("add-0").cost == 3.0 and g.edge_size("add-0", "add-2") == 16.0


def test_subgraph_copy_and_with_costs(diamond):
    sub = diamond.subgraph(["b", "c", "d"])
    assert len(sub) == 3 and sorted(sub.edges()) == [("b", "d", 50.0), ("c", "d", 10.0)]
    cp = diamond.copy()
    cp.add_task("z")
    assert "z" not in diamond and len(cp) == 5
    changed = diamond.with_costs(cost={"a": 9.0}, costs={"b": {"w0": 1.0}})
    assert changed.task("a").cost == 9.0 and changed.task("b").costs == {"w0": 1.0}
    assert diamond.task("a").cost == 2.0 and diamond.task("b").costs is None
    resized = diamond.with_costs(sizes={("b", "d"): 7.0})
    assert resized.edge_size("b", "d") == 7.0 and diamond.edge_size("b", "d") == 50.0
    assert resized.arrays.size.tolist() != diamond.arrays.size.tolist()  # the arrays see the new size
    with pytest.raises(GraphError, match="no edge 'd' -> 'b'"):
        diamond.with_costs(sizes={("d", "b"): 1.0})
    with pytest.raises(GraphError, match="edge 'b' -> 'd': size must be"):
        diamond.with_costs(sizes={("b", "d"): -1.0})


def test_from_columns_checks_like_add():
    with pytest.raises(GraphError, match="duplicate task id 'a'"):
        TaskGraph.from_columns("g", ["a", "a"], [1, 1])
    with pytest.raises(GraphError, match="task 'b': cost must be finite"):
        TaskGraph.from_columns("g", ["a", "b"], [1, -2])
    with pytest.raises(GraphError, match="unknown task 'q'"):
        TaskGraph.from_columns("g", ["a", "b"], [1, 2], src=["a"], dst=["q"], size=[0])
    with pytest.raises(GraphError, match="edge 'a' -> 'b': size must be"):
        TaskGraph.from_columns("g", ["a", "b"], [1, 2], src=["a"], dst=["b"], size=[math.nan])
    with pytest.raises(GraphError, match="duplicate edge 'a' -> 'b'"):
        TaskGraph.from_columns("g", ["a", "b"], [1, 2], src=["a", "a"], dst=["b", "b"], size=[0, 0])


def test_large_graph_topological_order_is_valid():
    rng = np.random.default_rng(3)
    n = 5000
    src = rng.integers(0, n - 1, size=15000)
    dst = src + 1 + rng.integers(0, 50, size=15000)
    keep = dst < n
    pairs = sorted(set(zip(src[keep].tolist(), dst[keep].tolist())))
    g = TaskGraph.from_columns(
        "big", list(range(n)), np.ones(n), src=[p for p, _ in pairs], dst=[d for _, d in pairs], size=[1.0] * len(pairs)
    )
    a = g.arrays
    pos = np.empty(n, dtype=np.int64)
    pos[a.topo] = np.arange(n)
    assert (pos[a.src] < pos[a.dst]).all()
    assert len(set(a.topo.tolist())) == n


def test_restrict_costs_keeps_only_the_named_workers():
    g = TaskGraph()
    g.add_task("a", cost=2.0, costs={"w0": 1.0, "w1": 3.0})
    g.add_task("b", cost=1.0)
    r = g.restrict_costs(["w1"])
    assert r.task("a").costs == {"w1": 3.0} and r.task("b").costs is None
    assert g.task("a").costs == {"w0": 1.0, "w1": 3.0}  # the original is untouched
    assert g.restrict_costs([]).task("a").costs is None and g.restrict_costs(["w0"]) is not g
    plain = TaskGraph()
    plain.add_task("x")
    assert plain.restrict_costs(["w0"]) is plain


def test_from_arrays_builds_in_bulk_and_names_bad_input():
    from taskflow.errors import CycleError as Cyc

    g = TaskGraph.from_arrays(
        "bulk",
        ["a", "b", "c"],
        [1.0, 2.0, 3.0],
        [8.0, 0.0, 0.0],
        [0, 1],
        [1, 2],
        [8.0, 4.0],
        meta=[{"k": 1}, None, {"k": 3}],
    ).validate()
    assert g.topological_order() == ["a", "b", "c"] and g.edge_size("b", "c") == 4.0 and g.has_edge("a", "b")
    assert g.task("a").meta == {"k": 1} and g.task("b").meta is None and dict(g.metas()) == {0: {"k": 1}, 2: {"k": 3}}
    g.add_edge("a", "c")  # the edge map is built on first use
    assert g.num_edges == 3 and not g.has_edge("c", "a")
    cases = [
        ((["a", "a"], [1, 1], [0, 0], [], [], []), GraphError, "duplicate task id 'a'"),
        ((["a", "b"], [1, 1], [0, 0], [0], [5], [0]), GraphError, "task index 0 -> 5 out of range"),
        ((["a", "b"], [1, 1], [0, 0], [0, 0], [1, 1], [0, 0]), GraphError, "duplicate edge 'a' -> 'b'"),
        ((["a", "b"], [1, 1], [0, 0], [1], [1], [0]), Cyc, "b"),
        ((["a", "b"], [1, -1], [0, 0], [], [], []), GraphError, "task 'b': cost must be finite and >= 0"),
        ((["a", "b"], [1, 1], [0, 0], [0], [1], [float("nan")]), GraphError, "edge 'a' -> 'b': size"),
    ]
    for args, err, msg in cases:
        with pytest.raises(err, match=msg):
            TaskGraph.from_arrays("bad", *args)


def test_execute_runs_in_process_and_names_a_failing_task():
    from taskflow import TaskFailed, execute

    g = TaskGraph()
    a = g.add_task("a", fn=lambda: 3)
    g.add_task("b", fn=lambda x: x / 0, args=(a,))
    with pytest.raises(TaskFailed, match="'b'") as info:
        execute(g)
    assert info.value.results == {"a": 3}
    h = TaskGraph()
    h.add_task("x", cost=1.0)
    with pytest.raises(TaskflowError, match="tasks without a callable"):
        execute(h)


def test_small_and_large_graphs_get_the_same_topological_order_from_python_and_the_kernel():
    """Below SMALL_GRAPH tasks the order comes from Python's lists (a command starts without loading
    numba); above it from the kernel, compiled or not: the three agree, and find cycles."""
    import numpy as np

    from taskflow import arrays, jit
    from taskflow.errors import CycleError

    rng = np.random.default_rng(3)
    n = 3000
    src = rng.integers(0, n - 1, 9000)
    dst = np.minimum(n - 1, src + 1 + rng.integers(0, 50, 9000))
    ptr, idx, _ = arrays.csr(src, dst, n)
    ids = list(range(n))
    with jit.compiled():
        compiled = arrays.topological_order(n, src, dst, ptr, idx, ids)
    with jit.interpreted():
        plain = arrays.topological_order(n, src, dst, ptr, idx, ids)
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    python, k = arrays._kahn_py(n, ptr.tolist(), idx.tolist(), indeg)
    assert k == n and python.tolist() == compiled.tolist() == plain.tolist()
    with pytest.raises(CycleError):
        arrays.topological_order(
            3,
            np.array([0, 1, 2]),
            np.array([1, 2, 0]),
            *arrays.csr(np.array([0, 1, 2]), np.array([1, 2, 0]), 3)[:2],
            [0, 1, 2],
        )
