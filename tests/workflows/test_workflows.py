import math

import numpy as np
import pytest

from workflows import scientific as sc


@pytest.mark.parametrize("width,stages", [(1, 1), (3, 2), (8, 5)])
def test_fork_join_counts(width, stages):
    g = sc.fork_join(width, stages).validate()
    assert len(g) == stages * (width + 2)
    assert g.num_edges == 2 * stages * width + stages - 1


@pytest.mark.parametrize("depth,k", [(0, 2), (1, 3), (4, 2), (3, 1)])
def test_trees(depth, k):
    n = depth + 1 if k == 1 else (k ** (depth + 1) - 1) // (k - 1)
    out, inn = sc.out_tree(depth, k).validate(), sc.in_tree(depth, k).validate()
    assert len(out) == len(inn) == n and out.num_edges == inn.num_edges == n - 1
    assert len(out.sources()) == 1 and len(inn.sinks()) == 1
    assert len(out.sinks()) == k**depth


@pytest.mark.parametrize("m", [2, 4, 16, 64])
def test_fft_counts(m):
    g = sc.fft(m).validate()
    log = int(math.log2(m))
    assert len(g) == 2 * m - 1 + m * log
    assert g.num_edges == 2 * m - 2 + 2 * m * log
    assert len(g.sinks()) == m


@pytest.mark.parametrize("m", [2, 3, 5, 10])
def test_gaussian_elimination_counts(m):
    g = sc.gaussian_elimination(m).validate()
    assert len(g) == (m * m + m - 2) // 2
    assert g.num_edges == m * (m - 1) // 2 + (m - 2) + (m - 2) * (m - 1) // 2


def test_bad_parameters():
    with pytest.raises(ValueError, match="power of two"):
        sc.fft(6)
    with pytest.raises(ValueError, match="m must be >= 2"):
        sc.gaussian_elimination(1)


def test_random_layered_is_deterministic_and_follows_its_parameters():
    a = sc.random_layered(300, shape=1.0, out_degree=3, ccr=2.0, beta=0.5, workers=["p0", "p1"], seed=9)
    b = sc.random_layered(300, shape=1.0, out_degree=3, ccr=2.0, beta=0.5, workers=["p0", "p1"], seed=9)
    c = sc.random_layered(300, shape=1.0, out_degree=3, ccr=2.0, beta=0.5, workers=["p0", "p1"], seed=10)
    assert list(a.edges()) == list(b.edges()) and [t.costs for t in a.tasks()] == [t.costs for t in b.tasks()]
    assert list(a.edges()) != list(c.edges())
    a.validate()
    # every task but the sources has a parent; CCR is the mean edge time over the mean cost
    ar = a.arrays
    mean_cost = ar.cost.mean()
    assert 1.0 < ar.size.mean() / mean_cost < 3.0
    for t in a.tasks():  # heterogeneity 0.5: each exact cost within +-25% of the task's mean cost
        assert all(0.75 * t.cost - 1e-9 <= v <= 1.25 * t.cost + 1e-9 for v in t.costs.values())


# ---------------------------------------------------------------- training
from workflows import training as tr  # noqa: E402


def per_iteration(N, L, B, S, kind, compression=False):
    return N * (S + 2 * L + 1 + B + L) + tr.allreduce_tasks(kind, N, B) + (2 * N * B if compression else 0)


@pytest.mark.parametrize("kind", ["ring", "tree", "ps"])
@pytest.mark.parametrize("model,N,B,T", [("resnet50", 4, 2, 1), ("vgg16", 3, 4, 2), ("bert-base", 8, 3, 1)])
def test_data_parallel_counts_match_the_documented_formula(kind, model, N, B, T):
    L = len(tr.model_profile(model))
    g = tr.data_parallel(model, workers=N, iterations=T, allreduce=kind, buckets=B).validate()
    assert len(g) == N * L + T * per_iteration(N, L, B, 4, kind)
    cats = {}
    for t in g.tasks():
        cats[t.meta["category"]] = cats.get(t.meta["category"], 0) + 1
    if kind == "ring":
        assert cats["ring-reduce-scatter"] + cats["ring-all-gather"] == 2 * (N - 1) * N * B * T
    gc = tr.data_parallel(model, workers=N, iterations=T, allreduce=kind, buckets=B, compression="fp16")
    assert len(gc) == N * L + T * per_iteration(N, L, B, 4, kind, compression=True)


