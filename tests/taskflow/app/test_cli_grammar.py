"""One grammar for the whole command line: a walk over every subcommand's parser finds help on
every option and the same syntax wherever an option name recurs; then each shared option is used
as written in every command that takes it."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from taskflow.app.cli import build_parser, main
from taskflow.app.cli.options import GRAPH_HELP, OLD_SPELLINGS, QUIET_HELP, SPEEDS_HELP
from taskflow.app.cli.values import parse_speeds
from taskflow.errors import TaskflowError

from tests.conftest import EXAMPLES

GRAPH, CLUSTER = str(EXAMPLES / "heft_paper.graph.json"), str(EXAMPLES / "heft_paper.cluster.json")


def subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def options(sp) -> list:
    return [a for a in sp._actions if not isinstance(a, argparse._HelpAction)]


def test_every_option_of_every_command_has_help():
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, sp in subparsers().items()
        for a in options(sp)
        if not (a.help or "").strip() or (a.help == argparse.SUPPRESS and not _alias_of_visible(sp, a))
    ]
    assert missing == []
    top = build_parser()
    for name in subparsers():  # the top-level help names every command
        assert name in top.format_help()


def _alias_of_visible(sp, action) -> bool:
    """A hidden older spelling is fine when a visible option writes the same field."""
    return any(a is not action and a.dest == action.dest and a.help != argparse.SUPPRESS for a in sp._actions)


def test_an_option_name_means_one_syntax_in_every_command():
    seen = {}
    for name, sp in subparsers().items():
        for a in options(sp):
            if a.help == argparse.SUPPRESS:  # an older spelling, read for what it meant there
                continue
            for opt in a.option_strings:
                sig = (type(a).__name__, a.dest, a.type, a.nargs, tuple(a.choices or ()), a.const)
                seen.setdefault(opt, {}).setdefault(sig, []).append(name)
    mixed = {opt: sigs for opt, sigs in seen.items() if len(sigs) > 1}
    assert mixed == {}


#: each thing the commands share, by the field it fills: its one spelling
CANONICAL = {
    "scheduler": ["--scheduler"],
    "output": ["-o", "--output"],
    "plot": ["--plot"],
    "quiet": ["-q", "--quiet"],
    "verbose": ["-v", "--verbose"],
    "workers": ["--workers"],
    "processes": ["-j", "--processes"],
    "seed": ["--seed"],
    "timeout": ["--timeout"],
    "cores": ["--cores"],
    "chrome_trace": ["--chrome-trace"],
    "profile": ["--profile"],
}


def test_the_same_thing_has_the_same_name_in_every_command():
    wrong = []
    for name, sp in subparsers().items():
        for a in options(sp):
            if a.help == argparse.SUPPRESS:
                continue
            if a.dest in CANONICAL and a.option_strings != CANONICAL[a.dest]:
                wrong.append(f"{name} {a.option_strings} (want {CANONICAL[a.dest]})")
            # an earlier spelling is never listed; a name that writes a canonical field is that field's
            wrong += [f"{name} {o} is listed" for o in a.option_strings if o in OLD_SPELLINGS]
        dests = {a.dest for a in options(sp)}
        wrong += [f"{name} has no {opt}" for opt in ("quiet", "verbose") if opt not in dests]
    assert wrong == []


def test_every_scheduler_option_says_what_leaving_it_out_means():
    for name, sp in subparsers().items():
        for a in options(sp):
            if a.dest == "scheduler" and a.help != argparse.SUPPRESS:
                assert not a.required and ("default" in a.help), name


def test_earlier_spellings_are_still_read_as_the_one_name():
    parse = build_parser().parse_args
    assert parse(["run", GRAPH, "--gantt", "g.png", "--report", "r.json", "--jobs", "3"]).plot == "g.png"
    assert parse(["run", GRAPH, "--report", "r.json"]).output == "r.json"
    assert parse(["run", GRAPH, "--jobs", "3"]).workers == 3
    assert parse(["advise", GRAPH, "--catalog", "aws", "--policy", "cpop"]).scheduler == "cpop"
    assert parse(["compare", GRAPH, "--schedulers", "heft", "--out", "d"]).output == "d"
    assert parse(["bench", "--jobs", "2"]).processes == 2
    assert parse(["schedule", GRAPH, "--workers", "2"]).scheduler == "heft"  # a default, as simulate and run


@pytest.mark.parametrize("command", sorted(subparsers()))
def test_an_unknown_option_names_the_command_and_the_option_meant(command):
    from taskflow.app.cli.parser import unknown_options

    sp = subparsers()[command]
    line = unknown_options(sp, ["--qiuet"])
    assert line == "unrecognized arguments: --qiuet (--qiuet: did you mean --quiet?)"
    assert sp.prog == f"taskflow {command}"


def test_an_unknown_option_is_one_line_with_the_command_and_a_did_you_mean(capsys):
    assert main(["advise", GRAPH, "--catalog", "tiny", "--schedulr", "heft"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: taskflow advise: unrecognized arguments: --schedulr heft (--schedulr: did you mean --scheduler?)\n"
    )
    assert main(["simulat", GRAPH]) == 2
    assert "did you mean 'simulate'?" in capsys.readouterr().err


@pytest.mark.parametrize("option,helptext", [("-q", QUIET_HELP), ("--speeds", SPEEDS_HELP)])
def test_a_shared_option_has_one_meaning(option, helptext):
    where = {
        name: next(a for a in options(sp) if option in a.option_strings)
        for name, sp in subparsers().items()
        if any(option in a.option_strings for a in options(sp))
    }
    assert len(where) >= 4 and all(a.help == helptext for a in where.values()), sorted(where)


def test_every_command_that_reads_a_graph_takes_a_file_or_module_function():
    readers = {name for name, sp in subparsers().items() if any(a.dest in ("graph", "graphs") for a in options(sp))}
    assert readers == {"info", "convert", "schedule", "simulate", "run", "compare", "validate", "advise"}
    for name in readers:
        a = next(a for a in options(subparsers()[name]) if a.dest in ("graph", "graphs"))
        assert a.help.startswith(GRAPH_HELP), name


@pytest.fixture
def mydag(tmp_path, monkeypatch):
    (tmp_path / "mydag.py").write_text(
        "from taskflow import TaskGraph\n"
        "def build():\n"
        "    g = TaskGraph('mydag')\n"
        "    a = g.add_task('a', fn=sum, args=([1, 2],), cost=2.0, output_size=1e6)\n"
        "    g.add_task('b', fn=abs, args=(a,), cost=1.0)\n"
        "    return g\n"
        "def broken():\n"
        "    raise ValueError('no graph today')\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def test_a_module_function_graph_works_in_every_command(mydag, capsys):
    plan = mydag / "plan.json"
    for argv in (
        ["info", "mydag:build"],
        ["convert", "mydag:build", "-o", "g.json"],
        ["schedule", "mydag:build", "--workers", "2", "--scheduler", "heft", "-o", str(plan), "-q"],
        ["simulate", "mydag:build", "--workers", "2", "-q"],
        ["validate", "mydag:build", "--workers", "2", "--schedule", str(plan)],
        ["compare", "mydag:build", "--workers", "2", "--scheduler", "heft", "-q"],
    ):
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        out = capsys.readouterr().out
        assert "mydag" in out or "heft" in out or "valid" in out or "2 tasks" in out, (argv, out)
    # run reads it the same way (and fails before a cluster starts when the function raises)
    assert main(["run", "mydag:broken", "--workers", "1", "-q"]) == 2
    assert (
        capsys.readouterr().err.strip() == "error: mydag:broken: building the graph raised ValueError: no graph today"
    )


def test_speeds_in_order_or_by_name_mean_the_same_in_every_command(capsys, tmp_path, diamond):
    from taskflow import save_graph

    save_graph(diamond, tmp_path / "diamond.json")
    GRAPH = str(tmp_path / "diamond.json")  # noqa: N806 - no per-worker costs: any --workers fits
    assert parse_speeds("1,1,2") == [1.0, 1.0, 2.0] and parse_speeds("w2=2, w0=1") == {"w2": 2.0, "w0": 1.0}
    for bad in ("1,,2", "0", "-1", "w0=", "=2", "fast", "nan", "inf"):
        with pytest.raises(TaskflowError, match="--speeds"):
            parse_speeds(bad)
    plans = {}
    for form in ("1,1,2", "w2=2"):
        out = tmp_path / f"plan-{form}.json"
        assert (
            main(
                [
                    "schedule",
                    GRAPH,
                    "--workers",
                    "3",
                    "--speeds",
                    form,
                    "--scheduler",
                    "round-robin",
                    "-q",
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        plans[form] = json.loads(out.read_text())["makespan"]
        assert main(["simulate", GRAPH, "--workers", "3", "--speeds", form, "--scheduler", "round-robin", "-q"]) == 0
        assert main(["compare", GRAPH, "--workers", "3", "--speeds", form, "--scheduler", "round-robin", "-q"]) == 0
    assert plans["1,1,2"] == plans["w2=2"]
    capsys.readouterr()
    # a count that does not fit, or a name that is no worker, is one error line in every command
    for cmd in (
        ["schedule", GRAPH, "--scheduler", "heft"],
        ["simulate", GRAPH],
        ["compare", GRAPH],
        ["validate", GRAPH, "--schedule", GRAPH],
        ["run", GRAPH],
    ):
        assert main(cmd + ["--workers", "3", "--speeds", "1,2"]) == 2
        assert capsys.readouterr().err.strip() == "error: --speeds lists 2 speeds for --workers 3", cmd
    assert main(["schedule", GRAPH, "--workers", "2", "--speeds", "w7=2", "--scheduler", "heft"]) == 2
    assert "unknown worker(s) w7" in capsys.readouterr().err


def test_quiet_prints_the_summary_only(capsys):
    assert main(["schedule", GRAPH, "--cluster", CLUSTER, "--scheduler", "heft", "-q"]) == 0
    quiet = capsys.readouterr().out.splitlines()
    assert len(quiet) == 1 and quiet[0].startswith("heft: makespan 80")
    assert main(["schedule", GRAPH, "--cluster", CLUSTER, "--scheduler", "heft"]) == 0
    loud = capsys.readouterr().out.splitlines()
    same = [ln.split(", scheduled in")[0] for ln in (loud[0], quiet[0])]  # the planning time differs
    assert same[0] == same[1] and len(loud) == 1 + 3  # and the plan, a line per worker
    assert main(["simulate", GRAPH, "--cluster", CLUSTER, "--scheduler", "heft,cpop", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["heft", "cpop"]
    assert main(["schedule", GRAPH, "--cluster", CLUSTER, "--scheduler", "heft,cpop", "-q"]) == 0
    table = capsys.readouterr().out.splitlines()  # several: the comparison table alone
    assert table[0].split()[:3] == ["scheduler", "makespan", "x"] and [ln.split()[0] for ln in table[1:]] == [
        "heft",
        "cpop",
    ]


def test_a_comma_list_of_schedulers_everywhere_and_unknown_names_named(capsys, tmp_path):
    out = tmp_path / "plans.csv"
    assert (
        main(["schedule", GRAPH, "--cluster", CLUSTER, "--scheduler", "HEFT, critical-path", "-q", "-o", str(out)]) == 0
    )
    rows = out.read_text().splitlines()
    assert rows[0] == "scheduler,task,worker,start,finish" and len(rows) == 1 + 2 * 10
    assert {r.split(",")[0] for r in rows[1:]} == {"heft", "cpop"}
    heft = sorted(float(r.split(",")[4]) for r in rows[1:] if r.startswith("heft,"))
    assert heft[-1] == 80.0
    for cmd in (
        ["schedule", GRAPH, "--cluster", CLUSTER],
        ["simulate", GRAPH, "--cluster", CLUSTER],
        ["compare", GRAPH, "--cluster", CLUSTER],
        ["run", GRAPH],
        ["bench"],
    ):
        assert main(cmd + ["--scheduler", "heft,nosuch"]) == 2, cmd
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "nosuch" in err[0] and "heft" in err[0], cmd


def test_schedule_and_simulate_draw_gantt_charts_and_chrome_traces(tmp_path, capsys):
    for cmd in ("schedule", "simulate"):
        png, trace = tmp_path / f"{cmd}.png", tmp_path / f"{cmd}.json"
        assert (
            main(
                [
                    cmd,
                    GRAPH,
                    "--cluster",
                    CLUSTER,
                    "--scheduler",
                    "heft,cpop",
                    "-q",
                    "--gantt",
                    str(png),
                    "--chrome-trace",
                    str(trace),
                ]
            )
            == 0
        )
        assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 10_000
        events = json.loads(trace.read_text())["traceEvents"]
        assert {e["pid"].split(":")[0] for e in events} == {"heft", "cpop"}
        assert len([e for e in events if e["cat"] == "task"]) == 20
    capsys.readouterr()


def test_each_shared_option_is_defined_once_in_the_source():
    """An option several commands take is written in one place (options.SHARED or an add_* helper),
    never again as its own add_argument in a command's parser."""
    import re
    from pathlib import Path

    from taskflow.app.cli import options

    cli = Path(options.__file__).parent
    defined: dict = {}
    for path in sorted(cli.glob("*.py")):
        for flag in re.findall(r'add_argument\(\s*"(--[a-z][a-z-]*)"', path.read_text()):
            defined.setdefault(flag, []).append(path.name)
    written_twice = {flag: where for flag, where in defined.items() if len(where) > 1}
    assert written_twice == {}
    outside = {flag: where for flag, where in defined.items() if flag in options.SHARED and where != ["options.py"]}
    assert outside == {}
    # every shared option is taken by two commands or more
    counts = {flag: 0 for flag in options.SHARED}
    for sp in subparsers().values():
        for a in options_of(sp):
            for flag in set(a.option_strings) & set(counts):
                counts[flag] += 1
    assert {flag: n for flag, n in counts.items() if n < 2} == {}


def options_of(sp) -> list:
    return [a for a in sp._actions if a.help != argparse.SUPPRESS]


def test_a_shared_option_keeps_its_syntax_in_every_command():
    from taskflow.app.cli.options import add_option

    sp = argparse.ArgumentParser()
    with pytest.raises(TaskflowError, match="not a shared option, or a change of its syntax"):
        add_option(sp, "--workers", type=float)
    with pytest.raises(TaskflowError, match="not a shared option"):
        add_option(sp, "--nope")
    add_option(sp, "--workers", default=4, help="workers here")
    assert sp.parse_args([]).workers == 4 and sp.parse_args(["--workers", "2"]).workers == 2
