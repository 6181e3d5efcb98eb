"""What lets the simulator run large graphs on many workers: the max-min rates solved over the
active pairs only (checked against a plain progressive-filling reference), the duration matrix
computed on demand above the dense limit (entry for entry the dense one; same simulations), and
the 1000Genome-shaped generator used by the scale benchmark."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import schedulers
import taskflow.costs as costs
from taskflow import Cluster, TaskGraph, simulate
from taskflow.cluster import Worker
from taskflow.costs import CostModel, Durations
from taskflow.errors import GraphError, WorkflowError
from taskflow.jit import compiled, interpreted
from taskflow.simulator.network import Flow, _flows, _flowstate, maxmin
from taskflow.simulator.network._fairshare import fill_classes
from taskflow.simulator.states import DONE
from workflows.scientific import genome_like, random_layered


def reference_rates(flows, up, down, pcap, bp=np.inf, rack=None, rup=None):
    """Max-min fair rate per flow by textbook progressive filling: every unfrozen flow rises at
    the same pace until a resource (upload port, download port, the pair's own cap, the
    backplane, a rack's up/downlink) is full; the flows through it freeze. ``flows``: (src, dst)."""
    F = len(flows)
    res = []  # (capacity, member flows)
    for w in range(len(up)):
        res.append((up[w], [f for f, (a, _) in enumerate(flows) if a == w]))
        res.append((down[w], [f for f, (_, b) in enumerate(flows) if b == w]))
    for f, (a, b) in enumerate(flows):
        res.append((pcap[a, b], [f]))
    res.append((bp, list(range(F))))
    if rack is not None:
        for r in range(len(rup)):
            res.append((rup[r], [f for f, (a, b) in enumerate(flows) if rack[a] == r and rack[b] != r]))
            res.append((rup[r], [f for f, (a, b) in enumerate(flows) if rack[b] == r and rack[a] != r]))
    rate = np.zeros(F)
    frozen = np.zeros(F, bool)
    while not frozen.all():
        best, which = np.inf, None
        for cap, members in res:
            live = [f for f in members if not frozen[f]]
            if live:
                share = (cap - sum(rate[f] for f in members if frozen[f])) / len(live)
                if share < best:
                    best, which = share, live
        if which is None or best == np.inf:
            rate[~frozen] = np.inf
            break
        rate[which] = best
        frozen[which] = True
    return rate


def solve(flows, W, up, down, pcap, bp=np.inf, rack=None, rup=None):
    """Rates of ``flows`` from the simulator's solver."""
    pn = np.zeros(W * W)
    for a, b in flows:
        pn[a * W + b] += 1
    qs = np.flatnonzero(pn > 0).astype(np.int64)
    rng = np.random.default_rng(len(flows))
    qs = rng.permutation(qs)  # the solver takes the active pairs in any order
    slot = {int(q): k for k, q in enumerate(qs)}  # the solver's pairs sit in slots
    prate = np.zeros(len(qs))
    rack_a = np.zeros(W, np.int64) if rack is None else np.asarray(rack, np.int64)
    rup_a = np.zeros(0) if rup is None else np.asarray(rup, float)
    capped = bool(np.any(pcap[~np.eye(W, dtype=bool)] < np.minimum(up[:, None], down[None, :])[~np.eye(W, dtype=bool)]))
    loc = np.full(2 * W, -1, np.int64)
    fill_classes(
        np.arange(len(qs)),
        len(qs),
        qs // W,
        qs % W,
        np.zeros(len(qs), np.int64),
        pn[qs],
        pcap.reshape(-1)[qs].copy(),
        up,
        down,
        prate,
        1,
        capped,
        bp,
        rack_a,
        rup_a,
        rup_a.copy(),
        loc,
        np.zeros(len(qs), np.int64),
    )
    assert (loc == -1).all()  # the scratch array is left as it came
    return np.array([prate[slot[a * W + b]] for a, b in flows])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_max_min_rates_match_progressive_filling(data):
    W = data.draw(st.integers(2, 7))
    pairs = [(a, b) for a in range(W) for b in range(W) if a != b]
    flows = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=14))
    bw = np.array(data.draw(st.lists(st.sampled_from([1.0, 2.0, 5.0, 10.0]), min_size=W * W, max_size=W * W)))
    pcap = bw.reshape(W, W).copy()
    np.fill_diagonal(pcap, 0.0)
    up, down = pcap.max(axis=1), pcap.max(axis=0)
    bp = data.draw(st.sampled_from([np.inf, 4.0, 13.0]))
    racked = data.draw(st.booleans())
    rack = [w % 2 for w in range(W)] if racked else None
    rup = [3.0, 3.0] if racked else None
    got = solve(flows, W, up, down, pcap, bp, rack, rup)
    want = reference_rates(flows, up, down, pcap, bp, rack, rup)
    assert got == pytest.approx(want, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_rates_solved_again_only_where_a_change_moves_them_match_progressive_filling(data):
    """The network's rates after each change of its flows (some start, some end), repairing only
    what the change can move where the pairs are few per worker (``REPAIR = 1``; ``DENSE`` drawn
    low, so that the pairs cross it both ways: whole solves that keep no bookkeeping, then the
    bookkeeping made afresh), against textbook progressive filling of all the flows then active."""
    W = data.draw(st.integers(2, 7))
    speeds = data.draw(st.lists(st.sampled_from([1.0, 2.0, 5.0, 10.0]), min_size=W * W, max_size=W * W))
    names = [f"w{i}" for i in range(W)]
    bws = {names[a]: {names[b]: speeds[a * W + b] for b in range(W) if b != a} for a in range(W)}
    cluster = Cluster([Worker(n) for n in names], bandwidth=1.0, bandwidths=bws)
    net = maxmin.MaxMinNetwork(cluster, None, lambda *a: None, lambda *a: None)
    assert net.repair == maxmin.REPAIR
    net.repair = 1
    pairs = [(a, b) for a in range(W) for b in range(W) if a != b]
    live, fid = [], 0
    dense = data.draw(st.sampled_from([0.5, 1, 2, maxmin.DENSE]))
    with compiled() if data.draw(st.booleans()) else interpreted(), _patched(maxmin, "DENSE", dense):
        for _ in range(data.draw(st.integers(1, 12))):
            for a, b in data.draw(st.lists(st.sampled_from(pairs), max_size=6)):
                fid += 1
                flow = Flow(fid, 0, a, b, 1e9, 0.0, 0.0)
                net.start(flow, 0.0)
                live.append(flow)
            for k in sorted(set(data.draw(st.lists(st.integers(0, max(0, len(live) - 1)), max_size=4))), reverse=True):
                if k < len(live):
                    net.abort(live.pop(k), 0.0)
            net.next_time()
            assert net.tracked == (net.npairs <= dense * W and net.npairs > 0)
            if live:
                pcap = np.array([[0.0 if a == b else speeds[a * W + b] for b in range(W)] for a in range(W)])
                want = reference_rates([(f.src, f.dst) for f in live], pcap.max(axis=1), pcap.max(axis=0), pcap)
                got = [net.rate(f) for f in live]
                assert got == pytest.approx(want, rel=1e-9)
    assert not net.N[19].any()  # the scratch flags (in the set) are left clear


class _patched:
    """``setattr(obj, name, value)`` within a ``with`` block (hypothesis tests cannot take pytest's
    function-scoped monkeypatch)."""

    def __init__(self, obj, name, value):
        self.obj, self.name, self.value = obj, name, value

    def __enter__(self):
        self.old = getattr(self.obj, self.name)
        setattr(self.obj, self.name, self.value)

    def __exit__(self, *exc):
        setattr(self.obj, self.name, self.old)


def test_the_repair_bookkeeping_made_afresh_after_dense_solves_repairs_correctly(monkeypatch):
    """Pairs thin out after a spell of whole solves that kept no bookkeeping (more pairs than
    ``DENSE`` per worker): the ports' lists and loads are made afresh, and the repairs after that
    give the rates of progressive filling."""
    monkeypatch.setattr(maxmin, "DENSE", 1)
    W = 5
    pcap = np.full((W, W), 10.0)
    pcap[0, 1] = 3.0
    np.fill_diagonal(pcap, 0.0)
    names = [f"w{i}" for i in range(W)]
    cluster = Cluster(
        [Worker(n) for n in names],
        bandwidth=1.0,
        bandwidths={names[a]: {names[b]: pcap[a, b] for b in range(W) if b != a} for a in range(W)},
    )
    net = maxmin.MaxMinNetwork(cluster, None, lambda *a: None, lambda *a: None)
    net.repair = 1
    hows, live = [], []
    counts = (_flowstate.NAFRESH, _flowstate.NREPAIRED, _flowstate.NGIVENUP)

    def step(add=(), drop=()):
        for a, b in add:
            live.append(Flow(len(hows) * 100 + len(live), 0, a, b, 1e9, 0.0, 0.0))
            net.start(live[-1], 0.0)
        for f in [live[k] for k in drop]:
            live.remove(f)
            net.abort(f, 0.0)
        before = [int(net.C[k]) for k in counts]
        net.next_time()
        hows.append(tuple(int(net.C[k]) - b for k, b in zip(counts, before)))  # (afresh, repaired, given up)
        want = reference_rates([(f.src, f.dst) for f in live], pcap.max(axis=1), pcap.max(axis=0), pcap)
        assert [net.rate(f) for f in live] == pytest.approx(want, rel=1e-9)

    step(add=[(0, 1), (0, 2), (3, 1)])  # 3 pairs <= 5: kept from the first solve
    step(add=[(2, 4)])
    step(add=[(a, b) for a in range(W) for b in range(W) if a != b and (a + b) % 2])  # dense: none kept
    assert not net.tracked
    step(drop=range(4, len(live)))  # thin again: made afresh, then repaired
    step(add=[(4, 0)], drop=[0])
    step(drop=[1])
    # made afresh at the first solve and after the dense one; repaired in between and after; none given up
    made, fixed = (1, 0, 0), (0, 1, 0)
    assert hows == [made, fixed, (0, 0, 0), made, fixed, fixed], hows


@pytest.mark.parametrize("shape", ["genome", "layered"])
def test_a_simulation_that_repairs_its_rates_solves_each_as_a_whole_solve_would(shape, monkeypatch):
    """Every rate solve of whole simulations (fan-ins, and a random layered graph, on 64 workers,
    work stealing) repairing what each change moves, checked right after against a whole solve of
    the same flows; and the repaired runs end as the whole-solve runs do, to rounding."""
    monkeypatch.setattr(maxmin, "REPAIR", 8)
    g = (
        genome_like(16, 60, 3, seed=2)
        if shape == "genome"
        else random_layered(600, shape=1.0, out_degree=2, ccr=1.0, seed=3, bandwidth=1e8)
    )
    cluster = Cluster.heterogeneous([1.0 + (i % 4) for i in range(64)], bandwidth=1e8, latency=1e-4)
    refresh, whole = _flows.refresh, fill_classes
    seen = {"solves": 0, "repaired": 0, "worst": 0.0}

    def checked(*args):
        out = refresh(*args)
        (
            qs,
            P,
            psrc,
            pdst,
            pcls,
            pn,
            pcap,
            up,
            down,
            prate,
            _,
            recompute,
            classes,
            capped,
            bp,
            rack,
            rup,
            rdown,
            loc,
            pb,
        ) = args[5:25]
        if recompute and P:
            mine = prate.copy()
            whole(
                qs, P, psrc, pdst, pcls, pn, pcap, up, down, mine, classes, capped, bp, rack, rup, rdown, loc, pb.copy()
            )
            live = qs[:P]
            seen["solves"] += 1
            seen["repaired"] += out[1] == 1
            seen["worst"] = max(seen["worst"], float(np.max(np.abs(mine[live] - prate[live]) / mine[live])))
        return out

    monkeypatch.setattr(_flows, "refresh", checked)  # (seen by the kernels run as plain Python)
    with interpreted():
        repaired = simulate(g, cluster, "work-stealing", network="maxmin")
    assert seen["repaired"] > 20 and seen["worst"] < 1e-9, seen
    monkeypatch.setattr(_flows, "refresh", refresh)
    monkeypatch.setattr(maxmin, "REPAIR", 0)
    whole_solves = simulate(g, cluster, "work-stealing", network="maxmin")
    assert whole_solves.makespan == pytest.approx(repaired.makespan, rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_max_min_rates_with_many_ties_match_progressive_filling(data):
    """Alike links and many flows: ports saturate at equal shares, and freezing one pair moves
    both of its ports at once (the solver's heap must stay ordered through both)."""
    W = data.draw(st.integers(3, 9))
    pairs = [(a, b) for a in range(W) for b in range(W) if a != b]
    flows = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=40))
    pcap = np.full((W, W), 2.0)
    np.fill_diagonal(pcap, 0.0)
    got = solve(flows, W, pcap.max(axis=1), pcap.max(axis=0), pcap)
    want = reference_rates(flows, pcap.max(axis=1), pcap.max(axis=0), pcap)
    assert got == pytest.approx(want, rel=1e-9)