def test_next_forward_waits_only_for_its_layers_update():
    g = tr.data_parallel("resnet50", workers=2, iterations=2, buckets=3)
    preds = set(g.predecessors("it1.w0.fwd.l2"))
    assert preds == {"it1.w0.fwd.l1", "it0.w0.update.l2"}


def test_layer_order_priority_ranks_the_first_layers_transfers_first():
    none = tr.data_parallel("vgg16", workers=4, iterations=1, buckets=4)
    ordered = tr.data_parallel("vgg16", workers=4, iterations=1, buckets=4, priority="layer-order")
    assert list(ordered.edges()) == list(none.edges()) and ordered.ids == none.ids
    assert all("priority" not in t.meta for t in none.tasks())
    groups = {}  # bucket -> its layers, from the update tasks
    prio = {}
    for t in ordered.tasks():
        if t.meta["category"] == "update":
            groups.setdefault(t.meta["priority"], set()).add(t.meta["layer"])
        if t.meta["category"] == "ring-all-gather":
            prio.setdefault(t.meta["bucket"], set()).add(t.meta["priority"])
        if t.meta["category"] == "ring-reduce-scatter":
            assert "priority" not in t.meta  # the reduce phase keeps backprop's order
    assert all(len(v) == 1 for v in prio.values()) and len(prio) == 4  # one priority per bucket
    by_priority = [min(groups[p]) for p in sorted(groups, reverse=True)]
    assert by_priority == sorted(by_priority) and by_priority[0] == 0  # first layers highest


@pytest.mark.parametrize(
    "mode,kw",
    [
        ("sync", {}),
        ("local", {"sync_every": 3}),
        ("local", {"sync_every": 1}),
        ("stale", {"staleness": 0}),
        ("stale", {"staleness": 2}),
    ],
)
@pytest.mark.parametrize("kind", ["ring", "tree", "ps"])
def test_repeated_iterations_are_built_exactly_as_one_by_one(mode, kw, kind):
    spec = dict(
        model="vgg16",
        workers=3,
        iterations=8,
        allreduce=kind,
        buckets=3,
        priority="layer-order",
        compression="topk",
        topk_ratio=0.05,
        batch=96,
        device="v100",
        stages=("read", "decode"),
        load_cost=1e-3,
        name="x",
    )
    fast = tr.training_graph(tr.TrainingSpec(**spec, mode=mode, barrier=True, **kw))
    slow = tr.training_graph(tr.TrainingSpec(**spec, mode=mode, barrier=True, tile=False, **kw))
    assert fast.ids == slow.ids and list(fast.edges()) == list(slow.edges())
    assert [t.meta for t in fast.tasks()] == [t.meta for t in slow.tasks()]
    assert [t.cost for t in fast.tasks()] == [t.cost for t in slow.tasks()]


def test_barrier_holds_every_spread_phase_until_every_bucket_is_reduced():
    g = tr.data_parallel("resnet50", workers=3, iterations=1, allreduce="ps", buckets=3, barrier=True)
    plain = tr.data_parallel("resnet50", workers=3, iterations=1, allreduce="ps", buckets=3)
    assert len(g) == len(plain) + 1
    assert sorted(g.predecessors("it0.barrier")) == [f"it0.b{j}.ps-sum" for j in range(3)]
    assert set(g.successors("it0.barrier")) == {f"it0.b{j}.pull.w{w}" for j in range(3) for w in range(3)}


def test_local_sgd_counts_and_syncs():
    N, T, H, L, B, S = 3, 7, 3, 6, 2, 4
    g = tr.local_sgd("resnet50", workers=N, iterations=T, sync_every=H, allreduce="tree", buckets=B).validate()
    syncs = T // H
    assert len(g) == N * L + T * N * (S + 2 * L + 1 + L) + syncs * (N * B + tr.allreduce_tasks("tree", N, B) + N * L)
    cats = {}
    for t in g.tasks():
        cats.setdefault(t.meta["category"], set()).add(t.meta.get("iteration"))
    assert cats["average"] == {H - 1, 2 * H - 1}  # iterations 2 and 5 synchronise
    # after a sync the next forward reads the averaged model; otherwise the local one
    assert "it2.w0.average.l1" in g.predecessors("it3.w0.fwd.l1")
    assert "it3.w0.local.l1" in g.predecessors("it4.w0.fwd.l1")


