"""Ctrl-C (SIGINT to the whole process group, as a terminal sends it) and SIGTERM (to the command
alone, as ``kill PID`` sends it) end every command with one line, exit status 130 or 143, whole
files and no process left behind, whether the embedded cluster is starting or running."""

from __future__ import annotations

import csv
import importlib.util
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

HEFT_G = os.path.abspath("examples/heft_paper.graph.json")
HEFT_C = os.path.abspath("examples/heft_paper.cluster.json")


def _as_from_a_terminal():
    """Ctrl-C as a terminal's command gets it, whatever started these tests: a shell runs a
    background job (``make test &``) with SIGINT ignored, and its children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def ctrl_c_as_in_a_terminal():
    """This process's Ctrl-C handler as in a terminal's program (see _as_from_a_terminal), put back after."""
    before = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _start(argv, cwd):
    return subprocess.Popen(
        [sys.executable, "-m", "taskflow", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_as_from_a_terminal,
    )


def _workers(proc) -> list:
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for k in kids:
        try:
            if "spawn_main" in " ".join(k.cmdline()):
                out.append(k)
        except psutil.Error:
            pass
    return out


def _wait_until(condition, proc, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the command ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)


def _busy(proc) -> bool:
    """Both workers started and ran Dask for a while (imports done, the cluster up)."""
    ws = _workers(proc)
    try:
        return len(ws) >= 2 and all(sum(w.cpu_times()[:2]) > 0.7 for w in ws)
    except psutil.Error:
        return False


def _ended(proc, sig, to_group: bool, expected: int, timeout: float = 60.0) -> str:
    group = proc.pid
    (os.killpg if to_group else os.kill)(group, sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(group, signal.SIGKILL)
        pytest.fail(f"still running {timeout} s after the signal")
    assert proc.returncode == expected, (proc.returncode, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err  # one line, no traceback, no Dask log
    deadline = time.monotonic() + 10
    while True:  # every process of the group goes (the resource tracker a moment after the command)
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        if time.monotonic() > deadline:
            os.killpg(group, signal.SIGKILL)
            pytest.fail("processes of the command outlived it")
        time.sleep(0.05)
    return err


@pytest.mark.parametrize("moment", ["starting", "running"])
def test_ctrl_c_on_an_embedded_run_is_one_line(tmp_path, moment):
    proc = _start(["run", HEFT_G, "--time-scale", "0.5", "-q"], tmp_path)
    if moment == "starting":  # the first worker process exists: Dask is still being imported there
        _wait_until(lambda: _workers(proc), proc, "worker process")
    else:
        _wait_until(lambda: _busy(proc), proc, "busy workers")
    assert _ended(proc, signal.SIGINT, True, 130) == "error: interrupted\n"


@pytest.mark.parametrize("moment", ["starting", "running"])
def test_sigterm_to_a_run_alone_ends_it_and_its_cluster(tmp_path, moment):
    """Starting: a worker process is being handed its task as the command stops (it failed
    with a traceback, and asyncio reported the cluster's unfinished start, after the line)."""
    proc = _start(["run", HEFT_G, "--time-scale", "0.5", "-q"], tmp_path)
    if moment == "starting":
        _wait_until(lambda: _workers(proc), proc, "worker process")
    else:
        _wait_until(lambda: _busy(proc), proc, "busy workers")
    assert _ended(proc, signal.SIGTERM, False, 143) == "error: terminated\n"


def test_ctrl_c_on_compare_real_is_one_line(tmp_path):
    proc = _start(
        ["compare", HEFT_G, "--cluster", HEFT_C, "--real", "--time-scale", "0.5", "--schedulers", "heft,cpop"], tmp_path
    )
    _wait_until(lambda: _busy(proc), proc, "busy workers")
    assert _ended(proc, signal.SIGINT, True, 130) == "error: interrupted\n"


def test_sigterm_to_bench_alone_ends_its_pool_and_keeps_whole_rows(tmp_path):
    proc = _start(["bench", "--out", "b", "--jobs", "2", "--schedulers", "heft,cpop"], tmp_path)
    _wait_until(lambda: len(psutil.Process(proc.pid).children()) >= 2, proc, "pool workers")
    assert _ended(proc, signal.SIGTERM, False, 143) == "error: terminated\n"
    results = tmp_path / "b" / "results.csv"
    if results.exists():  # whatever was written is whole rows
        with open(results, newline="") as f:
            rows = list(csv.DictReader(f))
        assert all(None not in r and all(v is not None for v in r.values()) for r in rows)


@pytest.mark.parametrize(
    "sig, raised, status, line",
    [
        (signal.SIGTERM, "Terminated", 143, "error: terminated\n"),
        (signal.SIGINT, "KeyboardInterrupt", 130, "error: interrupted\n"),
    ],
)
def test_a_signal_whose_exception_python_dropped_still_ends_the_command(
    sig, raised, status, line, monkeypatch, capsys, ctrl_c_as_in_a_terminal
):
    """Python drops an exception raised where it cannot propagate: SIGTERM arriving as a pool
    forks a worker (in logging's at-fork handler) once let ``taskflow bench`` finish and exit 0,
    printing Python's report of the dropped exception. Here the signal comes inside a finaliser."""
    import taskflow.app.cli as cli
    from taskflow.app.cli import _terminate_as_interrupt

    monkeypatch.setattr(cli, "_quiet_ending", lambda *a: pytest.fail("only the program ends quietly"))

    class Finaliser:
        def __del__(self):
            signal.raise_signal(sig)

    went_on = []

    def command():
        Finaliser()  # collected at once: the signal's exception is raised in __del__ and dropped
        went_on.append(True)
        return 0

    with pytest.raises(KeyboardInterrupt) as e:
        with _terminate_as_interrupt():
            command()
    assert type(e.value).__name__ == raised and went_on == [True]
    assert capsys.readouterr().err == ""  # no report of the dropped exception

    class Parser:  # `taskflow <command>` whose command meets the same signal
        def parse_args(self, argv):
            return type("Args", (), {"func": staticmethod(lambda args: command())})()

    monkeypatch.setattr(cli, "build_parser", lambda: Parser())
    assert cli.main(["anything"]) == status
    assert capsys.readouterr().err == line
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_program_logs_nothing_once_a_signal_ends_it(sig, ctrl_c_as_in_a_terminal):
    """An embedded cluster's scheduler runs on in its own thread while the command unwinds after
    Ctrl-C, and logged the workers the signal had ended (``broadcast to ... failed``) before the
    program's one line. Ending the program, a signal stops logging at once; a caller of ``main``
    (not the program) keeps its logging."""
    import logging
    import threading

    from taskflow.app.cli import _terminate_as_interrupt

    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    log = logging.getLogger("distributed.scheduler")
    keep = Keep()
    log.addHandler(keep)

    def scheduler_thread():  # what Dask's event loop thread logs as the command unwinds
        log.error("broadcast to tcp://127.0.0.1:1 failed")

    try:
        for quiet in (False, True):
            with pytest.raises(KeyboardInterrupt):
                with _terminate_as_interrupt(quiet=quiet):
                    signal.raise_signal(sig)
            t = threading.Thread(target=scheduler_thread)
            t.start()
            t.join()
        assert seen == ["broadcast to tcp://127.0.0.1:1 failed"]  # logged for a caller only
    finally:
        logging.disable(logging.NOTSET)
        log.removeHandler(keep)


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("sklearn") is None,
    reason="needs the torch extra",
)
# SIGTERM to the command alone runs in make test-all; make test sends it to `taskflow run` alone (above)
@pytest.mark.parametrize(
    "sig, to_group, status",
    [pytest.param(signal.SIGTERM, False, 143, marks=pytest.mark.slow), (signal.SIGINT, True, 130)],
)
def test_a_signal_to_train_after_an_epoch_keeps_the_epochs_printed_and_written(tmp_path, sig, to_group, status):
    """``taskflow train`` prints each epoch as it ends and writes ``-o`` then: stopped after epoch
    k, epochs 1..k are on the terminal and in the file; the command ends with one line, and at
    once (a second of unwinding at most, however slow its cluster is to close)."""
    import json

    from workflows.images import write_digits

    write_digits(tmp_path / "digits")
    proc = _start(["train", "digits", "--epochs", "200", "--iterations", "2", "-o", "h.json"], tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / "h.json").exists():  # written as epoch 1 ends
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    t0 = time.monotonic()
    (os.killpg if to_group else os.kill)(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == status and err.count("\n") == 1 and err.startswith("error: "), (proc.returncode, err)
    printed = [line for line in out.splitlines() if line.startswith("epoch ")]
    written = json.loads((tmp_path / "h.json").read_text())["epochs"]
    assert written and len(printed) in (len(written), len(written) - 1)  # written first, then printed
    assert [f"epoch {e['epoch'] + 1}:" for e in written[: len(printed)]] == [p.split(" loss")[0] for p in printed]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".taskflow-")]  # nothing half-written
    assert took < 30  # bounded (within a second on a quiet machine; the machine may be loaded)
