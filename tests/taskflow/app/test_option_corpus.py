"""A property-based corpus of hostile option values, over every number every command takes.

The options are found in the parser itself, so an option added later is in the corpus at once.
Every count, duration and scale must be checked when the arguments are parsed: a value out of its
range, not finite, not a number, or a digit of another script is refused with one ``error:``
line naming the option and exit status 2, before anything starts; a value in range is taken as
the number it spells. Commands that start nothing (schedule, simulate, compare, jobs) are run whole on
what the parser accepts: they end with exit 0, or one error line and exit 2, never a traceback,
within a bound.
"""

from __future__ import annotations

import argparse
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taskflow.app.cli import main
from taskflow.app.cli.options import _Bounded
from taskflow.app.cli.parser import build_parser

HEFT_G = "examples/heft_paper.graph.json"
# what each command needs besides the option under test (parsing must reach the option)
NEEDS = {
    "schedule": [HEFT_G, "--workers", "2", "--scheduler", "heft"],
    "simulate": [HEFT_G, "--workers", "2"],
    "compare": [HEFT_G, "--workers", "2", "--schedulers", "heft,cpop"],
    "run": [HEFT_G],
    "validate": [HEFT_G, "--schedule", "x.json"],
    "info": [HEFT_G],
    "convert": [HEFT_G, "-o", "x.json"],
    "bench": [],
    "demo": [],
    "testbed": ["--", "true"],
    "samples": [],
    "schedulers": [],
    "calibrate": [],
    "advise": [HEFT_G, "--catalog", "tiny"],
    "train": ["data"],
    "jobs": ["simulate", "examples/jobs.json", "--scheduler", "fifo,las"],
}
SAFE_TO_RUN = {"schedule", "simulate", "compare", "jobs"}


def _numeric_options():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for command, sp in sub.choices.items():
        for action in sp._actions:
            if isinstance(action.type, _Bounded):
                out.append((command, action.option_strings[0], action.type, action.dest))
    return out


OPTIONS = _numeric_options()

HOSTILE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(
        [
            "",
            " ",
            "nan",
            "-inf",
            "inf",
            "1e400",
            "-1e400",
            "1e308",
            "\u00b2",
            "\u0663",
            "0x10",
            "1_000",
            " 2",
            "2 ",
            "--",
            "1,5",
            "True",
            "0.0",
            "-0",
            "1e-400",
            "5",
            "0",
            "-1",
            "9" * 400,
        ]
    ),
    st.text(max_size=8),
)


def test_every_number_any_command_takes_is_checked_when_parsed():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    raw = [
        (command, a.option_strings)
        for command, sp in sub.choices.items()
        for a in sp._actions
        if a.type in (int, float)
    ]
    assert not raw, f"options parsed as a bare int or float (no range, nan and inf taken): {raw}"
    assert len(OPTIONS) >= 30  # the counts, durations and scales of the commands
    assert set(NEEDS) >= {command for command, _, _, _ in OPTIONS}


def _argv(command: str, option: str, value: str) -> list:
    """``command`` with what it needs, ``option`` set to ``value`` last before a ``--``."""
    needs = NEEDS[command]
    cut = needs.index("--") if "--" in needs else len(needs)
    head = list(needs[:cut])
    if option in head:
        i = head.index(option)
        del head[i : i + 2]
    return [command, *head, f"{option}={value}", *needs[cut:]]


def _expected(bounded, text):
    """The number ``text`` spells if the option takes it, else None."""
    try:
        return bounded(text)
    except argparse.ArgumentTypeError:
        return None


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choice=st.sampled_from(OPTIONS), text=HOSTILE)
def test_a_hostile_number_is_one_line_naming_the_option_or_the_number_it_spells(choice, text):
    import contextlib
    import io

    command, option, bounded, dest = choice
    want = _expected(bounded, text)
    err = io.StringIO()
    parser = build_parser()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = parser.parse_args(_argv(command, option, text))
        except SystemExit as e:
            code = e.code
        else:
            code = 0
    if want is None:
        assert code == 2, (command, option, text)
        line = err.getvalue()
        assert line.count("\n") == 1 and line.startswith("error: ") and option in line, line
    else:
        assert code == 0, (command, option, text, err.getvalue())
        value = getattr(args, dest)
        assert value == want and type(value) is bounded.kind and (bounded.kind is int or math.isfinite(value))


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(choice=st.sampled_from([o for o in OPTIONS if o[0] in SAFE_TO_RUN]), text=HOSTILE)
def test_a_command_that_starts_nothing_ends_cleanly_on_any_number(choice, text):
    import contextlib
    import io

    command, option, _, _ = choice
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main([*_argv(command, option, text), "-q"])
    assert time.monotonic() - t0 < 30, (command, option, text)
    lines = err.getvalue()
    assert code == 0 or (code == 2 and lines.count("\n") == 1 and lines.startswith("error: ")), (code, lines)
    assert "internal error" not in lines and "Traceback" not in lines


@pytest.mark.parametrize(
    "command, option, bounded, dest",
    [o for o in OPTIONS if o[0] not in SAFE_TO_RUN],
    ids=lambda x: x if isinstance(x, str) and not x.isidentifier() or x in NEEDS else "",
)
def test_a_command_that_would_start_a_cluster_refuses_a_bad_number_first(
    command, option, bounded, dest, capsys, tmp_path, monkeypatch, no_cluster
):
    monkeypatch.chdir(tmp_path)  # nothing may be written anywhere
    bad = "nan" if bounded.kind is float else "-1"
    t0 = time.monotonic()
    code = main([str(_abs(a)) for a in _argv(command, option, bad)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and option in err, err
    assert time.monotonic() - t0 < 60 and not list(tmp_path.iterdir())  # no_cluster: nothing started


def _abs(arg):
    from pathlib import Path

    p = Path(arg)
    return p.resolve() if arg.endswith(".json") and p.exists() else arg