def test_stale_synchronous_waits_for_the_update_s_iterations_back():
    assert (
        tr.stale_synchronous("resnet50", workers=2, iterations=3, staleness=0).ids
        == tr.data_parallel("resnet50", workers=2, iterations=3).ids
    )
    same = tr.stale_synchronous("resnet50", workers=2, iterations=3, staleness=0)
    assert list(same.edges()) == list(tr.data_parallel("resnet50", workers=2, iterations=3).edges())
    g = tr.stale_synchronous("resnet50", workers=2, iterations=5, staleness=2)
    assert set(g.predecessors("it4.w1.fwd.l3")) == {"it4.w1.fwd.l2", "it1.w1.update.l3", "it3.w1.bwd.l3"}
    assert "init.w1.l3" in g.predecessors("it2.w1.fwd.l3")
    with pytest.raises(ValueError, match="simulation only"):
        tr.TrainingSpec(
            model="resnet50",
            workers=2,
            iterations=2,
            stages=("read",),
            load_cost=1e-3,
            executable=True,
            dataset_dir="/nonexistent",
            hidden=(8,),
            lr=0.1,
            mode="stale",
            staleness=1,
        )


def test_staleness_overlaps_communication_with_the_next_compute():
    from taskflow import Cluster, simulate

    c = Cluster.homogeneous(4, bandwidth=1e9)  # ring transfer time about equal to compute time
    spans = [
        simulate(
            tr.stale_synchronous("resnet50", workers=4, iterations=6, staleness=s, allreduce="ring"),
            c,
            "placed",
            network="simple",
        ).makespan
        for s in (0, 1, 2)
    ]
    assert spans[1] < spans[0] * 0.8 and spans[2] <= spans[1]


def _uniform(L):
    return [{"name": f"l{i}", "macs": 1e6, "params": 10.0} for i in range(L)]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("S,M,T", [(4, 8, 1), (3, 5, 2), (2, 1, 1)])
def test_pipeline_counts_match_the_documented_formula(schedule, S, M, T):
    g = tr.pipeline_parallel(_uniform(6), stages=S, microbatches=M, schedule=schedule, iterations=T).validate()
    assert len(g) == S + T * (M + 2 * S * M + S)
    coincide = S if M == 1 else (M if schedule == "1f1b" else 0)
    per_iteration = M + 2 * (S - 1) * M + S * M + 2 * S * M + S + S * M + S * (2 * M - 1) - coincide
    assert g.num_edges == T * per_iteration


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_bubble_and_activation_memory(schedule):
    """Equal stages, free transfers: makespan (M + S - 1)(F + B) plus init and update, for both
    schedules; a stage holds at most M (GPipe) or S - s (1F1B) microbatches' activations."""
    from taskflow import Cluster, simulate

    S, M = 4, 8
    g = tr.pipeline_parallel(
        _uniform(4), stages=S, microbatches=M, schedule=schedule, batch=M, device=2e6, load_cost=0.0
    )
    trace = simulate(g, Cluster.homogeneous(S, bandwidth=1e15), "placed", network="simple")
    F = g.task("it0.s0.F0").cost
    assert F == pytest.approx(1.0)
    expect = g.task("init.s0").cost + (M + S - 1) * 3 * F + g.task("it0.s0.update").cost
    assert trace.makespan == pytest.approx(expect, rel=1e-6)
    plan = trace.to_schedule()
    for s in range(S):
        fwd = [plan.assignment(f"it0.s{s}.F{m}") for m in range(M)]
        bwd = [plan.assignment(f"it0.s{s}.B{m}") for m in range(M)]
        assert {a.worker for a in fwd + bwd} == {f"w{s}"}
        peak = max(sum(f.finish <= x < b.finish for f, b in zip(fwd, bwd)) for x in (a.finish for a in fwd))
        assert peak == (M if schedule == "gpipe" else S - s)