def test_max_min_solver_ignores_idle_workers():
    """The same two flows among 1,000 mostly idle workers get the same rates as among 3 (the
    solver walks the active pairs, not every pair of workers)."""
    flows = [(0, 1), (0, 2), (2, 1)]
    rates = []
    for W in (3, 1000):
        pcap = np.full((W, W), 10.0)
        np.fill_diagonal(pcap, 0.0)
        rates.append(solve(flows, W, pcap.max(axis=1), pcap.max(axis=0), pcap))
    assert rates[0] == pytest.approx([5.0, 5.0, 5.0]) and rates[1] == pytest.approx(rates[0])


def graph_with_exact_costs(seed=3):
    g = random_layered(60, seed=seed)
    h = TaskGraph("exact")
    for i, t in enumerate(g.ids):
        h.add_task(
            t,
            cost=float(g.arrays.cost[i]),
            output_size=float(g.arrays.output_size[i]),
            costs={"w1": 3.5} if i % 7 == 0 else None,
            cores=2 if i % 11 == 0 else 1,
        )
    for a, b, size in g.edges():
        h.add_edge(a, b, size=size)
    return h


DENSE = costs.DENSE_LIMIT


@pytest.fixture
def dense_limit(monkeypatch):
    def lower(n):
        monkeypatch.setattr(costs, "DENSE_LIMIT", n)

    return lower


