"""Placements of real training jobs on shaped links: a job scheduler's placements compared on the
testbed's two racks joined by a narrow link, each against the job simulator's prediction (needs
root and ``ip netns``; see docs/testbed.md).

    python benchmarks/bench_jobs_testbed.py [--inter-rack 40mbit] [--repeat 1] [--scheduler fifo] [-o FILE]

Four Dask workers in two racks of two (``two-racks``: each worker's link at ``--bandwidth``, the
racks joined by one link at ``--inter-rack`` each way, shared by every transfer between them). A
trace of eight data-parallel jobs (ResNet-8 on two workers, whose allreduce moves its 1.2 MB of
gradients every iteration, and small one-worker jobs) arrives over ten seconds; the job scheduler
places each under ``consolidated``, ``contention-aware`` and ``spread`` (the contention-oblivious
baseline: the most racks). The jobs are profiled once on this network (each kind inside a rack
and spread over both: :func:`taskflow.training.jobprofile.profile_jobs`), and each placement is
simulated on the same racks with the uplink shared max-min by the jobs crossing it
(:class:`taskflow.jobs.JobNetwork` timed by the profile): the real average completion time beside
the simulator's, the median per-job error, and whether both rank the placements alike. ``-o FILE``
writes what was measured (the profile, every real and simulated run) as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _testbed import inside_or_unavailable  # noqa: E402

PLACEMENTS = ("consolidated", "contention-aware", "spread")
#: (id, arrival s, workers, model, iterations)
JOBS = (
    ("t0", 0.0, 2, "resnet8", 40),
    ("t1", 0.5, 2, "resnet8", 40),
    ("t2", 1.0, 1, "small-cnn", 40),
    ("t3", 3.0, 2, "resnet8", 24),
    ("t4", 5.0, 1, "small-cnn", 40),
    ("t5", 6.0, 2, "resnet8", 40),
    ("t6", 8.0, 1, "mlp", 60),
    ("t7", 10.0, 2, "resnet8", 24),
)


def inside(config: dict) -> None:
    """In the testbed's client namespace: profile, then each placement simulated and run."""
    import warnings

    from distributed import Client

    from taskflow import TaskflowWarning
    from taskflow.app.cli.training import model_factory
    from taskflow.app.jobs import compare_jobs
    from taskflow.app.jobs_real import job_errors, median_run
    from taskflow.formats import load_cluster
    from taskflow.jobs import JobNetwork, JobTrace
    from taskflow.jobscheduling import Job, get_job_scheduler
    from taskflow.training.jobprofile import predicted_trace, profile_jobs, racks_machine
    from taskflow.training.jobrun import run_jobs
    from taskflow.training.jobworkers import workers_of
    from workflows.images import ImageFolder, write_digits

    warnings.simplefilter("ignore", TaskflowWarning)
    trace = JobTrace([Job(i, a, n, 1.0, model=m, iterations=it) for i, a, n, m, it in JOBS], name="testbed-8-jobs")
    net = load_cluster(config["cluster"])
    with tempfile.TemporaryDirectory(prefix="bench-jobs-testbed-") as tmp, Client(timeout="30s") as client:
        data = write_digits(os.path.join(tmp, "digits"), seed=0)
        first = ImageFolder(data, "train")
        models = {m: model_factory(m, first.shape(), len(first.classes)) for m in {j.model for j in trace.jobs}}
        t0 = time.perf_counter()
        profile = profile_jobs(trace, models, data, client=client, racks=net.racks, uplink=net.uplink)
        print(
            f"profile ({time.perf_counter() - t0:.0f} s): "
            + ", ".join(
                f"{k[0]}/{k[1]}w epoch {v:.2f} s"
                + (f", spread {profile.across[k]:.2f} s" if k in profile.across else "")
                for k, v in sorted(profile.epoch.items())
            ),
            flush=True,
        )
        print(
            "  starts: "
            + ", ".join(f"{k[0]}/{k[1]}w {v:.2f} s" for k, v in sorted(profile.start.items()))
            + "; beside each other: "
            + ", ".join(f"{a} by {b} {v:.2f}" for (a, b), v in sorted(profile.interference.pairs.items())),
            flush=True,
        )
        cluster = racks_machine(workers_of(client), net.racks, net.uplink)
        fed, real = predicted_trace(trace, profile), predicted_trace(trace, profile, label=False)
        restore = statistics.median(profile.start.values())
        drain = statistics.median(profile.epoch.values()) / 2
        rows = []
        for r in range(config["repeat"]):
            for how in PLACEMENTS[r % 3 :] + PLACEMENTS[: r % 3]:
                sched = get_job_scheduler(config["scheduler"], placement=how)
                run = run_jobs(real, sched, models, data, client=client, racks=net.racks, timeout=1200)
                assert run.violations() == [], run.violations()[:2]
                rows.append((how, run))
                print(f"  {how}: real avg JCT {run.metrics()['avg_jct']:.2f} s", flush=True)
        out = []
        for how in PLACEMENTS:
            real_run = median_run([run for h, run in rows if h == how])
            (sim,) = compare_jobs(
                fed,
                cluster,
                [config["scheduler"]],
                restore=restore,
                drain=drain,
                interference=profile.interference,
                network=JobNetwork(cluster, profile.iteration),
                placement=how,
            )
            racks = net.racks
            names = workers_of(client)
            crossing = sum(len({racks[names[w]] for _, _, ws in rec.runs for w in ws}) > 1 for rec in real_run.records)
            out.append(
                {
                    "placement": how,
                    "real": real_run.metrics()["avg_jct"],
                    "simulated": sim.metrics()["avg_jct"],
                    "error": statistics.median(job_errors(real_run, sim)),
                    "crossing": crossing,
                    "runs": [run.metrics()["avg_jct"] for h, run in rows if h == how],
                    "real_runs": [run.to_dict() for h, run in rows if h == how],
                    "simulated_run": sim.to_dict(),
                }
            )
    print(json.dumps({"rows": out, "profile": profile.to_dict()}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bandwidth", default="200mbit", help="each worker's link (default 200mbit)")
    ap.add_argument("--inter-rack", default="40mbit", help="the link between the racks (default 40mbit)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per placement, their order turned (default 1)")
    ap.add_argument("--scheduler", default="fifo", help="the job scheduler (default fifo)")
    ap.add_argument("-o", "--output", help="write the profile and every run here (JSON)")
    ap.add_argument("--inside", help=argparse.SUPPRESS)
    args = ap.parse_args()
    status = inside_or_unavailable(args, "bench_jobs_testbed", inside)
    if status is not None:
        return status
    from taskflow.testbed import Testbed

    t0 = time.perf_counter()
    config = {"repeat": args.repeat, "scheduler": args.scheduler}
    from taskflow.formats import save_cluster

    with (
        tempfile.TemporaryDirectory(prefix="bench-jobs-testbed-") as tmp,
        Testbed(workers=4, topology="two-racks", bandwidth=args.bandwidth, inter_rack=args.inter_rack) as tb,
    ):
        config["cluster"] = os.path.join(tmp, "cluster.json")
        save_cluster(tb.cluster(), config["cluster"])
        p = tb.exec(
            [sys.executable, os.path.abspath(__file__), "--inside", json.dumps(config)], timeout=3600, stderr=None
        )
    if p.returncode != 0:
        print(p.stdout, file=sys.stderr)
        return p.returncode
    lines = p.stdout.strip().splitlines()
    print("\n".join(lines[:-1]))
    measured = json.loads(lines[-1])
    rows = measured["rows"]
    if args.output:
        from taskflow.formats import atomic_write

        atomic_write(
            args.output,
            json.dumps(
                {"scheduler": args.scheduler, "bandwidth": args.bandwidth, "inter_rack": args.inter_rack, **measured},
                indent=1,
            )
            + "\n",
        )
    rank = lambda key: [r["placement"] for r in sorted(rows, key=lambda r: r[key])]  # noqa: E731
    print(
        f"\n{args.scheduler}, 4 workers in 2 racks, {args.bandwidth} links, {args.inter_rack} between the racks; "
        f"{len(JOBS)} jobs, {args.repeat} run(s) per placement (each job's median)"
    )
    print("| placement | real avg JCT s | runs | simulated s | median per-job err. | jobs across racks |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['placement']} | {r['real']:.2f} | {', '.join(f'{x:.2f}' for x in r['runs'])} | "
            f"{r['simulated']:.2f} | {r['error']:.1%} | {r['crossing']} of {len(JOBS)} |"
        )
    # alike: no two placements the simulator tells apart come out the other way round (those it
    # predicts equal, the same placement here, may come out either way)
    same = not any(a["simulated"] < b["simulated"] - 1e-9 and a["real"] > b["real"] for a in rows for b in rows)
    print(f"ranking: real {rank('real')}, simulated {rank('simulated')}: {'alike' if same else 'DIFFERENT'}")
    print(f"{time.perf_counter() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