def test_pipeline_order_and_bad_input():
    assert tr.pipeline_order("gpipe", 1, 2, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    assert tr.pipeline_order("1f1b", 2, 3, 2) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]
    with pytest.raises(ValueError, match="schedule must be"):
        tr.pipeline_parallel(schedule="zigzag")
    with pytest.raises(ValueError, match="stages must be between 1 and the model's 14 layers"):
        tr.pipeline_parallel("gpt2-small", stages=15)


def test_executable_local_sgd_equals_its_reference_and_sync_every_1_equals_sgd(tmp_path):
    from taskflow import execute

    T, N, batch, lr, seed = 12, 3, 48, 0.5, 2  # 16 samples a rank
    for H in (1, 4, 5):
        g = tr.local_sgd(
            workers=N,
            iterations=T,
            sync_every=H,
            allreduce="ring",
            buckets=2,
            executable=True,
            dataset_dir=tmp_path,
            hidden=(16,),
            lr=lr,
            batch=batch,
            seed=seed,
        )
        res = execute(g)
        paths = [tmp_path / f"shard{w}.npz" for w in range(N)]
        ranks, losses = tr.local_sgd_reference(paths, T, batch, [64, 16, 10], lr, seed, H)
        last = {}
        for w in range(N):
            for k in range(2):
                t = max(t for t in range(T) if f"it{t}.w{w}.average.l{k}" in g or f"it{t}.w{w}.local.l{k}" in g)
                key = f"it{T - 1}.w{w}.average.l{k}" if T % H == 0 else f"it{T - 1}.w{w}.local.l{k}"
                last[w, k] = res[key]
                assert t == T - 1
                assert np.allclose(res[key][0], ranks[w][k][0], atol=1e-9, rtol=0)
        loss = [np.mean([res[f"it{t}.w{w}.loss"][0] for w in range(N)]) for t in range(T)]
        assert loss == pytest.approx(losses, abs=1e-9)
        if H == 1:
            ref, _ = tr.sgd_reference(paths, T, batch, [64, 16, 10], lr, seed)
            # local SGD with every-step averaging takes the same steps as synchronous SGD
            dp = execute(
                tr.data_parallel(
                    workers=N,
                    iterations=T,
                    allreduce="tree",
                    executable=True,
                    dataset_dir=tmp_path,
                    hidden=(16,),
                    lr=lr,
                    batch=batch,
                    seed=seed,
                )
            )
            assert np.allclose(last[0, 0][0], dp[f"it{T - 1}.w0.update.l0"][0], atol=1e-9, rtol=0)
        if H == 5:
            assert not np.allclose(last[0, 0][0], last[1, 0][0])  # 2 local steps since the last average


def test_costs_come_from_the_model_profile():
    g = tr.data_parallel("resnet50", workers=1, iterations=1, batch=32, device="v100", allreduce="tree")
    layer3 = next(x for x in tr.model_profile("resnet50") if x["name"] == "layer3")
    assert g.task("it0.w0.fwd.l3").cost == pytest.approx(2 * layer3["macs"] * 32 / 15.7e12)
    assert g.task("it0.w0.bwd.l3").cost == pytest.approx(2 * g.task("it0.w0.fwd.l3").cost)
    assert g.task("it0.w0.bucket0").output_size == pytest.approx(
        4 * sum(x["params"] for x in tr.model_profile("resnet50")[3:])
    )


def test_generators_are_deterministic():
    a = tr.data_parallel("gpt2-small", workers=3, iterations=2)
    b = tr.data_parallel("gpt2-small", workers=3, iterations=2)
    assert list(a.edges()) == list(b.edges()) and [t.cost for t in a.tasks()] == [t.cost for t in b.tasks()]


def test_bad_training_parameters():
    with pytest.raises(ValueError, match="allreduce must be"):
        tr.data_parallel(allreduce="butterfly")
    with pytest.raises(ValueError, match="unknown model 'alexnet'"):
        tr.data_parallel("alexnet")


# ---------------------------------------------------------------- data loading
from workflows import dataloading as dl  # noqa: E402


