"""The input limits are safeguards a user can raise: the largest file read (``--max-bytes``, the
environment variable, ``set_max_bytes``), with the JSON values and XML elements a file may hold
scaled to it; the default holds a million-task graph in our own format; a command on a large graph
prints no per-task table and says each stage's time."""

from __future__ import annotations

import json

import pytest

from taskflow import Cluster, TaskGraph
from taskflow.app.cli import commands, main
from taskflow.errors import FormatError, UsageError
from taskflow.formats import _util, load_graph, save_cluster, save_graph, set_max_bytes


def layers(n: int, width: int = 100) -> TaskGraph:
    """``n`` tasks in layers of ``width``, one parent each in the layer before, 1 MB on every other edge."""
    ids = [f"t{i}" for i in range(n)]
    dst = list(range(width, n))
    src = [(d // width - 1) * width + (d * 7919) % width for d in dst]
    return TaskGraph.from_arrays(
        "layers",
        ids,
        [1.0 + i % 10 for i in range(n)],
        [0.0] * n,
        src,
        dst,
        [1e6 if k % 2 == 0 else 0.0 for k in range(len(dst))],
    )


@pytest.fixture
def limit(monkeypatch):
    """Set the environment's limit (the process's own is left unset)."""
    monkeypatch.setattr(_util, "_max_bytes", None)

    def to(text):
        monkeypatch.setenv(_util.MAX_BYTES_ENV, text)

    return to


def test_a_file_past_the_limit_is_refused_with_how_to_raise_it_and_raising_it_reads_it(tmp_path, limit, capsys):
    path = tmp_path / "g.json"
    save_graph(layers(300), path)
    size = path.stat().st_size
    limit("1KiB")
    with pytest.raises(
        FormatError,
        match=rf"{size:,} bytes, more than the limit of 1,024 \(raise it with "
        r"--max-bytes or TASKFLOW_MAX_BYTES",
    ):
        load_graph(str(path))
    assert main(["info", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-bytes" in err
    assert main(["info", str(path), "--max-bytes", "1MiB"]) == 0
    assert "300 tasks" in capsys.readouterr().out
    with pytest.raises(FormatError, match="more than the limit of 1,024"):  # the command's limit was its own
        load_graph(str(path))
    limit("1MiB")
    assert len(load_graph(str(path))) == 300
    set_max_bytes(2048)  # the process's own beats the environment's
    try:
        with pytest.raises(FormatError, match="more than the limit of 2,048"):
            load_graph(str(path))
    finally:
        set_max_bytes(None)


@pytest.mark.parametrize("text", ["12 parsecs", "-5", "0", "1" * 80, ""])
def test_a_limit_that_is_no_size_is_refused(text, tmp_path, limit, capsys):
    with pytest.raises(UsageError, match="size"):
        set_max_bytes(text)
    path = tmp_path / "g.json"
    save_graph(layers(10), path)
    assert main(["info", str(path), "--max-bytes", text]) == 2
    assert "--max-bytes" in capsys.readouterr().err
    limit(text or " ")
    with pytest.raises(UsageError, match="TASKFLOW_MAX_BYTES: size"):
        load_graph(str(path))


def test_the_values_a_json_file_may_hold_scale_with_the_limit(tmp_path, limit):
    """A file of many tiny values under the byte limit but past the values it allows is refused
    before parsing, and read once the limit is raised."""
    g = TaskGraph("many")
    g.add_task("a", cost=1.0, meta={"v": [0] * 3000})
    path = tmp_path / "many.json"
    save_graph(g, path)
    path.write_text(json.dumps(json.loads(path.read_text()), separators=(",", ":")))
    limit("64KiB")  # 2,048 values allowed; the file holds 3,000 in 6 KB
    assert path.stat().st_size < 64 * 1024
    with pytest.raises(FormatError, match="JSON with more than 2,048 values .*--max-bytes"):
        load_graph(str(path))
    limit("1MiB")
    assert len(load_graph(str(path))) == 1


def test_the_elements_a_dax_file_may_hold_scale_with_the_limit(tmp_path, limit):
    jobs = "".join(f'<job id="j{i}" name="w" runtime="1"/>' for i in range(200))
    path = tmp_path / "g.dax"
    path.write_text(f'<?xml version="1.0"?><adag name="d">{jobs}</adag>')
    limit("8KiB")  # 128 elements allowed
    with pytest.raises(FormatError, match="XML with more than 128 elements"):
        load_graph(str(path))
    limit("1MiB")
    assert len(load_graph(str(path))) == 200


def test_the_default_limit_holds_a_million_task_graph_in_our_own_format(tmp_path):
    """Bytes and JSON values per task of a layered graph (one parent each, 1 MB on every other
    edge), written by ``save_graph``, times a million: within the default limits."""
    n = 5000
    path = tmp_path / "g.json"
    save_graph(layers(n, width=1000), path)
    text = path.read_text()
    per_task_bytes = len(text) / n
    per_task_values = (text.count(",") + text.count("[") + text.count("{")) / n
    assert per_task_bytes * 1_000_000 < _util.DEFAULT_MAX_BYTES
    assert per_task_values * 1_000_000 < _util.DEFAULT_MAX_BYTES * _util.JSON_ITEMS_PER_BYTE


def test_a_command_on_a_large_graph_prints_no_per_task_table_and_says_each_stage(tmp_path, monkeypatch, capsys):
    path, cluster = tmp_path / "g.json", tmp_path / "c.json"
    monkeypatch.setattr(commands, "TABLE_TASKS", 300)  # (the thresholds lowered: the same rule, a smaller graph)
    monkeypatch.setattr(commands, "STAGE_TASKS", 250)
    save_graph(layers(commands.TABLE_TASKS + 100), path)
    save_cluster(Cluster.homogeneous(4), cluster)
    for command in ("schedule", "simulate"):
        assert main([command, str(path), "--cluster", str(cluster)]) == 0
        out, err = capsys.readouterr()
        assert "no per-worker table above 300 tasks" in out and out.count("\n") < 10, out[:500]
        assert f"read {commands.TABLE_TASKS + 100:,} tasks in" in err and "validated and measured in" in err
    small = tmp_path / "small.json"
    save_graph(layers(200), small)
    assert main(["schedule", str(small), "--cluster", str(cluster)]) == 0
    out, err = capsys.readouterr()
    assert out.count("\n") > 4 and "read" not in err  # the table; no stages under STAGE_TASKS
    assert main(["schedule", str(path), "--cluster", str(cluster), "-q"]) == 0
    assert capsys.readouterr().err == ""  # -q: no stages


def _nesting(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


@pytest.mark.parametrize("block", [3, 7, 1 << 24])
def test_the_nesting_count_skips_strings_and_the_number_scan_sees_every_block(block, monkeypatch):
    """The nesting of a JSON text (brackets inside strings left out) is the parsed document's, with
    and without escapes; a number too large for a float is found whatever the blocks the scan for
    one reads the text in (a run of digits across two blocks included)."""
    from hypothesis import given, settings, strategies as st

    monkeypatch.setattr(_util, "_DEPTH_BLOCK", block)
    text_chars = st.text(alphabet='ab[]{}" :,\\\\', max_size=6)
    docs = st.recursive(
        st.none() | st.integers() | text_chars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text_chars, inner, max_size=3),
        max_leaves=12,
    )

    @settings(max_examples=150, deadline=None)
    @given(docs)
    def check(doc):
        text = json.dumps([[doc]] * 70)  # past the count of brackets below which nothing is counted
        assert _util._json_depth(text) == _nesting([[doc]] * 70)

    check()
    for text in ('{"a": [1.5, ' + "7" * 320 + ".0]}", "[1, 2e+400]", "[3E309]"):
        assert _util._may_overflow(text.encode()), text
        with pytest.raises(FormatError, match="out of range"):
            _util.parse_json(text, "s")
    assert _util.parse_json("[" + "7" * 250 + ".0, 1e308]", "s")[1] == 1e308  # flagged, and in range
    assert not _util._may_overflow(b"[1.5, 2e-400, 1e99, 123456]")
