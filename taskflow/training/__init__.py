"""Train a PyTorch model as task graphs on Dask workers: :func:`train`.

One graph per epoch (:class:`workflows.torch_training.TorchTraining`): each rank's state stays on
its worker from one iteration to the next, and only the final states and the held-out accuracy
come back to this process at the epoch's end. There they are checkpointed (atomically), and the
next epoch's graph starts from them. A run that was stopped resumes from its checkpoint: the
batches and the augmentation of an epoch depend on the seed and the epoch alone, so the resumed run
ends with the same parameters as one that never stopped.

:class:`History` holds what a user reads: per epoch the training loss, held-out loss and accuracy,
wall seconds, seconds per iteration, samples per second and bytes moved between workers per
iteration; :meth:`History.plot` draws accuracy against wall time.
"""

from __future__ import annotations

import os
import time
import warnings

from ..checks import PLOT_FORMATS, plot_format
from ..checks import seed as check_seed
from ..errors import TaskflowWarning, UsageError
from ..files import check_outputs
from .checkpoint import check_resumable, fingerprint, load_checkpoint, save_checkpoint
from .history import Breakdown, History, record_epoch

__all__ = ["train", "History", "Breakdown", "load_checkpoint", "check_device", "plot_format", "PLOT_FORMATS"]


def _model_name(model) -> str:
    fn = getattr(model, "func", model)
    return getattr(fn, "__name__", type(fn).__name__)


