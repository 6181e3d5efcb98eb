"""The real-workload suite (``taskflow bench --suite dask``): its workloads are ordinary Dask code
that computes the same whatever schedules it, its bad arguments are refused before any cluster
starts, and one workload runs end to end against Dask's own scheduling."""

from __future__ import annotations

import math

import dask
import pandas as pd
import pytest

from taskflow import TaskflowError
from taskflow.app.cli import main
from taskflow.app.dask_suite import format_rows, run_suite
from taskflow.app.dask_workloads import WORKLOADS, workload


def test_there_are_workloads_of_every_kind_a_dask_user_writes():
    kinds = {w.kind for w in WORKLOADS}
    assert kinds == {"dask.array", "dask.dataframe", "dask.bag", "dask.delayed"}
    assert len(WORKLOADS) >= 8 and len({w.name for w in WORKLOADS}) == len(WORKLOADS)
    with pytest.raises(TaskflowError, match="unknown workload 'nope'; known: array-matmul"):
        workload("nope")


def test_results_are_compared_exactly_enough():
    w = WORKLOADS[0]
    assert w.same((1.0, [("a", 2)]), (1.0 + 1e-12, [("a", 2)]))
    assert not w.same((1.0,), (1.001,)) and not w.same(([("a", 2)],), ([("b", 2)],))
    a = pd.DataFrame({"x": [1.0, 2.0]}, index=[1, 0])
    assert w.same((a,), (a.sort_index(),)) and not w.same((a,), (a * 2,))


