import csv
import time

import pytest

from taskflow.app.bench import run_suite
from taskflow.app.cli import main
from tests.conftest import NO_HTTP


def test_quick_suite_outputs_valid_rows_and_resumes(tmp_path, capsys):
    out = tmp_path / "b"
    rows = run_suite("quick", out, ["heft", "work-stealing"], jobs=2, progress=False)
    with open(out / "results.csv", newline="") as f:
        saved = list(csv.DictReader(f))
    # schedulers x workflows (every family, the shipped real ones too: nothing skipped) x clusters x networks
    assert len(saved) == len(rows) == 2 * 12 * 3 * 2
    assert {r["family"] for r in saved} == {"random-dag", "scientific", "training", "wfcommons", "estee"}
    assert all(r["valid"] == "True" for r in saved)
    assert {r["network"] for r in saved} == {"simple", "maxmin"} and len({r["cluster"] for r in saved}) == 3
    summary = (out / "summary.md").read_text()
    assert "| heft |" in summary and "**" in summary and "Wins / ties / losses" in summary
    assert "family **wfcommons**: epigenomics (223 tasks), montage (103 tasks)" in summary
    assert "**Placement fidelity**" in summary and "**SLR**" in summary
    for f in ("normalised.png", "gantt.png"):
        assert (out / f).read_bytes()[:4] == b"\x89PNG"
    assert "data:image/png;base64," in (out / "report.html").read_text()
    # a rerun skips every finished row
    again = run_suite("quick", out, ["heft", "work-stealing"], jobs=1, progress=True)
    assert "0 to run" in capsys.readouterr().out and len(again) == len(rows)
    with open(out / "results.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == len(saved)


def test_bench_cli_rejects_unknown_scheduler(tmp_path, capsys):
    code = main(["bench", "--schedulers", "heft,nope", "--out", str(tmp_path / "x")])
    assert code == 2 and "unknown scheduler 'nope'" in capsys.readouterr().err


def test_real_subset_runs_on_dask_and_resumes(tmp_path, capsys):
    from taskflow.app.bench import run_real
    from taskflow.app.bench_report import summarise_real

    rows = run_real("quick", tmp_path, ["heft", "work-stealing"], target_seconds=0.6, only={"fork-join-8x2"})
    assert [(r["workflow"], r["scheduler"]) for r in rows] == [
        ("fork-join-8x2", "heft"),
        ("fork-join-8x2", "work-stealing"),
    ]
    heft = rows[0]
    assert heft["outputs_ok"] == "True" and float(heft["placement_fidelity"]) == 1.0
    assert 0.3 < float(heft["measured_makespan"]) < 5.0
    assert abs(float(heft["predicted_makespan"]) - 0.6) < 1e-6  # the time scale targets HEFT's plan
    with open(tmp_path / "real.csv", newline="") as f:
        assert len(list(csv.DictReader(f))) == 2
    again = run_real("quick", tmp_path, ["heft", "work-stealing"], target_seconds=0.6, only={"fork-join-8x2"})
    assert again == rows and "0 to run" in capsys.readouterr().out
    md = summarise_real(rows)
    assert "| fork-join-8x2 |" in md and "Every emulated output had its declared size: yes" in md


def test_the_real_subset_waits_a_bounded_time_for_lost_workers(monkeypatch):
    from distributed import Client, LocalCluster

    from taskflow.app import bench
    from taskflow.errors import TaskflowError

    monkeypatch.setattr(bench, "WORKER_WAIT", 0.5)
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        bench._all_workers_back(c, 1)  # all there: returns at once
        t0 = time.perf_counter()
        with pytest.raises(TaskflowError, match="has 1 of its 2 workers after waiting 0 s"):
            bench._all_workers_back(c, 2)
        assert time.perf_counter() - t0 < 10