def train(
    model,
    data,
    *,
    loss=None,
    optimizer=None,
    epochs: int = 1,
    workers: int | None = None,
    batch: int = 64,
    shares=None,
    allreduce: str = "ring",
    bucket_mb: float = 25.0,
    priority: str = "none",
    mode: str = "sync",
    sync_every: int = 1,
    staleness: int = 0,
    compensation: float = 0.0,
    compression=None,
    topk_ratio: float = 0.01,
    stages=None,
    microbatches: int = 4,
    schedule: str = "1f1b",
    scheduler: str = "placed",
    pad: int = 0,
    flip: bool = False,
    seed: int = 0,
    iterations=None,
    threads: int = 1,
    client=None,
    address=None,
    scheduler_file=None,
    jobqueue=None,
    jobqueue_options=None,
    checkpoint=None,
    resume: bool = True,
    timeout=None,
    quiet: bool = False,
    plot=None,
    on_epoch=None,
    fuse=None,
    prefetch: int = 0,
    device: str = "auto",
    size=None,
    loaders: int = 0,
    cache_mb: float = 0.0,
    on_workers=None,
    elastic: bool = False,
) -> History:
    """Train ``model`` on ``data`` for ``epochs`` epochs, each epoch one task graph on Dask.

    Parameters
    ----------
    model : callable
        A factory returning a ``torch.nn.Module``: called with no arguments, once in this process
        (its parameters counted, two samples of the data run through it before any cluster starts)
        and once in each worker process; a picklable function or ``functools.partial``. Its input
        is a batch of the data's samples (``N x C x H x W`` ``float32`` in [-1, 1] for images);
        with the default loss it returns one output per class.
    data : path, Dataset or (Dataset, Dataset)
        A dataset root with ``train`` and ``val`` class folders (:mod:`workflows.images`), or a
        map-style ``torch.utils.data.Dataset`` (``ds[i] -> (input, label)``), or a pair ``(train,
        val)`` of them (:mod:`workflows.torch_data`: each sample's random transforms seeded).
    loss, optimizer, workers, batch, allreduce, bucket_mb, priority, pad, flip, seed, iterations, threads
        As in :class:`workflows.torch_training.TorchTraining` (``iterations``: per epoch; ``workers``
        default 2, and with ``stages`` one per stage).
    shares : sequence of float or "speeds", optional
        Each rank's part of the batch (default equal); ``"speeds"``: in proportion to the speeds
        calibration measures on the workers for the first epoch, then to the speed of each rank's
        steps in the epoch before (a slow worker gets fewer samples; the weighted gradient, and so
        the parameters, are the same whatever the parts).
    stages, microbatches, schedule
        Pipeline parallelism instead (:class:`workflows.torch_pipeline.TorchPipeline`): the model,
        a ``torch.nn.Sequential``, cut into ``stages`` (one worker each), each batch into
        ``microbatches``, run in the ``schedule`` ``gpipe`` or ``1f1b``.
    mode, sync_every, staleness, compensation, compression, topk_ratio
        The variant: ``sync`` (default), ``local`` SGD averaging every ``sync_every`` iterations,
        ``stale``-synchronous with ``staleness`` (DC-S3GD's delay ``compensation``); gradient
        ``compression`` ``fp16`` or ``topk`` (``topk_ratio`` of the entries, error feedback).
    epochs : int
    scheduler : str
        The scheduler that places each epoch's graph (default ``placed``: rank ``r`` on worker
        ``r``, as DDP runs).
    client, address, scheduler_file, jobqueue, jobqueue_options
        Where to run, as in :func:`taskflow.run` (default: an embedded LocalCluster of ``workers``
        processes of ``threads`` threads, closed after).
    checkpoint : path, optional
        Written after every epoch (atomically); with ``resume``, a run whose checkpoint exists
        starts after its last epoch.
    timeout : float, optional
        Seconds per epoch before the run is abandoned.
    quiet : bool
        No progress bar.
    plot : path, optional
        Draw accuracy against wall time there at the end.
    fuse : bool, optional
        One loading task per rank and iteration, run ``prefetch`` iterations ahead, and a small
        gradient reduced directly by the updates (:class:`~workflows.torch_training.TorchTraining`):
        fewer tasks, the same parameters. Default: on under ``placed`` (each rank stays on its
        worker), off under any other scheduler (which should see each stage).
    prefetch : int
        With ``fuse``: batches loaded ahead of the step they feed, in tasks of their own (0: each in
        its step's task).
    device : str
        Where each task computes and keeps its rank's state: ``auto`` (default: CUDA where the
        worker's torch sees a device, else the CPU), ``cpu``, ``cuda``, ``cuda:1``. Gradients
        are reduced on the CPU. Pipeline stages run on the CPU.
    size : int, optional
        Images resized to ``size`` x ``size`` pixels as they are decoded.
    loaders, cache_mb
        Workers of their own that load the batches (beside the ranks: the embedded cluster gets
        ``workers + loaders`` processes), each keeping ``cache_mb`` MB of decoded samples
        (:mod:`workflows.torch_loaders`); the parameters are the same.
    on_epoch : callable, optional
        Called with the :class:`History` so far as each epoch ends (after its checkpoint): a line
        printed, a file written as the run goes, so that a run stopped after epoch ``k`` has said
        epochs ``1..k``. What it raises stops the run there (the checkpoint is written): a job
        scheduler preempts a job so (:mod:`taskflow.training.jobrun`).
    on_workers : sequence of str, optional
        The names of the Dask workers of the cluster ``client`` (or ``address``) reaches that the
        job runs on, rank ``r`` on the ``r``-th (default: the cluster's workers, in order): a job
        held to the workers a job scheduler gave it, beside other jobs on the same cluster.
    elastic : bool
        A checkpoint written on another number of ranks resumes on this one, each rank from rank
        0's state (synchronous data parallelism keeps every rank's state the same, and the batch,
        over all ranks, is the same whatever their number): a job scheduler's resize. Synchronous
        mode without compression only.

    Returns
    -------
    History

    Raises
    ------
    TaskflowError
        Bad input (named), a checkpoint of another job, a task that failed (a loss that is NaN
        names its iteration).
    """
    from workflows.torch_training import TorchTraining

    from ..runtime import run
    from ..runtime.client.connecting import connect
    from ..runtime.client.session import check_flags
    from ..runtime.launch.local import prompt_messages
    from ..runtime.client.waiting import close_quietly, progress_bar

    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise UsageError(f"epochs must be an integer >= 1, got {epochs!r}")
    seed = check_seed(seed)
    if on_epoch is not None and not callable(on_epoch):
        raise UsageError(
            f"on_epoch must be a callable (it is called with the History after each epoch), got "
            f"{type(on_epoch).__name__}"
        )
    check_flags(resume=resume, quiet=quiet, flip=flip, elastic=elastic)
    if elastic and (mode != "sync" or compression is not None or stages is not None):
        raise UsageError(
            "elastic resumes synchronous data parallelism only (no mode, compression or stages): "
            "only there every rank holds the same state"
        )
    check_outputs(
        [("checkpoint", checkpoint), ("plot", plot)],
        [data] if isinstance(data, (str, os.PathLike)) else [],
        plot_options=("plot",),
    )  # before any training: a run is not lost to an output's name
    by_speed = isinstance(shares, str)
    if by_speed and shares != "speeds":
        raise UsageError(f"shares must be numbers (one per rank) or 'speeds', got {shares!r}")
    if stages is not None and workers is not None and workers != stages:
        raise UsageError(
            f"pipeline parallelism runs one worker per stage: workers {workers!r} with stages "
            f"{stages!r} (leave workers out)"
        )
    workers = 2 if workers is None else workers
    check_device(device, stages, client is None and address is None and scheduler_file is None and jobqueue is None)
    if stages is not None:
        from workflows.torch_pipeline import TorchPipeline

        if shares is not None or mode != "sync" or compression is not None:
            raise UsageError(
                "pipeline parallelism (stages) takes no shares, mode or compression: those are data parallelism's"
            )

        def make(_shares):
            return TorchPipeline(
                model,
                data,
                loss=loss,
                optimizer=optimizer,
                stages=stages,
                microbatches=microbatches,
                schedule=schedule,
                batch=batch,
                pad=pad,
                flip=flip,
                seed=seed,
                iterations=iterations,
                threads=threads,
            )
    else:
        job = dict(
            fuse=scheduler == "placed" if fuse is None else fuse,
            prefetch=prefetch,
            loss=loss,
            optimizer=optimizer,
            workers=workers,
            batch=batch,
            allreduce=allreduce,
            bucket_mb=bucket_mb,
            priority=priority,
            pad=pad,
            flip=flip,
            seed=seed,
            iterations=iterations,
            threads=threads,
            mode=mode,
            sync_every=sync_every,
            staleness=staleness,
            compensation=compensation,
            compression=compression,
            topk_ratio=topk_ratio,
            device=device,
            size=size,
            loaders=loaders,
            cache_mb=cache_mb,
        )

        def make(_shares):
            return TorchTraining(model, data, shares=_shares, **job)

    spec = make((1,) * workers if by_speed else shares)
    workers = int(spec.workers)
    if spec.per_epoch < 1:
        raise UsageError(f"an epoch of {len(spec.train)} images holds no full batch of {batch}")
    ck = None
    if checkpoint is not None and resume and os.path.exists(checkpoint):
        ck = load_checkpoint(checkpoint)
        if by_speed and len(ck.get("counts") or ()) == workers:  # the parts of the batch its run had reached
            spec = make(ck["counts"])
        if elastic and len(ck["states"]) != workers:  # a resize: every rank from rank 0's state
            ck["states"] = [ck["states"][0]] * workers
        check_resumable(ck, spec, checkpoint, by_speed, elastic)  # before any cluster starts
    need = workers + int(getattr(spec, "loaders", 0))
    if on_workers is not None:
        on_workers = [str(w) for w in on_workers]
        if client is None and address is None and scheduler_file is None:
            raise UsageError("on_workers names workers of an existing cluster: give client or address too")
        if len(on_workers) != need or len(set(on_workers)) != need:
            raise UsageError(f"on_workers names {len(set(on_workers))} distinct workers; the job needs {need}")
    c, owned = connect(
        client,
        address,
        scheduler_file,
        need,
        threads,
        work_stealing=False,
        jobqueue=jobqueue,
        jobqueue_options=jobqueue_options,
    )
    try:
        if owned:  # our own cluster: a chain of short steps does not wait out Dask's message batches
            prompt_messages(c)
        held = None if on_workers is None else _held(c, on_workers)
        if by_speed and ck is None:
            spec = make(_speed_shares(c, workers, held))
        states, first, wall0, history = _start(spec, ck, checkpoint, model, scheduler, by_speed)
    except BaseException:
        close_quietly(owned, now=True)
        raise
    fp, profile = fingerprint(spec, by_speed), None
    bar = None
    if not quiet and first < epochs:
        bar = progress_bar((epochs - first) * spec.per_epoch, "training", unit="it")
    finished = False  # a timeout or Ctrl-C: the workers are ended, not waited for
    try:
        for e in range(first, epochs):
            g = spec.graph(e, states)
            finals = spec.final_tasks(e)
            keep = finals + ([f"e{e}.eval"] if f"e{e}.eval" in g else [])
            t0 = time.perf_counter()
            with warnings.catch_warnings():  # the first epoch plans with guessed costs; later ones with measured
                warnings.simplefilter("ignore", TaskflowWarning)
                report = run(
                    g,
                    scheduler,
                    client=c,
                    cluster=held,
                    quiet=True,
                    timeout=timeout,
                    seed=seed,
                    keep=keep,
                    profile=profile,
                    hold=held is not None,
                )
            seconds = time.perf_counter() - t0
            profile = report.profile
            states = [report.results[t] for t in finals]
            record_epoch(history, spec, g, e, states, report, seconds, wall0)
            wall0 = history.epochs[-1]["wall"]
            if by_speed:  # the next epoch's parts from this one's measured steps
                spec = make(_step_shares(spec, g, report))
            if checkpoint is not None:
                save_checkpoint(checkpoint, e, states, history, fp, spec.counts)
            if bar is not None:
                bar.update(spec.per_epoch)
                last = history.epochs[-1]
                bar.set_postfix(loss=f"{last['loss']:.3f}", acc=f"{last['accuracy']:.1%}")
            if on_epoch is not None:
                if bar is not None:
                    bar.clear()  # what the caller prints goes above the bar
                on_epoch(history)
                if bar is not None:
                    bar.refresh()
        finished = True
    finally:
        if bar is not None:
            bar.close()
        close_quietly(owned, now=not finished)
    history.states, history.job = states, spec
    if profile is not None:
        history.profile = profile
    if plot is not None:
        history.plot(plot)
    return history


