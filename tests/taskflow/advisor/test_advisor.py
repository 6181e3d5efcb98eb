"""The advisor: catalogs (every bad input one line), configurations' clusters and costs, bounds that
no simulation beats, a pruned search that finds what simulating everything finds, training jobs,
noise, profiles, and the command."""

import json
import math

import numpy as np
import pytest
import yaml

from taskflow import CostModel, TaskGraph, simulate
from taskflow.advisor import (
    CATALOGS,
    Configuration,
    Evaluator,
    FixedWorkload,
    Training,
    advise,
    catalog_from_dict,
    configurations,
    load_catalog,
    profiled,
)
from taskflow.app.cli import main
from taskflow.errors import FormatError, TaskflowError
from taskflow.runtime import CostProfile
from workflows.scientific import random_layered

TINY = CATALOGS["tiny"]


def tiny_doc():
    return yaml.safe_load(TINY.read_text())


def small_graph(n=40, seed=3, size=2e8):
    g = random_layered(n, mean_cost=5.0, ccr=0.5, bandwidth=size / 10, seed=seed)
    return g


# ---------------------------------------------------------------------- catalogs
def test_shipped_catalogs_load_and_every_public_figure_has_a_source():
    aws = load_catalog("aws")
    assert len(aws.types) >= 10 and aws.currency == "USD" and aws.billing_minimum == 60
    assert all(t.source for t in aws.types)
    assert len(configurations(aws)) >= 500
    g5 = aws.type("g5.xlarge")
    assert g5.workers == 1 and g5.speed_of("forward", aws.groups) == pytest.approx(1.99)
    assert g5.speed_of("decode", aws.groups) == pytest.approx(0.94)
    assert aws.type("p4d.24xlarge").workers == 8 and aws.type("c6i.4xlarge").slots == 16
    assert load_catalog(TINY).name == "tiny"


def _mutate(path, value):
    doc = tiny_doc()
    node = doc
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


