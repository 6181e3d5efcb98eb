"""A user's files and the system's are never replaced by an output, and no input read blocks: every
command refuses an output that is a device, a FIFO or under /proc, or that lies inside an input,
before any work, and writes nothing (taskflow.files)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from taskflow.errors import FormatError, UsageError
from taskflow.files import check_output, check_outputs, open_append, open_regular
from taskflow.formats import atomic_write

from tests.conftest import EXAMPLES

GRAPH = str(EXAMPLES / "heft_paper.graph.json")


def _fifo(tmp_path, name="pipe"):
    p = tmp_path / name
    os.mkfifo(p)
    return p


def _within(seconds, fn, *args):
    """``fn(*args)``'s exception, raised in a thread that must end within ``seconds`` (a read that
    blocks on a FIFO would not)."""
    box = []

    def call():
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box.append(e)
        else:
            box.append(None)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn.__name__} blocked"
    return box[0]


@pytest.mark.parametrize("target", ["/dev/null", "/dev/full", "/proc/taskflow-test", "/proc/self/status"])
def test_a_system_path_is_refused_as_an_output(target):
    with pytest.raises(UsageError, match=r"--output '/(dev|proc)/"):
        check_output("--output", target)


def test_a_fifo_a_folder_and_a_link_to_a_device_are_refused(tmp_path):
    fifo = _fifo(tmp_path)
    link = tmp_path / "null-link"
    link.symlink_to("/dev/null")
    for p, kind in ((fifo, "a pipe"), (tmp_path, "a folder"), (link, "a device")):
        with pytest.raises(UsageError, match=kind):
            check_output("-o", str(p))
    # a link to a regular file is fine: it is replaced, not written through
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "ok-link").symlink_to(tmp_path / "real.json")
    check_output("-o", str(tmp_path / "ok-link"))


def test_an_output_inside_an_input_folder_or_on_an_input_is_refused(tmp_path):
    data = tmp_path / "data" / "train" / "0"
    data.mkdir(parents=True)
    (data / "a.png").write_bytes(b"x")
    for out in (data / "a.png", data / "new.png", tmp_path / "data" / "h.json"):
        with pytest.raises(UsageError, match="inside the input folder"):
            check_output("--plot", str(out), [str(tmp_path / "data")])
    # a folder the command will make is an input folder too
    with pytest.raises(UsageError, match="inside the input folder"):
        check_output("-o", str(tmp_path / "new" / "h.json"), [str(tmp_path / "new")])
    g = tmp_path / "g.json"
    g.write_text("{}")
    with pytest.raises(UsageError, match="is an input"):
        check_output("-o", str(g), [str(g)])
    check_output("-o", str(tmp_path / "beside.json"), [str(tmp_path / "data"), str(g)])


def test_every_output_is_checked_before_any_is_written(tmp_path):
    with pytest.raises(UsageError, match="--cost-graph '/proc/x'"):
        check_outputs([("--profile", str(tmp_path / "p.json")), ("--cost-graph", "/proc/x")])
    with pytest.raises(UsageError, match="name the same file"):
        check_outputs([("-o", str(tmp_path / "a.json")), ("--profile", str(tmp_path / "a.json"))])
    assert list(tmp_path.iterdir()) == []


def test_atomic_write_never_replaces_what_is_not_a_regular_file(tmp_path):
    fifo = _fifo(tmp_path)
    with pytest.raises(FormatError, match="a pipe"):
        atomic_write(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(FormatError, match="a device"):
        atomic_write("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temporary file left


def test_an_input_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = _fifo(tmp_path)
    e = _within(10, open_regular, str(fifo), "checkpoint")
    assert isinstance(e, UsageError) and "checkpoint" in str(e) and "a pipe" in str(e)
    e = _within(10, open_append, str(fifo))
    assert isinstance(e, UsageError) and "a pipe" in str(e)
    from taskflow.formats import load_graph, read_json

    for reader in (read_json, load_graph):
        e = _within(10, reader, str(fifo))
        assert isinstance(e, FormatError) and "a pipe" in str(e)


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", GRAPH, "-o", "{fifo}"],
        ["schedule", GRAPH, "-o", "{fifo}"],
        ["schedule", GRAPH, "--plot", "{fifo}.png"],
        ["simulate", GRAPH, "--chrome-trace", "{fifo}"],
        ["simulate", GRAPH, "--plot", "{fifo}.png"],
        ["info", "{fifo}"],
        ["advise", GRAPH, "--profile", "{fifo}", "--catalog", "tiny"],
        ["advise", GRAPH, "--catalog", "tiny", "-o", "{fifo}"],
    ],
)
def test_every_command_refuses_a_fifo_at_once_and_writes_nothing(tmp_path, capsys, argv):
    from taskflow.app.cli import main

    fifo = _fifo(tmp_path)
    _fifo(tmp_path, "pipe.png")
    box = []
    e = _within(60, lambda: box.append(main([a.format(fifo=fifo) for a in argv])))
    assert e is None and box == [2]
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "pipe" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "pipe.png"]
    assert all(stat.S_ISFIFO(os.stat(p).st_mode) for p in tmp_path.iterdir())


def test_a_graph_command_refuses_dev_null_and_leaves_it_a_device(capsys):
    from taskflow.app.cli import main

    assert main(["convert", GRAPH, "-o", "/dev/null"]) == 2
    assert "'/dev/null': is a device" in capsys.readouterr().err
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_an_output_folder_inside_an_input_folder_is_refused(tmp_path, capsys):
    from taskflow.app.cli import main

    (tmp_path / "graphs").mkdir()
    g = tmp_path / "graphs" / "g.json"
    g.write_bytes(open(GRAPH, "rb").read())
    assert main(["compare", str(tmp_path / "graphs"), "-o", str(tmp_path / "graphs" / "out")]) == 2
    assert "inside the input folder" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "graphs").iterdir()) == ["g.json"]


def test_bytes_are_said_in_the_unit_that_fits_and_read_back():
    from taskflow.checks import format_bytes, parse_bytes

    for n, text in ((0, "0 B"), (512, "512 B"), (79_440, "79.4 kB"), (4.76e6, "4.76 MB"), (2.5e9, "2.5 GB")):
        assert format_bytes(n) == text
        if n:
            assert parse_bytes(text.replace(" ", "")) == pytest.approx(n, rel=5e-3)
