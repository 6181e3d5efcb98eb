"""Real training against PyTorch's DistributedDataParallel, in one run.

    python benchmarks/bench_torch.py [--model resnet8|small-cnn|loading|both|all] [--workers 2] [--epochs 3]
                                     [--iterations 10] [--batch 96] [--data DIR]

For each model, the same job twice on this machine, one after the other:

* **DDP**: ``--workers`` processes (``torch.multiprocessing``), the gloo backend on loopback, one
  torch thread each, ``DistributedDataParallel(bucket_cap_mb=25)``; each process loads its part of
  each global batch with the same loading code as ours (read, Pillow decode, seeded augmentation,
  collate; in the process, before the step) and rank 0 evaluates the held-out split after each
  epoch while the others wait.
* **taskflow**: :func:`taskflow.train` on an embedded LocalCluster of ``--workers`` one-thread
  worker processes, ``placed`` (rank r on worker r), ring allreduce: the same model, seed, batches
  and augmentation.

Figures: samples/s over the epochs after the first (the first includes starting the processes and
importing torch in them), the ratio, held-out accuracy after the last epoch, and for ours where each
rank's time went per iteration (loading, forward-backward, allreduce, update, idle). ``resnet8`` is
a ResNet-8 of 32-64-128 channels on 32x32 RGB images (a synthetic set) at ``--batch`` samples per
rank; ``small-cnn`` a two-convolution net on the handwritten digits (8x8) at 32 per rank. ``all``
(the default) adds the loading-bound job of ``benchmarks/bench_loading.py`` (JPEG photographs,
DDP with a DataLoader against loaders of our own with a cache of decoded samples).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_loading beside it

import torch  # noqa: E402

import taskflow  # noqa: E402
from taskflow.checks import format_bytes  # noqa: E402
from workflows.images import load_batch, write_digits, write_synthetic  # noqa: E402
from workflows.torch_models import resnet8, small_cnn  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402

OPTIMIZER = functools.partial(torch.optim.SGD, lr=0.05, momentum=0.9)


class RankBatches(torch.utils.data.Dataset):
    """A DataLoader's items: a rank's batches of an epoch, each loaded as our tasks load it."""

    def __init__(self, spec, rank: int, epoch: int):
        self.spec, self.epoch = spec, epoch
        self.batches = [ranks[rank] for ranks in spec.batches(epoch)]

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, k):
        s = self.spec
        x, y = load_batch(s.train, self.batches[k], self.epoch, s.seed, s.pad, s.flip)
        return torch.from_numpy(x), torch.from_numpy(y)


def _ddp_rank(rank: int, world: int, port: int, spec_kw: dict, epochs: int, out, loader_procs=None):
    """A DDP rank; its batches loaded in the rank before each step (``loader_procs`` None), or by
    a DataLoader of ``loader_procs`` worker processes (prefetch factor 2)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from workflows.torch_tasks import evaluate

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    spec = TorchTraining(**spec_kw)
    torch.manual_seed(spec.seed)
    model = spec.ctx.model()
    ddp = DDP(model, bucket_cap_mb=25)
    opt = spec.ctx.optimizer(ddp.parameters())
    times, accs, waits = [], [], 0.0
    for epoch in range(epochs):
        data = RankBatches(spec, rank, epoch)
        if loader_procs is not None:
            data = torch.utils.data.DataLoader(
                data, batch_size=None, num_workers=loader_procs, prefetch_factor=2 if loader_procs else None
            )
        dist.barrier()
        t0 = time.perf_counter()
        ddp.train()
        it = iter(data)
        for _ in range(len(data)):
            w = time.perf_counter()
            x, y = next(it)
            waits += time.perf_counter() - w if epoch == epochs - 1 else 0.0
            opt.zero_grad()
            spec.ctx.loss(ddp(x), y).backward()
            opt.step()
        if rank == 0 and spec.val is not None:
            state = {"params": [p.detach() for p in model.parameters()], "buffers": list(model.buffers())}
            accs.append(evaluate(state, spec.ctx, spec.val)["accuracy"])
        dist.barrier()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        out.put(
            {
                "times": times,
                "accuracy": accs,
                "wait": waits / max(1, spec.per_epoch),
                "params": [p.detach().numpy().copy() for p in model.parameters()],
            }
        )
    dist.destroy_process_group()


