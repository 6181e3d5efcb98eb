"""``taskflow compare``: every scheduler, static and dynamic, on a user's own graphs, in simulation and
(``real=True``) on an embedded Dask cluster in emulation; one table, one plot, one report."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

from ..cluster import Cluster
from ..errors import ClusterError, UsageError
from ..formats import atomic_write, save_figure
from ..graph import TaskGraph
from ..scheduling import available, get_scheduler, scheduler_class
from .plot import plain_text

__all__ = ["compare", "COMPARE_FIELDS", "table_text", "table_notes", "write_outputs", "summarise"]

COMPARE_FIELDS = [
    "graph",
    "tasks",
    "scheduler",
    "kind",
    "repeat",
    "seed",
    "simulated_makespan",
    "lower_bound",
    "bound_ratio",
    "slr",
    "valid",
    "measured_makespan",
    "predicted_makespan",
    "placement_fidelity",
]

#: Seconds the fastest simulated plan of a graph is scaled to on Dask.
REAL_SECONDS = 2.0


def compare(
    graphs,
    cluster: Cluster,
    schedulers=None,
    network: str = "maxmin",
    seed: int = 0,
    real: bool = False,
    out=None,
    progress: bool = False,
    dashboard=False,
    *,
    address=None,
    scheduler_file=None,
    profile=None,
    time_scale: float | None = None,
    repeat: int = 1,
) -> list:
    """Simulate every scheduler on every graph (and, with ``real``, run the static ones and Dask's own
    work stealing on an embedded LocalCluster of ``len(cluster)`` workers, emulated at the
    cluster's declared speeds, time-scaled so the best simulated plan takes about
    :data:`REAL_SECONDS`). Every simulated trace is validated.

    Parameters
    ----------
    graphs : list of (label, TaskGraph)
    cluster : Cluster
    schedulers : list of str, optional
        Default: every registered scheduler, static and dynamic.
    network : {"maxmin", "simple"}
    seed : int
    real : bool
    out : path, optional
        A folder for ``compare.csv``, ``compare.md`` and ``compare.png``.
    progress : bool
    dashboard : bool or str
        With ``real``: serve the embedded cluster's Dask dashboard (True, or HOST:PORT) and print
        its link.
    address, scheduler_file : str, optional
        With ``real``: run on this existing cluster instead of an embedded one. Its workers, in
        the order of their names, take the places of ``cluster``'s workers (as many of each).
    profile : str or os.PathLike, optional
        With ``real``: a cost profile each run plans with and adds its measurements to (see
        :func:`taskflow.run`), so a second comparison plans with measured costs.
    time_scale : float, optional
        With ``real``: multiply emulated durations and sizes by this (default: so that the best
        simulated plan of a graph takes about :data:`REAL_SECONDS`).
    repeat : int
        Each scheduler on each graph this many times, seeds ``seed``, ``seed + 1``, ... (each row
        records its ``repeat`` and ``seed``): the table and the figure give the median of the
        repeats and their range.

    Returns
    -------
    list of dict
        One row per graph, scheduler and repeat (:data:`COMPARE_FIELDS`); ``measured_*`` empty
        where not run.

    Raises
    ------
    TaskflowError
        A repeat count that is not an integer >= 1, an unknown scheduler, an existing cluster of
        another size.
    """
    from ..analysis import critical_path, lower_bound
    from ..costs import CostModel
    from .. import simulate  # (the adaptive scheduler's own decisions: taskflow.runtime.simulated)

    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise UsageError(f"repeat must be an integer >= 1, got {repeat!r}")
    # by default every scheduler the simulator can carry out (not a plan with task copies)
    names = (
        [get_scheduler(n).name for n in schedulers]
        if schedulers
        else [n for n in available() if not scheduler_class(n).duplicates]
    )
    rows = []
    for label, g in graphs:
        cost_model = CostModel(g, cluster)
        lb, cp = lower_bound(g, cluster, cost_model), critical_path(g, cost_model=cost_model)[0]
        for name in names:
            for k in range(repeat):
                scheduler = get_scheduler(name, seed=seed + k)
                trace = simulate(g, cluster, scheduler, network=network, seed=seed + k)
                valid = not trace.problems(g, cluster, limit=1)
                mk = trace.makespan
                rows.append(
                    {
                        "graph": label,
                        "tasks": len(g),
                        "scheduler": scheduler.name,
                        "kind": scheduler.kind,
                        "repeat": k,
                        "seed": seed + k,
                        "simulated_makespan": mk,
                        "lower_bound": lb,
                        "bound_ratio": mk / lb if lb > 0 else float("nan"),
                        "slr": mk / cp if cp > 0 else float("nan"),
                        "valid": valid,
                        "measured_makespan": "",
                        "predicted_makespan": "",
                        "placement_fidelity": "",
                        "executable": g.executable,
                    }
                )
                if progress:
                    again = f" (seed {seed + k})" if repeat > 1 else ""
                    print(f"  simulated {label} / {scheduler.name}{again}: {mk:.6g} s", flush=True)
    if real:
        _on_dask(graphs, cluster, rows, progress, dashboard, address, scheduler_file, profile, time_scale)
    if out is not None:
        write_outputs(rows, Path(out))
    return rows


def _on_dask(
    graphs,
    cluster: Cluster,
    rows,
    progress,
    dashboard=False,
    address=None,
    scheduler_file=None,
    profile=None,
    time_scale=None,
) -> None:
    """Fill the measured columns: static schedulers and work stealing on one cluster (embedded, or
    the existing one at ``address`` / ``scheduler_file``)."""
    import contextlib

    from distributed import Client

    from ..runtime.messages import workers_info
    from ..runtime.launch.local import local_cluster, warm_cluster
    from ..runtime.client.connecting import client_for, dashboard_address, say_dashboard

    if time_scale is not None and not 0 < time_scale < float("inf"):
        raise UsageError(f"--time-scale must be a number > 0, got {time_scale!r}")
    with contextlib.ExitStack() as stack:
        if address or scheduler_file:
            client = stack.enter_context(client_for(address, scheduler_file))
            names = sorted(
                (str(w.get("name", a)) for a, w in workers_info(client).items()),
                key=lambda n: (0, int(n), "") if n.isascii() and n.isdigit() else (1, 0, n),
            )
            if len(names) != len(cluster):
                raise ClusterError(
                    f"the cluster at {address or scheduler_file} has {len(names)} workers "
                    f"({', '.join(names) or 'none'}) and the declared cluster {len(cluster)}: give as many "
                    f"(--workers {len(names)})"
                )
        else:
            lc = stack.enter_context(
                local_cluster(
                    len(cluster), max(1, int(cluster.cores.max())), dashboard_address(dashboard), work_stealing=True
                )
            )
            client = stack.enter_context(Client(lc))
            names = [str(k) for k in range(len(cluster))]
            if dashboard:
                say_dashboard(client)
            warm_cluster(client)
        on_dask = Cluster(
            [w.__class__(n, w.speed, w.cores) for n, w in zip(names, cluster.workers)],
            cluster.bandwidth,
            None,
            cluster.latency,
            cluster.name,
        )
        _measure(graphs, cluster, on_dask, client, rows, progress, profile, time_scale)


def _measure(graphs, cluster, on_dask, client, rows, progress, profile, time_scale) -> None:
    import warnings

    from ..errors import TaskflowWarning
    from ..runtime import run

    for label, g in graphs:
        if g.executable:
            scale = 1.0
        elif time_scale is not None:
            scale = time_scale
        else:
            best = min(r["simulated_makespan"] for r in rows if r["graph"] == label)
            scale = REAL_SECONDS / best if best > 0 else 1.0
        for r in rows:
            if r["graph"] != label or not (r["kind"] == "static" or r["scheduler"] == "work-stealing"):
                continue
            g2 = g.restrict_costs(on_dask.ids) if not g.arrays.costs else _renamed_costs(g, cluster, on_dask)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TaskflowWarning)
                t0 = time.perf_counter()
                rep = run(
                    g2,
                    r["scheduler"],
                    client=client,
                    cluster=on_dask,
                    time_scale=scale,
                    size_scale=scale,
                    quiet=True,
                    timeout=600,
                    profile=profile,
                    seed=r.get("seed", 0),
                )
            r["measured_makespan"] = rep.measured_makespan / scale
            r["predicted_makespan"] = rep.predicted_makespan / scale if rep.predicted_makespan is not None else ""
            r["placement_fidelity"] = rep.placement_fidelity if rep.placement_fidelity is not None else ""
            if progress:
                print(
                    f"  on Dask {label} / {r['scheduler']}: {rep.measured_makespan:.3g} s real "
                    f"({time.perf_counter() - t0:.1f} s)",
                    flush=True,
                )


def _renamed_costs(g: TaskGraph, cluster: Cluster, on_dask: Cluster) -> TaskGraph:
    """Per-worker costs keyed by the Dask workers' names (``on_dask``) instead of the cluster's ids."""
    name = {w.id: m.id for w, m in zip(cluster.workers, on_dask.workers)}
    a = g.arrays
    costs = {a.ids[i]: {name[w]: c for w, c in row.items() if w in name} for i, row in a.costs.items()}
    return g.with_costs(costs=costs)


def summarise(rows) -> list:
    """One row per graph and scheduler: the median of its repeats' ``simulated_makespan``,
    ``bound_ratio``, ``measured_makespan`` and ``predicted_makespan``, each with ``(low, high)``
    under ``<field>_range``; ``repeats`` counts them and ``valid`` holds for all.

    Parameters
    ----------
    rows : list of dict
        What :func:`compare` returned.
    """
    import statistics

    groups: dict = {}
    for r in rows:
        groups.setdefault((r["graph"], r["scheduler"]), []).append(r)
    out = []
    for rs in groups.values():
        row = dict(rs[0], repeats=len(rs), valid=all(r["valid"] for r in rs))
        for f in ("simulated_makespan", "bound_ratio", "measured_makespan", "predicted_makespan"):
            xs = [float(r[f]) for r in rs if r.get(f, "") != ""]
            row[f], row[f + "_range"] = (statistics.median(xs), (min(xs), max(xs))) if xs else ("", None)
        out.append(row)
    return out


def table_text(rows) -> str:
    """The comparison as a plain-text table, per graph, shortest makespan first, followed by what
    each column means (:func:`table_notes`); repeats as their median and range.

    Parameters
    ----------
    rows : list of dict
        What :func:`compare` returned.
    """
    summary = summarise(rows)
    many = max(r["repeats"] for r in summary) > 1
    real = any(r["measured_makespan"] != "" for r in summary)
    w = 22 if many else 10

    def cell(r, f):
        v, span = r[f], r[f + "_range"]
        if v == "":
            return "-"
        return _num(v) + (f" ({_num(span[0])}-{_num(span[1])})" if many else "")

    head = f"{'graph':<24} {'scheduler':<15} {'kind':<8} {'simulated':>{w}} {'x bound':>8}"
    head += f" {'on Dask':>{w}} {'predicted':>{w}}" if real else ""
    lines = [head, "-" * len(head)]
    for label in dict.fromkeys(r["graph"] for r in summary):
        for r in sorted(
            (r for r in summary if r["graph"] == label), key=lambda r: (r["simulated_makespan"], r["scheduler"])
        ):
            line = (
                f"{label[:24]:<24} {r['scheduler']:<15} {r['kind']:<8} {cell(r, 'simulated_makespan'):>{w}} "
                f"{r['bound_ratio']:>8.3f}"
            )
            if real:
                line += f" {cell(r, 'measured_makespan'):>{w}} {cell(r, 'predicted_makespan'):>{w}}"
            lines.append(line + ("" if r["valid"] else "  INVALID"))
    notes = table_notes(rows)
    if many:
        seeds = sorted({r["seed"] for r in rows})
        notes.append(
            f"each figure: the median of {summary[0]['repeats']} repeats (seeds {seeds[0]}-{seeds[-1]}) "
            f"and, in brackets, their range; compare.csv holds every repeat"
        )
    return "\n".join(lines + [""] + notes)


def _num(x) -> str:
    """Four significant digits in fixed notation (77.36, 0.08603, 1235); exponent form only for
    very large or very small values, so a column lines up."""
    import math

    x = float(x)
    if not math.isfinite(x) or x == 0:
        return f"{x:g}"
    if not 1e-3 <= abs(x) < 1e6:
        return f"{x:.3e}"
    return f"{x:.{max(0, 3 - math.floor(math.log10(abs(x))))}f}"


def table_notes(rows) -> list:
    """One line per column of :func:`table_text`: what the number is and where it comes from.

    Parameters
    ----------
    rows : list of dict
    """
    notes = [
        "simulated: the makespan in the simulator, with the graph's declared costs on the given cluster "
        "(in the graph's time units)",
        "x bound:   simulated / the lower bound (the larger of the critical path at the fastest durations and "
        "the total work over the cluster's speed); 1.000 means no schedule can be shorter",
        "           (SLR, the makespan over the critical path alone, is in compare.csv)",
    ]
    if any(r["measured_makespan"] != "" for r in rows):
        notes += [
            "on Dask:   the makespan measured on Dask workers, in the same units (an emulated graph runs with "
            "its durations scaled; the figure is scaled back)",
            "predicted: what the runtime predicted for that run before it started, from the cluster it measured "
            "(speeds, network, Dask's per-task overhead) rather than the declared one; for work-stealing, a "
            "model of Dask's own rules (dask-model)",
        ]
        if any(r.get("executable") for r in rows):
            notes += [
                "           a graph with your own functions runs them for real: 'on Dask' is their real time, "
                "'simulated' your declared costs; to plan with real costs: taskflow run GRAPH --profile "
                "costs.json, twice, or compare --real --profile costs.json"
            ]
    return notes


def write_outputs(rows, out: Path) -> None:
    """``compare.csv``, ``compare.md`` (the table and what it means) and ``compare.png``.

    Parameters
    ----------
    rows : list of dict
    out : Path
    """
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, fieldnames=COMPARE_FIELDS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write(out / "compare.csv", buf.getvalue())
    md = [
        "# Scheduler comparison",
        "",
        "`static` schedulers plan before the run; `dynamic` ones decide as it runs. What each column means "
        "is under the table; `compare.csv` also holds the lower bound and the SLR (makespan / critical path).",
        "",
        "```",
        table_text(rows),
        "```",
        "",
    ]
    atomic_write(out / "compare.md", "\n".join(md))
    _plot(rows, out / "compare.png")


@plain_text
def _plot(rows, path: Path) -> None:
    """One panel per graph: a bar per scheduler (simulated; blue static, orange dynamic), a dot where
    it was measured on Dask, the lower bound dotted; the legend sits outside the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    colour = {"static": "tab:blue", "dynamic": "tab:orange"}
    rows = summarise(rows)
    labels = list(dict.fromkeys(r["graph"] for r in rows))
    per = max(len([r for r in rows if r["graph"] == label]) for label in labels)
    fig, axes = plt.subplots(len(labels), 1, figsize=(9, 0.9 + len(labels) * (0.7 + 0.26 * per)), squeeze=False)
    for ax, label in zip(axes[:, 0], labels):
        rs = sorted((r for r in rows if r["graph"] == label), key=lambda r: -r["simulated_makespan"])
        y = range(len(rs))
        ax.barh(
            list(y),
            [r["simulated_makespan"] for r in rs],
            color=[colour.get(r["kind"], "grey") for r in rs],
            xerr=_spread(rs, "simulated_makespan"),
            ecolor="dimgrey",
            capsize=2,
        )
        measured = [k for k, r in enumerate(rs) if r["measured_makespan"] != ""]
        if measured:
            got = [rs[k] for k in measured]
            ax.errorbar(
                [r["measured_makespan"] for r in got],
                measured,
                xerr=_spread(got, "measured_makespan"),
                color="black",
                fmt="o",
                markersize=4,
                capsize=2,
                zorder=3,
            )
        ax.set_yticks(list(y))
        ax.set_yticklabels([r["scheduler"] for r in rs])
        ax.axvline(rs[0]["lower_bound"], color="grey", linestyle=":")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("makespan (graph's time units)")
    handles = [
        Patch(color=colour["static"], label="static scheduler, simulated"),
        Patch(color=colour["dynamic"], label="dynamic scheduler, simulated"),
        Line2D([], [], color="grey", linestyle=":", label="lower bound"),
    ]
    if any(r["measured_makespan"] != "" for r in rows):
        handles.append(Line2D([], [], color="black", marker="o", linestyle="", markersize=5, label="measured on Dask"))
    if max(r["repeats"] for r in rows) > 1:
        handles.append(
            Line2D(
                [],
                [],
                color="dimgrey",
                marker="|",
                label=f"range of {rows[0]['repeats']} repeats (bars and dots: medians)",
            )
        )
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.9 / fig.get_figheight() * 0.6, 1, 1))
    save_figure(fig, path, plt.close, dpi=110)


def _spread(rs, field: str):
    """Error bars from each row's median to its range's ends (None without repeats)."""
    if all(r["repeats"] == 1 for r in rs):
        return None
    return [[r[field] - r[field + "_range"][0] for r in rs], [r[field + "_range"][1] - r[field] for r in rs]]
