"""The Python API and the scheduler's preload against hostile input: a closed or missing client, a
flag that is not a bool, a scheduler the preload cannot serve, an address where nothing listens, ids
and numbers no file format writes; each one clear error, the documented exit status, no hang."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import taskflow
from taskflow.errors import FormatError, GraphError, LaunchError, SchedulerError, UsageError

from tests.conftest import EXAMPLES

HEFT_G = str(EXAMPLES / "heft_paper.graph.json")


@pytest.mark.parametrize("client", [None, object(), "tcp://127.0.0.1:8786"])
def test_use_refuses_what_is_not_a_client(client):
    with pytest.raises(UsageError, match="client must be a distributed.Client"):
        taskflow.use(client, "heft")


def test_use_and_run_refuse_a_closed_client(client):
    from distributed import Client

    closed = Client(client.scheduler.address, timeout="30s")
    closed.close()
    with pytest.raises(UsageError, match="the client is closed"):
        taskflow.use(closed, "heft")
    with pytest.raises(UsageError, match="the client is closed"):
        taskflow.run(taskflow.load_graph(HEFT_G), "heft", client=closed)


def test_an_option_of_the_wrong_type_is_refused(no_cluster):
    import dask

    with pytest.raises(SchedulerError, match="steal must be True or False"):
        taskflow.get_scheduler("adaptive", steal="no")
    with pytest.raises(UsageError, match="report must be True or False"):
        taskflow.compute(dask.delayed(sum)([1, 2]), report="no")
    with pytest.raises(UsageError, match="quiet must be True or False"):
        taskflow.run(taskflow.load_graph(HEFT_G), "heft", quiet="yes")


def test_the_preload_reads_the_variable_and_its_earlier_spelling_and_checks_either(monkeypatch):
    from taskflow.errors import TaskflowError
    from taskflow.runtime.scheduler.preload import EARLIER, preloaded_scheduler

    monkeypatch.delenv("TASKFLOW_SCHEDULER", raising=False)
    monkeypatch.delenv(EARLIER, raising=False)
    assert preloaded_scheduler() is None
    monkeypatch.setenv(EARLIER, "cpop")
    assert preloaded_scheduler() == "cpop"
    monkeypatch.setenv("TASKFLOW_SCHEDULER", "heft")  # the current spelling wins
    assert preloaded_scheduler() == "heft"
    monkeypatch.setenv("TASKFLOW_SCHEDULER", "nosuch")
    with pytest.raises(TaskflowError, match="nosuch"):  # in a program of one's own: raised
        preloaded_scheduler()


def test_an_unknown_preloaded_scheduler_stops_the_dask_scheduler(tmp_path):
    env = {**os.environ, "TASKFLOW_SCHEDULER": "nosuch"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--preload",
            "taskflow.runtime.scheduler.plugin",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--dashboard-address",  # (its HTTP server starts all the same: no warning of a port in use)
            "127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    errors = [
        ln for ln in proc.stderr.splitlines() if not ln.split(" - ")[-2:-1] == ["INFO"] and " - INFO - " not in ln
    ]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert errors == [errors[0]] and errors[0].startswith("error: TASKFLOW_SCHEDULER='nosuch': unknown scheduler"), (
        errors
    )


def test_an_address_where_nothing_listens_is_bad_input_at_once(capsys):
    import socket

    from taskflow.app.cli import main

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    assert main(["run", HEFT_G, "--address", f"tcp://127.0.0.1:{port}", "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing listens there (connection refused)" in err
    assert time.monotonic() - t0 < 25  # not the client's 30 s of retries
    with pytest.raises(LaunchError):
        taskflow.run(taskflow.load_graph(HEFT_G), "heft", address=f"tcp://127.0.0.1:{port}")


def test_a_fifo_scheduler_file_is_refused_at_once(tmp_path, capsys):
    from taskflow.app.cli import main

    fifo = tmp_path / "sched.json"
    os.mkfifo(fifo)
    assert main(["run", HEFT_G, "--scheduler-file", str(fifo), "-q"]) == 2
    assert "a pipe" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [[1], {"a": 1}, (1, 2)])
def test_an_edge_between_ids_no_format_holds_is_a_graph_error(bad):
    g = taskflow.TaskGraph()
    g.add_task("a", cost=1)
    with pytest.raises(GraphError, match="task ids must be str or int"):
        g.add_edge(bad, "a") if not isinstance(bad, tuple) else g.add_edge("a", list(bad))


@pytest.mark.parametrize("runtime", ["1_000", "٣", "inf", "0x10", "1e5_0"])
def test_a_dax_number_is_read_as_files_write_numbers(tmp_path, runtime):
    p = tmp_path / "w.xml"
    p.write_text(
        f'<adag xmlns="http://pegasus.isi.edu/schema/DAX" version="2.1"><job id="a" runtime="{runtime}"/></adag>'
    )
    with pytest.raises(FormatError, match="runtime .* is not a number"):
        taskflow.load_graph(p)


@pytest.mark.parametrize("text", ["1_000", "٣", " 2"])
def test_an_option_number_is_read_as_files_write_numbers(text, capsys, no_cluster):
    from taskflow.app.cli import main

    assert main(["simulate", HEFT_G, "--workers", text]) == 2
    assert "--workers" in capsys.readouterr().err


def test_advising_with_a_profile_that_measured_nothing_is_refused(tmp_path, capsys):
    import json

    from taskflow.app.cli import main

    empty = tmp_path / "p.json"
    empty.write_text(
        json.dumps(
            {
                "format": "taskflow-cost-profile",
                "version": 1,
                "runs": 0,
                "tasks": {},
                "prefixes": {},
                "bandwidth": {},
                "speeds": {},
                "models": {},
            }
        )
    )
    code = main(["advise", HEFT_G, "--profile", str(empty), "--catalog", "tiny", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and f"cost profile {str(empty)!r} holds no measured task" in err and err.count("\n") == 1, err
