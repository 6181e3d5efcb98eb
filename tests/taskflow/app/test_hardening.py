"""Bad input found by hostile runs, by class: each ends in one line naming the problem and exit
status 2, nothing started and nothing written (numbers of every option checked when parsed; a
scheduler file or address that is not one; a budget without bound; a rerun's id that names a
real task)."""

from __future__ import annotations

import json
import time

import pytest

from taskflow.app.cli import main
from taskflow.trace import run_id

HEFT_G = "examples/heft_paper.graph.json"


def _one_line(capsys, argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (code, err)
    return err


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["schedule", HEFT_G, "--workers", "2", "--scheduler", "heft", "--seed", "-1"],
            "--seed: must be an integer >= 0",
        ),
        (["simulate", HEFT_G, "--workers", "2", "--seed", "-1"], "--seed: must be an integer >= 0"),
        (["compare", HEFT_G, "--workers", "2", "--seed", "x"], "--seed: 'x' is not an integer"),
        (["simulate", HEFT_G, "--workers", "2", "--noise", "nan"], "--noise: must be a finite number >= 0"),
        (["run", HEFT_G, "--time-scale", "-1"], "--time-scale: must be a finite number > 0"),
        (["run", HEFT_G, "--time-scale", "1e308"], "--time-scale: must be a finite number > 0 and <= 1e+06"),
        (["run", HEFT_G, "--size-scale", "nan"], "--size-scale: must be a finite number > 0"),
        (["run", HEFT_G, "--retries", "-1"], "--retries: must be an integer >= 0"),
        (["run", HEFT_G, "--timeout", "nan"], "--timeout: must be a finite number > 0"),
        (["run", HEFT_G, "--workers", "0"], "--workers: must be an integer >= 1"),
        (["bench", "--jobs", "0"], "--jobs: must be an integer >= 1"),
        (["bench", "--jobs", "-1"], "--jobs: must be an integer >= 1"),
        (["testbed", "--threads", "-1", "--", "true"], "--threads: must be an integer >= 1"),
        (
            ["schedule", HEFT_G, "--workers", "2", "--scheduler", "heft-search", "--budget", "99999999999999999999"],
            "--budget: budget '99999999999999999999': expected evaluations",
        ),
        (["nosuch"], "invalid choice: 'nosuch'"),
        (
            ["run", HEFT_G, "--dashboard", "127.0.0.1:99999"],
            "--dashboard: must be HOST:PORT with a port from 0 to 65535",
        ),
        (["run", HEFT_G, "--dashboard", ":8787"], "--dashboard: must be HOST:PORT"),
        (["compare", HEFT_G, "--workers", "2", "--schedulers", ""], "--scheduler: empty value ''"),
    ],
)
def test_a_bad_number_or_word_is_one_line_when_parsed(argv, message, capsys, no_cluster):
    assert message in _one_line(capsys, argv)  # refused before anything starts (no_cluster)


def test_a_scheduler_file_that_is_missing_or_not_one_is_named(capsys, tmp_path, monkeypatch):
    import threading

    import taskflow.runtime.launch.existing as existing

    monkeypatch.setattr(existing, "SCHEDULER_FILE_WAIT", 1.0)
    t0 = time.monotonic()
    err = _one_line(capsys, ["run", HEFT_G, "--scheduler-file", tmp_path / "nope.json", "-q"])
    assert f"{tmp_path / 'nope.json'}: no such scheduler file (waited 1 s for it)" in err
    later = tmp_path / "later.json"  # a scheduler started a moment ago: its file comes, and is read
    threading.Timer(0.3, lambda: later.write_text(json.dumps({"address": "garbage"}))).start()
    assert "'garbage' is not a Dask scheduler address" in _one_line(capsys, ["run", HEFT_G, "--scheduler-file", later])
    bad = tmp_path / "bad.json"
    bad.write_text("garbage")
    assert "not a Dask scheduler file (JSONDecodeError" in _one_line(capsys, ["run", HEFT_G, "--scheduler-file", bad])
    bad.write_text(json.dumps({"type": "Scheduler"}))
    assert 'not a Dask scheduler file (no "address")' in _one_line(capsys, ["run", HEFT_G, "--scheduler-file", bad])
    assert "is not a Dask scheduler address" in _one_line(capsys, ["run", HEFT_G, "--address", "garbage"])
    assert time.monotonic() - t0 < 60  # nothing waited for past its bound (a loaded machine's seconds included)


