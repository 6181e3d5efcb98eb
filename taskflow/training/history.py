"""What a training run measured: :class:`History` (per epoch the losses, held-out accuracy, times,
samples per second, bytes moved and where each iteration's time went) and its plot."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..checks import format_bytes, plot_format
from ..formats import save_figure
from .timeline import epoch_trace

__all__ = ["History", "Breakdown", "breakdown", "record_epoch", "LOADING", "COMPUTE", "STATE"]

#: task categories whose time is loading (read, decode, augment, collate; ``load`` fuses them; a
#: Dataset's ``fetch`` and the ``data`` task that sends it)
LOADING = frozenset({"read", "decode", "augment", "collate", "load", "fetch", "data"})
#: task categories whose time is computing (the model's steps, its state's updates, the evaluation);
#: every other category is communication (buckets, compression, the allreduce's tasks)
COMPUTE = frozenset(
    {"init", "forward-backward", "update", "working", "average", "param-bucket", "forward", "backward", "dx", "eval"}
)
#: task categories whose output is a rank's state: bytes of theirs moved are a scheduler moving ranks
STATE = frozenset({"init", "update", "working", "average"})


@dataclass(frozen=True)
class Breakdown:
    """Where one iteration's wall time went, in seconds per rank: the four add up to the epoch's
    seconds per iteration."""

    #: the model's steps and updates (the evaluation's share included)
    compute: float
    #: reading, decoding, augmenting and collating the batches
    loading: float
    #: the gradient's reduction: its tasks and the time outputs took to move between workers
    communication: float
    #: the rest: Dask's scheduling of each task, waiting for other ranks, the epoch's start and end
    waiting: float

    def as_dict(self) -> dict:
        """``{"compute", "loading", "communication", "waiting"}`` (JSON-ready)."""
        return {
            "compute": self.compute,
            "loading": self.loading,
            "communication": self.communication,
            "waiting": self.waiting,
        }

    def text(self) -> str:
        """``compute 5.1, loading 3.2, communication 2.0, scheduling and waiting 19.2 ms``."""
        return (
            f"compute {self.compute * 1e3:.1f}, loading {self.loading * 1e3:.1f}, communication "
            f"{self.communication * 1e3:.1f}, scheduling and waiting {self.waiting * 1e3:.1f} ms"
        )


def breakdown(graph, trace, iterations: int, ranks: int, seconds: float, inside_loading: float = 0.0) -> Breakdown:
    """An epoch's :class:`Breakdown` from its graph's categories and its trace: each run's time by
    its task's category, the seconds outputs took to move (communication), loading done inside
    fused tasks (``inside_loading``, seconds in all, moved from compute to loading); per iteration
    and rank, the rest of ``seconds`` (the epoch's wall time) is scheduling and waiting (for loaders
    on workers of their own too: their tasks, ``meta["place"]``, are not the ranks' time).

    Parameters
    ----------
    graph : TaskGraph
    trace : Trace
    iterations, ranks : int
    seconds : float
    inside_loading : float
    """
    per = 1.0 / max(1, iterations * ranks)
    sums = {"compute": 0.0, "loading": inside_loading, "communication": 0.0}
    for r in trace.runs:
        md = graph.task(r.task).meta
        if "place" in md:  # a worker of its own (a loader): not a rank's time
            continue
        kind = md.get("category", "other")
        group = "loading" if kind in LOADING else "compute" if kind in COMPUTE else "communication"
        sums[group] += r.finish - r.start
    sums["compute"] = max(0.0, sums["compute"] - inside_loading)
    # what moves between workers, but not a loader's output: that arrives while the ranks compute
    sums["communication"] += sum(x.finish - x.start for x in trace.transfers if "place" not in graph.task(x.task).meta)
    parts = {k: v * per for k, v in sums.items()}
    wall = seconds / max(1, iterations)
    return Breakdown(waiting=max(0.0, wall - sum(parts.values())), **parts)


@dataclass
class History:
    """What a training run measured (see the module docstring)."""

    #: per epoch: epoch, loss, val_loss, accuracy, seconds, wall, iterations, seconds_per_iteration,
    #: samples_per_second, bytes_per_iteration, state_bytes_per_iteration (of those, the bytes of the
    #: ranks' states a scheduler moved between workers), state_bytes, counts (samples per rank), busy
    #: (task kind -> seconds per iteration and rank), breakdown (:class:`Breakdown` as a dict),
    #: predicted_seconds_per_iteration (simulated from the costs earlier epochs measured; None for
    #: the first)
    epochs: list = field(default_factory=list)
    #: (iteration, the global batch's loss) of every iteration
    losses: list = field(default_factory=list)
    #: each rank's state at the end (parameters, buffers, optimizer state)
    states: list = field(default_factory=list)
    #: what the run was: workers, batch, allreduce, scheduler, parameters, ...
    config: dict = field(default_factory=dict)
    #: the epoch the run resumed after (None: it started afresh)
    resumed_from: int | None = None
    #: the task costs every epoch of this run measured (a :class:`~taskflow.runtime.CostProfile`)
    profile: object = None
    #: the job (:class:`~workflows.torch_training.TorchTraining` or ``TorchPipeline``)
    job: object = None
    #: each epoch this process ran, as measured (:class:`~taskflow.training.timeline.EpochTrace`)
    traces: list = field(default_factory=list, repr=False)

    def chrome_trace(self, path) -> None:
        """Write every epoch's tasks and transfers as one Chrome trace
        (:func:`~taskflow.training.timeline.chrome_trace`).

        Parameters
        ----------
        path : path
        """
        from .timeline import chrome_trace

        chrome_trace(self.traces, path)

    def cost_graph(self):
        """The last epoch's graph with costs only: the simulator's (and the advisor's) twin of
        what ran (None before any epoch)."""
        if self.job is None or not self.epochs:
            return None
        return self.job.graph(self.epochs[-1]["epoch"], executable=False)

    @property
    def final_accuracy(self) -> float:
        """The last epoch's held-out accuracy (nan without a ``val`` split)."""
        return self.epochs[-1]["accuracy"] if self.epochs else float("nan")

    def to_dict(self) -> dict:
        """A JSON-ready dict (the states left out)."""
        return {"config": self.config, "epochs": self.epochs, "losses": self.losses, "resumed_from": self.resumed_from}

    def breakdown(self, epoch: int = -1) -> Breakdown | None:
        """Where an iteration's time went in epoch ``epoch`` (an index into :attr:`epochs`; None for
        an epoch recorded without one, as a checkpoint of an earlier version).

        Parameters
        ----------
        epoch : int
        """
        b = self.epochs[epoch].get("breakdown") if self.epochs else None
        return Breakdown(**b) if b else None

    def lines(self) -> list:
        """One line per epoch: loss, held-out accuracy, seconds, where an iteration's time went,
        samples per second, bytes moved (and how many of them were the ranks' states)."""
        out = []
        for k, e in enumerate(self.epochs):
            acc = "" if math.isnan(e["accuracy"]) else f", held-out accuracy {e['accuracy']:.1%}"
            b = self.breakdown(k)
            per_it = f"{e['seconds'] / max(1, e['iterations']) * 1e3:.1f} ms/iteration" + (f": {b.text()}" if b else "")
            moved = e["bytes_per_iteration"]
            states = e.get("state_bytes_per_iteration") or 0.0
            why = f" ({format_bytes(states)} of it the ranks' states, moved by the scheduler)" if states else ""
            ld = e.get("loader_seconds_per_iteration")
            ld = f"; each loader busy {ld * 1e3:.1f} ms an iteration" if ld else ""
            out.append(
                f"epoch {e['epoch'] + 1}: loss {e['loss']:.4f}{acc}, {e['seconds']:.2f} s ({per_it}; "
                f"{e['samples_per_second']:.0f} samples/s), {format_bytes(moved)} moved per iteration{why}{ld}"
            )
        return out

    def plot(self, path) -> None:
        """Held-out accuracy and training loss against wall time, and beside them where each epoch's
        iterations spent their time (:meth:`breakdown`, stacked), written to ``path`` (PNG, SVG, PDF
        by suffix).

        Raises
        ------
        TaskflowError
            A suffix that names no image format.
        """
        plot_format(path)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        with matplotlib.rc_context({"text.parse_math": False}):  # names are text, never formulas
            self._draw(path, plt)

    def _draw(self, path, plt) -> None:
        wall = [e["wall"] for e in self.epochs]
        parts = [self.breakdown(k) for k in range(len(self.epochs))]
        shown = [k for k, b in enumerate(parts) if b is not None]
        fig, (ax, bars) = plt.subplots(1, 2, figsize=(10.4, 3.6), gridspec_kw={"width_ratios": [3, 2]})
        ax.plot(wall, [e["accuracy"] * 100 for e in self.epochs], "o-", color="C0", label="held-out accuracy")
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("held-out accuracy (%)", color="C0")
        ax.set_ylim(0, 100)
        ax2 = ax.twinx()
        ax2.plot(wall, [e["loss"] for e in self.epochs], "s--", color="C1", label="training loss")
        ax2.set_ylabel("training loss", color="C1")
        c = self.config
        ax.set_title(
            f"{c.get('model', 'model')}: {c.get('workers')} workers, {c.get('reduction', c.get('allreduce'))}, "
            f"{c.get('scheduler')}",
            fontsize=10,
            usetex=False,
        )
        # where an iteration's time went, epoch by epoch (the first holds the start-up: apart, hatched)
        bottom = [0.0] * len(shown)
        for j, (field_, label) in enumerate(
            (
                ("compute", "compute"),
                ("loading", "loading"),
                ("communication", "communication"),
                ("waiting", "scheduling and waiting"),
            )
        ):
            ms = [getattr(parts[k], field_) * 1e3 for k in shown]
            bars.bar(
                [k + 1 for k in shown],
                ms,
                bottom=bottom,
                color=f"C{j + 2}",
                label=label,
                hatch=["//" if self.epochs[k]["epoch"] == 0 else "" for k in shown],
            )
            bottom = [b + m for b, m in zip(bottom, ms)]
        bars.set_xlabel("epoch (the first holds the start-up)")
        bars.set_ylabel("ms per iteration and rank")
        bars.set_title("where an iteration's time went", fontsize=10)
        if shown:
            bars.legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        save_figure(fig, path, plt.close, dpi=100)


def record_epoch(history: History, spec, graph, epoch: int, states, report, seconds: float, wall0: float) -> None:
    """Add to ``history`` an epoch's figures: the global loss of each iteration from the ranks' logs (weighted by
    their samples), what moved between workers, the held-out evaluation, and where the workers'
    time went (seconds per iteration and rank of each kind of task).

    Parameters
    ----------
    history : History
    spec
        The job's training (a :class:`~workflows.torch_training.TorchTraining`).
    graph : TaskGraph
        The epoch's graph.
    epoch : int
    states : list
        Each rank's state at the epoch's end (their logs are emptied).
    report : RunReport
        The epoch's run.
    seconds, wall0 : float
        The epoch's seconds; the wall time before it.
    """
    from workflows.torch_tasks import state_bytes

    per_it: dict = {}
    inside = 0.0  # seconds of loading done inside fused tasks
    for s in states:
        for entry in s["log"]:
            it, value, n = entry[:3]
            inside += entry[3] if len(entry) > 3 else 0.0
            tot, cnt = per_it.get(it, (0.0, 0))
            per_it[it] = (tot + value * n, cnt + n)
    losses = [(it, tot / cnt) for it, (tot, cnt) in sorted(per_it.items())]
    for s in states:
        s["log"] = []
    history.losses += losses
    ev = report.results.get(f"e{epoch}.eval") or {"loss": float("nan"), "accuracy": float("nan")}
    moved = report.trace.bytes_moved
    n_it = spec.per_epoch
    busy: dict = {}
    for r in report.trace.runs:
        kind = graph.task(r.task).meta.get("category", "other")
        busy[kind] = busy.get(kind, 0.0) + (r.finish - r.start) / (n_it * int(spec.workers))
    state_moved = sum(x.bytes for x in report.trace.transfers if graph.task(x.task).meta.get("category") in STATE)
    parts = breakdown(graph, report.trace, n_it, int(spec.workers), seconds, inside)
    loaders = int(getattr(spec, "loaders", 0))
    off = sum(r.finish - r.start for r in report.trace.runs if "place" in graph.task(r.task).meta)
    history.traces.append(epoch_trace(epoch, wall0, graph, report.trace))
    history.epochs.append(
        {
            "epoch": epoch,
            "loss": sum(v for _, v in losses) / max(1, len(losses)),
            "val_loss": ev["loss"],
            "accuracy": ev["accuracy"],
            "seconds": seconds,
            "wall": wall0 + seconds,
            "iterations": n_it,
            "seconds_per_iteration": report.measured_makespan / n_it,
            "samples_per_second": n_it * spec.batch / seconds,
            "bytes_per_iteration": moved / n_it,
            "state_bytes_per_iteration": state_moved / n_it,
            "breakdown": parts.as_dict(),
            "state_bytes": state_bytes(states[0]),
            "busy": busy,
            "counts": list(spec.counts),
            # loaders of their own: the seconds each spent per iteration (their share of the wall time)
            "loader_seconds_per_iteration": off / (n_it * loaders) if loaders else None,
            # the simulator's prediction of this epoch, from the costs the earlier epochs measured
            "predicted_seconds_per_iteration": report.predicted_makespan / n_it
            if report.costs != "declared" and report.predicted_makespan is not None
            else None,
        }
    )
