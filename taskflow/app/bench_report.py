"""The outputs of the scheduler comparison: ``summary.md`` (geometric-mean SLR per scheduler and
family, win/tie/loss counts, the Dask section), ``normalised.png``, ``gantt.png`` and a
self-contained ``report.html``."""

from __future__ import annotations

import base64
import csv
import html
import math
from pathlib import Path

from ..formats import atomic_write, save_figure
from .plot import plain_text
from .suite import BW, build_workflow

__all__ = ["write_outputs", "summarise", "summarise_real"]


def summarise_real(rows) -> str:
    """A markdown section: per workflow, measured makespan per scheduler (best in bold).

    Parameters
    ----------
    rows : list of dict
        ``real.csv`` rows.
    """
    if not rows:
        return ""
    names = list(dict.fromkeys(r["scheduler"] for r in rows))
    wfs = list(dict.fromkeys(r["workflow"] for r in rows))
    by = {(r["workflow"], r["scheduler"]): r for r in rows}
    lines = [
        "## On Dask (emulated, 4 local workers declared at speeds 1, 1, 2, 4)",
        "",
        "Measured makespan in seconds (time-scaled so HEFT's plan takes about 3 s; **bold** = "
        "shortest), and in brackets measured / predicted. `work-stealing` is Dask's own scheduler.",
        "",
        "| workflow | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
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
    first = sorted(float(r["first_error"]) for r in rows)
    second = sorted(float(r["learned_error"]) for r in rows)
    lines += [
        "",
        f"Prediction error |measured - predicted| / predicted over these {len(rows)} runs: planned with the "
        f"declared costs median {_median(first):.1%}, worst {first[-1]:.1%}; the same workflow again, planned "
        f"with the cost profile the first run measured, median {_median(second):.1%}, worst {second[-1]:.1%}.",
    ]
    again = [r for r in rows if r.get("again_measured") not in (None, "")]
    if again:
        third = sorted(float(r["again_error"]) for r in again)
        spread = sorted(
            abs(float(r["again_measured"]) - float(r["learned_measured"]))
            / min(float(r["again_measured"]), float(r["learned_measured"]))
            for r in again
        )
        lines += [
            "",
            f"The same learned plan run once more: prediction error median {_median(third):.1%}, worst "
            f"{third[-1]:.1%}. Two runs of one plan differed by a median of {_median(spread):.1%} and up to "
            f"{spread[-1]:.1%} (the longer over the shorter, minus 1): the noise of this machine that any "
            f"prediction is up against.",
        ]
    bad = [r for r in rows if r["outputs_ok"] not in ("True", True)]
    lines += [
        "",
        f"Every emulated output had its declared size: {'yes' if not bad else f'no ({len(bad)} runs)'}; "
        f"mean placement fidelity of the static plans "
        f"{sum(float(r['placement_fidelity']) for r in rows if r['scheduler'] != 'work-stealing') / max(1, sum(r['scheduler'] != 'work-stealing' for r in rows)):.0%}.",
        "",
    ]
    return "\n".join(lines)


def _median(xs):
    xs = sorted(xs)
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else (xs[k - 1] + xs[k]) / 2


# ---------------------------------------------------------------------- summaries and plots
def _geomean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summarise(rows, names) -> str:
    """The markdown summary: geometric-mean SLR per scheduler and family (best in bold), win/tie/loss
    counts per network model.

    Parameters
    ----------
    rows : list of dict
        ``results.csv`` rows.
    names : list of str
        Schedulers, in column order.
    """
    fams = sorted({r["family"] for r in rows})
    lines = [
        "# Scheduler comparison",
        "",
        f"{len(rows)} simulated runs; {sum(r['valid'] in ('True', True) for r in rows)} valid. "
        "Geometric-mean SLR (makespan / critical path at the fastest durations; lower is better); "
        "**bold** = best in the column.",
        "",
        "| scheduler | " + " | ".join(fams) + " | all |",
        "|---" * (len(fams) + 2) + "|",
    ]
    table = {}
    for n in names:
        for f in fams + ["all"]:
            table[n, f] = _geomean(
                [float(r["slr"]) for r in rows if r["scheduler"] == n and (f == "all" or r["family"] == f)]
            )
    best = {f: min(table[n, f] for n in names) for f in fams + ["all"]}
    for n in sorted(names, key=lambda n: table[n, "all"]):
        cells = [(f"**{table[n, f]:.3f}**" if table[n, f] == best[f] else f"{table[n, f]:.3f}") for f in fams + ["all"]]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    # win / tie / loss on makespan, per instance
    inst = {}
    for r in rows:
        inst.setdefault((r["workflow"], r["cluster"], r["network"], r["seed"]), {})[r["scheduler"]] = float(
            r["makespan"]
        )
    lines += [
        "",
        "Wins / ties / losses on makespan (row against column, same instance, ties within 0.1%):",
        "",
        "| | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
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
    lines += [
        "",
        "Instances where each scheduler is best (or tied best): "
        + "; ".join(
            f"{net}: " + ", ".join(f"{n} {c}" for n, c in sorted(cnt.items(), key=lambda x: -x[1]) if c)
            for net, cnt in per_net.items()
        ),
        "",
    ]
    return "\n".join(lines + _what_ran(rows))


def _what_ran(rows) -> list:
    """Which workflows (per family, with their tasks), clusters, networks and seeds the runs used,
    and what the words mean."""
    wfs: dict = {}
    for r in rows:
        wfs.setdefault(r["family"], {})[r["workflow"]] = r["tasks"]
    out = ["## What ran", ""]
    for fam in sorted(wfs):
        out.append(f"- family **{fam}**: " + ", ".join(f"{w} ({t} tasks)" for w, t in sorted(wfs[fam].items())))
    out += [
        f"- clusters: {', '.join(sorted({r['cluster'] for r in rows}))}; networks: "
        f"{', '.join(sorted({r['network'] for r in rows}))}; seeds: {', '.join(sorted({str(r['seed']) for r in rows}))}",
        "",
        "**SLR** (schedule length ratio): the makespan over the critical path at each task's fastest "
        "duration; 1.0 is the best any schedule could do. **Placement fidelity** (on Dask): the share of tasks "
        "that ran on the worker the plan chose; Dask's own `work-stealing` has no plan, so it has none. The "
        "scheduler `random` places tasks at random (a baseline); the family `random-dag` holds random layered "
        "DAGs.",
        "",
    ]
    return out


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


@plain_text
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
    heights = []
    for k, n in enumerate(names):
        ys = [_geomean(norm[n, f]) for f in fams]
        heights += [y for y in ys if y == y]
        ax.bar([i + k * width for i in range(len(fams))], ys, width, label=n)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(fams))])
    ax.set_xticklabels(fams)
    # one scheduler far behind (8x the best) would squash the rest into a band above 1: a log scale
    # then, with ticks at plain ratios
    if heights and max(heights) > 3 * max(1.0, sorted(heights)[len(heights) // 2]):
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_yscale("log")
        ax.set_ylim(0.95, max(heights) * 1.15)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.25, 1.5, 2.0, 3.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_ylabel("makespan / best makespan of the instance (geometric mean)")
    ax.set_xlabel("workflow family")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_title("Scheduler comparison in the simulator (lower is better; 1 = best on every instance)")
    ax.legend(ncol=3, fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "normalised.png", plt.close, dpi=110)
    # a representative run
    from taskflow.cluster import Cluster, Worker
    from .plot import gantt
    from taskflow.simulator import simulate

    g = build_workflow(("layered", 1.0), 0)
    c = Cluster([Worker(f"w{i}", s) for i, s in enumerate([1.0, 1.0, 2.0, 4.0])], bandwidth=BW, latency=1e-3)
    tr = simulate(g, c, "heft", network="maxmin")
    gantt(
        tr.to_schedule(),
        out / "gantt.png",
        title=f"heft on hetero-4, maxmin network, layered-ccr1: makespan {tr.makespan:.1f} s",
        workers=c.ids,
        graph=g,
        transfers=tr.transfers,
    )


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
    """Write ``summary.md``, the plots and ``report.html`` into ``out``.

    Parameters
    ----------
    rows : list of dict
    out : pathlib.Path
    names : list of str
    real_rows : list of dict, optional
        The Dask rows (default: ``real.csv`` when present).
    """
    names = [n for n in names if any(r["scheduler"] == n for r in rows)]
    md = summarise(rows, names)
    if real_rows is None and (out / "real.csv").exists():
        with open(out / "real.csv", newline="") as f:
            real_rows = list(csv.DictReader(f))
    if real_rows:
        md += "\n" + summarise_real(real_rows)
    atomic_write(out / "summary.md", md + "\n")
    _plots(rows, names, out)
    imgs = "".join(
        f'<h2>{title}</h2><img alt="{title}" src="data:image/png;base64,{base64.b64encode((out / f).read_bytes()).decode()}">'
        for title, f in (("Normalised makespan per family", "normalised.png"), ("A representative run", "gantt.png"))
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>taskflow benchmark</title><style>"
        f"body{{font-family:sans-serif;max-width:1100px;margin:auto}}table{{border-collapse:collapse}}"
        f"td,th{{border:1px solid #999;padding:3px 6px;text-align:right}}img{{max-width:100%}}</style></head>"
        f"<body>{_md_table_to_html(md)}{imgs}</body></html>"
    )
    atomic_write(out / "report.html", page)