@pytest.mark.parametrize("name", ["df-groupby", "delayed-loading"])
def test_a_workload_computes_the_same_twice(name, tmp_path):
    w = workload(name)
    if w.prepare is not None:
        w.prepare(str(tmp_path))
    first = dask.compute(*w.build(str(tmp_path)), scheduler="sync")
    again = dask.compute(*w.build(str(tmp_path)), scheduler="threads", num_workers=2)
    assert w.same(first, again)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--clusters", "nowhere"], "unknown cluster 'nowhere'"),
        (["--workloads", "nope"], "unknown workload 'nope'"),
        (["--repeat", "0"], "argument --repeat: must be an integer >= 1"),
        (["--firsts", "0"], "argument --firsts: must be an integer >= 1"),
        (["--scheduler", "heft,cpop"], "give one --scheduler"),
    ],
)
def test_bad_arguments_are_one_line_and_start_nothing(argv, message, capsys, tmp_path):
    assert main(["bench", "--suite", "dask", "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


@pytest.mark.slow
def test_one_workload_end_to_end(tmp_path, capsys):
    assert (
        main(
            [
                "bench",
                "--suite",
                "dask",
                "--workloads",
                "df-groupby",
                "--repeat",
                "1",
                "--firsts",
                "2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    text = (tmp_path / "dask.csv").read_text().splitlines()
    assert text[0].startswith("cluster,workload,scheduler,runs") and text[1].startswith(
        "homogeneous,df-groupby,adaptive,1"
    )
    assert "df-groupby" in (tmp_path / "dask.md").read_text()
    import csv

    (made,) = list(csv.DictReader(text))
    assert made["decisions"] == "dask"  # workers alike: the default scheduler leaves its counted run to Dask
    assert made["firsts"] == "2" and made["first_decision"] == "dask dask"  # two first runs, each on its own cluster
    lo, mid, hi = (float(made[f"dask_first{x}"]) for x in ("_min", "", "_max"))
    assert lo < hi and mid == pytest.approx((lo + hi) / 2)  # the median of two
    each = sorted(float(t) for t in made["dask_first_runs"].split())  # each first run's seconds, listed
    assert each == pytest.approx([lo, hi], abs=1e-3) and len(made["ours_first_runs"].split()) == 2
    rows = run_suite(["homogeneous"], ["delayed-loading"], repeat=1, scheduler="heft", progress=False)
    (row,) = rows
    assert row["scheduler"] == "heft" and row["dask_median"] > 0 and row["ours_median"] > 0
    assert row["ratio"] == pytest.approx(row["ours_median"] / row["dask_median"])
    assert row["ratio_low"] == pytest.approx(row["ratio"]) == row["ratio_high"]  # one pair: nothing to resample
    # heft plans every run: each has a prediction to compare with what the plugin measured
    assert -1 < row["prediction_error"] < 1  # later runs plan from costs learned by then
    assert row["first_prediction_error"] > -1 and math.isfinite(row["first_prediction_error"])
    assert "delayed-loading" in format_rows(rows)
    assert row["decisions"] == "-" and format_rows(rows).endswith("  -")  # a named plan: nothing chosen


@pytest.mark.testbed
def test_a_workload_on_the_two_rack_testbed(capsys):
    from taskflow.testbed import available

    if available():
        pytest.skip(f"needs the network testbed: {available()}")
    (row,) = run_suite(["two-racks"], ["delayed-loading"], repeat=1, scheduler="heft", progress=False)
    assert row["cluster"] == "two-racks" and row["runs"] == 1
    assert row["dask_first"] > 0 and row["ours_first"] > 0 and row["dask_median"] > 0 and row["ours_median"] > 0
    from taskflow.testbed import leftovers

    assert not leftovers()  # every testbed of the suite was removed


def test_the_two_rack_cluster_is_skipped_with_its_reason_where_there_is_no_testbed(monkeypatch, capsys):
    import taskflow.testbed as tb

    monkeypatch.setattr(tb, "available", lambda: "the testbed needs root")
    assert run_suite(["two-racks"], ["delayed-loading"], repeat=1, progress=False) == []
    assert "two-racks cluster skipped: the testbed needs root" in capsys.readouterr().out


def test_the_suite_keeps_dask_s_warnings_on_a_shuffle_run_again_quiet(monkeypatch):
    import logging

    import taskflow.app.dask_suite as suite

    levels = []
    monkeypatch.setattr(
        suite,
        "_measure",
        lambda *a, **k: (
            levels.append(logging.getLogger(suite._SHUFFLE_LOGGER).getEffectiveLevel()) or {"cluster": "homogeneous"}
        ),
    )
    monkeypatch.setattr(suite, "format_rows", lambda rows, header=True: "")
    before = logging.getLogger(suite._SHUFFLE_LOGGER).level
    run_suite(["homogeneous"], ["df-shuffle"], repeat=1)
    assert levels == [logging.ERROR] and logging.getLogger(suite._SHUFFLE_LOGGER).level == before


def test_the_summary_gives_each_cluster_its_geometric_means_and_prediction_error():
    from taskflow.app.dask_suite import summarise

    nan = float("nan")
    rows = [
        {
            "cluster": "two-racks",
            "workload": "a",
            "ratio": 0.25,
            "first_ratio": 1.0,
            "prediction_error": -0.02,
            "ratio_low": 0.2,
            "ratio_high": 0.3,
            "first_ratio_low": 0.9,
            "first_ratio_high": 1.1,
        },
        {
            "cluster": "two-racks",
            "workload": "b",
            "ratio": 1.0,
            "first_ratio": 0.81,
            "prediction_error": 0.04,
            "ratio_low": 1.01,
            "ratio_high": 1.2,
            "first_ratio_low": 0.7,
            "first_ratio_high": 0.9,
        },
        {"cluster": "homogeneous", "workload": "a", "ratio": 1.0, "first_ratio": 1.0, "prediction_error": nan},
    ]
    lines = summarise(rows).splitlines()
    assert lines[0] == (
        "two-racks: ours / Dask's geomean 0.500 (first runs 0.900), worst 1.00, best 0.25; "
        "longer beyond the spread on 1 of 2 (b) (first runs 0 of 2); "
        "predictions on 2 of 2, median |error| 3.0%"
    )
    assert lines[1].endswith("no predictions")


def test_a_ratio_s_interval_tells_a_difference_from_the_spread():
    from taskflow.app.dask_suite import ratio_interval

    dask = [1.0, 1.3, 0.9, 1.1, 1.2]
    same = [1.2, 0.9, 1.1, 1.0, 1.3]  # the same runs in another order: the ratio of medians is 1
    lo, hi = ratio_interval(same, dask)
    assert lo < 1.0 < hi and hi - lo > 0.1  # noise this wide cannot say which is longer
    slower = [x * 1.5 for x in dask]  # every run half as long again, paired: no doubt
    assert ratio_interval(slower, dask) == pytest.approx((1.5, 1.5))
    lo, hi = ratio_interval([x + 0.6 for x in same], dask)  # longer than the spread: the interval above 1
    assert 1.0 < lo < 1.55 < hi
    assert ratio_interval(same, dask) == ratio_interval(same, dask)  # seeded: the same runs, the same interval
    with pytest.raises(TaskflowError, match="pairs"):
        ratio_interval([1.0, 2.0], [1.0])


def test_the_table_shows_each_ratio_with_its_interval():
    from taskflow.app.dask_suite import format_rows

    row = {
        "cluster": "homogeneous",
        "workload": "df-merge",
        "dask_first": 1.9,
        "ours_first": 2.05,
        "first_ratio": 1.08,
        "first_ratio_low": 0.93,
        "first_ratio_high": 1.21,
        "dask_median": 1.56,
        "dask_min": 1.5,
        "dask_max": 1.69,
        "ours_median": 1.54,
        "ours_min": 1.47,
        "ours_max": 1.79,
        "ratio": 0.99,
        "ratio_low": 0.94,
        "ratio_high": 1.05,
        "prediction_error": 0.152,
        "decisions": "dask",
    }
    header, line = format_rows([row]).splitlines()
    assert "ratio (95%)" in header
    assert "1.08 (0.93-1.21)" in line and "0.99 (0.94-1.05)" in line and line.endswith("+15.2%  dask")