def check_device(device, stages, here: bool) -> None:
    """A device torch knows; CUDA asked for on this machine's cluster only where torch sees it.

    Parameters
    ----------
    device : str
        ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
    stages : int or None
        Pipeline stages (which run on the CPU).
    here : bool
        The cluster is one this process starts on this machine.

    Raises
    ------
    UsageError
        Not a device's name; a device with stages; CUDA where torch sees none here.
    """
    import torch

    if not isinstance(device, str) or not device:
        raise UsageError(f"device must be a device's name ('auto', 'cpu', 'cuda', 'cuda:1'), got {device!r}")
    if device == "auto":
        return
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as e:
        raise UsageError(f"device {device!r} is not a device torch knows: {str(e).splitlines()[0]}") from None
    if stages is not None and dev.type != "cpu":
        raise UsageError(f"pipeline stages run on the CPU: device {device!r} with stages (leave device out)")
    if here and dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"device {device!r}: torch sees no CUDA device on this machine (device 'auto' uses one where there is one)"
        )


def _held(client, names) -> object:
    """The cluster model of the workers ``names`` of the live cluster, in that order (rank ``r``
    on the ``r``-th under ``placed``)."""
    from ..errors import ClusterError
    from ..runtime import cluster_from_dask

    cl = cluster_from_dask(client)
    by_id = {str(w.id): w for w in cl.workers}
    missing = [n for n in names if n not in by_id]
    if missing:
        raise ClusterError(
            f"on_workers names worker {missing[0]!r}, which the cluster does not have "
            f"(it has {', '.join(sorted(by_id))})"
        )
    return cl.subset([by_id[n].id for n in names]).replace(workers=[by_id[n] for n in names])