@pytest.mark.parametrize("address", ["garbage", "tcp://127.0.0.1", "tcp://[::1", "nosuchscheme://x:1"])
def test_a_bad_address_leaves_no_half_built_client(address):
    # a client whose start failed was closed by its __del__ whenever the collector ran: inside the
    # next client's start, that deadlocked a whole test session
    import gc

    from distributed import Client

    from taskflow.errors import TaskflowError
    from taskflow.runtime.client.connecting import client_for

    # type(), not isinstance: a dead weak proxy among the objects (torch leaves some) raises on isinstance
    before = {id(o) for o in gc.get_objects() if issubclass(type(o), Client)}  # other tests' clients
    with pytest.raises(TaskflowError, match="is not a Dask scheduler address"):
        client_for(address, None)
    assert not [o for o in gc.get_objects() if issubclass(type(o), Client) and id(o) not in before]


def test_a_reruns_id_never_names_a_real_task(tmp_path, capsys):
    assert run_id("a", 1, {"a"}) == "a" and run_id("a", 2, {"a"}) == "a#2"
    assert run_id("a", 2, {"a", "a#2"}) == "a#2#" and run_id("a", 2, {"a", "a#2", "a#2#"}) == "a#2##"
    g = tmp_path / "g.json"
    g.write_text(
        json.dumps(
            {
                "format": "taskflow-graph/1",
                "name": "g",
                "tasks": [{"id": "a", "cost": 1.0, "output_size": 1e9}, {"id": "a#2", "cost": 2.0}],
                "edges": [{"from": "a", "to": "a#2", "size": 1e9}],
            }
        )
    )
    out = tmp_path / "t.json"
    code = main(
        [
            "simulate",
            str(g),
            "--workers",
            "2",
            "--fail",
            "w0@1.5",
            "--scheduler",
            "round-robin",
            "--bandwidth",
            "1e8",
            "-q",
            "-o",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and "recomputed: a" in text
    runs = {a.get("run", a["task"]) for a in json.loads(out.read_text())["assignments"]}
    assert {"a", "a#2", "a#2#"} <= runs


def test_a_call_cancelled_by_a_scheduler_gone_is_a_lost_scheduler_not_a_cancelled_error():
    """Cleanup after a lost scheduler calls it once more; Dask cancels that call (CancelledError, a
    BaseException), which must read as the lost scheduler and not escape a ``finally:``."""
    import asyncio
    from types import SimpleNamespace

    import taskflow
    from taskflow.runtime.client.session import call

    def sync(*args, **kwargs):
        raise asyncio.CancelledError()

    client = SimpleNamespace(sync=sync, scheduler=SimpleNamespace(address="tcp://gone:1", taskflow_forget=None))
    with pytest.raises(
        taskflow.SchedulerLost, match=r"lost the Dask scheduler \(tcp://gone:1\) during 'taskflow_forget'"
    ):
        call(client, "taskflow_forget", run="r")


def test_samples_never_overwrite_unasked_nor_write_through_a_link(tmp_path, capsys):
    out = tmp_path / "kit"
    assert main(["samples", "--out", str(out)]) == 0
    capsys.readouterr()
    mine = out / "graph.json"
    mine.write_text("my own work")
    err = _one_line(capsys, ["samples", "--out", out])
    assert "exist already; nothing written (give --force to replace them)" in err
    assert mine.read_text() == "my own work"
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    mine.unlink()
    mine.symlink_to(secret)
    assert main(["samples", "--out", str(out), "--force"]) == 0
    assert secret.read_text() == "outside" and not mine.is_symlink() and '"taskflow-graph/1"' in mine.read_text()
    mine.unlink()
    mine.mkdir()
    before = sorted(p.name for p in out.iterdir())
    assert f"{mine}: is a folder" in _one_line(capsys, ["samples", "--out", out, "--force"])
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written on the way


def test_a_write_that_fails_names_the_users_file_and_leaves_the_old_one(tmp_path, monkeypatch):
    import errno
    import os

    from taskflow.formats import atomic_write

    target = tmp_path / "report.json"
    target.write_text("old")

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as e:
        atomic_write(target, "new " * 1000)
    assert e.value.filename == str(target) and e.value.errno == errno.ENOSPC
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_an_output_on_a_dangling_link_replaces_the_link_and_a_too_long_name_is_named(tmp_path, capsys):
    cluster = "examples/heft_paper.cluster.json"
    link = tmp_path / "plan.json"
    link.symlink_to(tmp_path / "missing" / "x.json")
    assert main(["schedule", HEFT_G, "--cluster", cluster, "--scheduler", "heft", "-o", str(link), "-q"]) == 0
    assert not link.is_symlink() and not (tmp_path / "missing").exists()
    assert json.loads(link.read_text())["format"] == "taskflow-schedule/1"
    capsys.readouterr()
    long = tmp_path / ("x" * 300 + ".json")
    code = main(["schedule", HEFT_G, "--cluster", cluster, "--scheduler", "heft", "-o", str(long), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(long) in err and ".taskflow-" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_workers_is_the_number_of_batch_jobs(monkeypatch, capsys):
    """With ``--jobqueue``, ``--workers`` is the number of batch jobs of one worker each (``--jobs``,
    its earlier spelling, still reads the same); a batch run without it is refused (no scheduler
    or batch system needed: the runtime's entry point is replaced by one that reports what it was
    given)."""
    import taskflow.runtime
    from taskflow import TaskflowError

    def fake_run(graph, name, **kwargs):
        raise TaskflowError(f"would start {kwargs['workers']} worker(s) via {kwargs['jobqueue']}")

    monkeypatch.setattr(taskflow.runtime, "run", fake_run)
    assert "would start 1 worker(s) via slurm" in _one_line(
        capsys, ["run", HEFT_G, "--jobqueue", "slurm", "--workers", "1"]
    )
    assert "would start 3 worker(s) via pbs" in _one_line(capsys, ["run", HEFT_G, "--jobqueue", "pbs", "--jobs", "3"])
    assert "--jobqueue needs --workers N" in _one_line(capsys, ["run", HEFT_G, "--jobqueue", "slurm"])
    assert "would start 2 worker(s) via None" in _one_line(capsys, ["run", HEFT_G])


def test_bench_resumes_from_a_cut_file_and_refuses_one_that_is_not_its_own(tmp_path, capsys):
    from taskflow.app.bench import read_results
    from taskflow.app.suite import FIELDS

    path = tmp_path / "results.csv"
    row = dict(
        zip(FIELDS, ["w", "f", "c", "simple", "heft", "0", "10", "5.0", "4.0", "1.2", "2", "0.5", "0.001", "True"])
    )
    head = ",".join(FIELDS) + "\n"
    whole = ",".join(row.values()) + "\n"
    path.write_text(head + whole + whole.replace(",heft,", ",cpop,") + "w,f,c,simple,blevel,0,1")  # killed mid-row
    rows = read_results(path)
    assert [r["scheduler"] for r in rows] == ["heft", "cpop"]
    assert path.read_text().endswith(",True\n") and path.read_text().count("\n") == 3  # rewritten whole
    path.write_text(head + whole.replace(",5.0,", ",five,"))
    assert read_results(path) == []
    path.write_bytes(b"\xff\xfe\x00garbage")
    err = _one_line(capsys, ["bench", "--out", tmp_path, "-q"])
    assert f"{path}: not a results file of taskflow bench (not UTF-8 text)" in err
    path.write_text("a,b\n1,2\n")
    assert "not a results file of this version" in _one_line(capsys, ["bench", "--out", tmp_path, "-q"])


@pytest.mark.parametrize(
    "body, said",
    [
        ("sys.exit(0)", "building the graph called sys.exit(0)"),
        ("sys.exit(5)", "building the graph called sys.exit(5)"),
        ("raise KeyboardInterrupt", "building the graph raised KeyboardInterrupt"),
    ],
)
def test_a_users_module_that_exits_or_interrupts_is_named(body, said, tmp_path, monkeypatch, capsys):
    name = f"exits_{abs(hash(body))}"
    (tmp_path / f"{name}.py").write_text(f"import sys\n\n\ndef build():\n    {body}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert f"{name}:build: {said}" in _one_line(capsys, ["info", f"{name}:build"])


@pytest.mark.parametrize(
    "doc, number",
    [
        (
            {
                "format": "taskflow-cluster/1",
                "name": "x",
                "workers": [{"id": "a"}, {"id": "b"}],
                "racks": {"a": 1, "b": 2},
                "uplink": "BIG",
            },
            "1e400",
        ),
        ({"format": "taskflow-cluster/1", "name": "x", "workers": [{"id": "a", "speed": "BIG"}]}, "-2e308"),
    ],
)
def test_a_number_a_float_cannot_hold_is_named_not_taken_for_infinity(tmp_path, capsys, doc, number):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc).replace('"BIG"', number))
    err = _one_line(capsys, ["schedule", HEFT_G, "--cluster", path, "--scheduler", "heft"])
    assert f"{path}: the number {number} is out of range" in err
    g = json.loads(open(HEFT_G).read())
    g["tasks"][0]["cost"] = "BIG"
    path.write_text(json.dumps(g).replace('"BIG"', "1" + "0" * 400 + ".5"))
    assert "is out of range" in _one_line(capsys, ["schedule", path, "--workers", "2", "--scheduler", "heft"])


@pytest.mark.parametrize("command", [["schedule", "--scheduler", "heft"], ["simulate"], ["compare"]])
def test_ids_holding_control_characters_are_printed_escaped(tmp_path, capfd, command):
    bad = ["a\x1b[31mRED", "b\x08\x08", "c\u202eevil", "d\x07"]
    g = tmp_path / "g.json"
    g.write_text(
        json.dumps(
            {
                "format": "taskflow-graph/1",
                "name": "n\x1b[2J",
                "tasks": [{"id": t, "cost": 1.0} for t in bad],
                "edges": [{"from": bad[0], "to": bad[1]}],
            }
        )
    )
    code = main([command[0], str(g), "--workers", "2", *command[1:]])
    out, err = capfd.readouterr()
    assert code == 0, err
    for raw in ("\x1b", "\x08", "\u202e", "\x07"):
        assert raw not in out + err
    if command[0] != "compare":  # the per-worker table names the tasks
        assert "a\\x1b[31mRED" in out and "c\\u202eevil" in out


@pytest.fixture
def full_disk(tmp_path):
    """A folder on a 64 KiB tmpfs filled to the last byte (needs root: else the test skips)."""
    import os
    import subprocess

    where = tmp_path / "full"
    where.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("a full filesystem needs root (mount -t tmpfs)")
    try:
        f = open(where / "filler", "wb", buffering=0)
        for chunk in (4096, 1):  # to the last byte
            try:
                while True:
                    f.write(b"x" * chunk)
            except OSError:
                pass
        f.close()
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_report_onto_a_full_disk_is_one_error_and_leaves_nothing(full_disk, tmp_path, capsys):
    g = tmp_path / "g.json"
    g.write_text(
        json.dumps({"format": "taskflow-graph/1", "name": "g", "tasks": [{"id": "a", "cost": 0.01}], "edges": []})
    )
    report = full_disk / "report.json"
    code = main(["run", str(g), "--workers", "1", "-q", "--report", str(report)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(report) in err and "No space left" in err, err
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler"]  # no report, no temporary file


def test_an_output_name_too_long_for_the_filesystem_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / ("a" * 300 + ".json")
    code = main(["schedule", HEFT_G, "--workers", "2", "--scheduler", "heft", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""  # no plan printed: nothing was done
    assert f"--output '{out}': the file name is longer than this filesystem takes" in captured.err
    assert list(tmp_path.iterdir()) == []
