"""Repeated training runs, to say a figure with its spread: :func:`repeat` trains one job ``n`` times
on one cluster, each run with its own seed (``seed``, ``seed + 1``, ...: the model's initial
parameters, the batches and the augmentation all change with it), and :class:`Repeats` holds the
histories. :func:`table` sets several jobs side by side (one row each: the median of the runs and
their range), :func:`plot` draws them in one figure (held-out accuracy per epoch, the median as a
line and the range as a band).

Throughput is the steady one: samples per second over the epochs after the first, whose time holds
the start-up (the workers importing torch, the first graph's submission); a one-epoch run has only
its first."""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass, field

from ..checks import plot_format
from ..formats import save_figure

__all__ = ["Repeats", "repeat", "one_cluster", "table", "plot"]

#: the figures :meth:`Repeats.summary` gives, each the median of the runs and their range
FIGURES = ("samples_per_second", "seconds_per_iteration", "accuracy", "loss")


def _steady(history) -> tuple:
    """``(samples per second, seconds per iteration)`` over the epochs after the first (all of
    them where there is one)."""
    epochs = history.epochs[1:] or history.epochs
    seconds = sum(e["seconds"] for e in epochs)
    iterations = sum(e["iterations"] for e in epochs)
    samples = sum(e["samples_per_second"] * e["seconds"] for e in epochs)
    return samples / seconds, seconds / max(1, iterations)


@dataclass
class Repeats:
    """Several runs of one job (see the module docstring)."""

    #: the job's label in a table or a figure (its scheduler, say)
    name: str
    #: one :class:`~taskflow.training.History` per run
    histories: list = field(default_factory=list)
    #: the seed of each run
    seeds: list = field(default_factory=list)

    def values(self, figure: str) -> list:
        """One value of ``figure`` (of :data:`FIGURES`) per run.

        Parameters
        ----------
        figure : str
        """
        if figure in ("samples_per_second", "seconds_per_iteration"):
            return [_steady(h)[FIGURES.index(figure)] for h in self.histories]
        return [h.epochs[-1][figure] for h in self.histories]

    def summary(self) -> dict:
        """Per figure of :data:`FIGURES`: ``{"median", "low", "high"}`` over the runs."""
        out = {}
        for f in FIGURES:
            v = self.values(f)
            out[f] = {"median": statistics.median(v), "low": min(v), "high": max(v)}
        return out

    def line(self) -> str:
        """The runs in one line: medians, with the range after each."""
        s = self.summary()
        sps, spi, acc = s["samples_per_second"], s["seconds_per_iteration"], s["accuracy"]
        return (
            f"{self.name}: {len(self.histories)} runs (seeds {', '.join(map(str, self.seeds))}): "
            f"{sps['median']:.0f} samples/s ({sps['low']:.0f}-{sps['high']:.0f}), "
            f"{spi['median'] * 1e3:.1f} ms/iteration ({spi['low'] * 1e3:.1f}-{spi['high'] * 1e3:.1f}), "
            f"held-out accuracy {acc['median']:.1%} ({acc['low']:.1%}-{acc['high']:.1%})"
        )

    def to_dict(self) -> dict:
        """A JSON-ready dict: the name, the seeds, the summary and every run's history."""
        return {
            "name": self.name,
            "seeds": list(self.seeds),
            "summary": self.summary(),
            "runs": [h.to_dict() for h in self.histories],
        }


def repeat(model, data, n: int = 3, seed: int = 0, name: str | None = None, on_run=None, **options) -> Repeats:
    """Train ``model`` on ``data`` ``n`` times, with seeds ``seed``, ``seed + 1``, ..., on one
    cluster (started once, unless ``client`` or an address is given).

    Parameters
    ----------
    model, data
        As :func:`taskflow.train` takes them.
    n : int
        Runs.
    seed : int
        The first run's seed.
    name : str, optional
        The label (default: the scheduler's name).
    on_run : callable, optional
        Called with ``(k, seed, history)`` as run ``k`` ends.
    **options
        :func:`taskflow.train`'s other arguments (``checkpoint`` and ``plot`` excepted: a run's
        checkpoint would resume the next, and :func:`plot` draws the runs together).

    Returns
    -------
    Repeats

    Raises
    ------
    TaskflowError
        Bad input, as :func:`taskflow.train` says it; ``n`` below 1; a checkpoint or a plot.
    """
    from ..checks import seed as check_seed
    from ..errors import UsageError
    from . import train

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"repeats must be an integer >= 1, got {n!r}")
    for option in ("checkpoint", "plot"):
        if options.get(option) is not None:
            raise UsageError(
                f"repeated runs take no {option} (each run would write over the last); plot them "
                f"together with taskflow.training.repeats.plot"
            )
    seed = check_seed(seed)
    check_seed(seed + n - 1, "the last run's seed")
    out = Repeats(name or options.get("scheduler", "placed"))
    with one_cluster(options) as options:
        for k in range(n):
            h = train(model, data, seed=seed + k, **options)
            out.histories.append(h)
            out.seeds.append(seed + k)
            if on_run is not None:
                on_run(k, seed + k, h)
    return out


