"""The main job (``make demo``): an executable data-parallel training graph with its data-loading
stages, run on an embedded LocalCluster under heft, cpop and work-stealing; a real PyTorch model
trained on the same cluster (where the torch extra is installed); then the quick
scheduler-comparison suite in the simulator. Everything lands in ``./taskflow-out/``."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

from ..errors import TaskflowWarning

__all__ = ["main"]


def main(out="taskflow-out", iterations: int = 10, workers: int = 2, bench: bool = True, dashboard=False) -> int:
    """The main demo (``make demo``); see the module docstring.

    Parameters
    ----------
    out : path
    iterations, workers : int
    bench : bool
        Also run the quick scheduler comparison.
    dashboard : bool or str
        Serve Dask's dashboard of the demo's cluster (True, or HOST:PORT) and print its link.

    Returns
    -------
    int
    """
    from distributed import Client

    from workflows.training import data_parallel

    from ..runtime import cluster_from_dask, run
    from ..runtime.launch.local import local_cluster, warm_cluster
    from ..runtime.client.connecting import dashboard_address, say_dashboard
    from .bench import run_suite
    from .plot import gantt_compare

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    g = data_parallel(
        workers=workers,
        iterations=iterations,
        allreduce="ring",
        buckets=2,
        executable=True,
        dataset_dir=out / "data",
        hidden=(32,),
        lr=0.5,
        batch=32 * workers,
        seed=0,
    )
    print(
        f"training graph: {len(g)} tasks, {g.num_edges} edges ({workers} ranks x {iterations} iterations, "
        f"ring allreduce, MLP 64-32-10 on a synthetic 10-class dataset written as shards to {out / 'data'})"
    )
    with local_cluster(workers, 1, dashboard_address(dashboard)) as lc, Client(lc) as client:
        if dashboard:
            say_dashboard(client)
        warm_cluster(client)
        cluster = cluster_from_dask(client, calibrate=True)  # speeds, network and Dask's per-task overhead
        print(
            f"cluster model (measured): speeds {[round(w.speed, 2) for w in cluster.workers]}, "
            f"{cluster.bandwidth / 1e9:.2f} GB/s, latency {cluster.latency * 1e3:.1f} ms, "
            f"per-task overhead {cluster.task_overhead * 1e3:.1f} ms"
        )
        profile = out / "costs.json"
        profile.unlink(missing_ok=True)
        with warnings.catch_warnings():  # its prediction is from guessed costs: said below, not warned
            warnings.simplefilter("ignore", TaskflowWarning)
            first = run(g, "heft", client=client, cluster=cluster, quiet=True, profile=str(profile))
        print(
            f"learning run (heft, costs guessed from FLOPs): predicted {first.predicted_makespan:.3f} s, measured "
            f"{first.measured_makespan:.3f} s; what it measured saved to {profile}"
        )
        print(
            f"{'scheduler':<14} {'predicted s':>11} {'measured s':>10} {'fidelity':>8} {'final loss':>10}  "
            f"(fidelity: the tasks on the plan's worker; work stealing has no plan)"
        )
        for name in ("heft", "cpop", "work-stealing"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TaskflowWarning)
                rep = run(g, name, client=client, cluster=cluster, quiet=True, profile=str(profile))
            loss = sum(rep.results[f"it{iterations - 1}.w{w}.loss"][0] for w in range(workers)) / workers
            first = sum(rep.results[f"it0.w{w}.loss"][0] for w in range(workers)) / workers
            fidelity = f"{rep.placement_fidelity:.0%}" if rep.placement_fidelity is not None else "-"
            predicted = f"{rep.predicted_makespan:.3f}" if rep.predicted_makespan is not None else "-"
            print(
                f"{name:<14} {predicted:>11} {rep.measured_makespan:10.3f} {fidelity:>8} {loss:10.4f}  "
                f"(first {first:.3f})"
            )
            rep.save(out / f"run-{name}.json")
            gantt_compare(rep, out / f"gantt-{name}.png")
        _train_torch(client, out)
    print(
        f"reports and Gantt charts in {out}/ ({time.perf_counter() - t0:.0f} s). The table's predictions use "
        f"the costs the runs before measured ({profile.name}), the cluster's calibrated network and Dask's "
        "per-task overhead."
    )
    if bench:
        run_suite("quick", out / "bench", jobs=os.cpu_count())
        print(f"quick suite: {out / 'bench' / 'summary.md'}, {out / 'bench' / 'report.html'}")
    print(f"demo done in {time.perf_counter() - t0:.0f} s")
    return 0


def _train_torch(client, out: Path) -> None:
    """Train a small CNN on scikit-learn's digits (written as PNG class folders) for two epochs on
    ``client``'s workers; say so and return where PyTorch is not installed."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("sklearn") is None:
        print("real training skipped: pip install 'dask-taskflow[torch]' (PyTorch) to train a CNN here")
        return
    from workflows.images import write_digits
    from workflows.torch_models import small_cnn

    from ..training import train

    data = out / "digits"
    if not (data / "train").exists():
        write_digits(data)
    history = train(
        small_cnn,
        data,
        epochs=2,
        workers=len(client.scheduler_info()["workers"]),
        batch=64,
        client=client,
        quiet=True,
        plot=out / "accuracy.png",
    )
    print(
        f"real training (PyTorch): a {history.config['parameters']:,}-parameter CNN on {data}, ring allreduce, "
        f"ranks placed on their workers; accuracy against time in {out / 'accuracy.png'}"
    )
    for line in history.lines():
        print(f"  {line}")
