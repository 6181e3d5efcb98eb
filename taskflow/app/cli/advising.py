"""``taskflow advise``: which configuration of a catalog's node types to rent for a workflow."""

from __future__ import annotations

import json
import os
import sys

from ...errors import UsageError
from ...formats import atomic_write, dump_json
from .commands import command
from .options import GRAPH_HELP, SECONDS, check_outputs
from .values import read_graph, scheduler_names

__all__ = ["advise", "add_arguments"]


def add_arguments(sp) -> None:
    """The ``advise`` subcommand's arguments.

    Parameters
    ----------
    sp : argparse.ArgumentParser
    """
    from .options import (
        COUNT,
        add_network,
        add_option,
        add_output,
        add_plot,
        add_quiet,
        add_scheduler,
        add_seed,
        number,
    )

    sp.add_argument("graph", metavar="GRAPH", nargs="?", help=GRAPH_HELP + "; or --train for a training job")
    add_option(sp, "--format", help="force GRAPH's format (default: detect)")
    sp.add_argument("--catalog", required=True, help="a catalog file (YAML or JSON) or a shipped one: aws, tiny")
    sp.add_argument(
        "--train",
        metavar="MODEL",
        help="a training job instead of GRAPH: a model name "
        "(resnet50, vgg16, bert-base, gpt2-small) or size (350m, 1.3b), or the cost graph of a real "
        "PyTorch job (taskflow train --cost-graph FILE), with the costs it measured (--profile)",
    )
    sp.add_argument("--steps", type=COUNT, help="--train: training steps (default 100)")
    add_option(sp, "--batch", help="--train: global batch per step (default 64)")
    sp.add_argument(
        "--parallelism",
        choices=("data", "pipeline"),
        help="--train: one rank per GPU (data) or one stage per GPU (pipeline); default data",
    )
    sp.add_argument("--deadline", type=SECONDS, help="seconds: the cheapest configuration finishing in time")
    add_option(sp, "--budget", help="catalog currency: the fastest configuration costing at most this")
    add_scheduler(sp, help="the schedulers to try; default heft,work-stealing, and placed for --train")
    sp.add_argument("--max-nodes", type=COUNT, help="most nodes in a configuration")
    sp.add_argument("--types", help="only these node types (comma list)")
    add_network(sp)
    add_option(sp, "--profile", help="task costs from a cost profile of a real run (taskflow run --profile)")
    add_option(sp, "--noise", help="per-task duration noise x exp(N(0, S)): gives the chance of missing the deadline")
    sp.add_argument(
        "--samples",
        type=number(int, low=1, high=10_000),
        help="with --noise: noisy simulations per front configuration (default 20)",
    )
    sp.add_argument(
        "--confidence",
        type=number(float, above=0.0, high=1.0),
        help="with --noise: meet the deadline at least this often (default 0.9)",
    )
    sp.add_argument(
        "--tolerance",
        type=number(float, low=0.0, high=0.99),
        default=0.02,
        help="skip a configuration within this share of a simulated one on both bounds (default 0.02; "
        "0: the exact front)",
    )
    add_seed(sp)
    add_output(sp, "write every configuration, the front and the answer (JSON)")
    add_plot(sp, "makespan against cost, the front and the answer")
    add_quiet(sp)


@command("Search a catalog's configurations for a workflow; print the answer, the front and why others lost.")
def advise(args) -> int:
    from ...advisor import Training, advise as run_advice

    budget = _amount(args.budget) if args.budget is not None else None
    check_outputs(
        [("--output", args.output), ("--plot", args.plot)],
        [args.graph, args.profile, args.train, args.catalog if os.path.isfile(args.catalog) else None],
    )
    _check_pairs(args)
    if (args.graph is None) == (args.train is None):
        raise UsageError("advise needs a GRAPH or --train MODEL (one of the two)")
    if args.train is not None and args.train.endswith(".json") and os.path.isfile(args.train):
        workload = read_graph(args.train, None)  # a profiled PyTorch job: its ranks as it ran, its measured costs
        if args.profile is None:
            raise UsageError(
                f"--train {args.train}: a job's cost graph goes with the costs its run measured: "
                f"--profile FILE (taskflow train --profile FILE)"
            )
    elif args.train is not None:
        workload = Training(
            args.train, steps=args.steps or 100, batch=args.batch or 64, parallelism=args.parallelism or "data"
        )
    else:
        workload = read_graph(args.graph, args.format)
    schedulers = scheduler_names(args.scheduler) if args.scheduler else None
    types = [t.strip() for t in args.types.split(",") if t.strip()] if args.types else None
    with _Progress(not args.quiet) as progress:
        advice = run_advice(
            workload,
            args.catalog,
            deadline=args.deadline,
            budget=budget,
            schedulers=schedulers,
            max_nodes=args.max_nodes,
            types=types,
            network=args.network,
            profile=args.profile,
            noise=args.noise,
            samples=args.samples or 20,
            confidence=args.confidence or 0.9,
            tolerance=args.tolerance,
            seed=args.seed,
            progress=progress,
        )
    print(advice.answer() if args.quiet else advice.table())
    if args.plot:  # before the JSON: a plot that fails leaves no half of the outputs behind
        advice.plot(args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    if args.output:
        atomic_write(args.output, dump_json(_plain(advice.to_dict())))
        print(f"wrote {args.output}", file=sys.stderr)
    return 0 if advice.choice is not None or (args.deadline is None and budget is None) else 1


class _Progress:
    """``progress(done, total)`` for the search and then the noisy samples: a bar on stderr once a
    phase has taken 2 s (none with -q, or where stderr is no terminal)."""

    def __init__(self, shown: bool):
        self.shown, self.bar = shown, None

    def __call__(self, done: int, total: int) -> None:
        if not self.shown:
            return
        if self.bar is None or self.bar.total != total:
            from ...runtime.client.waiting import progress_bar

            self.close()
            self.bar = progress_bar(total, "advise", unit="simulation")
        self.bar.n = done
        self.bar.refresh() if done == total else self.bar.update(0)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_pairs(args) -> None:
    """An option that only means something beside another is refused without it (one line)."""
    pairs = (
        ("--steps", args.steps, "--train"),
        ("--batch", args.batch, "--train"),
        ("--parallelism", args.parallelism, "--train"),
        ("--samples", args.samples, "--noise"),
        ("--confidence", args.confidence, "--noise"),
    )
    given = {"--train": args.train is not None, "--noise": bool(args.noise)}
    for option, value, needs in pairs:
        if value is not None and not given[needs]:
            raise UsageError(f"{option} goes with {needs}")
    if args.train is not None and args.train.endswith(".json") and os.path.isfile(args.train):
        for option, value, _ in pairs[:3]:
            if value is not None:
                raise UsageError(
                    f"{option} goes with --train MODEL (a model name): the cost graph "
                    f"{args.train} is one step of the job as it ran"
                )


def _amount(text: str) -> float:
    """``--budget``: a positive amount (parsed here: ``schedule --budget`` spells another thing)."""
    import argparse

    try:
        return SECONDS(text)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"--budget: {e}") from None


def _plain(doc):
    """``doc`` with numpy numbers as Python ones (JSON)."""
    return json.loads(json.dumps(doc, default=float))
