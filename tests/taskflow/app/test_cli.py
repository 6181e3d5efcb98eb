import json
import subprocess
import sys
from pathlib import Path

import pytest

from taskflow.app.cli import main

from tests.conftest import EXAMPLES, shared, shared_graph_files

HEFT_G = str(EXAMPLES / "heft_paper.graph.json")
HEFT_C = str(EXAMPLES / "heft_paper.cluster.json")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_console_script_runs_for_real(tmp_path):
    exe = Path(sys.executable).with_name("taskflow")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "taskflow"]
    r = subprocess.run(cmd + ["info", HEFT_G, "--json"], capture_output=True, text=True, check=True)
    info = json.loads(r.stdout)
    assert info["tasks"] == 10 and info["edges"] == 15
    r = subprocess.run(
        cmd + ["schedule", HEFT_G, "--workers", "0", "--scheduler", "random"], capture_output=True, text=True
    )
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: ")


def expected_counts(path):
    """Counts computed from the raw file, independent of our loaders where practical."""
    text = path.read_text(errors="replace") if path.suffix != ".zip" else ""
    if path.suffix == ".stg":
        rows = [l.split() for l in text.splitlines() if l.strip() and not l.startswith("#")][1:]
        return len(rows), sum(int(r[2]) for r in rows)
    if path.name.endswith(".graph.json"):
        doc = json.loads(text)
        return len(doc["tasks"]), len(doc["edges"])
    if path.suffix == ".json":
        tasks = json.loads(text)["workflow"]["specification"]["tasks"]
        return len(tasks), len({(p, t["id"]) for t in tasks for p in t["parents"]})
    if path.suffix == ".xml":
        import re

        links = set()
        for child, body in re.findall(r'<child ref="([^"]+)">(.*?)</child>', text, re.S):
            links |= {(p, child) for p in re.findall(r'<parent ref="([^"]+)"', body)}
        return len(re.findall(r"<job ", text)), len(links)
    return None


@pytest.mark.parametrize("path", shared_graph_files(), ids=lambda p: p.name)
def test_info_json_counts_every_shared_file(capsys, path):
    code, out, err = run(capsys, "info", path, "--json")
    assert code == 0, err
    info = json.loads(out)
    for key in ("tasks", "edges", "total_cost", "critical_path"):
        assert key in (info[0] if isinstance(info, list) else info)
    if path.suffix == ".zip":
        import zipfile

        with zipfile.ZipFile(path) as z:
            table = json.loads(z.read(z.namelist()[0]))
        assert isinstance(info, list) and len(info) == len(table["graph"])
        for row, k in zip(info, table["graph"]):
            tasks = json.loads(table["graph"][k])
            assert row["tasks"] == len(tasks)
            assert row["edges"] == len({(i[0], c) for c, t in enumerate(tasks) for i in t["inputs"]})
    else:
        assert (info["tasks"], info["edges"]) == expected_counts(path)
        if path.name.startswith("montage-chameleon-2mass-01d-001"):
            assert (info["tasks"], info["edges"]) == (103, 231)


def test_info_text(capsys):
    code, out, _ = run(capsys, "info", shared("stg", "robot.stg"))
    assert code == 0 and "90 tasks, 135 edges" in out and "critical path 569 s" in out


def test_round_robin_schedule_passes_validate(capsys, tmp_path):
    out_file = tmp_path / "plan.json"
    code, out, err = run(capsys, "schedule", HEFT_G, "--cluster", HEFT_C, "--scheduler", "round-robin", "-o", out_file)
    assert code == 0, err
    plan = json.loads(out_file.read_text())
    assert plan["format"] == "taskflow-schedule/1" and plan["scheduler"] == "round-robin"
    assert len(plan["assignments"]) == 10
    code, out, err = run(capsys, "validate", HEFT_G, "--cluster", HEFT_C, "--schedule", out_file)
    assert code == 0 and out.startswith("valid: 10 tasks on 3 workers")
    # a tampered plan is caught and the problem printed
    plan["assignments"][0]["finish"] += 1
    out_file.write_text(json.dumps(plan))
    code, out, err = run(capsys, "validate", HEFT_G, "--cluster", HEFT_C, "--schedule", out_file)
    assert code == 1 and "invalid: task 't1' runs 15 s on worker 'p1'; its duration there is 14 s" in err