def _pipeline_edges(S, N, E, K, C, d):
    steps = [len([s for s in range(S) if s % N == w]) * E for w in range(N)]
    loads = []  # per rank, per step: does it load something?
    for w in range(N):
        own = len([s for s in range(S) if s % N == w])
        loads.append([e == 0 or C < K for e in range(E) for _ in range(own)])
    P = 0 if d is None else sum(1 for w in range(N) for k in range(steps[w]) if k >= d + 1 and loads[w][k])
    owners = sum(1 for x in steps if x)
    return S * K + S * (E - 1) * (K - C + (C > 0)) + (S * E - owners) + P


@pytest.mark.parametrize(
    "S,N,E,cache,d",
    [(8, 2, 1, None, 1), (7, 3, 3, "decode", 0), (5, 2, 2, "collate", 2), (4, 5, 2, None, None), (6, 2, 3, "read", 1)],
)
def test_input_pipeline_counts(S, N, E, cache, d):
    stages = ("read", "decode", "augment", "collate")
    K = len(stages)
    C = stages.index(cache) + 1 if cache else 0
    g = dl.input_pipeline(S, N, stages=stages, prefetch=d, cache=cache, epochs=E).validate()
    assert len(g) == S * (E * K - (E - 1) * C) + S * E
    assert g.num_edges == _pipeline_edges(S, N, E, K, C, d)


def test_prefetch_bounds_the_batches_loaded_ahead():
    from taskflow import Cluster, simulate

    g = dl.input_pipeline(8, 1, prefetch=1, step_cost=1.0, shard_bytes=1e6)
    assert g.predecessors("e0.s2.read") == ["e0.s0.train"]  # step 2 loads once step 0 is consumed
    trace = simulate(g, Cluster.homogeneous(4), "heft", network="simple").to_schedule()
    for k in range(2, 8):
        assert trace.assignment(f"e0.s{k}.read").start >= trace.assignment(f"e0.s{k - 2}.train").finish - 1e-9
    unbounded = dl.input_pipeline(8, 1, prefetch=None, step_cost=1.0, shard_bytes=1e6)
    assert unbounded.predecessors("e0.s2.read") == []


def test_cache_skips_the_cached_stages_in_later_epochs():
    g = dl.input_pipeline(4, 2, cache="decode", epochs=2)
    assert "e1.s1.read" not in g and "e1.s1.decode" not in g
    assert g.predecessors("e1.s1.augment")[0] == "e0.s1.decode"
    assert g.edge_size("e0.s1.decode", "e1.s1.augment") == g.task("e0.s1.decode").output_size


def test_locality_makes_reads_cheap_where_the_shard_is_held():
    from taskflow import Cluster

    import schedulers

    c = Cluster.homogeneous(3, bandwidth=10e9)
    held = {s: c.ids[(s * 2) % 3] for s in range(9)}
    g = dl.input_pipeline(
        9, 3, locality=held, worker_ids=c.ids, shard_bytes=200e6, remote_bandwidth=50e6, prefetch=None
    )
    t = g.task("e0.s4.read")
    assert t.costs[held[4]] == pytest.approx(200e6 / 500e6)
    assert t.costs[c.ids[0]] == pytest.approx(200e6 / 500e6 + 200e6 / 50e6) != t.costs[held[4]]
    plan = schedulers.get_scheduler("heft").schedule(g, c)
    assert all(plan.assignment(f"e0.s{s}.read").worker == held[s] for s in range(9))
    with pytest.raises(ValueError, match="locality needs worker_ids"):
        dl.input_pipeline(4, 2, locality={0: "w0"})
    with pytest.raises(ValueError, match="locality names shard 9"):
        dl.input_pipeline(4, 2, locality={9: "w0"}, worker_ids=["w0"])
    with pytest.raises(ValueError, match="cache must name a stage"):
        dl.input_pipeline(4, 2, cache="shuffle")


# ---------------------------------------------------------------- several jobs
from workflows import multijob as mj  # noqa: E402