def test_lazy_durations_equal_the_dense_matrix(dense_limit):
    g = graph_with_exact_costs()
    c = Cluster([Worker(f"w{i}", 1.0 + i % 3, 1 + i % 2) for i in range(5)], task_overhead=0.25)
    dense = CostModel(g, c)
    dense_limit(10)
    lazy = CostModel(g, c)
    assert dense.dense and not lazy.dense and isinstance(lazy.durations, Durations)
    D, L = dense.durations, lazy.durations
    assert np.isinf(D).any()  # some tasks need 2 cores
    n, W = D.shape
    assert L.shape == (n, W)
    for i in range(n):
        np.testing.assert_array_equal(L[i], D[i])
        assert all(L[i, w] == D[i, w] for w in range(W))
    rows, cols = np.arange(n), np.arange(n) % W
    np.testing.assert_array_equal(L[rows, cols], D[rows, cols])
    np.testing.assert_array_equal(L[5:17], D[5:17])
    for name in ("min", "max", "sum"):
        np.testing.assert_array_equal(getattr(L, name)(axis=1), getattr(D, name)(axis=1))
        np.testing.assert_allclose(getattr(L, name)(axis=0), getattr(D, name)(axis=0), rtol=1e-12)
    plain = random_layered(300, seed=2)  # no exact costs, one core: the per-worker sum from the column sums
    faster = Cluster.heterogeneous([1.0, 2.5, 0.5], bandwidth=1e6)
    np.testing.assert_allclose(
        CostModel(plain, faster).durations.sum(axis=0),
        np.asarray(CostModel(plain, faster).densified().durations).sum(axis=0),
        rtol=1e-12,
    )
    np.testing.assert_array_equal(lazy.mean_duration(), dense.mean_duration())
    np.testing.assert_array_equal(lazy.work(), dense.work())
    np.testing.assert_array_equal(lazy.feasible(), dense.feasible())
    assert all((lazy.feasible_row(i) == dense.feasible_row(i)).all() for i in range(n))