def run_ddp(spec_kw: dict, epochs: int, cpus: dict | None = None, loader_procs: int | None = None) -> dict:
    """DDP on ``spec_kw["workers"]`` spawned processes (see :func:`_ddp_rank`); ``cpus``: rank ->
    cores (a cgroup CPU limit from its start)."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_ddp_rank, args=(r, spec_kw["workers"], port, spec_kw, epochs, q, loader_procs))
        for r in range(spec_kw["workers"])
    ]
    for p in procs:
        p.start()
    limits = None
    if cpus:  # rank -> cores: that process held to a share of a core from its start
        from taskflow.testbed import CpuLimits

        limits = CpuLimits({procs[r].pid: c for r, c in cpus.items()}).apply()
    try:
        out = q.get(timeout=1800)
    finally:
        if limits is not None:
            limits.release()
    for p in procs:
        p.join(60)
    return out


def run_ours(
    spec_kw: dict, epochs: int, scheduler: str = "placed", cpus: dict | None = None, shares=None
) -> taskflow.training.History:
    """``taskflow.train`` on a LocalCluster of one-thread workers; ``cpus``: worker name -> cores
    (a cgroup CPU limit from its start)."""
    from distributed import Client

    from taskflow.runtime.launch.local import local_cluster

    kw = dict(spec_kw)
    if shares is not None:
        kw["shares"] = shares
    # taskflow's embedded cluster (what train starts by default): its workers keep freed memory for
    # reuse; Dask's plain LocalCluster hands it back to the system after every step (its
    # MALLOC_TRIM_THRESHOLD_ of 64 KiB), and a ResNet-8 step took 1.5x as long there
    with local_cluster(kw["workers"], 1) as lc, Client(lc) as client:
        limits = None
        if cpus:
            from taskflow.testbed import CpuLimits

            pids = client.run(os.getpid)
            names = {a: str(w["name"]) for a, w in client.scheduler_info()["workers"].items()}
            limits = CpuLimits({pids[a]: cpus[n] for a, n in names.items() if n in cpus}).apply()
        try:
            return taskflow.train(
                kw.pop("model"), kw.pop("data"), epochs=epochs, scheduler=scheduler, quiet=True, client=client, **kw
            )
        finally:
            if limits is not None:
                limits.release()


def steady(values):
    return sum(values[1:]) if len(values) > 1 else values[0]


def compare(name: str, spec_kw: dict, epochs: int) -> None:
    spec = TorchTraining(**spec_kw)
    samples = spec.per_epoch * spec.batch
    t0 = time.perf_counter()
    x, y = load_batch(spec.train, spec.batches(0)[0][0])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = spec.ctx.model()
    for k in range(3):  # one rank's step on one core, warm
        if k == 1:
            t0 = time.perf_counter()
        m.zero_grad()
        spec.ctx.loss(m(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    step = (time.perf_counter() - t0) / 2
    print(
        f"== {name}: {spec.params():,} parameters, {spec.workers} ranks x {spec.counts[0]} samples, "
        f"{spec.per_epoch} iterations per epoch, {epochs} epochs; one rank's forward-backward on one core "
        f"{step * 1e3:.0f} ms =="
    )
    ddp = run_ddp(spec_kw, epochs)
    ours = run_ours(spec_kw, epochs)
    d_sps = samples * (len(ddp["times"]) - 1 or 1) / steady(ddp["times"])
    o_secs = [e["seconds"] for e in ours.epochs]
    o_sps = samples * (len(o_secs) - 1 or 1) / steady(o_secs)
    err = max(float(abs(a.numpy() - b).max() / abs(b).max()) for a, b in zip(ours.states[0]["params"], ddp["params"]))
    print(f"{'':12} {'samples/s':>10} {'s/epoch':>9} {'accuracy':>9}")
    print(
        f"{'DDP (gloo)':12} {d_sps:10.1f} {steady(ddp['times']) / max(1, epochs - 1):9.2f} {ddp['accuracy'][-1]:9.1%}"
    )
    print(f"{'taskflow':12} {o_sps:10.1f} {steady(o_secs) / max(1, epochs - 1):9.2f} {ours.final_accuracy:9.1%}")
    print(f"ratio taskflow / DDP: {o_sps / d_sps:.3f}; parameters after the run differ by {err:.1e} (relative)")
    last = ours.epochs[-1]
    print(
        f"ours per iteration and rank: {last['seconds'] / last['iterations'] * 1e3:.1f} ms wall = "
        f"{ours.breakdown().text()} (scheduling and waiting: Dask's scheduling, the wait for the other "
        f"ranks, submitting the epoch); {format_bytes(last['bytes_per_iteration'])} moved per iteration; "
        f"predicted {(last['predicted_seconds_per_iteration'] or float('nan')) * 1e3:.1f} ms per iteration "
        f"(the graph's makespan, measured {last['seconds_per_iteration'] * 1e3:.1f} ms)"
    )


def schedulers_table(name: str, spec_kw: dict, epochs: int, names) -> None:
    """The same job under each scheduler on one cluster: the parameters must not change, the time
    and the bytes moved may."""
    from distributed import Client

    from taskflow.runtime.launch.local import local_cluster

    print(f"== {name} under each scheduler ({epochs} epochs; figures of the last) ==")
    print(
        f"{'scheduler':14} {'s/iteration':>11} {'predicted':>9} {'MB moved/it':>11} {'compute':>8} {'loading':>8} "
        f"{'communic.':>9} {'waiting':>8} {'params vs placed':>16}"
    )
    with local_cluster(spec_kw["workers"], 1) as lc, Client(lc) as client:
        first = None
        for sched in names:
            kw = dict(spec_kw)
            h = taskflow.train(
                kw.pop("model"), kw.pop("data"), epochs=epochs, scheduler=sched, client=client, quiet=True, **kw
            )
            if first is None:
                first = h.states[0]["params"]
            diff = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(h.states[0]["params"], first))
            e = h.epochs[-1]
            b = h.breakdown()
            predicted = e["predicted_seconds_per_iteration"] or float("nan")
            print(
                f"{sched:14} {e['seconds'] / e['iterations']:11.3f} {predicted:9.3f} "
                f"{e['bytes_per_iteration'] / 1e6:11.2f} {b.compute * 1e3:7.1f}m {b.loading * 1e3:7.1f}m "
                f"{b.communication * 1e3:8.1f}m {b.waiting * 1e3:7.1f}m {diff:16.1e}"
            )
    print(
        "(m: milliseconds per iteration and rank; predicted: the simulator with the costs the earlier epochs "
        "measured, seconds per iteration of the graph's makespan)"
    )


def quarter_core(name: str, spec_kw: dict, epochs: int, cores: float = 0.25) -> None:
    """Rank 1 held to ``cores`` of a core (a cgroup CPU limit) on both sides: DDP splits each batch
    evenly and waits for it every step; ours gives each rank a part in proportion to its measured
    speed (``shares="speeds"``) and weights its gradient by it."""
    spec = TorchTraining(**spec_kw)
    samples = spec.per_epoch * spec.batch
    print(f"== {name}, rank 1 held to {cores:g} of a core (needs root): {spec.batch} samples per iteration ==")
    ddp = run_ddp(spec_kw, epochs, cpus={1: cores})
    ours = run_ours(spec_kw, epochs, cpus={"1": cores}, shares="speeds")
    d_sps = samples * (len(ddp["times"]) - 1 or 1) / steady(ddp["times"])
    o_secs = [e["seconds"] for e in ours.epochs]
    o_sps = samples * (len(o_secs) - 1 or 1) / steady(o_secs)
    print(f"{'':12} {'samples/s':>10} {'s/epoch':>9} {'accuracy':>9}  parts of the batch")
    print(
        f"{'DDP (gloo)':12} {d_sps:10.1f} {steady(ddp['times']) / max(1, epochs - 1):9.2f} "
        f"{ddp['accuracy'][-1]:9.1%}  {'/'.join(map(str, spec.counts))}"
    )
    print(
        f"{'taskflow':12} {o_sps:10.1f} {steady(o_secs) / max(1, epochs - 1):9.2f} {ours.final_accuracy:9.1%}  "
        f"{'/'.join(map(str, ours.epochs[-1]['counts']))} (by measured speed)"
    )
    print(f"ratio taskflow / DDP: {o_sps / d_sps:.2f}")


#: the variants the two-rack run compares: (name, TorchTraining options)
RACK_VARIANTS = (
    ("sync", {}),
    ("sync, layer order", {"priority": "layer-order"}),
    ("local SGD, H = 4", {"mode": "local", "sync_every": 4}),
    ("top-k 1%", {"compression": "topk", "topk_ratio": 0.01}),
    ("fp16", {"compression": "fp16"}),
    ("stale, s = 1", {"mode": "stale", "staleness": 1}),
    ("stale, s = 1, DC", {"mode": "stale", "staleness": 1, "compensation": 0.5}),
)


def _job(config: dict) -> dict:
    """The resnet8 job of a JSON config (the two-rack run's child rebuilds it)."""
    return dict(
        model=functools.partial(resnet8),
        data=config["data"],
        workers=2,
        batch=config["batch"],
        iterations=config["iterations"],
        pad=4,
        flip=True,
        optimizer=OPTIMIZER,
        **config.get("variant", {}),
    )


def two_racks(data: str, batch: int, iterations: int, epochs: int, inter_rack: str, target: float) -> None:
    """Time-to-accuracy of each variant on the testbed's two racks (one worker each) joined by a
    narrow link: a child process in the testbed's client namespace trains each variant in turn
    on the same two workers (warmed by a first, unreported run)."""
    import json

    from taskflow.testbed import Testbed

    print(
        f"== resnet8 on two racks joined by {inter_rack} (links 1gbit; needs root): {epochs} epochs of "
        f"{iterations} iterations of {batch} samples; time to {target:.0%} held-out accuracy =="
    )
    print(f"{'variant':18} {'s/iteration':>11} {'MB moved/it':>11} {'time to target':>14}  held-out accuracy by epoch")
    with Testbed(workers=2, topology="two-racks", bandwidth="1gbit", inter_rack=inter_rack, timeout=120) as tb:
        runs = [("warm-up", {}, 1)] + [(n, v, epochs) for n, v in RACK_VARIANTS]
        for name, variant, n_epochs in runs:
            config = {
                "data": data,
                "batch": batch,
                "iterations": iterations if name != "warm-up" else 1,
                "epochs": n_epochs,
                "variant": variant,
            }
            p = tb.exec([sys.executable, os.path.abspath(__file__), "--inside", json.dumps(config)], timeout=3600)
            if p.returncode != 0:
                raise SystemExit(f"{name}: {(p.stderr.strip().splitlines() or ['no output'])[-1]}")
            if name == "warm-up":
                continue
            h = json.loads(p.stdout.strip().splitlines()[-1])
            eps = h["epochs"]
            hit = next((e["wall"] for e in eps if e["accuracy"] >= target), None)
            per_it = sum(e["seconds"] for e in eps) / sum(e["iterations"] for e in eps)
            print(
                f"{name:18} {per_it:11.3f} {eps[-1]['bytes_per_iteration'] / 1e6:11.2f} "
                f"{'-' if hit is None else f'{hit:.1f} s':>14}  " + " ".join(f"{e['accuracy']:.1%}" for e in eps)
            )


def _inside(config: dict) -> None:
    """The two-rack run's child: train one variant on the testbed's cluster, print the history."""
    import json

    job = _job(config)
    h = taskflow.train(
        job.pop("model"),
        job.pop("data"),
        epochs=config["epochs"],
        quiet=True,
        address=os.environ["DASK_SCHEDULER_ADDRESS"],
        **job,
    )
    print(json.dumps(h.to_dict()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model",
        choices=("resnet8", "small-cnn", "loading", "all", "both"),
        default="all",
        help="the jobs to run (default all: the small CNN, the ResNet-8 and the loading-bound job; both: "
        "the first two)",
    )
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10, help="per epoch (resnet8)")
    ap.add_argument("--batch", type=int, default=96, help="samples per rank (resnet8)")
    ap.add_argument("--data", help="folder for the datasets (default: a temporary one)")
    ap.add_argument(
        "--quarter-core",
        action="store_true",
        help="also the run with rank 1 held to a quarter of a core (cgroups: needs root)",
    )
    ap.add_argument("--only-quarter-core", action="store_true", help="only that run")
    ap.add_argument(
        "--two-racks",
        metavar="RATE",
        help="only the time-to-accuracy run of the variants on two racks "
        "joined by a link of RATE, e.g. 20mbit (network namespaces: needs root)",
    )
    ap.add_argument("--target", type=float, default=0.9, help="--two-racks: the accuracy to reach (default 0.9)")
    ap.add_argument("--inside", help=argparse.SUPPRESS)
    ap.add_argument(
        "--schedulers",
        default="placed,heft,work-stealing,adaptive",
        help="the table of the same job under each (comma list; '' for none)",
    )
    args = ap.parse_args()
    if args.inside:
        import json

        return _inside(json.loads(args.inside))
    tmp = tempfile.TemporaryDirectory() if args.data is None else None
    root = args.data or tmp.name
    N = args.workers
    if args.two_racks:
        syn = os.path.join(root, "synthetic")
        if not os.path.exists(os.path.join(syn, "train")):
            write_synthetic(syn, samples=max(2000, int(1.2 * args.iterations * args.batch * N) + 200))
        return two_racks(syn, args.batch * 2, args.iterations, args.epochs, args.two_racks, args.target)
    if args.model in ("small-cnn", "both", "all") and not args.only_quarter_core:
        digits = os.path.join(root, "digits")
        if not os.path.exists(os.path.join(digits, "train")):
            write_digits(digits)
        compare(
            "small-cnn on digits",
            dict(model=functools.partial(small_cnn), data=digits, workers=N, batch=32 * N, optimizer=OPTIMIZER),
            args.epochs,
        )
    if args.model in ("resnet8", "both", "all"):
        syn = os.path.join(root, "synthetic")
        if not os.path.exists(os.path.join(syn, "train")):
            write_synthetic(syn, samples=max(2000, int(1.2 * args.iterations * args.batch * N) + 200))
        job = dict(
            model=functools.partial(resnet8),
            data=syn,
            workers=N,
            batch=args.batch * N,
            iterations=args.iterations,
            pad=4,
            flip=True,
            optimizer=OPTIMIZER,
        )
        if args.quarter_core or args.only_quarter_core:
            quarter_core("resnet8", job, args.epochs)
        if args.only_quarter_core:
            return
        compare("resnet8 on synthetic 32x32", job, args.epochs)
        if args.schedulers:
            schedulers_table("resnet8", job, args.epochs, args.schedulers.split(","))
    if args.model in ("loading", "all"):  # the loading-bound job: python benchmarks/bench_loading.py alone
        from bench_loading import loading_job

        loading_job(os.path.join(root, "photos"), N, epochs=args.epochs)


if __name__ == "__main__":
    main()