def test_schedule_on_wfformat_with_workers(capsys, tmp_path):
    path = shared("wfinstances", "montage-chameleon-2mass-01d-001.json")
    out_file = tmp_path / "p.json"
    code, out, err = run(
        capsys,
        "schedule",
        path,
        "--workers",
        "4",
        "--bandwidth",
        "1e8",
        "--latency",
        "0.01",
        "--scheduler",
        "random",
        "--seed",
        "3",
        "-o",
        out_file,
        "-q",
    )
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    assert {a["worker"] for a in doc["assignments"]} <= {"w0", "w1", "w2", "w3"}


def test_schedule_all_prints_a_comparison(capsys):
    code, out, err = run(capsys, "schedule", HEFT_G, "--cluster", HEFT_C, "--scheduler", "all")
    assert code == 0
    assert "scheduler" in out and "round-robin" in out and "random" in out


def test_convert_to_dot_and_wfformat(capsys, tmp_path):
    code, out, _ = run(capsys, "convert", HEFT_G, "-o", tmp_path / "g.dot")
    assert code == 0 and (tmp_path / "g.dot").read_text().count("->") == 15
    code, out, _ = run(capsys, "convert", HEFT_G, "-o", tmp_path / "g.json", "--to", "wfformat")
    assert json.loads((tmp_path / "g.json").read_text())["schemaVersion"] == "1.5"


def test_schedulers_lists_baselines(capsys):
    code, out, _ = run(capsys, "schedulers")
    names = [l.split()[0] for l in out.splitlines()]
    assert "random" in names and "round-robin" in names


BAD_GRAPHS = {
    "cycle": (
        {
            "format": "taskflow-graph/1",
            "tasks": [{"id": "a", "cost": 1}, {"id": "b", "cost": 1}, {"id": "c", "cost": 1}],
            "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "b"}],
        },
        r"cycle: (b -> c -> b|c -> b -> c)",
    ),
    "duplicate": (
        {"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": 1}, {"id": "a", "cost": 2}]},
        "duplicate task id 'a'",
    ),
    "dangling": (
        {"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": 1}], "edges": [{"from": "a", "to": "ghost"}]},
        "unknown task 'ghost'",
    ),
    "negative-cost": (
        {"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": -1}]},
        "task 'a': cost must be finite and >= 0",
    ),
    "nan-size": (
        '{"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": 1, "output_size": NaN}]}',
        "task 'a': output_size must be finite and >= 0",
    ),
    "inf-cost": (
        '{"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": Infinity}]}',
        "task 'a': cost must be finite",
    ),
    "inf-edge": (
        '{"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": 1}, {"id": "b", "cost": 1}], '
        '"edges": [{"from": "a", "to": "b", "size": -Infinity}]}',
        "edge 'a' -> 'b': size must be finite",
    ),
    "malformed": ('{"format": "taskflow-graph/1",\n "tasks": [}', "malformed JSON at line 2, column 12"),
    "unknown-format": ("just some words\n", "unknown format"),
}


@pytest.mark.parametrize("case", sorted(BAD_GRAPHS))
@pytest.mark.parametrize("command", ["info", "schedule", "convert"])
def test_bad_graphs_one_line_exit_2_no_output(capsys, tmp_path, case, command):
    content, message = BAD_GRAPHS[case]
    src = tmp_path / "bad.json"
    src.write_text(content if isinstance(content, str) else json.dumps(content))
    out_file = tmp_path / "out.json"
    argv = {
        "info": ["info", src],
        "schedule": ["schedule", src, "--workers", "2", "--scheduler", "round-robin", "-o", out_file],
        "convert": ["convert", src, "-o", out_file],
    }[command]
    code, out, err = run(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(src) in lines[0]
    import re

    assert re.search(message, lines[0]), lines[0]
    assert not out_file.exists()


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--workers", "2", "--scheduler", "nope"],
            "unknown scheduler 'nope'; known schedulers: .*random, round-robin",
        ),
        (["--workers", "0", "--scheduler", "random"], "argument --workers: must be an integer >= 1"),
        (["--workers", "2", "--scheduler", "random"], "task 't1': costs name worker 'p1' that the cluster lacks"),
    ],
)
def test_bad_scheduling_requests(capsys, tmp_path, argv, message):
    out_file = tmp_path / "o.json"
    code, out, err = run(capsys, "schedule", HEFT_G, *argv, "-o", out_file)
    import re

    assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(message, err), err
    assert not out_file.exists()