@pytest.mark.parametrize(
    "speeds, cores, overhead",
    [
        ([1.0] * 7, [2] * 7, 0.0),  # alike workers: one column decides
        ([1.0, 3.0, 0.5, 3.0, 1.0, 0.25, 2.0], [2] * 7, 0.1),  # the fastest and slowest decide
        ([1.0, 3.0, 0.5, 3.0, 1.0, 0.25, 2.0], [1, 2, 2, 1, 4, 2, 1], 0.0),  # and of each core count
        ([1e-200, 1.0, 1e300, 2.0, 1e-200], [1, 1, 2, 2, 2], 0.0),  # durations near the float's ends
    ],
)
def test_lazy_smallest_and_largest_durations_over_one_worker_of_each_kind_equal_the_dense_ones(
    dense_limit, speeds, cores, overhead
):
    """Without exact costs a task's duration depends only on the worker's speed and cores, and falls
    as the speed rises: a smallest or largest over all workers is one over a few."""
    rng = np.random.default_rng(len(speeds))
    g = TaskGraph("kinds")
    for i in range(40):
        g.add_task(f"t{i}", cost=float(rng.choice([0.0, 1e-3, 1.0, 7.5, 1e6])), cores=int(rng.choice([1, 1, 2])))
    c = Cluster([Worker(f"w{i}", s, k) for i, (s, k) in enumerate(zip(speeds, cores))], task_overhead=overhead)
    dense = CostModel(g, c)
    dense_limit(10)
    lazy = CostModel(g, c)
    few, cols = lazy.durations.distinct(extremes=True)
    assert len(cols) < len(speeds)
    for name in ("min", "max"):
        np.testing.assert_array_equal(getattr(lazy.durations, name)(axis=1), getattr(dense.durations, name)(axis=1))
    np.testing.assert_array_equal(lazy.min_duration(), dense.min_duration())
    np.testing.assert_array_equal(lazy.work(), dense.work())