@contextlib.contextmanager
def one_cluster(options: dict):
    """Several runs of one job on one cluster: :func:`taskflow.train`'s ``options`` with
    ``client`` set to an embedded LocalCluster's, started once for all of them (the job's
    ranks and loaders, with the device checked first as one run would), unless they name a
    cluster already (``client``, ``address``, ``scheduler_file`` or ``jobqueue``). Its workers
    import torch before the first run, so that each run starts on workers alike. The cluster is
    closed as the block ends (at once, its workers killed, where the block was left by an
    error or Ctrl-C).

    Parameters
    ----------
    options : dict
        :func:`taskflow.train`'s keyword arguments.

    Raises
    ------
    TaskflowError
        A device this machine does not have; the cluster could not start.
    """
    from ..runtime.client.connecting import connect
    from ..runtime.client.waiting import close_quietly
    from ..runtime.launch.local import prompt_messages
    from . import check_device

    ranks = options.get("workers") or options.get("stages") or 2
    loaders = options.get("loaders") or 0
    counts = (ranks, loaders, options.get("threads", 1))
    named = options.get("client") is not None or any(options.get(k) for k in ("address", "scheduler_file", "jobqueue"))
    if named or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts):
        yield options  # a cluster named; or counts that train refuses in its own words, before any cluster starts
        return
    check_device(options.get("device", "auto"), options.get("stages"), True)
    client, owned = connect(None, None, None, ranks + loaders, counts[2], work_stealing=False)
    finished = False
    try:
        prompt_messages(client)
        client.run(_import_torch)  # the first run starts on workers as warm as the later ones'
        yield {**options, "client": client}
        finished = True
    finally:
        close_quietly(owned, now=not finished)


def _import_torch() -> None:
    """What a worker imports when it first trains: torch, and what its optimizers load on their
    first step."""
    import torch._dynamo  # noqa: F401

    import workflows.torch_tasks  # noqa: F401


def table(groups) -> str:
    """Several :class:`Repeats` side by side: a row each, the median of the runs and their range.

    Parameters
    ----------
    groups : list of Repeats
    """
    head = f"{'':14} {'runs':>4} {'samples/s':>22} {'ms/iteration':>20} {'held-out accuracy':>22}"
    rows = [head]
    for g in groups:
        s = g.summary()
        sps, spi, acc = s["samples_per_second"], s["seconds_per_iteration"], s["accuracy"]
        rows.append(
            f"{g.name:14} {len(g.histories):4d} {sps['median']:9.0f} ({sps['low']:.0f}-{sps['high']:.0f})".ljust(51)
            + f" {spi['median'] * 1e3:7.1f} ({spi['low'] * 1e3:.1f}-{spi['high'] * 1e3:.1f})".ljust(21)
            + f" {acc['median']:8.1%} ({acc['low']:.1%}-{acc['high']:.1%})"
        )
    rows.append("(the median of the runs, their range in brackets; samples/s over the epochs after the first)")
    return "\n".join(rows)


def plot(groups, path) -> None:
    """Held-out accuracy per epoch of each :class:`Repeats` in one figure: the median of its runs
    as a line, their range as a band; written to ``path`` (PNG, SVG, PDF by suffix).

    Parameters
    ----------
    groups : list of Repeats
    path : path
    """
    plot_format(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False}):
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for k, g in enumerate(groups):
            epochs = min(len(h.epochs) for h in g.histories)
            x = list(range(1, epochs + 1))
            per = [[h.epochs[e]["accuracy"] * 100 for h in g.histories] for e in range(epochs)]
            ax.plot(
                x, [statistics.median(v) for v in per], "o-", color=f"C{k}", label=f"{g.name} ({len(g.histories)} runs)"
            )
            ax.fill_between(x, [min(v) for v in per], [max(v) for v in per], color=f"C{k}", alpha=0.2)
        ax.set_xlabel("epoch")
        ax.set_ylabel("held-out accuracy (%)")
        ax.set_ylim(0, 100)
        ax.legend(loc="lower right", fontsize=8)
        ax.set_title("median of the runs, their range as a band", fontsize=10)
        fig.tight_layout()
        save_figure(fig, path, plt.close, dpi=100)
