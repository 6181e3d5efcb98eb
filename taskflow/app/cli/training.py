"""``taskflow train``: train a PyTorch model data-parallel on Dask workers, one task graph per
epoch, and print what each epoch measured."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys

from ...errors import MissingExtra, UsageError
from ...formats import atomic_write
from .commands import command
from .options import (
    COUNT,
    add_chrome_trace,
    add_existing,
    add_option,
    add_output,
    add_plot,
    add_quiet,
    add_scheduler,
    add_seed,
    check_outputs,
    number,
)
from .values import scheduler_names
from .running import per_scheduler

__all__ = ["train", "add_arguments", "MODELS", "model_factory"]

#: the models ``--model`` names (a ``module:function`` returning a Module is a user's own)
MODELS = ("small-cnn", "resnet8", "mlp")


def add_arguments(sp) -> None:
    """The ``train`` subcommand's arguments.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    sp.add_argument(
        "data",
        metavar="DATA",
        help="a dataset folder: train/ and val/ class folders of PNG or JPEG "
        "images (torchvision's ImageFolder layout); or module:name of a map-style torch Dataset, a pair "
        "(train, val) of them, or a function returning one",
    )
    add_option(
        sp,
        "--make-data",
        help="first write DATA if it is missing: scikit-learn's handwritten digits (1,797 "
        "8x8 images) or a seeded synthetic set of 32x32 RGB images",
    )
    sp.add_argument(
        "--model",
        default="small-cnn",
        help=f"{', '.join(MODELS)}, or module:function returning a torch.nn.Module (default small-cnn)",
    )
    sp.add_argument("--epochs", type=COUNT, default=1, help="epochs (default 1)")
    sp.add_argument("--iterations", type=COUNT, help="at most this many iterations per epoch (default: all)")
    add_option(sp, "--workers", help="ranks, one Dask worker each (default 2; with --stages, one per stage)")
    add_option(sp, "--batch", default=64, help="samples per iteration over all ranks (default 64)")
    sp.add_argument("--shares", help="each rank's part of the batch, e.g. 3,1 (default equal)")
    sp.add_argument("--allreduce", choices=("ring", "tree", "ps"), default="ring", help="(default ring)")
    sp.add_argument(
        "--bucket-mb",
        type=number(float, above=0.0, high=1e6),
        default=25.0,
        help="gradient bucket capacity in MB, as DDP's bucket_cap_mb (default 25)",
    )
    sp.add_argument(
        "--mode",
        choices=("sync", "local", "stale"),
        default="sync",
        help="synchronous data parallelism, local SGD (--sync-every) or stale-synchronous (--staleness); default sync",
    )
    sp.add_argument("--sync-every", type=COUNT, help="local SGD: average the models every N iterations (default 1)")
    sp.add_argument(
        "--staleness",
        type=number(int, low=0, high=10_000),
        help="stale: the compute of an iteration uses the model of this many iterations before (default 0)",
    )
    sp.add_argument(
        "--compensation",
        type=number(float, low=0.0, high=1e6),
        help="stale: DC-S3GD's delay compensation factor (default 0: none)",
    )
    sp.add_argument(
        "--compression",
        choices=("fp16", "topk"),
        help="compress gradients: half precision, or the largest entries with error feedback (--topk-ratio)",
    )
    sp.add_argument(
        "--topk-ratio",
        type=number(float, above=0.0, high=1.0),
        help="topk: the share of a bucket's entries sent (default 0.01)",
    )
    sp.add_argument(
        "--stages",
        type=COUNT,
        help="pipeline parallelism instead: cut the model (a Sequential) into this many stages, one worker each",
    )
    sp.add_argument("--microbatches", type=COUNT, help="--stages: microbatches per batch (default 4)")
    sp.add_argument("--pipeline", choices=("gpipe", "1f1b"), help="--stages: the pipeline's schedule (default 1f1b)")
    sp.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="(default sgd, momentum 0.9)")
    sp.add_argument("--lr", type=number(float, above=0.0, high=1e3), default=0.05, help="learning rate (default 0.05)")
    sp.add_argument(
        "--resize",
        type=number(int, low=1, high=8192),
        metavar="PIXELS",
        help="resize the images to PIXELS x PIXELS as they are decoded (photographs larger than the model needs)",
    )
    sp.add_argument(
        "--loaders",
        type=number(int, low=0, high=256),
        default=0,
        help="workers of their own that load the batches, beside the ranks (default 0: each rank loads its own)",
    )
    sp.add_argument(
        "--cache-mb",
        type=number(float, low=0.0, high=1e6),
        help="with --loaders: MB of decoded samples each loader keeps for the next epochs (default 0)",
    )
    sp.add_argument(
        "--augment",
        action="store_true",
        help="random crops (padding of an eighth of the side) and horizontal flips, seeded",
    )
    add_scheduler(sp, default="placed")
    add_existing(sp, "the workers must see DATA at the same path: ")
    sp.add_argument(
        "--checkpoint",
        help="write the state after every epoch; a run whose checkpoint exists resumes after its last epoch",
    )
    add_option(sp, "--timeout", help="give up on an epoch after this many seconds")
    add_output(sp, "write the history (JSON: per epoch loss, accuracy, times, bytes moved)", old=("--report",))
    add_plot(sp, "held-out accuracy against wall time, and where each epoch's iterations spent their time")
    add_chrome_trace(sp, "every epoch's tasks and transfers")
    sp.add_argument(
        "--timeline",
        metavar="PNG",
        help="a Gantt chart of one iteration (the last epoch's middle one), a row per worker",
    )
    sp.add_argument(
        "--device",
        default="auto",
        help="where the tasks compute and keep the model: auto (CUDA where a "
        "worker's torch sees a device, else the CPU), cpu, cuda, cuda:1 (default auto)",
    )
    add_option(
        sp,
        "--profile",
        help="write the task costs the run measured (a cost profile, JSON): with "
        "--cost-graph, what taskflow advise GRAPH --profile FILE plans with",
    )
    sp.add_argument(
        "--cost-graph",
        help="write one epoch's graph with costs only (native JSON): the job for the simulator and the advisor",
    )
    add_option(
        sp,
        "--repeat",
        default=1,
        help="train N times, seeds --seed, --seed + 1, ...: one table of the "
        "medians and their ranges, --plot one figure of them (default 1)",
    )
    add_seed(sp)
    add_quiet(sp)