def test_lazy_durations_simulate_alike(dense_limit):
    g = graph_with_exact_costs(5)
    c = Cluster([Worker(f"w{i}", 1.0 + i % 3, 2) for i in range(6)], bandwidth=50.0)
    for network in ("simple", "maxmin"):
        for opts in ({}, {"knows_speeds": False}):
            want = simulate(g, c, "work-stealing", network=network, scheduler_options=opts, validate=True)
            dense_limit(10)
            got = simulate(g, c, "work-stealing", network=network, scheduler_options=opts, validate=True)
            dense_limit(DENSE)
            assert got.makespan == want.makespan
            assert [(r.task, r.worker, r.start) for r in got.runs] == [(r.task, r.worker, r.start) for r in want.runs]


def test_a_static_scheduler_plans_from_the_whole_matrix_when_it_fits(dense_limit, monkeypatch):
    g = graph_with_exact_costs(7)
    c = Cluster([Worker(f"w{i}", 1.0 + i % 3, 2) for i in range(4)], bandwidth=50.0)
    want = schedulers.get_scheduler("cpop").schedule(g, c)
    dense_limit(10)
    assert not CostModel(g, c).dense
    got = schedulers.get_scheduler("cpop").schedule(g, c).validate(g, c)
    assert list(got.workers) == list(want.workers) and got.makespan == want.makespan
    monkeypatch.setattr(costs, "available_memory", lambda: 1000.0)
    with pytest.raises(
        GraphError,
        match=r"60 tasks x 4 workers: a static scheduler plans from the whole duration "
        r"matrix, .* GiB, more than half the memory available",
    ):
        simulate(g, c, "cpop")
    assert simulate(g, c, "heft").makespan > 0  # HEFT reads a row at a time: no whole matrix
    with pytest.raises(GraphError, match=r"60 tasks x 4 workers: the whole duration matrix would take"):
        np.asarray(CostModel(g, c).durations)
    assert simulate(g, c, "work-stealing").makespan > 0  # a dynamic scheduler needs no whole matrix


