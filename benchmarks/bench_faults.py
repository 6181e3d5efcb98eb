"""Fault campaign: runs under worker and scheduler loss on a loopback `dask scheduler` and three
`dask worker` processes (no nanny: a killed worker stays dead until the campaign starts another).

    python benchmarks/bench_faults.py [--runs 50] [--seed 0]

Scenarios, each run checked for: no hang (every run ends within its bound), the right results (an
executable layered graph whose total is known; the emulated outputs' sizes), every task reported:

1. ``--runs`` runs, one worker killed (SIGKILL) at a uniformly random moment from before
   submission (up to 0.5 s before) to the expected end;
2. five runs, two workers killed at random moments;
3. three runs, every worker killed, then one started a second later (the run must complete);
4. three runs, the scheduler killed at a random moment (the run must fail with a clear error in
   bounded time).
Wall time per run and in total is printed.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from distributed import Client  # noqa: E402

import warnings  # noqa: E402

from taskflow import TaskflowError, TaskflowWarning, TaskGraph, run  # noqa: E402
from taskflow.app.loopback import Loopback  # noqa: E402

warnings.simplefilter("ignore", TaskflowWarning)  # declared costs are rough here; the campaign is about faults
logging.getLogger("distributed.client").setLevel(logging.CRITICAL)  # the harness's own client after a killed scheduler
NAMES = ("wa", "wb", "wc")
TIMEOUT = 120.0  # a run still going after this long counts as a hang


def add(x, *rest):
    time.sleep(0.05)
    return x + sum(rest)


def layered(width=8, depth=5):
    """An executable graph whose sink is a known number (computed below)."""
    g = TaskGraph("faults")
    layer = [g.add_task(f"a{i}", fn=add, args=(i,), cost=0.05, output_size=64) for i in range(width)]
    for lvl in range(depth):
        layer = [
            g.add_task(f"l{lvl}_{i}", fn=add, args=(0, layer[i], layer[(i + 1) % width]), cost=0.05, output_size=64)
            for i in range(width)
        ]
    g.add_task("total", fn=add, args=(0, *layer), cost=0.05)
    vals = list(range(width))
    for _ in range(depth):
        vals = [vals[i] + vals[(i + 1) % width] for i in range(width)]
    return g, sum(vals)


def restore(lb: Loopback) -> None:
    """Every worker name running again (killed ones replaced)."""
    for name in NAMES:
        p = lb.workers.get(name)
        if p is None or p.poll() is not None:
            lb.start_worker(name)
    lb.wait_for_workers(len(NAMES), timeout=60)


def one_run(lb: Loopback, g, expected, actions, rng) -> dict:
    """Run ``g`` while ``actions`` [(seconds after submission, callable)] happen; classify it."""
    timers = []
    with Client(scheduler_file=str(lb.sched_file), timeout="30s") as c:
        for at, act in actions:
            if at <= 0:
                act()  # before submission
            else:
                t = threading.Timer(at, act)
                t.daemon = True
                timers.append(t)
        for t in timers:
            t.start()
        t0 = time.perf_counter()
        try:
            rep = run(g, "heft", client=c, quiet=True, timeout=TIMEOUT)
            wall = time.perf_counter() - t0
            ok = rep.results["total"] == expected and {r.task for r in rep.trace.runs} == set(g.ids)
            return {
                "outcome": "ok" if ok else "WRONG",
                "wall": wall,
                "replans": rep.replans,
                "reported": len({r.task for r in rep.trace.runs}),
            }
        except TaskflowError as e:
            wall = time.perf_counter() - t0
            hang = "did not finish within" in str(e)
            return {"outcome": "HANG" if hang else "error", "wall": wall, "error": str(e)[:120]}
        finally:
            for t in timers:
                t.cancel()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    g, expected = layered()
    folder = tempfile.mkdtemp(prefix="taskflow-faults-")
    lb = Loopback(folder, workers=NAMES)
    lb.start()
    results = []
    t_all = time.perf_counter()
    try:
        with Client(scheduler_file=str(lb.sched_file)) as c:  # how long a calm run takes, once warm
            run(g, "heft", client=c, quiet=True)
            calm = []
            for _ in range(3):
                t0 = time.perf_counter()
                run(g, "heft", client=c, quiet=True)
                calm.append(time.perf_counter() - t0)
            span = sorted(calm)[1]
        print(f"calm run: {span:.2f} s, the median of 3 ({len(g)} tasks on {len(NAMES)} workers); kills fall within it")

        def campaign(label, n, make_actions, expect_error=False):
            rows = []
            for k in range(n):
                restore(lb)
                r = one_run(lb, g, expected, make_actions(), rng)
                r["scenario"] = label
                r["expected_error"] = expect_error
                rows.append(r)
                if expect_error:  # the scheduler is gone: a fresh cluster for the next run
                    lb.stop()
                    lb.workers.clear()
                    lb.start()
            ok = sum(r["outcome"] == ("error" if expect_error else "ok") for r in rows)
            walls = [r["wall"] for r in rows]
            print(
                f"{label}: {ok}/{n} as expected, hangs {sum(r['outcome'] == 'HANG' for r in rows)}, "
                f"wrong results {sum(r['outcome'] == 'WRONG' for r in rows)}, wall {min(walls):.1f}-{max(walls):.1f} s"
                + (f", re-plans {sum(r.get('replans', 0) for r in rows)}" if not expect_error else "")
            )
            for r in rows:
                if r["outcome"] not in ("ok", "error") or (r["outcome"] == "error") != expect_error:
                    print(f"   unexpected: {r}")
            results.extend(rows)

        campaign(
            "1. one worker killed at a random moment",
            args.runs,
            lambda: [(rng.uniform(-0.5, span), lambda n=rng.choice(NAMES): lb.kill_worker(n))],
        )
        campaign(
            "2. two workers killed at random moments",
            5,
            lambda: [(rng.uniform(0, span), lambda n=n: lb.kill_worker(n)) for n in rng.sample(NAMES, 2)],
        )

        def all_then_one():
            at = rng.uniform(0, span * 0.8)

            def kill_all():
                for n in NAMES:
                    lb.kill_worker(n)

            return [(at, kill_all), (at + 1.0, lambda: lb.start_worker("wa"))]

        campaign("3. every worker killed, then one started", 3, all_then_one)
        campaign(
            "4. the scheduler killed at a random moment",
            3,
            lambda: [(rng.uniform(0.2, span), lb.kill_scheduler)],
            expect_error=True,
        )
    finally:
        lb.stop()
    hangs = sum(r["outcome"] == "HANG" for r in results)
    wrong = sum(r["outcome"] == "WRONG" for r in results)
    unexpected = sum((r["outcome"] == "error") != r["expected_error"] for r in results if r["outcome"] != "HANG")
    print(
        f"total: {len(results)} runs in {time.perf_counter() - t_all:.0f} s; hangs {hangs}, wrong results {wrong}, "
        f"unexpected outcomes {unexpected}; scheduler-loss errors reported after "
        + ", ".join(f"{r['wall']:.1f} s" for r in results if r["expected_error"])
    )


if __name__ == "__main__":
    main()