def test_multijob_tags_jobs_and_reports_their_completion_times():
    from taskflow import Cluster, simulate

    a = tr.data_parallel("resnet50", workers=2, iterations=2, allreduce="ring")
    b = sc.fork_join(4, 2, cost=0.01)
    g = mj.multijob([a, b], names=["train", "etl"]).validate()
    assert len(g) == len(a) + len(b) and g.num_edges == a.num_edges + b.num_edges
    assert g.task("train/it1.w0.loss").meta == {**a.task("it1.w0.loss").meta, "job": "train"}
    assert g.edge_size("train/it0.w0.fwd.l0", "train/it0.w0.fwd.l1") == a.edge_size("it0.w0.fwd.l0", "it0.w0.fwd.l1")
    c = Cluster.homogeneous(2, bandwidth=1e9)
    trace = simulate(g, c, "heft", network="maxmin")
    done = mj.job_completion_times(trace)
    assert set(done) == {"train", "etl"} and max(done.values()) == pytest.approx(trace.makespan)
    plan = trace.to_schedule()
    assert done["etl"] == pytest.approx(max(plan.assignment(f"etl/{t}").finish for t in b.ids))
    with pytest.raises(ValueError, match="distinct"):
        mj.multijob([a, b], names=["x", "x"])
    with pytest.raises(ValueError, match="hold no '/'"):
        mj.multijob([a], names=["a/b"])


def test_multijob_keeps_executable_jobs_executable(tmp_path):
    from taskflow import execute

    one = tr.data_parallel(
        workers=2, iterations=2, allreduce="ps", executable=True, dataset_dir=tmp_path / "a", hidden=(8,), batch=16
    )
    two = tr.data_parallel(
        workers=2, iterations=2, allreduce="tree", executable=True, dataset_dir=tmp_path / "b", hidden=(8,), batch=16
    )
    g = mj.multijob([one, two])
    assert g.executable and len(g) == len(one) + len(two)
    res, r1 = execute(g), execute(one)
    assert np.array_equal(res["job0/it1.w1.update.l0"][0], r1["it1.w1.update.l0"][0])


# ---------------------------------------------------------------- WfCommons recipes
def test_wfcommons_recipe_is_seeded_and_read_through_wfformat():
    pytest.importorskip("wfcommons")
    a = sc.wfcommons_recipe("montage", 120, seed=1)
    b = sc.wfcommons_recipe("montage", 120, seed=1)
    c = sc.wfcommons_recipe("montage", 120, seed=2)
    assert 100 <= len(a) <= 130 and a.num_edges > len(a)
    assert list(a.edges()) == list(b.edges()) and [t.cost for t in a.tasks()] == [t.cost for t in b.tasks()]
    assert [t.cost for t in a.tasks()] != [t.cost for t in c.tasks()]
    assert {t.meta["category"] for t in a.tasks()} >= {"mProject", "mDiffFit"}
    with pytest.raises(ValueError, match="unknown WfCommons recipe 'nosuch'; known: blast"):
        sc.wfcommons_recipe("nosuch")


@pytest.mark.parametrize(
    "make",
    [
        lambda: tr.local_sgd("bert-base", workers=3, iterations=5, sync_every=2),
        lambda: tr.stale_synchronous("vgg16", workers=3, iterations=4, staleness=1, allreduce="tree"),
        lambda: tr.pipeline_parallel("vgg16", stages=4, microbatches=6, schedule="1f1b", iterations=2),
        lambda: dl.input_pipeline(9, 2, prefetch=1, cache="decode", epochs=2),
        lambda: mj.multijob([tr.data_parallel("resnet50", workers=2), sc.fft(8)], priorities=[1, 0]),
        lambda: sc.random_layered(200, workers=["a", "b"], beta=1.0, seed=4),
    ],
)
def test_every_generator_is_acyclic_and_deterministic(make):
    a, b = make().validate(), make()
    assert a.ids == b.ids and list(a.edges()) == list(b.edges())
    assert [(t.cost, t.costs, t.output_size, t.meta) for t in a.tasks()] == [
        (t.cost, t.costs, t.output_size, t.meta) for t in b.tasks()
    ]
    assert len(a.topological_order()) == len(a)