def model_factory(name: str, shape: tuple, classes: int):
    """The factory ``--model`` names, sized for images of ``shape`` (C, H, W) and ``classes``.

    Parameters
    ----------
    name : str
    shape : tuple of int
    classes : int

    Raises
    ------
    TaskflowError
        An unknown name, or a ``module:function`` that cannot be loaded.
    """
    from workflows import torch_models

    c, h, w = shape
    if name == "small-cnn":
        return functools.partial(torch_models.small_cnn, in_channels=c, classes=classes, side=h)
    if name == "resnet8":
        return functools.partial(torch_models.resnet8, in_channels=c, classes=classes)
    if name == "mlp":
        return functools.partial(torch_models.mlp, features=c * h * w, hidden=(64,), classes=classes)
    if ":" not in name:
        raise UsageError(f"--model {name!r}: expected one of {', '.join(MODELS)}, or module:function")
    factory = _import(name, "--model")
    if not callable(factory):
        raise UsageError(f"--model {name}: is a {type(factory).__name__}, not a function returning a torch.nn.Module")
    return factory


def _shares(text: str | None, workers: int):
    if text is None:
        return None
    try:
        shares = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--shares {text!r}: expected numbers separated by commas, e.g. 3,1") from None
    if len(shares) != workers:
        raise UsageError(f"--shares lists {len(shares)} parts for --workers {workers}")
    return shares