@pytest.mark.parametrize("name", ["heft", "mct", "blevel", "adaptive"])
def test_a_scheduler_reading_a_row_at_a_time_plans_alike_without_the_whole_matrix(name, dense_limit, monkeypatch):
    """HEFT, MCT, b-level (and adaptive's plan) read the durations a task's row at a time: above the
    dense limit they plan without a tasks x workers array, exactly as from one (exact per-worker
    costs, a task overhead, tasks of two cores on workers of one or two included), and whatever
    the memory available."""
    g = graph_with_exact_costs(11)
    c = Cluster([Worker(f"w{i}", 1.0 + i % 3, 1 + i % 2) for i in range(5)], bandwidth=50.0, task_overhead=0.25)
    assert schedulers.get_scheduler(name).plans_lazily
    want = schedulers.get_scheduler(name).schedule(g, c)
    dense_limit(10)
    monkeypatch.setattr(costs, "available_memory", lambda: 1000.0)  # no room for the whole matrix
    model = CostModel(g, c)
    assert not model.dense and model.durations.exact
    got = schedulers.get_scheduler(name).schedule(g, c, cost_model=model).validate(g, c)
    assert list(got.workers) == list(want.workers)
    np.testing.assert_array_equal(got.start, want.start)
    np.testing.assert_array_equal(got.finish, want.finish)


def test_lazy_durations_name_an_overflowing_task(dense_limit):
    dense_limit(10)
    g = TaskGraph("big")
    g.add_task("ok", cost=1.0)
    g.add_task("huge", cost=1e308)
    c = Cluster([Worker("w0", 1.0), Worker("slow", 1e-3)])
    with pytest.raises(GraphError, match="task 'huge' on worker 'slow': its duration overflows"):
        CostModel(g, c)


def test_genome_like_shape():
    g = genome_like(3, individuals=4, populations=2, seed=1).validate()
    per = 4 + 2 + 2 * 2
    assert len(g) == 3 * per
    assert g.num_edges == 3 * (4 + 2 * 2 * 2)
    merges = [t for t in g.ids if t.startswith("merge")]
    assert len(merges) == 3 and all(len(g.predecessors(m)) == 4 for m in merges)
    tails = [t for t in g.ids if t.startswith(("frequency", "mutation_overlap"))]
    assert len(tails) == 3 * 4 and all(len(g.predecessors(t)) == 2 for t in tails)
    assert sorted(g.sinks()) == sorted(tails)
    again = genome_like(3, individuals=4, populations=2, seed=1)
    np.testing.assert_array_equal(g.arrays.cost, again.arrays.cost)
    assert not np.array_equal(g.arrays.cost, genome_like(3, individuals=4, populations=2, seed=2).arrays.cost)
    with pytest.raises(WorkflowError, match="individuals must be an integer >= 1, got 0"):
        genome_like(2, individuals=0)


