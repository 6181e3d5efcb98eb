"""Scheduler comparison benchmark: workflows x clusters x network models x schedulers x seeds, in the
simulator, in parallel processes, resumable (rows already in ``results.csv`` are skipped).

Outputs in the chosen folder: ``results.csv`` (one row per run), ``summary.md`` (geometric-mean SLR
per scheduler and workflow family with the best marked, win/tie/loss counts), ``normalised.png``
(makespan over the best per instance, per family), ``gantt.png`` (a representative run) and
``report.html`` (all of it in one self-contained page).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

FIELDS = ["workflow", "family", "cluster", "network", "scheduler", "seed", "tasks", "makespan", "lower_bound",
          "slr", "speedup", "efficiency", "scheduling_time", "valid"]
SUITES = ("quick", "standard", "full")
DEFAULT_SCHEDULERS = ("heft", "cpop", "blevel", "peft", "mct", "etf", "work-stealing", "blevel-dynamic", "random")
BW = 1e8  # bytes/s of the benchmark clusters; generated sizes are seconds x BW


def _shared() -> Path:
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def workflows(suite: str) -> list:
    """[(name, family, builder args)] - built lazily in the worker processes."""
    out = [("layered-ccr0.1", "random", ("layered", 0.1)), ("layered-ccr1", "random", ("layered", 1.0)),
           ("layered-ccr10", "random", ("layered", 10.0)), ("fft-16", "scientific", ("fft", 16)),
           ("gauss-8", "scientific", ("gauss", 8)), ("fork-join-8x2", "scientific", ("forkjoin", 8)),
           ("in-tree-3x3", "scientific", ("intree", 3)), ("dp-resnet50-tree", "training", ("training", "resnet50"))]
    sh = _shared()
    for f in ("montage-chameleon-2mass-01d-001.json", "epigenomics-chameleon-hep-2seq-50k-001.json"):
        if (sh / "wfinstances" / f).exists():
            out.append((f.split("-")[0], "wfcommons", ("file", str(sh / "wfinstances" / f))))
    if (sh / "estee" / "elementary.zip").exists():
        for k in (["conflux", "grid"] if suite == "quick" else ["conflux", "grid", "fork1", "bigmerge", "splitters"]):
            out.append((f"estee-{k}", "estee", ("file", f"{sh / 'estee' / 'elementary.zip'}#{k}")))
    if suite != "quick":
        out += [("layered-v300-ccr1", "random", ("layered-big", 1.0)), ("gauss-16", "scientific", ("gauss", 16)),
                ("dp-bert-ring", "training", ("training", "bert-base"))]
    return out


def clusters(suite: str) -> list:
    out = [("homo-4", [1.0] * 4, 1, BW), ("hetero-4", [1.0, 1.0, 2.0, 4.0], 1, BW),
           ("hetero-8-slow", [1.0, 1.5, 2.0, 3.0] * 2, 1, BW / 4)]
    if suite != "quick":
        out += [("homo-16x2", [1.0] * 16, 2, BW), ("hetero-8-fast", [1.0, 1.5, 2.0, 3.0] * 2, 1, BW * 20)]
    return out


def _build(spec, seed):
    from workflows import scientific as sc
    from workflows.training import data_parallel

    from ..formats import load_graph

    kind, arg = spec
    if kind == "layered":
        return sc.random_layered(60, shape=1.0, out_degree=2, ccr=arg, seed=seed, bandwidth=BW)
    if kind == "layered-big":
        return sc.random_layered(300, shape=1.0, out_degree=3, ccr=arg, seed=seed, bandwidth=BW)
    if kind == "fft":
        return sc.fft(arg, cost=10.0, size=10.0 * BW)
    if kind == "gauss":
        return sc.gaussian_elimination(arg, cost=10.0, size=10.0 * BW)
    if kind == "forkjoin":
        return sc.fork_join(arg, 2, cost=10.0, size=10.0 * BW)
    if kind == "intree":
        return sc.in_tree(arg, 3, cost=10.0, size=10.0 * BW)
    if kind == "training":
        return data_parallel(arg, workers=2, iterations=1, allreduce="tree" if arg == "resnet50" else "ring",
                             buckets=2, device="cpu-16c")
    if kind == "file":
        return load_graph(arg)
    raise ValueError(kind)


def _row(job) -> dict:
    """One simulation (runs in a worker process)."""
    from taskflow.cluster import Cluster, Worker
    from taskflow.costs import CostModel
    from taskflow.simulator import simulate

    import schedulers

    (wname, family, spec), (cname, speeds, cores, bw), network, sname, seed = job
    g = _build(spec, seed)
    c = Cluster([Worker(f"w{i}", s, max(cores, int(g.arrays.cores.max()))) for i, s in enumerate(speeds)],
                bandwidth=bw, latency=1e-3, name=cname)
    sch = schedulers.get_scheduler(sname, seed=seed)
    t0 = time.perf_counter()
    plan = sch.schedule(g, c) if sch.kind == "static" else None
    sched_time = time.perf_counter() - t0
    trace = simulate(g, c, sch, network=network, plan=plan, seed=seed)
    if plan is None:
        sched_time = time.perf_counter() - t0  # a dynamic policy decides during the whole run
    valid = not trace.problems(g, c, limit=1)
    m = trace.metrics(g, c, ) if valid else {k: float("nan") for k in ("lower_bound", "slr", "speedup", "efficiency")}
    return {"workflow": wname, "family": family, "cluster": cname, "network": network, "scheduler": sname,
            "seed": seed, "tasks": len(g), "makespan": trace.makespan, "lower_bound": m["lower_bound"],
            "slr": m["slr"], "speedup": m["speedup"], "efficiency": m["efficiency"],
            "scheduling_time": sched_time, "valid": valid}


def _key(r) -> tuple:
    return (str(r["workflow"]), str(r["cluster"]), str(r["network"]), str(r["scheduler"]), str(r["seed"]))


def run_suite(suite: str = "quick", out="taskflow-out/bench", scheduler_names=None, jobs: int | None = None,
              progress: bool = True, real: bool = False) -> list:
    """Run (or resume) a suite; returns every row (old and new) and writes the outputs. ``real``
    also runs a subset on Dask in emulation (:func:`run_real`, rows in ``real.csv``)."""
    if suite not in SUITES:
        from ..errors import TaskflowError
        raise TaskflowError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    import schedulers

    names = list(scheduler_names or DEFAULT_SCHEDULERS)
    for n in names:
        schedulers.scheduler_class(n)  # unknown names fail before anything runs
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = {"quick": [0], "standard": [0, 1, 2], "full": list(range(5))}[suite]
    todo_all = [(w, c, net, s, seed) for w in workflows(suite) for c in clusters(suite) for net in ("simple", "maxmin")
                for s in names for seed in seeds]
    csv_path = out / "results.csv"
    rows = []
    if csv_path.exists():
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
    done = {_key(r) for r in rows}
    todo = [j for j in todo_all if (j[0][0], j[1][0], j[2], j[3], str(j[4])) not in done]
    if progress:
        print(f"suite {suite}: {len(todo_all)} runs, {len(todo_all) - len(todo)} already done, {len(todo)} to run")
    new_file = not csv_path.exists()
    with open(csv_path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        if todo:
            jobs = jobs or os.cpu_count() or 1
            t0 = time.perf_counter()
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                for k, r in enumerate(pool.map(_row, todo, chunksize=4), 1):
                    writer.writerow(r)
                    f.flush()  # a rerun resumes after the last finished row
                    rows.append({kk: str(v) for kk, v in r.items()})
                    if progress and (k % 25 == 0 or k == len(todo)):
                        print(f"\r  [{'#' * (30 * k // len(todo)):<30}] {k}/{len(todo)} runs "
                              f"{time.perf_counter() - t0:5.1f} s", end="", flush=True)
            if progress:
                print()
    real_rows = run_real(suite, out, [n for n in names if n in REAL_SCHEDULERS] or None, progress=progress) \
        if real else None
    write_outputs(rows, out, names, real_rows)
    return rows


# ---------------------------------------------------------------------- a subset on Dask
REAL_FIELDS = ["workflow", "family", "cluster", "scheduler", "tasks", "time_scale", "predicted_makespan",
               "measured_makespan", "measured_over_predicted", "placement_fidelity", "outputs_ok"]
REAL_SCHEDULERS = ("heft", "cpop", "blevel", "work-stealing")
REAL_SPEEDS = [1.0, 1.0, 2.0, 4.0]  # the suite's hetero-4 cluster, declared on 4 local workers


def real_workflows(suite: str) -> list:
    """The subset run on Dask: small graphs, so every run takes a few seconds."""
    keep = {"layered-ccr1", "fork-join-8x2", "fft-16", "montage"}
    if suite != "quick":
        keep |= {"layered-ccr0.1", "gauss-8", "dp-resnet50-tree", "estee-grid"}
    return [w for w in workflows(suite) if w[0] in keep]


def run_real(suite: str = "quick", out="taskflow-out/bench", scheduler_names=None, target_seconds: float = 3.0,
             progress: bool = True, only=None) -> list:
    """Run the subset on an embedded 4-worker LocalCluster in emulation (each task sleeps its
    duration on the worker's declared speed and returns its output's bytes, scaled so a run takes
    about ``target_seconds``). Resumable: rows already in ``real.csv`` are skipped. Returns all rows."""
    import dask
    from distributed import Client, LocalCluster

    import schedulers

    from ..cluster import Cluster, Worker
    from ..runtime import run
    from ..simulator import simulate

    names = [n for n in (scheduler_names or REAL_SCHEDULERS)
             if schedulers.scheduler_class(n).kind == "static" or n == "work-stealing"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "real.csv"
    rows = []
    if path.exists():
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    done = {(r["workflow"], r["scheduler"]) for r in rows}
    wfs = [w for w in real_workflows(suite) if only is None or w[0] in only]
    todo = [(w, n) for w in wfs for n in names if (w[0], n) not in done]
    if progress:
        print(f"on Dask: {len(wfs) * len(names)} runs, {len(todo)} to run "
              f"(4 local workers declared at speeds {REAL_SPEEDS}, emulated)")
    if not todo:
        return rows
    model = Cluster([Worker(str(k), s) for k, s in enumerate(REAL_SPEEDS)], bandwidth=BW, latency=1e-3,
                    name="hetero-4")
    new_file = not path.exists()
    t0 = time.perf_counter()
    with dask.config.set({"distributed.scheduler.work-stealing": True}), \
            LocalCluster(n_workers=len(REAL_SPEEDS), threads_per_worker=1, processes=True,
                         dashboard_address=None) as lc, Client(lc) as client, open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=REAL_FIELDS)
        if new_file:
            writer.writeheader()
        for k, ((wname, family, spec), sname) in enumerate(todo, 1):
            g = _build(spec, 0)
            span = simulate(g, model, "heft", network="simple").makespan
            scale = target_seconds / span if span > 0 else 1.0
            rep = run(g, sname, client=client, cluster=model, time_scale=scale, size_scale=scale, quiet=True,
                      timeout=120)
            a = g.arrays
            ok = all(getattr(rep.results[t], "nbytes", -1) == int(float(a.output_size[i]) * scale)
                     for i, t in enumerate(a.ids))
            r = {"workflow": wname, "family": family, "cluster": "hetero-4", "scheduler": sname, "tasks": len(g),
                 "time_scale": scale, "predicted_makespan": rep.predicted_makespan,
                 "measured_makespan": rep.measured_makespan,
                 "measured_over_predicted": rep.measured_makespan / rep.predicted_makespan,
                 "placement_fidelity": rep.placement_fidelity, "outputs_ok": ok}
            writer.writerow(r)
            f.flush()
            rows.append({kk: str(v) for kk, v in r.items()})
            if progress:
                print(f"\r  [{'#' * (30 * k // len(todo)):<30}] {k}/{len(todo)} runs "
                      f"{time.perf_counter() - t0:5.1f} s", end="", flush=True)
    if progress:
        print()
    return rows


def summarise_real(rows) -> str:
    """A markdown section: per workflow, measured makespan per scheduler (best in bold)."""
    if not rows:
        return ""
    names = list(dict.fromkeys(r["scheduler"] for r in rows))
    wfs = list(dict.fromkeys(r["workflow"] for r in rows))
    by = {(r["workflow"], r["scheduler"]): r for r in rows}
    lines = ["## On Dask (emulated, 4 local workers declared at speeds 1, 1, 2, 4)", "",
             "Measured makespan in seconds (time-scaled so HEFT's plan takes about 3 s; **bold** = "
             "shortest), and in brackets measured / predicted. `work-stealing` is Dask's own scheduler.", "",
             "| workflow | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for w in wfs:
        ms = {n: float(by[w, n]["measured_makespan"]) for n in names if (w, n) in by}
        best = min(ms.values())
        cells = []
        for n in names:
            if (w, n) not in by:
                cells.append("")
                continue
            r = by[w, n]
            v = f"{ms[n]:.2f}"
            cells.append(f"{'**' + v + '**' if ms[n] == best else v} ({float(r['measured_over_predicted']):.2f})")
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    bad = [r for r in rows if r["outputs_ok"] not in ("True", True)]
    lines += ["", f"Every emulated output had its declared size: {'yes' if not bad else f'no ({len(bad)} runs)'}; "
              f"mean placement fidelity of the static plans "
              f"{sum(float(r['placement_fidelity']) for r in rows if r['scheduler'] != 'work-stealing') / max(1, sum(r['scheduler'] != 'work-stealing' for r in rows)):.0%}.", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------- summaries and plots
def _geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summarise(rows, names) -> str:
    fams = sorted({r["family"] for r in rows})
    lines = ["# Scheduler comparison", "",
             f"{len(rows)} simulated runs; {sum(r['valid'] in ('True', True) for r in rows)} valid. "
             "Geometric-mean SLR (makespan / critical path at the fastest durations; lower is better); "
             "**bold** = best in the column.", "",
             "| scheduler | " + " | ".join(fams) + " | all |", "|---" * (len(fams) + 2) + "|"]
    table = {}
    for n in names:
        for f in fams + ["all"]:
            table[n, f] = _geomean([float(r["slr"]) for r in rows if r["scheduler"] == n and (f == "all" or r["family"] == f)])
    best = {f: min(table[n, f] for n in names) for f in fams + ["all"]}
    for n in sorted(names, key=lambda n: table[n, "all"]):
        cells = [(f"**{table[n, f]:.3f}**" if table[n, f] == best[f] else f"{table[n, f]:.3f}") for f in fams + ["all"]]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    # win / tie / loss on makespan, per instance
    inst = {}
    for r in rows:
        inst.setdefault((r["workflow"], r["cluster"], r["network"], r["seed"]), {})[r["scheduler"]] = float(r["makespan"])
    lines += ["", "Wins / ties / losses on makespan (row against column, same instance, ties within 0.1%):", "",
              "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for a in names:
        cells = []
        for b in names:
            if a == b:
                cells.append("-")
                continue
            w = t = l = 0
            for ms in inst.values():
                if a in ms and b in ms:
                    if abs(ms[a] - ms[b]) <= 1e-3 * max(ms[a], ms[b]):
                        t += 1
                    elif ms[a] < ms[b]:
                        w += 1
                    else:
                        l += 1
            cells.append(f"{w}/{t}/{l}")
        lines.append(f"| **{a}** | " + " | ".join(cells) + " |")
    per_net = {net: _best_counts([r for r in rows if r["network"] == net], names) for net in ("simple", "maxmin")}
    lines += ["", "Instances where each scheduler is best (or tied best): " + "; ".join(
        f"{net}: " + ", ".join(f"{n} {c}" for n, c in sorted(cnt.items(), key=lambda x: -x[1]) if c)
        for net, cnt in per_net.items()), ""]
    return "\n".join(lines)


def _best_counts(rows, names) -> dict:
    inst = {}
    for r in rows:
        inst.setdefault((r["workflow"], r["cluster"], r["seed"]), {})[r["scheduler"]] = float(r["makespan"])
    out = {n: 0 for n in names}
    for ms in inst.values():
        b = min(ms.values())
        for n, v in ms.items():
            if v <= b * (1 + 1e-3):
                out[n] += 1
    return out


def _plots(rows, names, out: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = sorted({r["family"] for r in rows})
    inst = {}
    for r in rows:
        inst.setdefault((r["workflow"], r["cluster"], r["network"], r["seed"]), []).append(r)
    norm = {(n, f): [] for n in names for f in fams}
    for rs in inst.values():
        best = min(float(r["makespan"]) for r in rs)
        for r in rs:
            if r["scheduler"] in names:
                norm[r["scheduler"], r["family"]].append(float(r["makespan"]) / best)
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(names)
    for k, n in enumerate(names):
        ys = [_geomean(norm[n, f]) for f in fams]
        ax.bar([i + k * width for i in range(len(fams))], ys, width, label=n)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(fams))])
    ax.set_xticklabels(fams)
    ax.set_ylabel("makespan / best makespan of the instance (geometric mean)")
    ax.set_xlabel("workflow family")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_title("Scheduler comparison in the simulator (lower is better; 1 = best on every instance)")
    ax.legend(ncol=3, fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "normalised.png", dpi=110)
    plt.close(fig)
    # a representative run
    from taskflow.cluster import Cluster, Worker
    from .plot import gantt
    from taskflow.simulator import simulate

    g = _build(("layered", 1.0), 0)
    c = Cluster([Worker(f"w{i}", s) for i, s in enumerate([1.0, 1.0, 2.0, 4.0])], bandwidth=BW, latency=1e-3)
    tr = simulate(g, c, "heft", network="maxmin")
    gantt(tr.to_schedule(), out / "gantt.png", title=f"heft on hetero-4, maxmin network, layered-ccr1: "
          f"makespan {tr.makespan:.1f} s", workers=c.ids)


def _md_table_to_html(md: str) -> str:
    out, in_table = [], False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if all(set(c) <= set("-") for c in cells):
                continue
            if not in_table:
                out.append("<table>")
                in_table = True
                tag = "th"
            else:
                tag = "td"
            row = "".join(f"<{tag}>{_bold(html.escape(c))}</{tag}>" for c in cells)
            out.append(f"<tr>{row}</tr>")
        else:
            if in_table:
                out.append("</table>")
                in_table = False
            if line.startswith("# "):
                out.append(f"<h1>{html.escape(line[2:])}</h1>")
            elif line:
                out.append(f"<p>{_bold(html.escape(line))}</p>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


def _bold(s: str) -> str:
    parts = s.split("**")
    return "".join(p if k % 2 == 0 else f"<b>{p}</b>" for k, p in enumerate(parts))


def write_outputs(rows, out: Path, names, real_rows=None):
    names = [n for n in names if any(r["scheduler"] == n for r in rows)]
    md = summarise(rows, names)
    if real_rows is None and (out / "real.csv").exists():
        with open(out / "real.csv", newline="") as f:
            real_rows = list(csv.DictReader(f))
    if real_rows:
        md += "\n" + summarise_real(real_rows)
    (out / "summary.md").write_text(md + "\n")
    _plots(rows, names, out)
    imgs = "".join(
        f'<h2>{title}</h2><img alt="{title}" src="data:image/png;base64,{base64.b64encode((out / f).read_bytes()).decode()}">'
        for title, f in (("Normalised makespan per family", "normalised.png"), ("A representative run", "gantt.png")))
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>taskflow benchmark</title><style>"
            f"body{{font-family:sans-serif;max-width:1100px;margin:auto}}table{{border-collapse:collapse}}"
            f"td,th{{border:1px solid #999;padding:3px 6px;text-align:right}}img{{max-width:100%}}</style></head>"
            f"<body>{_md_table_to_html(md)}{imgs}</body></html>")
    (out / "report.html").write_text(page)
