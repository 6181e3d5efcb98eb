"""A generated corpus of malformed and hostile inputs, run through every command that reads input.

Each valid seed document (a graph in each format, a cluster, a schedule) is mutated by a seeded
generator: a value anywhere in it is replaced by a hostile one (a 400-digit integer, text where a
number belongs, a boolean, a list or object where an id belongs, an id holding a newline, a
number too large for a float, ...), a container is given the wrong type, the text is cut short
or nested deeply. Whatever a case does, it must end as the command line promises: accepted (exit
0), or exactly one ``error:`` line and exit 2 (``validate``: ``invalid:`` lines and exit 1), never
an internal error, nothing written when it failed.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from taskflow.app.cli import main

from tests.conftest import EXAMPLES, shared

HOSTILE = [
    10**400,
    -(10**400),
    "1.5",
    "",
    True,
    False,
    None,
    [],
    {},
    [1, [2]],
    {"a": {"b": 1}},
    -1,
    1e308,
    1e20,
    "x\nerror: forged",
    float("nan"),
    float("inf"),
    0,
    2**63,
    "\u202e",
    "a" * 300,
]


def _paths(doc, prefix=()):
    """Every path into a JSON document (containers and leaves)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):  # the first few of a long list are enough
            yield from _paths(v, prefix + (i,))


def _replace(doc, path, value):
    if not path:
        return value
    doc = json.loads(json.dumps(doc))
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return doc


FIELD_HOSTILE = [10**400, "1.5", True, None, [], {"a": 1}, -1, "x\nerror: forged"]


def _keys(doc, out=None) -> set:
    out = set() if out is None else out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            _keys(v, out)
    elif isinstance(doc, list):
        for v in doc:
            _keys(v, out)
    return out


