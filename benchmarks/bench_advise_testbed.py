"""The advisor against reality: its predicted makespans and ranking of configurations emulated here
(worker counts, cgroup CPU quotas for the slower node type, shaped links for the network; needs root).

    python benchmarks/bench_advise_testbed.py [--reps 3] [--out taskflow-out/advise-testbed]

A workflow of real CPU-bound tasks (a Python loop, so a CPU quota slows it; each returns a real
buffer of its output size) runs on each configuration of two node types:

- ``fast``: one worker held to ``--fast-cpu`` of a core (0.8), speed 1.0, 1.00 per hour;
- ``slow``: one worker held to ``--slow-cpu`` (0.25), speed 0.25 / 0.8 (the quotas' ratio), 0.25 per hour;

each worker's link shaped to ``--bandwidth`` (50 Mbit/s) in both directions, as a node's network
interface. The catalog declares exactly that: the speeds are the quotas' ratio and the bandwidth
the shaped rate, not fitted to any run.

1. A profiling run on ``1 x fast + 1 x slow`` learns the task costs (a cost profile, what
   ``taskflow run --profile`` keeps) and Dask's per-task overhead, which the catalog then carries.
2. The advisor predicts every configuration (HEFT, maxmin network) from the catalog and the profile.
3. Each configuration runs ``--reps`` times on its own testbed (HEFT's plan on the catalog's model);
   the median is compared with the prediction: the error of each, and whether the advisor ranks
   the configurations (by makespan and by cost) as the runs do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _testbed import inside_or_unavailable  # noqa: E402

CONFIGS = (("slow", 2), ("fast", 1), ("fast", 1, "slow", 1), ("fast", 2))


def burn(units, nbytes, *deps):
    """CPU work: ``units`` x 10 million loop steps of Python (about 0.2 s on a core here); returns
    ``nbytes`` real bytes."""
    x = 0
    for _ in range(int(units * 10_000_000)):
        x += 1
    return bytes(int(nbytes))


def workflow(seed: int = 1):
    """4 layers of 8 tasks and a join; each task reads 2 of the layer before; 1-3 MB per output."""
    import numpy as np

    from taskflow import TaskGraph

    rng = np.random.default_rng(seed)
    g = TaskGraph("advise-testbed")
    prev = []
    for layer in range(4):
        cur = []
        for k in range(8):
            deps = sorted(rng.choice(len(prev), size=min(2, len(prev)), replace=False).tolist()) if prev else []
            units = float(rng.uniform(1.0, 3.0))
            size = float(rng.uniform(1e6, 3e6))
            h = g.add_task(
                f"work{layer}_{k}",
                fn=burn,
                args=(units, size, *[prev[d] for d in deps]),
                cost=units,
                output_size=size,
                meta={"category": "work"},
            )
            cur.append(h)
        prev = cur
    g.add_task("join", fn=burn, args=(1.0, 1.0, *prev), cost=1.0, output_size=1.0, meta={"category": "join"})
    return g


def catalog(args, overhead: float, latency: float) -> dict:
    """The two node types as the emulation makes them."""
    return {
        "format": "taskflow-catalog/1",
        "name": "testbed",
        "currency": "credits",
        "reference": f"one worker held to {args.fast_cpu} of a core",
        "latency": latency,
        "overhead": overhead,
        "mix": [["fast", "slow"]],
        "types": [
            {"name": "fast", "price": 1.0, "cores": 1, "speed": 1.0, "bandwidth": args.bandwidth, "max_count": 4},
            {
                "name": "slow",
                "price": 0.25,
                "cores": 1,
                "speed": args.slow_cpu / args.fast_cpu,
                "bandwidth": args.bandwidth,
                "max_count": 4,
            },
        ],
    }


def label(spec) -> str:
    return " + ".join(f"{n} x {t}" for t, n in zip(spec[::2], spec[1::2]))


def cpus_of(spec, args) -> dict:
    out, k = {}, 0
    for t, n in zip(spec[::2], spec[1::2]):
        for _ in range(n):
            out[f"w{k}"] = args.fast_cpu if t == "fast" else args.slow_cpu
            k += 1
    return out


def inside(config: dict) -> None:
    """In the testbed's client namespace: run the workflow ``reps`` times, write the makespans."""
    import warnings

    from distributed import Client

    from taskflow import Cluster, TaskflowWarning, Worker, run
    from taskflow.advisor import profiled
    from taskflow.runtime import CostProfile

    g = workflow()
    speeds = {"fast": 1.0, "slow": config["slow_cpu"] / config["fast_cpu"]}
    with Client(timeout="30s") as client:
        names = sorted(client.scheduler_info()["workers"].values(), key=lambda w: w["name"])
        names = [w["name"] for w in names]
        types = [t for t, n in zip(config["spec"][::2], config["spec"][1::2]) for _ in range(n)]
        model = Cluster(
            [Worker(n, speed=speeds[t]) for n, t in zip(names, types)],
            bandwidth=config["bandwidth"],
            latency=config.get("latency", 0.0),
            task_overhead=config.get("overhead", 0.0),
        )
        profile = CostProfile.load(config["profile"]) if config.get("use_profile") else None
        graph = profiled(g, profile) if profile is not None else g
        out = []
        for rep in range(config["reps"] + 1):  # the first warms the workers up (imports), not counted
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TaskflowWarning)
                r = run(graph, "heft", client=client, cluster=model, quiet=True, timeout=600)
            if config.get("learn") and rep == config["reps"]:
                CostProfile.learn(graph, r).save(config["profile"])
            if rep:
                out.append(r.measured_makespan)
                print(f"[{label(config['spec'])}] run {rep}: {r.measured_makespan:.2f} s", flush=True)
    Path(config["result"]).write_text(json.dumps(out))