BAD = [
    ((("types", 0, "price"), KeyError), "types[0] (small): missing field 'price'"),
    ((("types", 0, "price"), "cheap"), "types[0] (small): price must be a number, got 'cheap'"),
    ((("types", 1, "price"), -1), "types[1] (big): price must be a number > 0 and <= 1e+09, got -1"),
    ((("types", 1, "price"), 1e308), "types[1] (big): price must be a number > 0 and <= 1e+09, got 1e+308"),
    ((("types", 1, "speed"), 1e-300), "types[1] (big): speed must be a number > 1e-09 and <= 1e+09"),
    ((("billing_minimum",), 1e300), "billing_minimum must be a number >= 0 and <= 1e+07"),
    ((("types", 0, "prize"), 1), "types[0] (small): unknown field 'prize'"),
    ((("types", 1, "name"), "small"), "types[1] (small): a second type of this name"),
    ((("types", 2, "speed"), {"gpu": 2}), "types[2] (gpu): speed: a per-kind speed mapping needs a 'default'"),
    ((("types", 2, "speed"), {"default": 1, "gpu": 0}), "types[2] (gpu): speed.gpu must be a number > 1e-09"),
    ((("types", 0, "memory"), "lots"), "types[0] (small): memory must be bytes or a size such as 16GiB"),
    ((("types", 0, "bandwidth"), "fast"), "types[0] (small): bandwidth: rate 'fast'"),
    ((("types", 0, "bandwidth"), KeyError), "types[0] (small): missing field 'bandwidth'"),
    ((("types", 0, "counts"), [1, 2]), "types[0] (small): give counts or max_count, not both"),
    ((("types", 2, "counts"), []), "types[2] (gpu): counts must be a non-empty list"),
    ((("types", 2, "counts"), [0, 1]), "types[2] (gpu): counts[] must be an integer from 1"),
    ((("types", 0, "max_count"), 2.5), "types[0] (small): max_count must be an integer from 1"),
    ((("types", 0, "gpu_memory"), "8GiB"), "types[0] (small): gpu_memory is for a type with gpus > 0"),
    ((("types", 0, "cores"), True), "types[0] (small): cores must be an integer"),
    ((("types", 0, "name"), ""), "types[0]: name must be a non-empty string"),
    ((("types", 0), "small"), "types[0]: a node type is a mapping, got str"),
    ((("mix", 0), ["small", "huge"]), "mix[0]: unknown type 'huge'"),
    ((("mix", 0), ["small", "small"]), "mix[0]: must be a pair of two different type names"),
    ((("mix",), "yes"), "mix must be true or a list"),
    ((("types",), []), "types must be a non-empty list of node types"),
    ((("format",), "catalog/2"), "format must be 'taskflow-catalog/1'"),
    ((("latency",), -1.0), "latency must be a number >= 0 and <= 1e+06"),
    ((("backplane",), "wide"), "backplane: rate 'wide'"),
    ((("kinds",), {"gpu": ["a"], "cpu": ["a"]}), "kinds.cpu: task kind 'a' is already in group 'gpu'"),
    ((("colour",), "blue"), "unknown field 'colour'"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_catalog_is_one_line_naming_the_type_and_field(change, message):
    doc = _mutate(*change)
    with pytest.raises(FormatError) as e:
        catalog_from_dict(doc, "tiny.yaml")
    text = str(e.value)
    assert message in text and "\n" not in text and text.startswith("tiny.yaml")


@pytest.mark.parametrize(
    "text, message",
    [
        ("types: [\n  {name: a\n", "bad.yaml: line"),
        ("- 1\n- 2\n", "a catalog is a mapping with a 'types' list, got list"),
        ("", "a catalog is a mapping"),
    ],
)
def test_unreadable_catalog_files(tmp_path, text, message):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(FormatError, match=message):
        load_catalog(p)


def test_numbers_read_alike_from_json_and_yaml(tmp_path):
    doc = tiny_doc()
    doc["latency"], doc["types"][0]["price"] = 5e-05, 1e-3
    (tmp_path / "c.json").write_text(json.dumps(doc))  # json writes 5e-05 and 0.001
    text = TINY.read_text().replace("latency: 1.0e-4", "latency: 5e-5")
    assert "latency: 5e-5" in text
    (tmp_path / "c.yaml").write_text(text)  # YAML 1.1 would read 5e-5 as a string
    assert load_catalog(tmp_path / "c.json").latency == pytest.approx(5e-5)
    assert load_catalog(tmp_path / "c.yaml").latency == pytest.approx(5e-5)
    assert load_catalog(tmp_path / "c.json").type("small").price == pytest.approx(1e-3)


def test_the_command_reports_a_bad_catalog_in_one_line_with_status_2(tmp_path, capsys):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(_mutate(("types", 1, "price"), "free")))
    code = main(["advise", "--train", "resnet50", "--catalog", str(p)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "types[1] (big): price must be a number" in err
    assert main(["advise", "--train", "resnet50", "--catalog", str(tmp_path / "none.yaml")]) == 2
    assert "no such catalog file" in capsys.readouterr().err
    assert main(["advise", "--train", "resnet50", "--catalog", "/dev/zero"]) == 2  # refused unread, no hang
    assert "/dev/zero: not a regular file" in capsys.readouterr().err
    assert main(["advise", "--catalog", "tiny"]) == 2  # neither GRAPH nor --train
    assert "GRAPH or --train" in capsys.readouterr().err


# ---------------------------------------------------------------------- configurations
def test_a_catalog_giving_too_many_configurations_asks_to_narrow_the_search():
    doc = tiny_doc()
    doc["types"][0]["max_count"] = 4096
    doc["types"][1]["max_count"] = 4096
    cat = catalog_from_dict(doc)
    with pytest.raises(TaskflowError, match="more than 200,000 configurations: narrow"):
        configurations(cat)
    assert len(configurations(cat, max_nodes=64)) == 64 + 64 + 4 + 63 * 64 // 2
    assert main(["advise", "--train", "resnet50", "--catalog", "tiny", "--max-nodes", "0"]) == 2


def test_a_catalog_mixing_thousands_of_types_is_refused_at_once():
    """3,000 types with ``mix: true`` are 4.5 million pairs: refused as the catalog is read, not
    searched for minutes; pairs listed past the limit are refused as soon as it is passed."""
    doc = tiny_doc()
    base = doc["types"][0]
    doc["types"] = [{**base, "name": f"t{i}", "max_count": 4} for i in range(3000)]
    doc["mix"] = True
    with pytest.raises(TaskflowError, match="mix: true pairs 3,000 types into 4,498,500 pairs"):
        catalog_from_dict(doc)
    doc["types"] = doc["types"][:600]
    doc["mix"] = [[f"t{i}", f"t{j}"] for i in range(600) for j in range(i + 1, 600)][:150_000]
    cat = catalog_from_dict(doc)
    with pytest.raises(TaskflowError, match="more than 200,000 configurations"):
        configurations(cat)


def test_the_command_plans_with_a_cost_profile(tmp_path, capsys):
    from taskflow import save_graph

    g = TaskGraph("p")
    for k in range(6):
        g.add_task(f"load_{k}", cost=1.0)
    gp, pp = tmp_path / "g.json", tmp_path / "costs.json"
    save_graph(g, gp)
    CostProfile(prefixes={"load": {"w0": 30.0}}, speeds={}).save(pp)
    assert (
        main(
            [
                "advise",
                str(gp),
                "--catalog",
                "tiny",
                "--types",
                "small",
                "--max-nodes",
                "1",
                "-o",
                str(tmp_path / "a.json"),
            ]
        )
        == 0
    )
    plain = json.loads((tmp_path / "a.json").read_text())["configurations"][0]["makespan"]
    assert (
        main(
            [
                "advise",
                str(gp),
                "--catalog",
                "tiny",
                "--types",
                "small",
                "--max-nodes",
                "1",
                "--profile",
                str(pp),
                "-o",
                str(tmp_path / "b.json"),
            ]
        )
        == 0
    )
    measured = json.loads((tmp_path / "b.json").read_text())["configurations"][0]["makespan"]
    assert plain == pytest.approx(3.0) and measured == pytest.approx(90.0)  # 6 tasks on 2 cores
    capsys.readouterr()


def test_configurations_and_their_clusters():
    cat = load_catalog(TINY)
    configs = configurations(cat)
    small, big, gpu = (cat.type(n) for n in ("small", "big", "gpu"))
    assert len(configs) == 8 + 4 + 4 + 8 * 4  # each type's counts, then small x big
    assert len(configurations(cat, max_nodes=3)) == 3 + 3 + 2 + 3  # pairs: (1,1) (1,2) (2,1)
    c = Configuration(((small, 2), (big, 1)))
    assert c.label == "2 x small + 1 x big" and c.nodes == 3 and c.workers == 3
    assert c.price == pytest.approx(0.8) and c.cost(3600, cat) == pytest.approx(0.8)
    cl = c.cluster(cat)
    assert [w.cores for w in cl.workers] == [2, 2, 8]
    # nodes of two types: the slower interface of the pair
    assert cl.bandwidth_between("small/0", "big/0") == pytest.approx(1e9 / 8)
    assert cl.bandwidth_between("small/0", "small/1") == pytest.approx(1e9 / 8)
    assert cl.latency == pytest.approx(1e-4) and cl.backplane is None
    doc = tiny_doc()
    doc["backplane"] = "2gbit"
    shared = catalog_from_dict(doc)
    assert Configuration(((shared.type("small"), 3),)).cluster(shared).backplane == pytest.approx(2e9 / 8)


def test_a_multi_gpu_node_is_a_rack_sharing_its_interface():
    doc = tiny_doc()
    doc["types"][2].update(gpus=4, intra_bandwidth="100gbit")
    cat = catalog_from_dict(doc)
    cl = Configuration(((cat.type("gpu"), 2),)).cluster(cat)
    assert len(cl) == 8 and all(w.cores == 1 for w in cl.workers)
    assert cl.racks["gpu/0.g3"] == "gpu/0" and cl.uplink == pytest.approx(10e9 / 8)
    assert cl.bandwidth_between("gpu/0.g0", "gpu/0.g1") == pytest.approx(100e9 / 8)
    assert cl.bandwidth_between("gpu/0.g0", "gpu/1.g0") == pytest.approx(10e9 / 8)


def test_per_kind_speeds_set_every_duration():
    cat = load_catalog(TINY)
    g = TaskGraph("kinds")
    g.add_task("f", cost=8.0, meta={"category": "forward"})
    g.add_task("d", cost=6.0, meta={"category": "decode"})
    g.add_edge("d", "f")
    ev = Evaluator(FixedWorkload(g), cat, ["heft"])
    small, big, gpu = (cat.type(n) for n in ("small", "big", "gpu"))
    for parts in [((gpu, 2),), ((small, 1), (gpu, 1)), ((gpu, 1), (big, 1)), ((big, 2),)]:
        config = Configuration(parts)
        gg, cl = ev.costed(g, config)
        d = CostModel(gg, cl).durations
        for j, w in enumerate(cl.workers):
            t = cat.type(w.id.split("/")[0])
            assert d[0, j] == pytest.approx(8.0 / t.speed_of("forward", cat.groups))
            assert d[1, j] == pytest.approx(6.0 / t.speed_of("decode", cat.groups))


def test_a_task_too_big_for_every_worker_makes_a_configuration_infeasible():
    cat = load_catalog(TINY)
    g = TaskGraph("big")
    g.add_task("a", cost=1.0, output_size=6 * 2**30)
    g.add_task("b", cost=1.0, cores=4)
    a = advise(g, cat, tolerance=0.0)
    small_only = [k for k in a.candidates if all(t.name == "small" for t, _ in k.config.parts)]
    assert small_only and all(k.status == "infeasible" for k in small_only)
    assert "holds 6.00 GiB" in small_only[0].reason or "needs 4 cores" in small_only[0].reason
    assert a.front and all(k.status != "infeasible" for k in a.front)
    none = advise(g, cat, types=["small"], deadline=100)
    assert none.choice is None and none.answer().startswith("no configuration can run the workload: 1 x small: task")


# ---------------------------------------------------------------------- bounds and the search
@pytest.mark.parametrize("seed", range(4))
def test_no_simulation_beats_the_bounds(seed):
    cat = load_catalog(TINY)
    g = small_graph(seed=seed)
    ev = Evaluator(FixedWorkload(g), cat, ["heft", "work-stealing"])
    rng = np.random.default_rng(seed)
    configs = configurations(cat)
    for k in rng.choice(len(configs), size=6, replace=False):
        c = configs[int(k)]
        cp, work = ev.bounds(g, c)
        for p in ("heft", "work-stealing"):
            assert ev.simulate(c, p) >= max(cp, work) * (1 - 1e-9)


def brute_force(g, cat, schedulers, deadline=None, budget=None):
    ev = Evaluator(FixedWorkload(g), cat, schedulers)
    pts = []
    for c in configurations(cat):
        t = min(ev.simulate(c, p) for p in schedulers)
        pts.append((c.label, t, c.cost(t, cat)))
    front, best = [], math.inf
    for label, t, cost in sorted(pts, key=lambda p: (p[2], p[1])):
        if t < best:
            front.append((label, t, cost))
            best = t
    ok = [p for p in pts if deadline is None or p[1] <= deadline]
    ok = [p for p in ok if budget is None or p[2] <= budget]
    if deadline is not None:
        answer = min(ok, key=lambda p: (p[2], p[1]))[0] if ok else None
    elif budget is not None:
        answer = min(ok, key=lambda p: (p[1], p[2]))[0] if ok else None
    else:
        answer = None
    return front, answer


@pytest.mark.parametrize("seed", [0, 1])
def test_the_pruned_search_finds_what_simulating_everything_finds(seed):
    cat = load_catalog(TINY)
    g = small_graph(seed=seed)
    schedulers = ["heft", "work-stealing"]
    front, _ = brute_force(g, cat, schedulers)
    a = advise(g, cat, schedulers=schedulers, tolerance=0.0)
    assert [(k.label, pytest.approx(k.time), pytest.approx(k.cost)) for k in a.front] == front
    assert a.stats["simulated"] < a.stats["configurations"]  # the bounds skipped some
    mid = front[len(front) // 2]
    _, answer = brute_force(g, cat, schedulers, deadline=mid[1] * 1.01)
    d = advise(g, cat, schedulers=schedulers, deadline=mid[1] * 1.01, tolerance=0.0)
    assert d.choice.label == answer and d.choice.time <= mid[1] * 1.01
    assert d.stats["simulated"] <= a.stats["simulated"]
    _, answer = brute_force(g, cat, schedulers, budget=mid[2] * 1.01)
    b = advise(g, cat, schedulers=schedulers, budget=mid[2] * 1.01, tolerance=0.0)
    assert b.choice.label == answer


def test_pruning_within_a_tolerance_stays_within_it_of_the_front():
    cat = load_catalog(TINY)
    g = small_graph(seed=5)
    exact = advise(g, cat, tolerance=0.0)
    loose = advise(g, cat, tolerance=0.05)
    assert loose.stats["simulated"] <= exact.stats["simulated"]
    for k in exact.front:  # every exact front point has a loose one at most 5% slower and dearer
        assert any(f.time <= k.time * 1.05 + 1e-9 and f.cost <= k.cost * 1.05 + 1e-9 for f in loose.front)


def test_a_tolerant_answer_is_within_the_tolerance_of_the_exact_one():
    cat = load_catalog(TINY)
    g = small_graph(n=60, seed=7)
    exact = advise(g, cat, tolerance=0.0)
    for k in exact.front[1:-1]:
        d0 = advise(g, cat, deadline=k.time, tolerance=0.0).choice
        d1 = advise(g, cat, deadline=k.time, tolerance=0.05).choice
        assert d1.time <= k.time and d1.cost <= d0.cost * 1.05 + 1e-12
        b0 = advise(g, cat, budget=k.cost, tolerance=0.0).choice
        b1 = advise(g, cat, budget=k.cost, tolerance=0.05).choice
        assert b1.cost <= k.cost and b1.time <= b0.time * 1.05 + 1e-9


def test_every_configuration_says_why_it_lost():
    cat = load_catalog(TINY)
    a = advise(small_graph(seed=2), cat, deadline=1e9)
    assert a.choice is not None
    for k in a.candidates:
        assert k.status in ("front", "simulated", "pruned", "infeasible")
        if k.status != "front":
            assert k.reason
        if k.status in ("front", "simulated"):
            assert k.bound in ("compute", "network", "critical path", "idle")
            assert 0 <= k.network_share < 1 and 0 < k.utilisation <= 1 + 1e-9
    assert a.choice.cost == min(k.cost for k in a.front)


def test_a_network_heavy_workflow_is_network_bound_on_slow_links():
    cat = load_catalog(TINY)
    g = TaskGraph("fan")
    g.add_task("src", cost=1.0, output_size=2e9)
    for k in range(8):
        g.add_task(f"w{k}", cost=1.0)
        g.add_edge("src", f"w{k}")
    a = advise(g, cat, schedulers=["heft"], tolerance=0.0, types=["small"])
    one = next(k for k in a.candidates if k.label == "1 x small")
    assert one.bound == "compute" and one.network_share == 0.0  # nothing moves on one node
    # 2 GB at 1 Gbit/s: HEFT keeps every task on the source's node; a free network would spread them
    many = [k for k in a.candidates if k.status in ("front", "simulated") and k.config.nodes > 1]
    assert len(many) >= 2 and all(k.bound == "network" and k.network_share >= 0.2 for k in many)


# ---------------------------------------------------------------------- training, noise, profiles
def test_training_extrapolates_steps_from_two_and_three():
    cat = load_catalog(TINY)
    tr = Training("resnet50", steps=8, batch=32)
    direct = Training("resnet50", steps=3, batch=32)
    config = Configuration(((cat.type("gpu"), 2),))
    ev = Evaluator(tr, cat, ["placed"])
    t2, t3 = (
        Evaluator(Training("resnet50", steps=s, batch=32), cat, ["placed"]).simulate(config, "placed") for s in (2, 3)
    )
    assert ev.simulate(config, "placed") == pytest.approx(t3 + 5 * (t3 - t2))
    assert Evaluator(direct, cat, ["placed"]).simulate(config, "placed") == pytest.approx(t3)
    from workflows.training import data_parallel

    g8 = data_parallel("resnet50", workers=2, iterations=8, batch=32)
    gg, cl = ev.costed(g8, config)
    real = simulate(gg, cl, "placed").makespan
    assert ev.simulate(config, "placed") == pytest.approx(real, rel=0.05)
    assert "8 ranks for a batch of 4" in Training("resnet50", steps=2, batch=4).infeasible(
        Configuration(((cat.type("gpu"), 8),))
    )


def test_training_advice_only_uses_gpu_types_and_sized_models():
    a = advise(Training("350m", steps=20, batch=16), "tiny")
    assert a.front and all(t.gpus for k in a.candidates for t, _ in k.config.parts)
    from workflows.models import model_profile

    assert sum(layer["params"] for layer in model_profile("1.3b")) == pytest.approx(1.3e9)
    with pytest.raises(TaskflowError, match="unknown model 'gpt9'"):
        Training("gpt9")


def test_pipeline_training_gives_each_gpu_a_stage_up_to_the_model_s_layers():
    cat = load_catalog(TINY)
    tr = Training("gpt2-small", steps=2, batch=32, parallelism="pipeline")
    for n in (2, 8):
        ((g, _),) = tr.graphs(Configuration(((cat.type("gpu"), n),)))
        stages = {md["stage"] for md in g.metas().values() if "stage" in md}
        assert stages == set(range(n))
    a = advise(tr, cat)
    times = {k.label: k.time for k in a.candidates if k.time is not None}
    assert times["2 x gpu"] < times["1 x gpu"]  # two stages overlap microbatches
    with pytest.raises(TaskflowError, match="parallelism must be 'data' or 'pipeline'"):
        Training("gpt2-small", parallelism="tensor")


def test_noise_gives_the_chance_of_missing_the_deadline():
    cat = load_catalog(TINY)
    g = small_graph(seed=1)
    exact = advise(g, cat, tolerance=0.0)
    k = exact.front[len(exact.front) // 2]
    tight = advise(g, cat, deadline=k.time * 1.001, noise=0.3, samples=12, confidence=0.9, tolerance=0.0)
    sampled = [f for f in tight.front if f.samples]
    assert sampled and all(len(f.samples) == 12 and 0 <= f.p_miss <= 1 for f in sampled)
    first = next(f for f in tight.front if f.label == k.label)
    assert first.p_miss > 0.1  # at its nominal makespan, noise makes it late more often than not
    assert tight.choice is not None and 1 - tight.choice.p_miss >= 0.9
    assert tight.choice.cost > k.cost and tight.choice.time < k.time  # dearer and faster, to be safe
    # the same seeds give the same samples
    again = advise(g, cat, deadline=k.time * 1.001, noise=0.3, samples=12, confidence=0.9, tolerance=0.0)
    assert [f.samples for f in again.front] == [f.samples for f in tight.front]


def test_a_profile_sets_costs_as_seconds_on_its_fastest_worker():
    g = TaskGraph("p")
    g.add_task("load_1", cost=1.0)
    g.add_task("other", cost=7.0)
    prof = CostProfile(prefixes={"load": {"w0": 2.0, "w1": 6.0}}, speeds={"w0": 3**0.5, "w1": 3**-0.5})
    pg = profiled(g, prof)
    assert pg.arrays.cost[pg.arrays.index["load_1"]] == pytest.approx(2.0)
    assert pg.arrays.cost[pg.arrays.index["other"]] == pytest.approx(7.0)
    assert not pg.arrays.costs
    assert profiled(g, prof, reference="w1").arrays.cost[0] == pytest.approx(6.0)
    with pytest.raises(TaskflowError, match="no worker 'w9'"):
        profiled(g, prof, reference="w9")


def test_a_graph_with_exact_per_worker_costs_is_advised_on_its_plain_costs():
    from taskflow import load_graph

    from tests.conftest import EXAMPLES

    g = load_graph(EXAMPLES / "heft_paper.graph.json")
    assert g.arrays.costs
    a = advise(g, "tiny", budget=3)
    assert a.choice is not None and "10 tasks' exact per-worker costs dropped" in a.workload
    assert all(k.status != "infeasible" for k in a.candidates)


def test_options_are_checked():
    g = small_graph()
    for kw, msg in [
        ({"deadline": -1}, "deadline must be a positive"),
        ({"max_nodes": 0}, "max_nodes"),
        ({"network": "fast"}, "unknown network"),
        ({"schedulers": ["nope"]}, "nope"),
        ({"types": ["huge"]}, "no type 'huge'"),
    ]:
        with pytest.raises(TaskflowError, match=msg):
            advise(g, "tiny", **kw)


# ---------------------------------------------------------------------- the command
def test_the_command_writes_the_advice_and_its_plot(tmp_path, capsys):
    from taskflow import save_graph

    gp = tmp_path / "g.json"
    save_graph(small_graph(seed=4), gp)
    out, png = tmp_path / "advice.json", tmp_path / "front.png"
    code = main(["advise", str(gp), "--catalog", "tiny", "--deadline", "1e6", "-o", str(out), "--plot", str(png)])
    text = capsys.readouterr().out
    assert code == 0 and "cheapest meeting the deadline:" in text and "Pareto front" in text
    doc = json.loads(out.read_text())
    assert doc["format"] == "taskflow-advice/1" and doc["choice"] == doc["front"][0]
    rows = {r["configuration"]: r for r in doc["configurations"]}
    assert len(rows) == 48 and all(r["reason"] or r["status"] == "front" for r in rows.values())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code = main(["advise", str(gp), "--catalog", "tiny", "--deadline", "0.001", "-q"])
    assert code == 1 and "no configuration meets the deadline of 0.001 s" in capsys.readouterr().out
    code = main(["advise", "--train", "resnet50", "--steps", "5", "--batch", "8", "--catalog", "tiny", "--budget", "5"])
    assert code == 0 and "fastest within the budget: " in capsys.readouterr().out


def test_the_catalog_in_the_docs_is_a_valid_catalog():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "advisor.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    cat = catalog_from_dict(yaml.safe_load(block), "advisor.md")
    assert [t.name for t in cat.types] == ["cpu.small", "cpu.large", "gpu.one"]
    assert cat.mix == (("cpu.large", "cpu.small"),) and cat.type("gpu.one").workers == 1
    assert len(configurations(cat)) == 32 + 4 + 3 + 4 * 32
