"""`taskflow compare`: every scheduler on a user's own graphs, the table against separate runs."""

from __future__ import annotations

import csv
import json
import sys

import pytest

import taskflow
from taskflow.app.cli import main
from taskflow.app.compare import compare, summarise
from taskflow.scheduling import available, scheduler_class

from tests.conftest import EXAMPLES

GRAPH, CLUSTER = EXAMPLES / "heft_paper.graph.json", EXAMPLES / "heft_paper.cluster.json"


@pytest.mark.parametrize("network", ["maxmin", "simple"])
def test_the_table_holds_every_scheduler_and_equals_separate_simulations(tmp_path, capsys, network):
    out = tmp_path / "cmp"
    assert main(["compare", str(GRAPH), "--cluster", str(CLUSTER), "--network", network, "--out", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader(open(out / "compare.csv")))
    g, c = taskflow.load_graph(GRAPH), taskflow.load_cluster(CLUSTER)
    # every scheduler the simulator carries out; a plan with task copies (heft-dup) is a plan only
    assert sorted(r["scheduler"] for r in rows) == [n for n in available() if n != "heft-dup"]
    assert {r["kind"] for r in rows} == {"static", "dynamic"}
    for r in rows:
        alone = taskflow.simulate(g, c, r["scheduler"], network=network, seed=0)
        assert float(r["simulated_makespan"]) == pytest.approx(alone.makespan, rel=1e-12), r["scheduler"]
        assert r["valid"] == "True" and r["scheduler"] in text
        # one SLR everywhere (makespan / critical path, as Schedule.metrics); the bound's ratio apart
        m = alone.metrics(g, c)
        assert float(r["slr"]) == pytest.approx(m["slr"]) and float(r["bound_ratio"]) == pytest.approx(m["bound_ratio"])
        assert float(r["bound_ratio"]) == pytest.approx(alone.makespan / taskflow.lower_bound(g, c))
    # every column of the table is explained under it
    assert all(any(ln.startswith(f"{col}:") for ln in text.splitlines()) for col in ("simulated", "x bound"))
    assert all(not scheduler_class(n).duplicates for n in available() if n != "heft-dup")
    if network == "simple":  # the paper's answers
        by = {r["scheduler"]: float(r["simulated_makespan"]) for r in rows}
        assert by["heft"] == pytest.approx(80) and by["cpop"] == pytest.approx(86)
    assert (out / "compare.png").stat().st_size > 1000 and "SLR" in (out / "compare.md").read_text()


def test_a_module_function_graph_and_several_graphs_in_one_table(tmp_path, capsys, monkeypatch):
    (tmp_path / "mydag.py").write_text(
        "from taskflow import TaskGraph\n"
        "def build():\n"
        "    g = TaskGraph('mydag')\n"
        "    a = g.add_task('a', fn=sum, args=([1, 2],), cost=2.0, output_size=1e6)\n"
        "    g.add_task('b', fn=abs, args=(a,), cost=1.0)\n"
        "    g.add_task('c', fn=abs, args=(a,), cost=3.0)\n"
        "    return g\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert (
        main(
            [
                "compare",
                "mydag:build",
                str(GRAPH),
                "--cluster",
                str(CLUSTER),
                "--schedulers",
                "HEFT,work_stealing,cpop",
                "-q",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith(("mydag", "heft_paper"))]
    assert len(lines) == 6 and {ln.split()[1] for ln in lines} == {"heft", "work-stealing", "cpop"}


def test_on_dask_the_static_schedulers_and_work_stealing_are_measured(tmp_path):
    g = taskflow.TaskGraph("small")
    a = g.add_task("a", cost=1.0, output_size=1000)
    for k in range(4):
        g.add_task(f"b{k}", cost=1.0)
        g.add_edge(a.id, f"b{k}")
    c = taskflow.Cluster.heterogeneous([1, 2], bandwidth=1e8)
    rows = compare(
        [("small", g)], c, ["heft", "work-stealing", "blevel-dynamic"], real=True, out=tmp_path, repeat=2, seed=4
    )
    assert [(r["scheduler"], r["seed"]) for r in rows] == [
        (n, s) for n in ("heft", "work-stealing", "blevel-dynamic") for s in (4, 5)
    ]
    for r in rows:  # each repeat measured on its own
        assert (r["measured_makespan"] == "") == (r["scheduler"] == "blevel-dynamic")  # simulator-only
    by = {r["scheduler"]: r for r in summarise(rows)}
    for name in ("heft", "work-stealing"):
        assert by[name]["measured_makespan"] > 0 and by[name]["predicted_makespan"] > 0 and by[name]["repeats"] == 2
        low, high = by[name]["measured_makespan_range"]
        assert {low, high} == {r["measured_makespan"] for r in rows if r["scheduler"] == name}
    assert all(r["placement_fidelity"] == 1.0 for r in rows if r["scheduler"] == "heft")
    assert "median of 2 repeats (seeds 4-5)" in (tmp_path / "compare.md").read_text()
    # measured in the graph's units: the 2 s scaling is undone
    assert (
        0.5 * by["heft"]["simulated_makespan"] < by["heft"]["measured_makespan"] < 3 * by["heft"]["simulated_makespan"]
    )


def test_repeats_give_each_seed_a_row_and_the_table_their_median_and_range(tmp_path, capsys):
    import statistics

    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                str(GRAPH),
                "--cluster",
                str(CLUSTER),
                "--scheduler",
                "random,heft",
                "--repeat",
                "5",
                "--seed",
                "7",
                "-o",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    rows = list(csv.DictReader(open(out / "compare.csv")))
    assert [(r["scheduler"], int(r["seed"]), int(r["repeat"])) for r in rows] == [
        (n, 7 + k, k) for n in ("random", "heft") for k in range(5)
    ]
    g, c = taskflow.load_graph(GRAPH), taskflow.load_cluster(CLUSTER)
    got = [float(r["simulated_makespan"]) for r in rows if r["scheduler"] == "random"]
    assert got == [
        pytest.approx(taskflow.simulate(g, c, taskflow.get_scheduler("random", seed=7 + k), seed=7 + k).makespan)
        for k in range(5)
    ]
    assert len(set(got)) > 1  # the seeds matter to a random placement
    line = next(ln for ln in text.splitlines() if " random " in ln)
    from taskflow.app.compare import _num

    assert f"{_num(statistics.median(got))} ({_num(min(got))}-{_num(max(got))})" in line
    assert "median of 5 repeats (seeds 7-11)" in text and (out / "compare.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("cmd", [["schedule", "--scheduler", "heft"], ["simulate", "--scheduler", "cpop"]])
def test_schedule_and_simulate_take_a_module_function_graph_as_run_does(tmp_path, capsys, monkeypatch, cmd):
    (tmp_path / "tinydag.py").write_text(
        "from taskflow import TaskGraph\n"
        "def build():\n"
        "    g = TaskGraph('tiny')\n"
        "    a = g.add_task('a', fn=abs, args=(-1,), cost=2.0)\n"
        "    g.add_task('b', fn=abs, args=(a,), cost=1.0)\n"
        "    return g\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main([cmd[0], "tinydag:build", "--workers", "2", *cmd[1:]]) == 0
    assert "makespan 3" in capsys.readouterr().out


@pytest.mark.slow  # about 20 s: a loopback cluster and four real runs
def test_on_an_existing_cluster_with_a_profile_and_a_time_scale(tmp_path, capsys):
    """compare --real on a loopback `dask scheduler` and two named workers: every static scheduler and
    Dask's own measured there, the profile written by the first comparison planned with by the
    second, and a model of another size refused before anything runs."""
    from taskflow.app.loopback import Loopback

    g = taskflow.TaskGraph("fan")
    a = g.add_task("a", cost=1.0, output_size=100_000)
    for k in range(4):
        g.add_task(f"b{k}", cost=1.0 + k)
        g.add_edge(a.id, f"b{k}")
    path = tmp_path / "fan.json"
    taskflow.save_graph(g, path)
    lb = Loopback(tmp_path, workers=("wa", "wb")).start()
    try:
        args = [
            "compare",
            str(path),
            "--workers",
            "2",
            "--speeds",
            "1,2",
            "--scheduler",
            "heft,work-stealing",
            "--real",
            "--scheduler-file",
            str(lb.sched_file),
            "--profile",
            str(tmp_path / "costs.json"),
            "--time-scale",
            "0.05",
            "-q",
        ]
        for k in range(2):
            out = tmp_path / f"cmp{k}"
            assert main(args + ["--out", str(out)]) == 0, capsys.readouterr().err
            rows = {r["scheduler"]: r for r in csv.DictReader(open(out / "compare.csv"))}
            assert (
                float(rows["heft"]["measured_makespan"]) > 0 and float(rows["work-stealing"]["measured_makespan"]) > 0
            )
            assert float(rows["heft"]["placement_fidelity"]) == 1.0
        profile = json.loads((tmp_path / "costs.json").read_text())
        assert profile  # what the runs measured, kept for the next plan
        text = capsys.readouterr().out
        assert "on Dask:" in text and "predicted:" in text  # the columns explained
        assert main(["compare", str(path), "--workers", "3", "--real", "--scheduler-file", str(lb.sched_file)]) == 2
        assert "has 2 workers (wa, wb) and the declared cluster 3" in capsys.readouterr().err
    finally:
        lb.stop()
    assert main(["compare", str(path), "--workers", "2", "--profile", str(tmp_path / "x.json")]) == 2
    assert "go with --real" in capsys.readouterr().err