def _replace_field(doc, key, value):
    """``doc`` with the value of every ``key`` field, wherever it is, replaced by ``value``."""
    if isinstance(doc, dict):
        return {k: (value if k == key else _replace_field(v, key, value)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_replace_field(v, key, value) for v in doc]
    return doc


def field_cases(text: str) -> list:
    """Every field name of the document, everywhere at once, set to each of a few hostile values."""
    doc = json.loads(text)
    return [_json_text(_replace_field(doc, k, v)) for k in sorted(_keys(doc)) for v in FIELD_HOSTILE]


def _json_text(doc) -> str:
    return json.dumps(doc, allow_nan=True)


def json_cases(text: str, n: int, seed: int) -> list:
    """``n`` mutations of a JSON document, plus structural ones."""
    rng = random.Random(seed)
    doc = json.loads(text)
    paths = list(_paths(doc))
    out = []
    for _ in range(n):
        path = rng.choice(paths)
        out.append(_json_text(_replace(doc, path, rng.choice(HOSTILE))))
    out.append(text[: rng.randrange(1, max(2, len(text)))])  # cut short
    out.append("[" * 100_000 + "]" * 100_000)  # nested deeply
    out.append('{"format": "taskflow-graph/1", "tasks": [' + "1" * 5000 + "]}")  # a 5,000-digit number
    out.append("\x00\xff binary")
    return out


def xml_cases(text: str, n: int, seed: int) -> list:
    rng = random.Random(seed)
    out = []
    import re

    attrs = [m.span(1) for m in re.finditer(r'="([^"]*)"', text)]
    for _ in range(n):
        a, b = rng.choice(attrs)
        v = rng.choice(["-1", "1e400", "x", "", "1" * 500, "nan", "inf", "\n"])
        out.append(text[:a] + v + text[b:])
    out.append(text[: len(text) // 2])
    out.append('<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "' + "y" * 10 + '">]><adag>&x;</adag>')
    return out


def stg_cases(text: str, n: int, seed: int) -> list:
    rng = random.Random(seed)
    lines = text.splitlines()
    out = []
    for _ in range(n):
        k = rng.randrange(len(lines))
        words = lines[k].split()
        if not words:
            continue
        j = rng.randrange(len(words))
        words[j] = rng.choice(["-1", "1" * 400, "x", "1.5", "99999999", "0"])
        out.append("\n".join(lines[:k] + [" ".join(words)] + lines[k + 1 :]))
    out.append("\n".join(lines[: len(lines) // 2]))
    return out


def zip_cases(data: bytes, n: int, seed: int) -> list:
    """An Estee graph-set zip: random byte flips (corrupt deflate, headers, sizes), and members of
    the wrong kind (binary, wrong column types, records without a graph, an encrypted flag, an
    unknown compression method)."""
    import io
    import zipfile

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))

    def one(member: bytes, name="graphs.json") -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, member)
        return buf.getvalue()

    out += [
        one(bytes(range(256)) * 4),
        one(json.dumps({"graph": [1, 2], "graph_name": "x"}).encode()),
        one(json.dumps({"graph": {"0": 5}, "graph_name": {"0": "g"}}).encode()),
        one(json.dumps([{"graph_name": "g"}]).encode()),
        one(json.dumps([{"graph": [{"d": "slow", "outputs": 3}]}]).encode()),
    ]
    plain = one(b'[{"graph": []}]')
    enc = bytearray(plain)
    enc[6] |= 1  # general purpose flag: encrypted
    cd = enc.rfind(b"PK\x01\x02")
    enc[cd + 8] |= 1
    out.append(bytes(enc))
    odd = bytearray(plain)
    odd[8:10] = (99).to_bytes(2, "little")  # compression method 99
    odd[cd + 10 : cd + 12] = (99).to_bytes(2, "little")
    out.append(bytes(odd))
    return out


def _seeds():
    return {
        "native": (EXAMPLES / "heft_paper.graph.json").read_text(),
        "wfformat": shared("wfinstances", "helloworld-chain-5-chameleon.json").read_text(),
    }


def _cases():
    seeds = _seeds()
    cases = []
    for k, text in enumerate(json_cases(seeds["native"], 150, 1)):
        cases.append(("native", k, ".json", text))
    for k, text in enumerate(json_cases(seeds["wfformat"], 150, 2)):
        cases.append(("wfformat", k, ".json", text))
    for kind in ("native", "wfformat"):
        for k, text in enumerate(field_cases(seeds[kind])):
            cases.append((f"{kind}_field", k, ".json", text))
    dax = shared("dax", "HEFT_paper.xml").read_text()
    for k, text in enumerate(xml_cases(dax, 60, 3)):
        cases.append(("dax", k, ".xml", text))
    stg = shared("stg", "robot.stg").read_text()
    for k, text in enumerate(stg_cases(stg, 60, 4)):
        cases.append(("stg", k, ".stg", text))
    for k, data in enumerate(zip_cases(shared("estee", "elementary.zip").read_bytes(), 60, 7)):
        cases.append(("estee", k, ".zip", data))
    return cases


CASES = _cases()
#: make test runs a third of each corpus (every case whose number is a multiple of 3); make test-all, all
SAMPLE = 3


def _sampled(k: int):
    return [] if k % SAMPLE == 0 else [pytest.mark.slow]


COMMANDS = ["info", "convert", "schedule", "simulate", "run"]


def _check(capsys, tmp_path, argv, outputs, allowed=(0, 2)):
    t0 = time.perf_counter()
    code = main([str(a) for a in argv])
    elapsed = time.perf_counter() - t0
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code in allowed, (argv, code, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]
        assert not any(Path(o).exists() for o in outputs), "a failed command wrote its output"
    elif code == 1:
        assert lines and all(ln.startswith("invalid: ") for ln in lines), err[-2000:]
    assert elapsed < 30, (argv, elapsed)  # bounded: no hang (a loaded machine's seconds included)
    return code


@pytest.mark.parametrize(
    "kind,k,ext,text", [pytest.param(*c, marks=_sampled(c[1]), id=f"{c[0]}-{c[1]}") for c in CASES]
)
def test_a_hostile_graph_file_ends_in_one_error_line_or_is_accepted(capsys, tmp_path, kind, k, ext, text):
    src = tmp_path / f"in{ext}"
    if isinstance(text, str):
        src.write_text(text, errors="surrogateescape")
    else:
        src.write_bytes(text)
    cluster = EXAMPLES / "heft_paper.cluster.json"
    info = None
    for cmd in COMMANDS:
        out = tmp_path / f"out-{cmd}.json"
        if cmd == "info":
            argv, outs = ["info", src], []
        elif cmd == "convert":
            argv, outs = ["convert", src, "-o", out, "--to", "wfformat"], [out]
        elif cmd == "schedule":
            argv, outs = ["schedule", src, "--cluster", cluster, "--scheduler", "heft", "-o", out, "-q"], [out]
        elif cmd == "simulate":
            argv, outs = ["simulate", src, "--workers", "2", "-o", out], [out]
        else:  # run: a file that does not load is refused before a cluster starts
            if info != 2:
                continue  # a loadable graph: running it is another test's business
            argv, outs = ["run", src, "--workers", "1", "-q", "--report", out], [out]
        code = _check(capsys, tmp_path, argv, outs)
        if cmd == "info":
            info = code
        if code == 0 and cmd == "convert":  # accepted: what was written reads back
            from taskflow import load_graph

            assert len(load_graph(out)) == len(load_graph(src))
        if code == 0 and cmd == "schedule":  # accepted: the plan written is valid
            assert main(["validate", str(src), "--cluster", str(cluster), "--schedule", str(out)]) == 0
            capsys.readouterr()


def _cluster_cases():
    text = (EXAMPLES / "heft_paper.cluster.json").read_text()
    cases = json_cases(text, 120, 5) + field_cases(text)
    many = {"format": "taskflow-cluster/1", "workers": [{"id": f"w{i}"} for i in range(200_000)]}
    cases.append(json.dumps(many))
    return cases


CLUSTER_CASES = _cluster_cases()
_PROFILES = None  # filled below


@pytest.mark.parametrize("k", [pytest.param(k, marks=_sampled(k), id=str(k)) for k in range(len(CLUSTER_CASES))])
def test_a_hostile_cluster_file_ends_in_one_error_line_or_is_accepted(capsys, tmp_path, k):
    src = tmp_path / "cluster.json"
    src.write_text(CLUSTER_CASES[k])
    out = tmp_path / "plan.json"
    graph = EXAMPLES / "heft_paper.graph.json"
    code = _check(
        capsys, tmp_path, ["schedule", graph, "--cluster", src, "--scheduler", "heft", "-o", out, "-q"], [out]
    )
    trace = tmp_path / "trace.json"
    _check(capsys, tmp_path, ["simulate", graph, "--cluster", src, "-o", trace], [trace])
    good = tmp_path / "good.json"
    assert (
        main(
            [
                "schedule",
                str(graph),
                "--cluster",
                str(EXAMPLES / "heft_paper.cluster.json"),
                "--scheduler",
                "heft",
                "-o",
                str(good),
                "-q",
            ]
        )
        == 0
    )
    capsys.readouterr()
    _check(capsys, tmp_path, ["validate", graph, "--cluster", src, "--schedule", good], [], allowed=(0, 1, 2))
    if code == 0:  # a mutation that left a valid cluster: what was written reads back and is valid
        assert main(["validate", str(graph), "--cluster", str(src), "--schedule", str(out)]) == 0
        capsys.readouterr()


def _schedule_cases(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan")
    plan = d / "plan.json"
    assert (
        main(
            [
                "schedule",
                str(EXAMPLES / "heft_paper.graph.json"),
                "--cluster",
                str(EXAMPLES / "heft_paper.cluster.json"),
                "--scheduler",
                "heft",
                "-o",
                str(plan),
                "-q",
            ]
        )
        == 0
    )
    return json_cases(plan.read_text(), 200, 6) + field_cases(plan.read_text())


@pytest.fixture(scope="module")
def schedule_cases(tmp_path_factory):
    return _schedule_cases(tmp_path_factory)


@pytest.mark.parametrize("trace", [False, True])
def test_a_hostile_schedule_file_is_invalid_or_an_error_never_a_crash(capsys, tmp_path, schedule_cases, trace):
    for k, text in enumerate(schedule_cases):
        src = tmp_path / f"s{k}.json"
        src.write_text(text)
        _check(
            capsys,
            tmp_path,
            [
                "validate",
                EXAMPLES / "heft_paper.graph.json",
                "--cluster",
                EXAMPLES / "heft_paper.cluster.json",
                "--schedule",
                src,
            ]
            + (["--trace"] if trace else []),
            [],
            allowed=(0, 1, 2),
        )


def test_a_hostile_plan_given_to_simulate_is_one_error_line_or_simulated(capsys, tmp_path, schedule_cases):
    for k, text in enumerate(schedule_cases):
        src = tmp_path / f"p{k}.json"
        src.write_text(text)
        out = tmp_path / f"t{k}.json"
        _check(
            capsys,
            tmp_path,
            [
                "simulate",
                EXAMPLES / "heft_paper.graph.json",
                "--cluster",
                EXAMPLES / "heft_paper.cluster.json",
                "--plan",
                src,
                "-o",
                out,
            ],
            [out],
        )


def _profile_cases():
    doc = {
        "format": "taskflow-cost-profile",
        "version": 1,
        "runs": 1,
        "task_overhead": 0.001,
        "latency": 0.002,
        "backplane": 1e9,
        "dask_placement": {"t1": ["0", 0.0]},
        "speeds": {"0": 1.0, "1": 2.0},
        "bandwidth": {"0": {"1": 1e8}},
        "prefixes": {"t": {"0": 1.0}},
        "tasks": {"t1": {"0": 1.0}},
        "models": {"t": {"fixed": 0.01, "unit": {"0": 1.0, "1": 0.5}, "r2": 0.9}},
    }
    return json_cases(json.dumps(doc), 80, 8) + field_cases(json.dumps(doc))


@pytest.mark.parametrize("k", range(len(_profile_cases())))
def test_a_hostile_cost_profile_is_refused_before_a_cluster_starts(capsys, tmp_path, k):
    """run --profile reads the profile before anything starts: a bad one is one error line; a
    mutation that left it valid is read (the run itself is another test's business)."""
    from taskflow import CostProfile, FormatError

    src = tmp_path / "costs.json"
    src.write_text(_PROFILES[k])
    try:
        CostProfile.load(src)
    except FormatError:
        before = src.read_text()
        _check(capsys, tmp_path, ["run", EXAMPLES / "heft_paper.graph.json", "--profile", src, "-q"], [], allowed=(2,))
        assert src.read_text() == before  # not overwritten


@pytest.mark.parametrize("target", ["/nonexistent/x.json", "", "{dir}", "{file}/x.json", "{input}"])
@pytest.mark.parametrize("cmd", ["convert", "schedule", "simulate"])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(capsys, tmp_path, cmd, target):
    graph = tmp_path / "g.json"
    graph.write_text((EXAMPLES / "heft_paper.graph.json").read_text())
    before = graph.read_text()
    target = target.format(dir=tmp_path, file=graph, input=graph)
    argv = {
        "convert": ["convert", graph, "-o", target],
        "schedule": ["schedule", graph, "--workers", "2", "--scheduler", "heft", "-o", target, "-q"],
        "simulate": ["simulate", graph, "--workers", "2", "-o", target],
    }[cmd]
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--output" in err and err.startswith("error: "), err
    assert graph.read_text() == before


def test_every_output_is_checked_before_the_first_is_written(capsys, tmp_path):
    out = tmp_path / "t.json"
    code = main(
        [
            "simulate",
            str(EXAMPLES / "heft_paper.graph.json"),
            "--workers",
            "2",
            "-o",
            str(out),
            "--chrome-trace",
            str(tmp_path / "missing" / "c.json"),
        ]
    )
    assert code == 2 and "--chrome-trace" in capsys.readouterr().err
    assert not out.exists()


def test_an_id_holding_a_newline_cannot_forge_a_second_error_line(capsys, tmp_path):
    src = tmp_path / "g.json"
    src.write_text(json.dumps({"format": "taskflow-graph/1", "tasks": [{"id": "a\nerror: forged", "cost": -1}]}))
    code = main(["info", str(src)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "\\n" in err


def test_a_device_file_is_refused_without_reading_it(capsys):
    code = main(["info", "/dev/zero"])
    assert code == 2 and "is a device, expected a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["info", "convert", "schedule", "simulate"])
def test_costs_that_add_up_past_the_largest_float_are_one_error(capsys, tmp_path, cmd):
    """Each cost is a valid float, but a chain of three at 1e308 sums to inf: refused at load,
    never written as 'Infinity' nor as a schedule with infinite times."""
    src = tmp_path / "big.json"
    src.write_text(
        json.dumps(
            {
                "format": "taskflow-graph/1",
                "tasks": [{"id": f"t{i}", "cost": 1e308} for i in range(3)],
                "edges": [{"from": "t0", "to": "t1"}, {"from": "t1", "to": "t2"}],
            }
        )
    )
    out = tmp_path / "out.json"
    argv = {
        "info": ["info", src],
        "convert": ["convert", src, "-o", out, "--to", "wfformat"],
        "schedule": ["schedule", src, "--workers", "2", "--scheduler", "heft", "-o", out, "-q"],
        "simulate": ["simulate", src, "--workers", "2", "-o", out],
    }[cmd]
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "add up past the largest float" in err, err
    assert not out.exists()


def test_a_duration_that_overflows_on_a_slow_worker_is_named(capsys, tmp_path):
    src = tmp_path / "g.json"
    src.write_text(json.dumps({"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": 1e300}]}))
    code = main(["schedule", str(src), "--workers", "1", "--speeds", "1e-10", "--scheduler", "heft", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "task 'a' on worker 'w0': its duration overflows" in err, err


# ---------------------------------------------------------------------- resource bombs, in their own process
def _bombs(d: Path) -> dict:
    """Inputs built to exhaust memory or time, each small on disk."""
    import zipfile

    out = {}
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    out["deep JSON"] = ["info", d / "deep.json"]
    (d / "wide.json").write_text("[" + "{}," * 5_000_000 + "{}]")
    out["5 million objects"] = ["info", d / "wide.json"]
    (d / "digits.json").write_text('{"format": "taskflow-graph/1", "tasks": [{"id": "a", "cost": ' + "9" * 5000 + "}]}")
    out["a 5,000-digit number"] = ["info", d / "digits.json"]
    (d / "xml.xml").write_bytes(b"<adag>" + b"<job/>" * 2_500_000 + b"</adag>")
    out["2.5 million XML elements"] = ["info", d / "xml.xml"]
    (d / "stg.stg").write_text("2000000000\n0 0 0\n")
    out["an STG declaring 2e9 tasks"] = ["info", d / "stg.stg"]
    workers = {"format": "taskflow-cluster/1", "workers": [{"id": f"w{i}"} for i in range(200_000)]}
    (d / "cluster.json").write_text(json.dumps(workers))
    out["200,000 workers"] = [
        "schedule",
        EXAMPLES / "heft_paper.graph.json",
        "--cluster",
        d / "cluster.json",
        "--scheduler",
        "heft",
        "-q",
    ]
    with zipfile.ZipFile(d / "bomb.zip", "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("graphs.json", "w", force_zip64=True) as f:
            chunk = b" " * (1 << 20)
            for _ in range(300):  # 300 MiB of spaces: about 300 KB compressed
                f.write(chunk)
    out["a zip member inflating to 300 MiB"] = ["info", d / "bomb.zip"]
    nested = b"x"
    for _ in range(50):
        import io

        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("inner.zip" if nested != b"x" else "graphs.json", nested)
        nested = buf.getvalue()
    (d / "nested.zip").write_bytes(nested)
    out["zips nested 50 deep"] = ["info", d / "nested.zip", "--format", "estee"]
    out["a device"] = ["info", "/dev/zero"]
    return out


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return _bombs(tmp_path_factory.mktemp("bombs"))


@pytest.mark.parametrize(
    "name",
    [
        "deep JSON",
        "5 million objects",
        "a 5,000-digit number",
        "2.5 million XML elements",
        "an STG declaring 2e9 tasks",
        "200,000 workers",
        "a zip member inflating to 300 MiB",
        "zips nested 50 deep",
        "a device",
    ],
)
def test_a_resource_bomb_is_one_error_line_in_bounded_time_and_memory(bombs, name):
    """Each in its own `taskflow` process: one error line, exit 2, under 10 s and 1 GB of RSS."""
    import os
    import subprocess
    import sys

    # a wrapper process whose only child is the command: its children's peak RSS is the command's
    wrapper = (
        "import resource, subprocess, sys\n"
        "rc = subprocess.run([sys.executable, '-m', 'taskflow'] + sys.argv[1:]).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)\n"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, *map(str, bombs[name])],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    elapsed = time.perf_counter() - t0
    peak_kib, code = (int(x) for x in proc.stdout.split()[-2:])
    err = proc.stderr
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (name, code, err[-1000:])
    assert len(lines) == 1 and lines[0].startswith("error: ") and "internal error" not in err, err[-1000:]
    assert elapsed < 30, (name, elapsed)  # refused, not expanded (the subprocess's own limit is 60)
    print(f"{name}: {elapsed:.2f} s, peak RSS {peak_kib / 1024:.0f} MiB")
    assert peak_kib < 1024 * 1024, (name, peak_kib)


@pytest.mark.parametrize("selector", ["", "weird", "-1", "99999", "1.5", "0#0", "\n"])
def test_an_odd_graph_selector_of_a_graph_set_is_one_error(capsys, tmp_path, selector):
    src = tmp_path / "set.zip"
    src.write_bytes(shared("estee", "elementary.zip").read_bytes())
    for cmd in (["info"], ["convert", "-o", str(tmp_path / "o.json")]):
        argv = [cmd[0], f"{src}#{selector}", *cmd[1:]]
        code = main(argv)
        err = capsys.readouterr().err
        assert code in (0, 2) and "internal error" not in err, err
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
            assert not (tmp_path / "o.json").exists()


_PROFILES = _profile_cases()


@pytest.mark.parametrize(
    "source, message",
    [
        ("def build(:\n", "cannot load (SyntaxError"),
        ("import no_such_module_xyz\n", "cannot load (ModuleNotFoundError"),
        ("raise RuntimeError('boom')\n", "importing it raised RuntimeError: boom"),
        ("def build():\n    raise ValueError('bad size')\n", "building the graph raised ValueError: bad size"),
        ("def build():\n    return 42\n", "returned int, expected a TaskGraph"),
    ],
)
@pytest.mark.parametrize("cmd", ["run", "compare"])
def test_a_broken_module_function_graph_is_one_error_line(capsys, tmp_path, monkeypatch, source, message, cmd):
    import sys

    (tmp_path / "brokendag.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "brokendag", raising=False)
    argv = (
        ["run", "brokendag:build", "--workers", "1", "-q"]
        if cmd == "run"
        else ["compare", "brokendag:build", "--workers", "2", "-q"]
    )
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
