"""An advice: the answer, the Pareto front, why the other configurations lost; as text, JSON and a plot."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Advice"]

_BOUND = {
    "compute": "compute-bound",
    "network": "network-bound",
    "critical path": "critical-path-bound",
    "idle": "idle cores",
}


@dataclass
class Advice:
    """What :func:`taskflow.advise` found.

    Attributes
    ----------
    workload : str
    catalog : Catalog
    candidates : list of Candidate
        Every configuration, with its status (front, simulated, pruned, infeasible) and reason.
    front : list of Candidate
        The Pareto front of makespan and cost, cheapest first.
    choice : Candidate or None
        The cheapest configuration meeting the deadline, or the fastest within the budget.
    stats : dict
        Configurations, simulated, pruned, infeasible, simulations, seconds.
    """

    workload: str
    catalog: object
    candidates: list
    front: list
    choice: object
    deadline: float | None = None
    budget: float | None = None
    schedulers: list = field(default_factory=list)
    network: str = "maxmin"
    noise: float = 0.0
    confidence: float = 0.9
    stats: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """A JSON-ready document (``taskflow-advice/1``)."""
        return {
            "format": "taskflow-advice/1",
            "workload": self.workload,
            "catalog": self.catalog.name,
            "currency": self.catalog.currency,
            "deadline": self.deadline,
            "budget": self.budget,
            "schedulers": self.schedulers,
            "network": self.network,
            "noise": self.noise,
            "choice": self.choice.label if self.choice is not None else None,
            "front": [k.label for k in self.front],
            "stats": self.stats,
            "configurations": [k.to_dict() for k in self.candidates],
        }

    def answer(self) -> str:
        """The one-line answer."""
        cur = self.catalog.currency
        if self.choice is not None:
            k = self.choice
            what = "cheapest meeting the deadline" if self.deadline is not None else "fastest within the budget"
            extra = (
                f", misses the deadline in {k.p_miss:.0%} of {len(k.samples)} noisy runs"
                if k.p_miss is not None
                else ""
            )
            return (
                f"{what}: {k.label} with {k.scheduler}: {k.time:.4g} s, {k.cost:.4g} {cur} "
                f"({k.config.price:.4g} {cur}/h){extra}"
            )
        if self.candidates and all(k.status == "infeasible" for k in self.candidates):
            return f"no configuration can run the workload: {self.candidates[0].label}: {self.candidates[0].reason}"
        if self.deadline is not None:
            need = f" at least {self.confidence:.0%} of the time" if self.noise > 0 else ""
            return f"no configuration meets the deadline of {self.deadline:g} s{need}"
        if self.budget is not None:
            return f"no configuration fits the budget of {self.budget:g} {cur}"
        ends = (
            f"fastest {min(self.front, key=lambda k: k.time).label}, cheapest "
            f"{min(self.front, key=lambda k: k.cost).label}"
            if self.front
            else "no configuration ran"
        )
        return (
            f"no deadline or budget given: {len(self.front)} configuration(s) on the front of makespan and cost "
            f"({ends})"
        )

    def table(self, losers: int = 8) -> str:
        """The report: the answer, the front, the closest losers and what the search skipped."""
        cur, s = self.catalog.currency, self.stats
        lines = [
            f"workload: {self.workload}",
            f"catalog: {self.catalog.name} ({s['configurations']} configurations; simulated "
            f"{s['simulated']} ({s['simulations']} simulations), pruned {s['pruned']} on bounds, "
            f"{s['infeasible']} infeasible; {s['seconds']:.1f} s)",
            "",
            self.answer(),
            "",
        ]
        head = f"{'configuration':<34} {'scheduler':<14} {'makespan s':>11} {'cost ' + cur:>10} {'held back by':<20}"
        noisy = any(k.samples for k in self.front)
        if noisy:
            head += f" {'p90 s':>9} {'P(miss)':>8}"
        lines += ["Pareto front (cheapest first):", head]
        for k in self.front:
            row = (
                f"{k.label:<34} {k.scheduler:<14} {k.time:>11.4g} {k.cost:>10.4g} "
                f"{_BOUND.get(k.bound, k.bound) + _share(k):<20}"
            )
            if noisy:
                import numpy as np

                p90 = f"{np.percentile(k.samples, 90):>9.4g}" if k.samples else f"{'-':>9}"
                pm = f"{k.p_miss:>8.0%}" if k.p_miss is not None else f"{'-':>8}"
                row += f" {p90} {pm}"
            lines.append(row)
        lost = sorted((k for k in self.candidates if k.status == "simulated"), key=lambda k: k.cost)[:losers]
        if lost:
            lines += ["", "Simulated, not on the front (cheapest first):"]
            lines += [
                f"{k.label:<34} {k.time:>9.4g} s {k.cost:>9.4g} {cur}  {_BOUND.get(k.bound, k.bound)}"
                f"{_share(k)}; {k.reason}"
                for k in lost
            ]
        skipped = Counter(_reason_kind(k.reason) for k in self.candidates if k.status in ("pruned", "infeasible"))
        if skipped:
            lines += ["", "Not simulated: " + "; ".join(f"{n} {why}" for why, n in skipped.most_common())]
        return "\n".join(lines)

    def plot(self, path) -> None:
        """The simulated configurations' makespan against cost, the front joined, the answer ringed.

        Parameters
        ----------
        path : str or path
        """
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        with matplotlib.rc_context({"text.parse_math": False}):  # names are text, never formulas
            self._draw(path, plt)

    def _draw(self, path, plt) -> None:
        from ..formats import save_figure

        sim = [k for k in self.candidates if k.status in ("front", "simulated")]
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.scatter([k.cost for k in sim], [k.time for k in sim], s=12, c="0.6", label="simulated")
        ax.plot([k.cost for k in self.front], [k.time for k in self.front], "o-", c="C0", ms=5, label="Pareto front")
        for k in self.front[:12]:
            ax.annotate(k.label, (k.cost, k.time), fontsize=6, xytext=(3, 3), textcoords="offset points")
        if self.choice is not None:
            ax.scatter(
                [self.choice.cost], [self.choice.time], s=160, facecolors="none", edgecolors="C3", label="answer"
            )
        if self.deadline is not None:
            ax.axhline(self.deadline, ls="--", c="C3", lw=0.8, label="deadline")
        if self.budget is not None:
            ax.axvline(self.budget, ls="--", c="C2", lw=0.8, label="budget")
        if sim:  # log axes where the values span more than a factor of 10
            for vals, setter in (([k.cost for k in sim], ax.set_xscale), ([k.time for k in sim], ax.set_yscale)):
                if min(vals) > 0 and max(vals) / min(vals) > 10:
                    setter("log")
        else:
            ax.text(
                0.5,
                0.5,
                "no configuration simulated:\n" + self.answer(),
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=8,
            )
        ax.set_xlabel(f"cost ({self.catalog.currency})")
        ax.set_ylabel("makespan (s)")
        ax.set_title(self.workload, fontsize=9)
        if sim:
            ax.legend(fontsize=7)
        fig.tight_layout()
        save_figure(fig, path, plt.close)


def _share(k) -> str:
    if k.bound == "network" and k.network_share is not None:
        return f" (+{k.network_share:.0%})"
    if k.bound in ("compute", "idle") and k.utilisation is not None:
        return f" ({k.utilisation:.0%} busy)"
    return ""


def _reason_kind(reason: str) -> str:
    if reason.startswith("cannot meet"):
        return "cannot meet the deadline"
    if reason.startswith("cannot fit"):
        return "cannot fit the budget"
    if reason.startswith("costs at least"):
        return "cannot be cheaper than the answer"
    if reason.startswith("takes at least"):
        return "cannot be faster than the answer"
    if " is as fast and as cheap" in reason:
        return "dominated on their bounds"
    return "infeasible (a task's cores or memory)"