def test_cluster_file_with_zero_workers(capsys, tmp_path):
    c = tmp_path / "c.json"
    c.write_text('{"format": "taskflow-cluster/1", "workers": [], "bandwidth": 1, "latency": 0}')
    code, _, err = run(capsys, "schedule", HEFT_G, "--cluster", c, "--scheduler", "random")
    assert code == 2 and "cluster has no workers" in err


def test_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "info", tmp_path / "nope.json")
    assert code == 2 and "no such file" in err


# ---------------------------------------------------------------- simulate
def test_simulate_writes_a_trace_that_validate_accepts(capsys, tmp_path):
    out, chrome = tmp_path / "trace.json", tmp_path / "chrome.json"
    code, text, err = run(
        capsys,
        "simulate",
        HEFT_G,
        "--cluster",
        HEFT_C,
        "--network",
        "simple",
        "--noise",
        "0.2",
        "--straggler",
        "p1:2@10",
        "--fail",
        "p2@50",
        "--seed",
        "1",
        "-o",
        out,
        "--chrome-trace",
        chrome,
    )
    assert code == 0, err
    assert "heft on simple: makespan" in text and "recomputed:" in text
    doc = json.loads(out.read_text())
    assert doc["format"] == "taskflow-schedule/1" and "transfers" in doc and "durations" in doc
    assert any("#" in str(a["task"]) for a in doc["assignments"])  # a recomputed run
    code, text, err = run(capsys, "validate", HEFT_G, "--cluster", HEFT_C, "--schedule", out, "--trace")
    assert code == 0 and text.startswith("valid:"), err
    # without --trace the model's durations rule: the noise made the runs differ from them
    code, text, err = run(capsys, "validate", HEFT_G, "--cluster", HEFT_C, "--schedule", out)
    assert code == 1 and "its duration there is" in err
    events = json.loads(chrome.read_text())["traceEvents"]
    assert {e["cat"] for e in events} == {"task", "transfer"}


def test_simulate_a_plan_file_reproduces_it(capsys, tmp_path):
    plan = tmp_path / "plan.json"
    run(capsys, "schedule", HEFT_G, "--cluster", HEFT_C, "--scheduler", "cpop", "-o", plan, "-q")
    code, text, _ = run(capsys, "simulate", HEFT_G, "--cluster", HEFT_C, "--plan", plan, "--network", "simple")
    assert code == 0 and "makespan 86 s" in text


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--fail", "p9@3"], "--fail: unknown worker 'p9'"),
        (["--fail", "p1"], "--fail 'p1': expected W@T"),
        (["--straggler", "p1@3"], "expected W:FACTOR@T"),
        (["--straggler", "p1:-2@3"], "FACTOR > 0"),
        (["--scheduler", "nope"], "unknown scheduler 'nope'"),
    ],
)
def test_simulate_bad_options(capsys, tmp_path, argv, message):
    out = tmp_path / "t.json"
    code, _, err = run(capsys, "simulate", HEFT_G, "--cluster", HEFT_C, *argv, "-o", out)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_validate_rejects_a_trace_with_a_wrong_duration(capsys, tmp_path):
    out = tmp_path / "trace.json"
    run(capsys, "simulate", HEFT_G, "--cluster", HEFT_C, "--noise", "0.3", "-o", out)
    doc = json.loads(out.read_text())
    doc["durations"]["t1"] += 1.0  # the world says t1 took longer than it ran
    out.write_text(json.dumps(doc))
    code, _, err = run(capsys, "validate", HEFT_G, "--cluster", HEFT_C, "--schedule", out, "--trace")
    assert code == 1 and "task 't1' runs" in err