def test_transfer_estimates_are_the_sum_over_inputs_not_held_for_every_worker_and_for_one():
    """A scheduler's transfer estimate for every worker (one compiled pass per input) and for one
    worker (what a steal asks) both equal the plain sum, input by input, of latency + bytes /
    bandwidth from each input's source to the worker, skipping inputs a copy of which is there."""
    from taskflow.scheduling import DynamicScheduler

    seen = []

    class Checker(DynamicScheduler):
        name = "estimate-checker"

        def on_ready(self, tasks, view):
            s = view._s
            for i in tasks:
                every = view.transfer_estimates(i)
                want = np.zeros(len(every))
                for w in range(len(every)):
                    for e in range(s.pred_ptr[i], s.pred_ptr[i + 1]):
                        p = s.pred_idx[e]
                        if s.status[p] == DONE and s.holds(p, w) < 0:
                            src = s.source_of(p, s.pred_size[e])
                            want[w] += view._lat[src, w] + s.pred_size[e] * view._inv[src, w]
                np.testing.assert_array_equal(every, want)
                assert [view.transfer_estimate(i, w) for w in range(len(every))] == want.tolist()
                seen.append(int(np.count_nonzero(want)))
            return [(i, i % 2) for i in tasks]  # outputs on w0 and w1: w2 and w3 always fetch

    g = genome_like(2, individuals=6, populations=2, seed=4)
    bw = {"w0": {"w1": 5e7, "w2": 2e7}, "w3": {"w0": 1e7}}
    c = Cluster([Worker(f"w{i}", 1.0 + i) for i in range(4)], bandwidth=1e8, bandwidths=bw, latency=1e-3)
    from taskflow.jit import compiled

    for h in (g, random_layered(40, seed=2)):
        simulate(h, c, Checker(), network="maxmin", validate=True)
        with compiled():
            simulate(h, c, Checker(), network="maxmin", validate=True)
    assert len(seen) == 2 * (len(g) + 40)
    assert set(seen) >= {3, 4}, set(seen)  # every input held on one worker, or inputs on both


def test_a_run_collects_garbage_less_often_and_gives_the_thresholds_back():
    import gc

    from taskflow.scheduling import DynamicScheduler

    during, breaks = [], []

    class Looker(DynamicScheduler):
        name = "gc-looker"

        def on_ready(self, tasks, view):
            during.append(gc.get_threshold())
            if breaks and view.now > 0:
                raise ValueError("a scheduler that breaks mid-run")
            return [(i, 0) for i in tasks]

    before = gc.get_threshold()
    try:
        gc.set_threshold(900, 11, 12)
        simulate(random_layered(30, seed=1), Cluster.homogeneous(2), Looker())
        breaks.append(True)
        with pytest.raises(Exception, match="a scheduler that breaks mid-run"):
            simulate(random_layered(30, seed=1), Cluster.homogeneous(2), Looker())
        breaks.clear()
        assert gc.get_threshold() == (900, 11, 12)  # given back, also after a run that failed
        k = len(during)
        gc.set_threshold(0, 11, 12)  # collection switched off: left so
        simulate(random_layered(30, seed=1), Cluster.homogeneous(2), Looker())
        assert gc.get_threshold() == (0, 11, 12)
    finally:
        gc.set_threshold(*before)
    assert set(during[:k]) == {(100_000, 50, 50)} and set(during[k:]) == {(0, 11, 12)}


def test_heft_append_never_fills_a_gap_and_adaptive_appends_above_its_limit(monkeypatch):
    """``heft-append`` takes HEFT's order and puts each task after its worker's last: on every worker
    the tasks start in the order they were placed (decreasing upward rank), each at or after the
    end of the one before; ``adaptive`` plans so above ``APPEND_PAIRS`` tasks x workers, HEFT below."""
    import schedulers.adaptive as adaptive
    from schedulers.ranks import upward_rank

    g = random_layered(600, seed=4, ccr=2.0)
    c = Cluster.heterogeneous([1.0, 2.0, 3.0, 0.5], bandwidth=1e6)
    plan = schedulers.get_scheduler("heft-append").schedule(g, c).validate(g, c)
    rank = upward_rank(CostModel(g, c))
    index = {t: i for i, t in enumerate(g.ids)}
    for w in c.ids:
        mine = sorted(
            (-rank[index[t]], index[t], s, f)
            for t, ww, s, f in zip(plan.tasks, plan.workers, plan.start, plan.finish)
            if ww == w
        )
        assert all(b[2] >= a[3] - 1e-9 for a, b in zip(mine, mine[1:]))
    heft = schedulers.get_scheduler("heft").schedule(g, c)
    assert heft.makespan <= plan.makespan  # the gap search never hurts here, and helps
    assert schedulers.get_scheduler("adaptive").schedule(g, c).makespan == heft.makespan
    monkeypatch.setattr(adaptive, "APPEND_PAIRS", 100)
    assert list(schedulers.get_scheduler("adaptive").schedule(g, c).workers) == list(plan.workers)