def _speed_shares(client, workers: int, held=None) -> list:
    """Each rank's part of the batch in proportion to the speed of the worker ``placed`` gives it
    (rank ``r`` on the cluster's worker ``r``, or on ``held``'s), as calibration measures it (a
    cgroup's CPU limit included)."""
    from ..runtime import cluster_from_dask

    cl = cluster_from_dask(client, calibrate=True)
    if held is not None:
        speed = {str(w.id): w.speed for w in cl.workers}
        return [speed[str(w.id)] for w in held.workers]
    return [cl.workers[r % len(cl.workers)].speed for r in range(workers)]


def _step_shares(spec, graph, report) -> list:
    """Parts of the batch that would make every rank's ``forward-backward`` take as long, from
    the seconds per sample each rank's steps took (its latest steps: the first of an epoch may
    include loading torch): a slow worker's part shrinks, a fast one's grows."""
    per_sample: dict = {}
    for r in report.trace.runs:
        md = graph.task(r.task).meta
        if md.get("category") == "forward-backward":
            per_sample.setdefault(md["rank"], []).append((r.finish - r.start) / spec.counts[md["rank"]])
    rates = []
    for k in range(int(spec.workers)):
        times = sorted(per_sample.get(k, []))
        if not times:
            return list(spec.counts)
        rates.append(1.0 / max(times[len(times) // 2], 1e-9))  # the median step
    return rates


def _start(spec, ck, checkpoint, model, scheduler, by_speed: bool = False) -> tuple:
    """``(states, first epoch, wall seconds so far, History)``: afresh, or from a checkpoint of
    the same job."""
    history = History(
        config={
            "model": _model_name(model),
            "parameters": spec.params(),
            "workers": int(spec.workers),
            "batch": int(spec.batch),
            "counts": list(spec.counts),
            "allreduce": spec.allreduce,
            "scheduler": scheduler,
            "iterations_per_epoch": spec.per_epoch,
            "buckets": len(spec.ctx.buckets),
            "train_samples": len(spec.train),
            "mode": spec.mode,
            "compression": spec.compression,
            "fused": bool(getattr(spec, "fuse", False)),
            "device": getattr(spec, "device", "cpu"),
            "reduction": "direct" if getattr(spec, "direct", lambda: False)() else spec.allreduce,
            "val_samples": 0 if spec.val is None else len(spec.val),
        }
    )
    if ck is None:
        return None, 0, 0.0, history
    history.epochs = list(ck["history"]["epochs"])
    history.losses = [tuple(x) for x in ck["history"]["losses"]]
    history.resumed_from = ck["epoch"]
    return ck["states"], ck["epoch"] + 1, history.epochs[-1]["wall"] if history.epochs else 0.0, history
