import math

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
    assert len(out.sinks()) == k ** depth


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
    gc = tr.data_parallel(model, workers=N, iterations=T, allreduce=kind, buckets=B, compression=0.25)
    assert len(gc) == N * L + T * per_iteration(N, L, B, 4, kind, compression=True)


def test_next_forward_waits_only_for_its_layers_update():
    g = tr.data_parallel("resnet50", workers=2, iterations=2, buckets=3)
    preds = set(g.predecessors("it1.w0.fwd.l2"))
    assert preds == {"it1.w0.fwd.l1", "it0.w0.update.l2"}


def test_layer_order_priority_orders_bucket_reductions():
    none = tr.data_parallel("vgg16", workers=4, iterations=1, buckets=4)
    ordered = tr.data_parallel("vgg16", workers=4, iterations=1, buckets=4, priority="layer-order")
    assert ordered.num_edges == none.num_edges + 3  # one ordering edge between consecutive buckets
    assert len(ordered) == len(none)


def test_costs_come_from_the_model_profile():
    g = tr.data_parallel("resnet50", workers=1, iterations=1, batch=32, device="v100", allreduce="tree")
    layer3 = next(x for x in tr.model_profile("resnet50") if x["name"] == "layer3")
    assert g.task("it0.w0.fwd.l3").cost == pytest.approx(2 * layer3["macs"] * 32 / 15.7e12)
    assert g.task("it0.w0.bwd.l3").cost == pytest.approx(2 * g.task("it0.w0.fwd.l3").cost)
    assert g.task("it0.w0.bucket0").output_size == pytest.approx(
        4 * sum(x["params"] for x in tr.model_profile("resnet50")[3:]))


def test_generators_are_deterministic():
    a = tr.data_parallel("gpt2-small", workers=3, iterations=2)
    b = tr.data_parallel("gpt2-small", workers=3, iterations=2)
    assert list(a.edges()) == list(b.edges()) and [t.cost for t in a.tasks()] == [t.cost for t in b.tasks()]


def test_bad_training_parameters():
    with pytest.raises(ValueError, match="allreduce must be"):
        tr.data_parallel(allreduce="butterfly")
    with pytest.raises(ValueError, match="unknown model 'alexnet'"):
        tr.data_parallel("alexnet")