@command(
    "Train a PyTorch model on Dask workers, an epoch per task graph; print each epoch's loss, held-out "
    "accuracy, time and bytes moved; --output, --plot and --checkpoint write them."
)
def train(args) -> int:
    try:
        import torch
    except ImportError:
        raise MissingExtra("taskflow train needs PyTorch: pip install 'dask-taskflow[torch]'") from None
    from ...training.repeats import one_cluster
    from workflows.images import write_digits, write_synthetic

    _check_pairs(args)
    names = scheduler_names(args.scheduler, default="placed")
    several = len(names) > 1 and args.repeat == 1  # one file per scheduler (repeats: one for all)
    check_outputs(
        [("--output", args.output)]
        + [
            (opt, per_scheduler(path, n, several))
            for n in names
            for opt, path in (
                ("--plot", args.plot),
                ("--checkpoint", args.checkpoint),
                ("--chrome-trace", args.chrome_trace),
                ("--timeline", args.timeline),
                ("--profile", args.profile),
                ("--cost-graph", args.cost_graph),
            )
        ],
        [args.data],
        plot_options=("--plot", "--timeline"),
    )
    data = _user_data(args)
    if args.make_data and not os.path.exists(os.path.join(args.data, "train")):
        (write_digits if args.make_data == "digits" else write_synthetic)(args.data, seed=args.seed)
        if not args.quiet:
            print(f"wrote the {args.make_data} dataset to {args.data}")
    from workflows.torch_data import open_data

    first, _ = open_data(data, size=args.resize)
    shape = first.shape()
    if first.classes is None and ":" not in args.model:
        raise UsageError(
            f"--model {args.model} is sized by the number of classes, which the Dataset {args.data} does "
            f"not say: give it a 'classes' list, or a model of your own (--model module:function)"
        )
    factory = model_factory(args.model, shape, len(first.classes or ()))
    opt = (
        functools.partial(torch.optim.SGD, lr=args.lr, momentum=0.9)
        if args.optimizer == "sgd"
        else functools.partial(torch.optim.Adam, lr=args.lr)
    )
    pad = max(1, shape[1] // 8) if args.augment else 0
    job = dict(
        optimizer=opt,
        epochs=args.epochs,
        workers=args.workers,
        batch=args.batch,
        shares=_shares(args.shares, args.workers or 2),
        allreduce=args.allreduce,
        bucket_mb=args.bucket_mb,
        mode=args.mode,
        sync_every=args.sync_every or 1,
        staleness=args.staleness or 0,
        compensation=args.compensation or 0.0,
        compression=args.compression,
        topk_ratio=args.topk_ratio or 0.01,
        stages=args.stages,
        microbatches=args.microbatches or 4,
        schedule=args.pipeline or "1f1b",
        pad=pad,
        flip=args.augment,
        iterations=args.iterations,
        address=args.address,
        scheduler_file=args.scheduler_file,
        timeout=args.timeout,
        quiet=args.quiet,
        device=args.device,
        size=args.resize,
        loaders=args.loaders,
        cache_mb=args.cache_mb or 0.0,
    )
    if args.repeat > 1:
        return _repeated(args, data, factory, names, job)
    with one_cluster(job) if several else contextlib.nullcontext(job) as job:  # the schedulers on one cluster
        _each(args, data, factory, names, job, several)
    return 0


def _each(args, data, factory, names, job, several) -> None:
    """Each scheduler's run of the job in turn, with its lines, report and files."""
    from ...training import train as run_training

    docs = []
    for name in names:

        def out(path, name=name):
            return per_scheduler(path, name, several)

        said = _Said(args, out(args.checkpoint), f"{name}: " if several else "", docs, several)
        history = run_training(
            factory,
            data,
            scheduler=name,
            seed=args.seed,
            checkpoint=out(args.checkpoint),
            plot=out(args.plot),
            on_epoch=said,
            **job,
        )
        said.end(history)  # a resumed run with no epoch left to run: its lines still
        docs.append(history.to_dict())
        if args.profile and history.profile is not None:
            history.profile.save(out(args.profile))
        graph = history.cost_graph() if args.cost_graph else None
        if graph is not None:
            from ...formats import save_graph

            save_graph(graph, out(args.cost_graph))
        if args.chrome_trace:
            history.chrome_trace(out(args.chrome_trace))
        if args.timeline and history.traces:
            from ...training.timeline import iteration_schedule
            from ..plot import gantt

            plan, moves, title = iteration_schedule(history.traces)
            gantt(plan, out(args.timeline), title=title, transfers=moves)


def _repeated(args, data, factory, names, job) -> int:
    """``--repeat N``: each scheduler's job N times (seeds ``--seed``, ``--seed`` + 1, ...), each
    run's lines as it ends, then one table of the medians and ranges; ``--plot`` one figure of them
    all (the median and a band), ``-o`` every run of every scheduler."""
    from ...training.repeats import one_cluster, plot, repeat, table

    if args.checkpoint or args.profile or args.cost_graph or args.chrome_trace or args.timeline:
        raise UsageError(
            "--repeat goes without --checkpoint, --profile, --cost-graph, --chrome-trace and --timeline "
            "(each run would write over the last)"
        )
    groups = []

    def said(name):
        def on_run(k, seed, history):
            for line in history.lines()[-1:] if args.quiet else history.lines():
                print(f"{name}: run {k + 1} (seed {seed}): {line}", flush=True)

        return on_run

    with one_cluster(job) as job:  # every scheduler's runs on one cluster
        for name in names:
            groups.append(
                repeat(factory, data, n=args.repeat, seed=args.seed, scheduler=name, on_run=said(name), **job)
            )
            if args.output:  # as the runs go: a comparison stopped half-way keeps what it measured
                atomic_write(args.output, json.dumps([g.to_dict() for g in groups], indent=1) + "\n")
    print(table(groups))
    if args.plot:
        plot(groups, args.plot)
    return 0


class _Said:
    """What ``train`` prints and writes as each epoch ends: the run's summary line before the first,
    then each epoch's line, and ``--output`` written again with the epochs so far (a run stopped
    after epoch ``k`` has printed and written epochs ``1..k``)."""

    def __init__(self, args, checkpoint, prefix: str, docs: list, several: bool):
        self.args, self.checkpoint, self.prefix, self.docs, self.several = args, checkpoint, prefix, docs, several
        self.lines = None  # none said yet

    def __call__(self, history) -> None:
        if self.lines is None:
            self.lines = 0
            _say_run(self.args, history, self.checkpoint, self.prefix)
        if self.args.output:  # first: an epoch printed is in the file
            docs = [*self.docs, history.to_dict()]
            atomic_write(self.args.output, json.dumps(docs[0] if not self.several else docs, indent=1) + "\n")
        lines = history.lines()
        if not self.args.quiet:
            for line in lines[self.lines :]:
                print(self.prefix + line, flush=True)
        self.lines = len(lines)

    def end(self, history) -> None:
        """The run has ended: quiet, its last epoch's line alone (the summary)."""
        self(history)
        if self.args.quiet and history.epochs:
            print(self.prefix + history.lines()[-1], flush=True)


def _user_data(args):
    """DATA: a folder's path (as given), or ``module:name`` of a Dataset, a pair of them, or a
    function returning either (imported as ``--model``'s functions are)."""
    text = args.data
    if os.path.exists(text) or ":" not in text or args.make_data:
        return text
    obj = _import(text, "DATA")
    if callable(obj) and not hasattr(obj, "__getitem__"):
        try:
            obj = obj()
        except Exception as e:  # noqa: BLE001 - the user's function: name it
            raise UsageError(f"DATA {text}: calling it raised {type(e).__name__}: {e}") from None
    return obj


def _import(name: str, what: str):
    """``module:attribute``, the module imported from the working folder too; its functions sent
    to workers by value (they need not import the user's file)."""
    import importlib

    import cloudpickle

    mod, _, attr = name.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(mod)
        obj = getattr(module, attr)
    except (ImportError, AttributeError, SyntaxError, ValueError) as e:
        raise UsageError(f"{what} {name}: cannot load ({type(e).__name__}: {e})") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's module (sys.exit on import too): name it
        raise UsageError(f"{what} {name}: importing it raised {type(e).__name__}: {e}") from None
    if module.__name__ != "__main__" and not module.__name__.startswith(("workflows", "torch")):
        cloudpickle.register_pickle_by_value(module)
    return obj


def _check_pairs(args) -> None:
    """An option that only means something beside another is refused without it (one line)."""
    pairs = (
        ("--sync-every", args.sync_every, "--mode local", args.mode == "local"),
        ("--staleness", args.staleness, "--mode stale", args.mode == "stale"),
        ("--compensation", args.compensation, "--mode stale", args.mode == "stale"),
        ("--topk-ratio", args.topk_ratio, "--compression topk", args.compression == "topk"),
        ("--microbatches", args.microbatches, "--stages", args.stages is not None),
        ("--pipeline", args.pipeline, "--stages", args.stages is not None),
        ("--cache-mb", args.cache_mb, "--loaders", bool(args.loaders)),
    )
    for option, value, needs, given in pairs:
        if value is not None and not given:
            raise UsageError(f"{option} goes with {needs}")
    if args.stages is not None and (args.shares or args.mode != "sync" or args.compression):
        raise UsageError("--stages (pipeline parallelism) goes without --shares, --mode and --compression")


def _say_run(args, history, checkpoint, prefix: str) -> None:
    """The run's summary line (unless quiet), and where it resumed from."""
    c = history.config
    if history.resumed_from is not None:
        print(f"{prefix}resumed after epoch {history.resumed_from + 1} from {checkpoint}")
    if not args.quiet and args.stages:
        print(
            f"{prefix}{args.model}: {c['parameters']:,} parameters in {c['workers']} stages, one worker each; "
            f"{len(c['counts'])} microbatches of {'/'.join(map(str, c['counts']))} samples, "
            f"{args.pipeline or '1f1b'}; {c['iterations_per_epoch']} iterations per epoch, placed by "
            f"{c['scheduler']}"
        )
    elif not args.quiet:
        print(
            f"{prefix}{args.model}: {c['parameters']:,} parameters in {c['buckets']} bucket(s); {c['workers']} "
            f"ranks of {'/'.join(map(str, c['counts']))} samples; {c['iterations_per_epoch']} iterations per "
            f"epoch; "
            + (
                "one task per rank and iteration, the gradient summed on every rank;"
                if c.get("reduction") == "direct"
                else f"{c['allreduce']} allreduce"
            )
            + f" placed by {c['scheduler']}"
            + (f"; {args.mode}" if args.mode != "sync" else "")
            + (f"; {args.compression} compression" if args.compression else "")
        )
