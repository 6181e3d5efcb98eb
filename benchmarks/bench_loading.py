"""A loading-bound training job against DDP with PyTorch's DataLoader, in one run.

    python benchmarks/bench_loading.py [--workers 2] [--loaders 2] [--epochs 3] [--iterations 15]
                                       [--batch 64] [--side 192] [--data DIR]

The job: JPEG photographs larger than the model needs (a seeded synthetic set of ``--side`` pixels
a side, quality 90), decoded and resized to 32x32, randomly cropped (padding 4) and flipped, for a
small CNN (two convolutions) of a few milliseconds a step: loading dominates, as in ImageNet
pipelines. The same job three times, one after the other, on the same cores:

* **DDP + DataLoader**: ``--workers`` rank processes (gloo on loopback, one torch thread each),
  each with a ``torch.utils.data.DataLoader`` of ``--loaders / --workers`` worker processes
  (prefetch factor 2) whose items are the rank's batches, each loaded by the same code as ours;
* **taskflow, loaders**: :func:`taskflow.train` with ``loaders=--loaders``: the ranks' workers and
  as many loader workers as DDP has DataLoader processes; each batch loaded in shards on the
  loaders (a sample always on the same loader) and sent as ``uint8`` pixels;
* **taskflow, loaders and a cache**: the same with ``cache_mb=64``: each loader keeps the decoded,
  resized samples it has loaded, so every epoch after the first skips reading and decoding (the
  augmentation is drawn anew).

Figures: samples/s over the epochs after the first (the first includes starting processes and
filling the cache), the ratios, held-out accuracy; what each loading stage costs per sample on one
core; where our ranks' iterations spent their time. Same seed, batches and augmentation on every
side: the parameters agree.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_torch beside it

import numpy as np  # noqa: E402
import torch  # noqa: E402

import taskflow  # noqa: E402
from taskflow.checks import format_bytes  # noqa: E402
from workflows.images import augment, collate, decode, read_files, write_synthetic  # noqa: E402
from workflows.torch_models import small_cnn  # noqa: E402
from workflows.torch_training import TorchTraining  # noqa: E402
from bench_torch import OPTIMIZER, run_ddp  # noqa: E402

CACHE_MB = 64.0


def run_ours(spec_kw: dict, epochs: int, loaders: int, cache_mb: float):
    from distributed import Client

    from taskflow.runtime.launch.local import local_cluster

    kw = dict(spec_kw)
    with local_cluster(kw["workers"] + loaders, 1) as lc, Client(lc) as client:
        return taskflow.train(
            kw.pop("model"),
            kw.pop("data"),
            epochs=epochs,
            quiet=True,
            client=client,
            loaders=loaders,
            cache_mb=cache_mb,
            device="cpu",
            prefetch=0 if loaders else 1,
            **kw,
        )


def stage_costs(spec) -> dict:
    """Milliseconds per sample of each loading stage, and of a rank's step per batch, on one core."""
    samples = spec.batches(0)[0][0]
    paths = [spec.train.paths[i] for i in samples]
    costs = {}
    for _ in range(2):  # the second round counts (files in the page cache, code warm)
        t = time.perf_counter()
        raw = read_files(paths)
        costs["read"] = time.perf_counter() - t
        t = time.perf_counter()
        decode(raw, paths)
        costs["decode"] = time.perf_counter() - t
        t = time.perf_counter()
        imgs = decode(raw, paths, spec.size)
        costs["resize"] = time.perf_counter() - t - costs["decode"]
        t = time.perf_counter()
        imgs = augment(imgs, samples, 0, spec.seed, spec.pad, spec.flip)
        costs["augment"] = time.perf_counter() - t
        t = time.perf_counter()
        x, y = collate(imgs, spec.train.labels[samples])
        costs["collate"] = time.perf_counter() - t
    per = {k: v / len(samples) * 1e3 for k, v in costs.items()}
    torch.set_num_threads(1)
    torch.manual_seed(0)
    m = spec.ctx.model()
    for k in range(3):
        if k == 1:
            t0 = time.perf_counter()
        m.zero_grad()
        spec.ctx.loss(m(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    per["step"] = (time.perf_counter() - t0) / 2 * 1e3
    return per


def steady_rate(samples_per_epoch: int, seconds) -> float:
    rest = seconds[1:] or seconds
    return samples_per_epoch * len(rest) / sum(rest)


def loading_job(
    data: str,
    workers: int = 2,
    loaders: int = 2,
    epochs: int = 3,
    iterations: int = 15,
    batch: int = 64,
    side: int = 192,
    width: int = 8,
) -> dict:
    """Write the data if missing, run the three sides, print the tables; the figures as a dict."""
    if not os.path.exists(os.path.join(data, "train")):
        write_synthetic(data, samples=max(1200, workers * batch * iterations + 200), size=side, fmt="jpeg")
    model = functools.partial(small_cnn, in_channels=3, side=32, width=width)
    spec_kw = dict(
        model=model,
        data=data,
        workers=workers,
        batch=workers * batch,
        iterations=iterations,
        optimizer=OPTIMIZER,
        size=32,
        pad=4,
        flip=True,
        seed=0,
    )
    spec = TorchTraining(**spec_kw)
    per = stage_costs(spec)
    n = spec.per_epoch * spec.batch
    load_ms = sum(per[k] for k in ("read", "decode", "resize", "augment", "collate")) * spec.counts[0]
    print(
        f"== loading-bound job: {side}x{side} JPEG -> 32x32, crop and flip; small CNN "
        f"({spec.params():,} parameters), {workers} ranks x {spec.counts[0]} samples, {spec.per_epoch} iterations "
        f"per epoch, {epochs} epochs; {loaders} loader processes =="
    )
    print(
        "one core, per sample (ms): "
        + ", ".join(f"{k} {per[k]:.3f}" for k in ("read", "decode", "resize", "augment", "collate"))
        + f"; a rank's batch loads in {load_ms:.1f} ms, its step takes {per['step']:.1f} ms"
    )
    per_rank = max(1, loaders // workers)
    sides = {
        f"DDP, DataLoader of {per_rank} process(es) a rank": run_ddp(spec_kw, epochs, loader_procs=per_rank),
        "DDP, each rank loading (num_workers=0)": run_ddp(spec_kw, epochs, loader_procs=0),
    }
    ours = {
        "taskflow, ranks loading (prefetch 1)": run_ours(spec_kw, epochs, 0, 0.0),
        f"taskflow, {loaders} loaders": run_ours(spec_kw, epochs, loaders, 0.0),
        f"taskflow, {loaders} loaders with a cache": run_ours(spec_kw, epochs, loaders, CACHE_MB),
    }
    rates = {k: steady_rate(n, d["times"]) for k, d in sides.items()}
    rates.update({k: steady_rate(n, [e["seconds"] for e in h.epochs]) for k, h in ours.items()})
    accs = {k: d["accuracy"][-1] for k, d in sides.items()}
    accs.update({k: h.final_accuracy for k, h in ours.items()})
    first, best = list(sides)[0], max(rates[k] for k in sides)
    print(f"{'':44} {'samples/s':>10} {'/ DDP+DL':>9} {'/ best DDP':>11} {'accuracy':>9}")
    for k, v in rates.items():
        print(f"{k:44} {v:10.1f} {v / rates[first]:9.3f} {v / best:11.3f} {accs[k]:9.1%}")
    plain, cached = list(ours.values())[1:]
    ddp = sides[first]
    err = max(float(abs(a.numpy() - b).max() / abs(b).max()) for a, b in zip(cached.states[0]["params"], ddp["params"]))
    same = max(float((a - b).abs().max()) for a, b in zip(cached.states[0]["params"], plain.states[0]["params"]))
    print(
        f"parameters: ours with and without the cache differ by {same:.1e}; ours and DDP's by {err:.1e} "
        f"(relative); DDP's rank 0 waited {ddp['wait'] * 1e3:.1f} ms an iteration for its DataLoader"
    )
    for name, h in (("loaders", plain), ("loaders and cache", cached)):
        last = h.epochs[-1]
        print(
            f"ours ({name}), last epoch per iteration and rank: {last['seconds'] / last['iterations'] * 1e3:.1f} "
            f"ms wall = {h.breakdown().text()}; each loader busy "
            f"{last['loader_seconds_per_iteration'] * 1e3:.1f} ms an iteration; "
            f"{format_bytes(last['bytes_per_iteration'])} moved per iteration"
        )
    return {"rates": rates, "stages": per}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--loaders", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank")
    ap.add_argument("--side", type=int, default=192, help="the JPEGs' side in pixels")
    ap.add_argument("--width", type=int, default=8, help="the CNN's first layer's channels")
    ap.add_argument("--data", help="folder for the dataset (default: a temporary one)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        loading_job(
            a.data or os.path.join(tmp, "photos"),
            a.workers,
            a.loaders,
            a.epochs,
            a.iterations,
            a.batch,
            a.side,
            a.width,
        )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
