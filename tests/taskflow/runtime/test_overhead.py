"""Dask's cost per task, learned from the gaps between one worker thread's tasks."""

import pytest

from taskflow.runtime.scheduler.overhead import LEAST, LONGEST, DispatchGaps


def _compute(start, stop):
    return {"action": "compute", "start": start, "stop": stop}


def test_nothing_is_learned_from_fewer_gaps_than_the_least():
    g = DispatchGaps()
    for i in range(LEAST):  # LEAST tasks: one gap fewer
        g.add("w", 1, [_compute(i * 0.01, i * 0.01 + 0.008)])
    assert g.overhead() is None
    g.add("w", 1, [_compute(LEAST * 0.01, LEAST * 0.01 + 0.008)])
    assert g.overhead() == pytest.approx(0.002)


def test_a_worker_waiting_for_work_is_not_a_cost_per_task():
    """Idle stretches (the longest tenth of the gaps, and any over LONGEST) are left out; a task
    starting before the last one stopped (another thread) gives no gap."""
    g = DispatchGaps()
    t = 0.0
    for i in range(40):
        idle = 0.2 if i == 19 else 0.001  # a long wait for work among 1 ms gaps
        g.add("w", 7, [_compute(t, t + 0.005)])
        t += 0.005 + idle
    g.add("w", 7, [_compute(t + LONGEST + 1, t + LONGEST + 1.005)])  # an idle second: never a gap
    g.add("w", 7, [_compute(t + LONGEST + 1.002, t + LONGEST + 1.01)])  # overlapping the one before
    assert len(g.gaps) == 39  # the 40 tasks' gaps, the 0.2 s wait among them
    assert g.overhead() == pytest.approx(0.001, rel=1e-6)


def test_only_the_latest_compute_of_a_key_and_the_transfers_before_it_count():
    g = DispatchGaps()
    g.add("w", None, [_compute(0.0, 1.0)])
    # the worker kept an earlier compute of this key; its transfer ended after the last task stopped
    g.add(
        "w",
        None,
        [
            _compute(-5.0, -4.0),
            {"action": "transfer", "start": 1.0, "stop": 1.004},
            _compute(1.005, 1.2),
            {"action": "transfer", "start": 3.0, "stop": 3.5},
        ],
    )
    assert [gap for _, gap in g.gaps] == [pytest.approx(0.001)]


def test_the_gaps_kept_are_the_latest():
    g = DispatchGaps(kept=25)
    t = 0.0
    for i in range(60):
        gap = 0.010 if i < 30 else 0.002
        g.add("w", 1, [_compute(t, t + 0.001)])
        t += 0.001 + gap
    assert len(g.gaps) == 25 and g.overhead() == pytest.approx(0.002, rel=1e-6)
