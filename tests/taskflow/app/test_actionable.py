"""Failures a user can act on, reports that say what is true, and the hostile inputs of the newest
features: a failing task is one line in the user's own file and line, a timeout and Ctrl-C are
kept, a report without a plan or a prediction says so instead of 0% or NaN, and inputs built to
hang, exhaust memory, overwrite a user's file or be silently misread are refused in one line."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

import taskflow
from taskflow import TaskflowError
from taskflow.app.cli import main

from tests.conftest import EXAMPLES

GRAPH, CLUSTER = str(EXAMPLES / "heft_paper.graph.json"), str(EXAMPLES / "heft_paper.cluster.json")
TINY = Path(taskflow.__file__).parent / "advisor" / "catalogs" / "tiny.yaml"
COMMAND = Path(sys.executable).parent / "taskflow"  # the console script, as a user runs it


def _command(argv, cwd, **kw):
    return subprocess.run([str(COMMAND), *argv], cwd=cwd, capture_output=True, text=True, timeout=120, **kw)


# ---------------------------------------------------------------------- a task that raises
@pytest.fixture
def failing_module(tmp_path):
    (tmp_path / "bad.py").write_text(
        textwrap.dedent("""\
        from taskflow import TaskGraph

        def work(i):
            if i == 2:
                raise ValueError(f"bad input {i}")
            return i

        def build():
            g = TaskGraph("bad")
            parts = [g.add_task(f"work{i}", fn=work, args=(i,), cost=0.1) for i in range(4)]
            g.add_task("total", fn=lambda *xs: sum(xs), args=tuple(parts), cost=0.1)
            return g
        """)
    )
    return tmp_path


def test_a_failing_task_is_one_line_in_the_users_file_and_line_and_exit_1(failing_module):
    p = _command(["run", "bad:build", "-q"], failing_module)
    assert p.returncode == 1, p.stderr  # a run that failed, not bad input (2)
    assert p.stderr == "error: task 'work2' failed: ValueError: bad input 2 (at bad.py:5, in work)\n"
    assert "Compute Failed" not in p.stderr and "<dynamic-code>" not in p.stderr


def test_verbose_prints_the_traceback_in_the_users_file(failing_module):
    p = _command(["run", "bad:build", "-q", "-v"], failing_module)
    assert p.returncode == 1
    assert f'File "{failing_module / "bad.py"}", line 5, in work' in p.stderr
    assert 'raise ValueError(f"bad input {i}")' in p.stderr  # the source line, read from the user's file
    assert p.stderr.rstrip().splitlines()[-1].startswith("error: task 'work2' failed")


def test_task_failed_locates_the_innermost_frame_of_the_users_code(failing_module, monkeypatch):
    monkeypatch.syspath_prepend(str(failing_module))
    monkeypatch.chdir(failing_module)
    import bad

    with pytest.raises(taskflow.TaskFailed) as info:
        taskflow.execute(bad.build())
    assert info.value.where == "bad.py:5, in work"
    assert info.value.traceback_text.rstrip().endswith("ValueError: bad input 2")


# ---------------------------------------------------------------------- timeouts and interrupts
@pytest.fixture
def slow_module(tmp_path):
    (tmp_path / "slow.py").write_text(
        textwrap.dedent("""\
        import time
        from taskflow import TaskGraph

        def work(i):
            time.sleep(60)
            return i

        def build():
            g = TaskGraph("slow")
            for i in range(2):
                g.add_task(f"work{i}", fn=work, args=(i,), cost=0.1)
            return g
        """)
    )
    return tmp_path


def test_a_timeout_counts_from_the_start_and_does_not_wait_for_running_tasks(slow_module, monkeypatch):
    """``timeout=2`` with tasks that sleep a minute: the cluster's start counts, the workers
    running the tasks are ended rather than waited for (their nannies would give them 5 s)."""
    monkeypatch.syspath_prepend(str(slow_module))
    import slow

    t0 = time.monotonic()
    with pytest.raises(taskflow.RunTimeout, match="within 2 s"):
        taskflow.run(slow.build(), "heft", quiet=True, timeout=2)
    # the tasks sleep 60 s: a run that waited for them (or for their workers) would take that long;
    # half of it holds a loaded machine's cluster start and stop
    assert time.monotonic() - t0 < 30


def test_compute_keeps_its_timeout_as_run_does():
    import dask

    t0 = time.monotonic()
    with pytest.raises(taskflow.RunTimeout, match="within 2 s"):
        taskflow.compute(dask.delayed(time.sleep)(60), timeout=2)
    # without the timeout the task's 60 s would be waited out; the margin holds a loaded machine's
    # cluster start and stop (4.8 s once under a full test run)
    assert time.monotonic() - t0 < 2 + 20


def _mapped(pid: int, name: str) -> bool:
    try:
        with open(f"/proc/{pid}/maps") as f:
            return name in f.read()
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc to see how far the import got")
def test_ctrl_c_while_the_command_imports_is_one_line_and_130(tmp_path):
    """Sent once numpy's compiled code is mapped, that is while ``import taskflow`` is under way
    (its first statement installs the handler, before it imports numpy): a traceback from inside
    an import before."""
    p = subprocess.Popen(
        [str(COMMAND), "schedulers"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while not _mapped(p.pid, "numpy") and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=30)
    if p.returncode == 0:  # it had finished before the signal came: nothing to check
        pytest.skip("the command finished first")
    assert (p.returncode, err) == (130, "error: interrupted\n"), err


def test_the_cp_sat_solver_leaves_ctrl_c_to_python():
    """CP-SAT installs its own SIGINT handler while it solves and puts SIG_DFL back after, where
    Python's was: the next Ctrl-C then killed the command with no cleanup (compare --real ran on
    for 39 s, or died with -2)."""
    code = textwrap.dedent("""\
        import os, signal, taskflow
        from taskflow import Cluster
        from workflows.scientific import random_layered
        g = random_layered(12, seed=1)
        taskflow.get_scheduler("optimal", budget=0.5).schedule(g, Cluster.homogeneous(2))
        try:
            os.kill(os.getpid(), signal.SIGINT)
            import time; time.sleep(5)
            print("not interrupted")
        except KeyboardInterrupt:
            print("interrupted")
        """)
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    assert (p.returncode, p.stdout.strip()) == (0, "interrupted"), p.stderr[-500:]


def test_ctrl_c_inside_compiled_code_ends_as_an_interrupt(monkeypatch, capsys):
    """numba returns a SystemError with the KeyboardInterrupt inside it."""
    from taskflow.app.cli import commands

    def interrupted(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise SystemError("CPUDispatcher(<function>) returned a result with an exception set") from e

    monkeypatch.setattr(commands, "info", interrupted)
    from taskflow.app.cli import build_parser

    args = build_parser().parse_args(["info", GRAPH])
    args.func = interrupted
    from taskflow.app.cli import _run

    assert _run(args, program=False) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


# ---------------------------------------------------------------------- reports that say what is true
def test_a_scheduler_without_a_plan_has_no_fidelity_and_no_planned_makespan(client):
    g = taskflow.load_graph(GRAPH)
    rep = taskflow.run(g, "work-stealing", client=client, quiet=True, time_scale=0.01)
    assert rep.placement_fidelity is None and rep.planned_makespan is None
    assert "fidelity" not in rep.summary() and "work-stealing: predicted makespan" in rep.summary()
    doc = rep.to_dict()
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN anywhere
    assert doc["placement_fidelity"] is None
    planned = taskflow.run(g, "heft", client=client, quiet=True, time_scale=0.01)
    assert planned.placement_fidelity == 1.0 and "placement fidelity 100%" in planned.summary()


def test_a_run_without_a_prediction_says_why_instead_of_nan(client):
    import dask

    x = dask.delayed(sum)([1, 2, 3])
    for _ in range(2):
        value, rep = taskflow.compute(x, client=client, report=True)
        assert value == (6,)
        p = rep.predicted_makespan
        assert (
            p is None and rep.no_prediction and rep.prediction_error is None and "no prediction" in rep.summary()
        ) or (p is not None and math.isfinite(p))
        json.dumps(rep.to_dict(), allow_nan=False)


def test_quiet_runs_keep_their_notes_and_do_not_warn(client, recwarn):
    from tests import runtime_graphs as rg

    rep = taskflow.run(rg.mixed_costs(), "heft", client=client, quiet=True)
    assert rep.notes and "look like guesses" in rep.notes[0]
    assert not [w for w in recwarn if issubclass(w.category, taskflow.TaskflowWarning)]


# ---------------------------------------------------------------------- the Python API's arguments
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"workers": 0}, "workers to be an integer from 1"),
        ({"workers": -1}, "workers to be an integer from 1"),
        ({"cluster": "str"}, "cluster must be a taskflow.Cluster"),
        ({"timeout": float("nan")}, "timeout must be"),
        ({"costs": {"sum": -1.0}}, r"costs\['sum'\] must be"),
        ({"costs": {"sum": float("nan")}}, r"costs\['sum'\]"),
        ({"client": "tcp://x"}, "client must be a distributed.Client"),
    ],
)
def test_compute_refuses_what_would_hang_or_fail_before_any_cluster_starts(kwargs, match):
    import dask

    with pytest.raises(TaskflowError, match=match):
        taskflow.compute(dask.delayed(sum)([1, 2]), **kwargs)


def test_every_scheduler_refuses_an_unknown_option_with_the_nearest_one():
    with pytest.raises(TaskflowError, match="adaptive: unknown option 'margn'; did you mean 'margin'"):
        taskflow.get_scheduler("adaptive", margn=0.2)
    with pytest.raises(TaskflowError, match="heft-search: unknown option 'budgt'; did you mean 'budget'"):
        taskflow.get_scheduler("heft-search", budgt=3)
    with pytest.raises(TaskflowError, match="heft: seed must be an integer"):
        taskflow.get_scheduler("heft", seed="1")
    from taskflow.scheduling import available, scheduler_class

    for name in available():
        if scheduler_class(name).option_names is not None:
            with pytest.raises(TaskflowError, match="unknown option"):
                taskflow.get_scheduler(name, definitely_not_an_option=1)


def test_use_with_no_scheduler_refuses_options(client):
    with pytest.raises(TaskflowError, match="takes no options"):
        taskflow.use(client, None, margin=0.2)
    with pytest.raises(TaskflowError, match="unknown option 'sedd'"):
        taskflow.use(client, "heft", sedd=1)
    with pytest.raises(TaskflowError, match="adaptive: margin must be a number"):
        taskflow.use(client, "adaptive", margin="0.2")
    with pytest.raises(TaskflowError, match="name the scheduler once"):
        taskflow.use(client, "heft", policy="cpop")  # the earlier keyword, beside the new one


# ---------------------------------------------------------------------- hostile input
def test_a_rate_of_many_digits_is_refused_at_once():
    """The rate and size pattern matched in quadratic time: 100,000 digits then '!' took minutes."""
    from taskflow.checks import _AMOUNT, parse_rate, split_amount

    text = "1" * 100_000 + "!"
    assert split_amount(text) is None and split_amount("2" * 70 + "x") is None  # longer than an amount is
    assert _AMOUNT.fullmatch(text) is None  # and the pattern itself fails in linear time (minutes before)
    with pytest.raises(TaskflowError, match="expected a number with a unit"):
        parse_rate(text)
    assert split_amount(" 1.5 GiB ") == (1.5, "GiB") and split_amount(".5e3mbit") == (500.0, "mbit")
    assert main(["schedule", GRAPH, "--workers", "2", "--bandwidth", text, "-q"]) == 2
    assert main(["advise", "--train", text, "--catalog", "tiny", "-q"]) == 2


def _catalog(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("price: 0.10", "price: 1:30"), "price must be a number, got '1:30'"),
        (lambda t: t.replace("price: 0.10", "price: 0x10"), "price must be a number, got '0x10'"),
        (lambda t: t.replace("    cores: 2\n", "    cores: 2\n    cores: 3\n", 1), "key 'cores' given twice"),
        (lambda t: t.replace("price: 0.10", "price: " + "9" * 5000), "an integer of 5,000 digits"),
        (lambda t: t.replace("memory: 4GiB", "memory: " + "1" * 100_000 + "!"), "memory must be bytes or a size"),
        (
            lambda t: t.replace("bandwidth: 1gbit", "bandwidth: " + "1" * 100_000 + "!", 1),
            "expected a number with a unit",
        ),
    ],
)
def test_a_catalog_is_read_strictly(tmp_path, capsys, edit, message):
    path = _catalog(tmp_path, edit(TINY.read_text()))
    assert main(["advise", GRAPH, "--catalog", path, "-q"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_a_json_catalog_with_a_huge_integer_or_a_duplicate_key_is_refused(tmp_path, capsys):
    doc = yaml.safe_load(TINY.read_text())
    text = json.dumps(doc).replace('"price": 0.1', '"price": ' + "9" * 5000, 1)
    assert main(["advise", GRAPH, "--catalog", _catalog(tmp_path, text, "c.json"), "-q"]) == 2
    assert "an integer of 5,000 digits" in capsys.readouterr().err
    text = json.dumps(doc)[:-1] + ', "name": "again"}'
    assert main(["advise", GRAPH, "--catalog", _catalog(tmp_path, text, "d.json"), "-q"]) == 2
    assert "key 'name' given twice" in capsys.readouterr().err


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, capsys):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    path = _catalog(tmp_path, "\n".join(lines) + "\nname: bomb\n")  # 10^10 values in 1 KB
    assert main(["advise", GRAPH, "--catalog", path, "-q"]) == 2
    assert "its aliases expand to more than 1,000,000 values" in capsys.readouterr().err


def test_advise_never_writes_over_its_catalog_nor_leaves_half_its_outputs(tmp_path, capsys):
    catalog = tmp_path / "mine.yaml"
    catalog.write_text(TINY.read_text())
    assert main(["advise", GRAPH, "--catalog", str(catalog), "-o", str(catalog), "-q"]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert catalog.read_text() == TINY.read_text()
    out = tmp_path / "advice.json"
    assert main(["advise", GRAPH, "--catalog", "tiny", "-o", str(out), "--plot", str(tmp_path / "front.txt")]) == 2
    assert "--plot" in capsys.readouterr().err and ".txt is not an image format" and not out.exists()


def test_a_name_matplotlib_would_read_as_a_formula_is_drawn_as_text(tmp_path):
    doc = yaml.safe_load(TINY.read_text())
    doc["name"] = "$\\frac{1}{$"
    doc["types"][0]["name"] = "$\\frac{1}{$"
    doc["mix"] = []
    doc["kinds"] = {}
    path = _catalog(tmp_path, yaml.safe_dump(doc))
    png = tmp_path / "front.png"
    assert main(["advise", GRAPH, "--catalog", path, "--plot", str(png), "-q"]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps", "3"], "--steps goes with --train"),
        (["--samples", "3"], "--samples goes with --noise"),
        (["--confidence", "0.5"], "--confidence goes with --noise"),
    ],
)
def test_an_advise_option_without_its_partner_is_refused(capsys, argv, message):
    assert main(["advise", GRAPH, "--catalog", "tiny", *argv]) == 2
    assert message in capsys.readouterr().err


def test_noisy_samples_past_their_bound_are_refused_before_the_first(capsys, monkeypatch):
    import taskflow.advisor as advisor

    monkeypatch.setattr(advisor, "MAX_NOISY_TASKS", 150)  # the example has 10 tasks, 3 configurations on the front
    assert main(["advise", GRAPH, "--catalog", "tiny", "--noise", "0.5", "--samples", "20"]) == 2
    assert (
        "20 noisy samples of 3 front configuration(s) would simulate 600 tasks, more than 150: give fewer "
        "samples (at most 5 here)"
    ) in capsys.readouterr().err
    assert main(["advise", GRAPH, "--catalog", "tiny", "--noise", "0.5", "--samples", "5", "-q"]) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--fail", "p1@1e400"], "time must be finite"),
        (["--straggler", "p1:2@1e400"], "finite time"),
        (["--noise", "1000"], "--noise: must be a finite number >= 0 and <= 10"),
    ],
)
def test_simulate_refuses_faults_it_cannot_carry_out(capsys, argv, message):
    assert main(["simulate", GRAPH, "--cluster", CLUSTER, "-q", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "internal error" not in err


def test_noise_at_its_bound_still_finishes_every_task():
    g, c = taskflow.load_graph(GRAPH), taskflow.load_cluster(CLUSTER)
    trace = taskflow.simulate(g, c, "heft", noise=10.0, seed=3)
    assert len(trace.runs) == len(g) and math.isfinite(trace.makespan)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--suite", "dask", "--workloads", ""], "--workloads: empty value"),
        (["--suite", "quick", "--repeat", "3"], "--repeat goes with --suite dask"),
        (["--suite", "dask", "--processes", "2"], "--processes goes with the simulated suites"),
        (["--suite", "dask", "--real"], "--real goes with the simulated suites"),
    ],
)
def test_bench_refuses_options_of_another_suite(tmp_path, capsys, argv, message):
    assert main(["bench", "-o", str(tmp_path / "b"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_budget_goes_with_a_searching_scheduler_and_the_search_reports_progress(capsys):
    assert main(["schedule", GRAPH, "--cluster", CLUSTER, "--budget", "30", "-q"]) == 2
    assert "--budget goes with --scheduler heft-search or optimal" in capsys.readouterr().err
    shares = []
    g, c = taskflow.load_graph(GRAPH), taskflow.load_cluster(CLUSTER)
    taskflow.get_scheduler("heft-search", budget=200, progress=shares.append).schedule(g, c)
    assert shares and shares == sorted(shares) and 0 < shares[-1] <= 1


def test_a_plot_onto_a_full_disk_leaves_no_file(tmp_path, monkeypatch):
    """A plot is drawn into memory and written whole: a failed write leaves nothing behind."""
    import errno

    from taskflow.formats import _util

    real_fdopen = os.fdopen

    def full(fd, *a, **kw):
        f = real_fdopen(fd, *a, **kw)

        def write(data):
            raise OSError(errno.ENOSPC, "No space left on device")

        f.write = write
        return f

    monkeypatch.setattr(_util.os, "fdopen", full)
    png = tmp_path / "plan.png"
    assert main(["schedule", GRAPH, "--cluster", CLUSTER, "--plot", str(png), "-q"]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_rerun_of_a_task_whose_id_another_rerun_would_take_validates(tmp_path):
    """Ids ``a`` and ``a#2``, and a lost worker that reruns ``a``: its run is ``a#2#``, which
    ``validate --trace`` now maps back to ``a``."""
    from taskflow.trace import run_id, task_of_run

    tasks = {"a", "a#2", "b"}
    for t in ("a", "a#2"):
        for k in (2, 3):
            assert task_of_run(run_id(t, k, tasks), tasks) == t
    assert task_of_run(run_id(7, 2, {7}), {7}) == 7
    graph = tmp_path / "g.json"
    graph.write_text(
        json.dumps(
            {
                "format": "taskflow-graph/1",
                "name": "ids",
                "tasks": [{"id": "a", "cost": 10}, {"id": "a#2", "cost": 10}, {"id": "b", "cost": 5}],
                "edges": [{"from": "a", "to": "b", "size": 1e10}, {"from": "a#2", "to": "b", "size": 1e10}],
            }
        )
    )
    trace = tmp_path / "t.json"
    assert main(["simulate", str(graph), "--workers", "3", "--fail", "w0@12", "-o", str(trace), "-q"]) == 0
    assert "a#2#" in trace.read_text()  # the rerun of a, kept apart from the task a#2
    assert main(["validate", str(graph), "--workers", "3", "--schedule", str(trace), "--trace", "-q"]) == 0


def test_a_json_input_with_a_key_given_twice_is_refused(tmp_path, capsys):
    """The last of two ``cost`` fields silently won before: which one did the user mean?"""
    path = tmp_path / "g.json"
    path.write_text('{"format": "taskflow-graph/1", "name": "x", "tasks": [{"id": "a", "cost": 1, "cost": 2}]}')
    assert main(["info", str(path)]) == 2
    assert "key 'cost' given twice in one object" in capsys.readouterr().err
