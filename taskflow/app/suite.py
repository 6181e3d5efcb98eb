"""What the scheduler comparison runs: its workflows, clusters and schedulers (quick, standard, full),
and the Dask subset (``--real``)."""

from __future__ import annotations

from workflows import samples

__all__ = ["SUITES", "FIELDS", "DEFAULT_SCHEDULERS", "BW", "workflows", "clusters", "real_workflows", "build_workflow"]


FIELDS = [
    "workflow",
    "family",
    "cluster",
    "network",
    "scheduler",
    "seed",
    "tasks",
    "makespan",
    "lower_bound",
    "slr",
    "speedup",
    "efficiency",
    "scheduling_time",
    "valid",
]
SUITES = ("quick", "standard", "full")
DEFAULT_SCHEDULERS = ("heft", "cpop", "blevel", "peft", "mct", "etf", "work-stealing", "blevel-dynamic", "random")
BW = 1e8  # bytes/s of the benchmark clusters; generated sizes are seconds x BW


def workflows(suite: str) -> list:
    """[(name, family, builder args)] - built lazily in the worker processes.

    Parameters
    ----------
    suite : {"quick", "standard", "full"}
    """
    out = [
        ("layered-ccr0.1", "random-dag", ("layered", 0.1)),
        ("layered-ccr1", "random-dag", ("layered", 1.0)),
        ("layered-ccr10", "random-dag", ("layered", 10.0)),
        ("fft-16", "scientific", ("fft", 16)),
        ("gauss-8", "scientific", ("gauss", 8)),
        ("fork-join-8x2", "scientific", ("forkjoin", 8)),
        ("in-tree-3x3", "scientific", ("intree", 3)),
        ("dp-resnet50-tree", "training", ("training", "resnet50")),
    ]
    # real workflows shipped in the package (workflows/data/samples): never skipped
    for name in ("montage", "epigenomics"):
        out.append((name, "wfcommons", ("file", str(samples.path(name)))))
    for k in ["conflux", "grid"] if suite == "quick" else ["conflux", "grid", "fork1", "bigmerge", "splitters"]:
        out.append((f"estee-{k}", "estee", ("file", f"{samples.path('estee-elementary')}#{k}")))
    if suite != "quick":
        out += [
            ("layered-v300-ccr1", "random-dag", ("layered-big", 1.0)),
            ("gauss-16", "scientific", ("gauss", 16)),
            ("dp-bert-ring", "training", ("training", "bert-base")),
        ]
    return out


def clusters(suite: str) -> list:
    """``[(name, speeds, cores, bandwidth)]`` of a suite's clusters.

    Parameters
    ----------
    suite : {"quick", "standard", "full"}
    """
    out = [
        ("homo-4", [1.0] * 4, 1, BW),
        ("hetero-4", [1.0, 1.0, 2.0, 4.0], 1, BW),
        ("hetero-8-slow", [1.0, 1.5, 2.0, 3.0] * 2, 1, BW / 4),
    ]
    if suite != "quick":
        out += [("homo-16x2", [1.0] * 16, 2, BW), ("hetero-8-fast", [1.0, 1.5, 2.0, 3.0] * 2, 1, BW * 20)]
    return out


def build_workflow(spec, seed):
    """One workflow of a suite: ``spec`` is ``(kind, parameter)`` as the suites list them.

    Parameters
    ----------
    spec : tuple
    seed : int

    Raises
    ------
    ValueError
        An unknown kind of workflow.
    """
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
        return data_parallel(
            arg, workers=2, iterations=1, allreduce="tree" if arg == "resnet50" else "ring", buckets=2, device="cpu-16c"
        )
    if kind == "file":
        return load_graph(arg)
    raise ValueError(kind)


REAL_FIELDS = [
    "workflow",
    "family",
    "cluster",
    "scheduler",
    "tasks",
    "time_scale",
    "predicted_makespan",
    "measured_makespan",
    "measured_over_predicted",
    "placement_fidelity",
    "outputs_ok",
    "learned_predicted",
    "learned_measured",
    "first_error",
    "learned_error",
    "again_measured",
    "again_error",
]
REAL_SCHEDULERS = ("heft", "cpop", "blevel", "work-stealing")
REAL_SPEEDS = [1.0, 1.0, 2.0, 4.0]  # the suite's hetero-4 cluster, declared on 4 local workers


def real_workflows(suite: str) -> list:
    """The subset run on Dask: small graphs, so every run takes a few seconds.

    Parameters
    ----------
    suite : {"quick", "standard", "full"}
    """
    keep = {"layered-ccr1", "fork-join-8x2", "fft-16", "montage"}
    if suite != "quick":
        keep |= {"layered-ccr0.1", "gauss-8", "dp-resnet50-tree", "estee-grid"}
    return [w for w in workflows(suite) if w[0] in keep]