def test_the_builder_refuses_to_copy_a_block_that_is_not_periodic():
    from workflows._builder import GraphBuilder

    b = GraphBuilder("x")
    first = b.task("init", 1.0, 0.0, {})
    start = b.mark()
    b.task("it0.a", 1.0, 0.0, {"iteration": 0}, deps=[first])  # depends on the prelude
    with pytest.raises(ValueError, match="depends on tasks before the periodic part"):
        b.tile(start, 2, lambda ids, k: [f"it{k}.a" for _ in ids], lambda ms, k: ms, floor=start[0])
    ok = GraphBuilder("y")
    s0 = ok.mark()
    prev = ok.task("it0.a", 1.0, 2.0, {"iteration": 0})
    s1 = ok.mark()
    ok.task("it1.a", 1.0, 2.0, {"iteration": 1}, deps=[prev])
    ok.tile(
        s1,
        2,
        lambda ids, k: [f"it{1 + k}.a" for _ in ids],
        lambda ms, k: [dict(m, iteration=1 + k) for m in ms],
        floor=s0[0],
    )
    g = ok.graph()
    assert g.topological_order() == ["it0.a", "it1.a", "it2.a", "it3.a"] and g.edge_size("it2.a", "it3.a") == 2.0
    assert g.task("it3.a").meta == {"iteration": 3}


def test_compression_means_one_thing_in_the_simulated_and_the_pytorch_builder():
    from workflows.allreduce import sent_bytes

    plain = tr.data_parallel("resnet50", workers=2, iterations=1, buckets=2)
    bucket = {t.id: t.output_size for t in plain.tasks() if t.meta["category"] == "bucket"}
    for compression, topk_ratio, share in (("fp16", 0.01, 0.5), ("topk", 0.05, 0.15)):
        g = tr.data_parallel(
            "resnet50", workers=2, iterations=1, buckets=2, compression=compression, topk_ratio=topk_ratio
        )
        sent = {
            t.id.replace("compress", "bucket"): t.output_size for t in g.tasks() if t.meta["category"] == "compress"
        }
        assert sent.keys() == bucket.keys()
        for k, nbytes in bucket.items():  # what the PyTorch job sends for a bucket of that size
            assert sent[k] == pytest.approx(sent_bytes(nbytes, compression, topk_ratio))
            assert sent[k] == pytest.approx(share * nbytes, rel=1e-3)
    from taskflow.errors import WorkflowError

    with pytest.raises(WorkflowError, match="compression must be one of fp16, topk or None, got 0.5"):
        tr.data_parallel(compression=0.5)
    with pytest.raises(WorkflowError, match="topk_ratio must be in"):
        tr.data_parallel(compression="topk", topk_ratio=0.0)


def test_batch_is_the_global_batch_each_rank_taking_its_share():
    from taskflow.errors import WorkflowError

    # the same global batch on more ranks: each rank computes less; the default is 32 a rank
    two = tr.data_parallel("resnet50", workers=2, iterations=1, batch=64)
    four = tr.data_parallel("resnet50", workers=4, iterations=1, batch=64)
    assert two.task("it0.w0.fwd.l0").cost == pytest.approx(2 * four.task("it0.w0.fwd.l0").cost)
    assert tr.TrainingSpec(workers=3).batch == 96 and tr.TrainingSpec(workers=3).rank_batch == 32
    assert tr.local_sgd("resnet50", workers=2, iterations=2, batch=64).task("it0.w1.fwd.l0").cost == pytest.approx(
        two.task("it0.w1.fwd.l0").cost
    )
    for bad, said in ((63, "batch 63 is not divisible by 2 workers"), (0, "batch must be"), (2.5, "batch must be")):
        with pytest.raises(WorkflowError, match=said):
            tr.data_parallel("resnet50", workers=2, iterations=1, batch=bad)


@pytest.mark.parametrize("mode", ["sync", "local", "stale"])
@pytest.mark.parametrize("compression", [None, "topk"])
def test_no_task_of_a_training_graph_is_dead_work(mode, compression):
    # every task leads to a rank's state after the last iteration (a leaf elsewhere is work for nothing)
    for kind, barrier in (("ring", False), ("tree", True), ("ps", False)):
        g = tr.training_graph(
            tr.TrainingSpec(
                model="resnet50",
                workers=3,
                iterations=5,
                allreduce=kind,
                buckets=3,
                compression=compression,
                barrier=barrier,
                mode=mode,
                sync_every=2,
                staleness=1 if mode == "stale" else 0,
            )
        )
        sinks = [g.task(t).meta for t in g.ids if not list(g.successors(t))]
        assert {m["iteration"] for m in sinks} == {4} and len(sinks) == 3 * len(tr.model_profile("resnet50"))