def on_testbed(spec, args, extra: dict) -> list:
    from taskflow.testbed import Testbed

    out = Path(args.out)
    result = out / f"runs-{'-'.join(map(str, spec))}.json"
    cpus = cpus_of(spec, args)
    with Testbed(workers=len(cpus), topology="uniform", bandwidth=args.bandwidth, cpus=cpus, timeout=120) as tb:
        config = {
            "spec": list(spec),
            "reps": args.reps,
            "result": str(result.resolve()),
            "fast_cpu": args.fast_cpu,
            "slow_cpu": args.slow_cpu,
            "bandwidth": tb.bandwidth,
            **extra,
        }
        p = tb.exec(
            [sys.executable, os.path.abspath(__file__), "--inside", json.dumps(config)],
            timeout=1800,
            stdout=None,
            stderr=None,
        )
        if p.returncode != 0:
            raise SystemExit(f"bench_advise_testbed: the runs on {label(spec)} failed (exit {p.returncode})")
    return json.loads(result.read_text())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="taskflow-out/advise-testbed")
    ap.add_argument("--bandwidth", default="50mbit")
    ap.add_argument("--fast-cpu", type=float, default=0.8)
    ap.add_argument("--slow-cpu", type=float, default=0.25)
    ap.add_argument("--inside", help=argparse.SUPPRESS)
    args = ap.parse_args()
    status = inside_or_unavailable(args, "bench_advise_testbed", inside)
    if status is not None:
        return status
    from taskflow.advisor import Configuration, Evaluator, FixedWorkload, catalog_from_dict, profiled
    from taskflow.checks import parse_rate
    from taskflow.runtime import CostProfile

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prof = out / "profile.json"
    if prof.exists():
        prof.unlink()
    t0 = time.perf_counter()
    # 1. learn the costs on 1 fast + 1 slow
    on_testbed(
        ("fast", 1, "slow", 1),
        argparse.Namespace(**{**vars(args), "reps": 1}),
        {"profile": str(prof.resolve()), "learn": True},
    )
    profile = CostProfile.load(prof)
    overhead = profile.task_overhead or 0.0
    latency = profile.latency or 0.0
    print(
        f"profile: {len(profile.prefixes)} task kinds, per-task overhead {overhead * 1e3:.1f} ms, "
        f"latency {latency * 1e3:.2f} ms ({time.perf_counter() - t0:.0f} s)",
        flush=True,
    )
    # 2. predict every configuration from the catalog and the profile
    cat = catalog_from_dict(catalog(args, overhead, latency), "testbed")
    ev = Evaluator(FixedWorkload(profiled(workflow(), profile)), cat, ["heft"], network="maxmin")
    rows = []
    for spec in CONFIGS:
        config = Configuration(tuple((cat.type(t), n) for t, n in zip(spec[::2], spec[1::2])))
        predicted = ev.simulate(config, "heft")
        # 3. measure it
        runs = on_testbed(
            spec, args, {"profile": str(prof.resolve()), "use_profile": True, "overhead": overhead, "latency": latency}
        )
        m = statistics.median(runs)
        rows.append(
            {
                "configuration": config.label,
                "predicted": predicted,
                "measured": m,
                "runs": runs,
                "error": (predicted - m) / m,
                "predicted_cost": config.cost(predicted, cat),
                "measured_cost": config.cost(m, cat),
            }
        )
        print(
            f"{config.label:<22} predicted {predicted:7.2f} s, measured {m:7.2f} s "
            f"(runs {', '.join(f'{r:.2f}' for r in runs)}), error {rows[-1]['error']:+.1%}",
            flush=True,
        )
    by = lambda key: [r["configuration"] for r in sorted(rows, key=lambda r: r[key])]  # noqa: E731
    same_time = by("predicted") == by("measured")
    same_cost = by("predicted_cost") == by("measured_cost")
    errs = [abs(r["error"]) for r in rows]
    text = "\n".join(
        [
            f"bandwidth {args.bandwidth} ({parse_rate(args.bandwidth) / 1e6:.2f} MB/s) per worker link; fast = "
            f"{args.fast_cpu} core, slow = {args.slow_cpu} core; HEFT; maxmin; {args.reps} runs each (median)",
            "| configuration | predicted s | measured s (median) | runs | error |",
            "|---|---|---|---|---|",
            *[
                f"| {r['configuration']} | {r['predicted']:.2f} | {r['measured']:.2f} | "
                f"{', '.join(f'{x:.2f}' for x in r['runs'])} | {r['error']:+.1%} |"
                for r in rows
            ],
            f"ranking by makespan: predicted {by('predicted')}, measured {by('measured')}: "
            f"{'the same' if same_time else 'DIFFERENT'}",
            f"ranking by cost: predicted {by('predicted_cost')}, measured {by('measured_cost')}: "
            f"{'the same' if same_cost else 'DIFFERENT'}",
            f"error: median {statistics.median(errs):.1%}, worst {max(errs):.1%}; "
            f"{sum(e <= 0.15 for e in errs)} of {len(errs)} within 15%",
        ]
    )
    (out / "summary.md").write_text(text + "\n")
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    print(text)
    print(f"{time.perf_counter() - t0:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
