"""Interference among co-located jobs: how much slower a job runs beside others on its nodes.

Jobs that share a node share its memory bandwidth, its PCIe and network links and, on a CPU
cluster, its cores: each runs slower than alone. Gandiva (Xiao et al., OSDI'18, Section 3.3)
measured this per pair of models and packs the pairs that slow each other least; the later DL-cluster
papers use such a table. :class:`Interference` is that table: ``speed[(a, b)]``, the share of its
solo speed a job of model ``a`` keeps beside one of model ``b`` (1: no slowdown), read by the job
simulator (:func:`~taskflow.jobs.simulate_jobs`) whenever the jobs sharing a node change. Beside
several jobs the slowdowns add: each neighbour adds the extra time its pair costs (a share ``s``
costs ``1/s - 1`` of the job's solo time). A table is measured by running the pairs together and
alone (:func:`taskflow.training.jobprofile.profile_jobs` on real training jobs), or written by hand.

Where the jobs contend for a machine's cores (a CPU cluster, or every worker on one machine), the
table can say instead how many cores each model's job keeps busy alone (``cores``) and how many the
machine gives them (``capacity``): jobs whose cores add up past the capacity share it in
proportion, ``speed = min(1, capacity / total) / min(1, capacity / own)``. Three jobs then slow
each other as much as the cores they share, where the pairs' slowdowns, measured on a machine
that two jobs already fill, cannot say what a third adds. A job whose model has no cores, or beside
one, is slowed by the pairs.

The format (JSON): ``{"format": "taskflow-interference/1", "default": 1.0, "pairs": [{"model":
"resnet8", "beside": "small-cnn", "speed": 0.8}, ...]}``, with ``"machine": true`` where the
slowdowns hold among every running job of the cluster, not only those sharing a node (a table
measured on one machine whose workers every job shares: the testbed's racks), and optionally
``"capacity": 1.7, "cores": [{"model": "resnet8", "cores": 1.2}, ...]``.
"""

from __future__ import annotations

import math

from ..errors import FormatError

__all__ = ["Interference", "FORMAT"]

FORMAT = "taskflow-interference/1"


class Interference:
    """Pairwise slowdowns of co-located jobs, by model name.

    Parameters
    ----------
    pairs : dict
        ``(model, beside) -> speed``: the share of its solo speed a job of ``model`` keeps beside
        one job of ``beside``, in (0, 1]. A job without a model is ``None``.
    default : float
        The share for a pair the table does not name (default 1: no slowdown).
    machine : bool
        The slowdowns hold among every running job of the cluster (one machine), not only among
        those sharing a node.
    cores : dict, optional
        ``model -> cores`` a job of ``model`` keeps busy alone (positive).
    capacity : float, optional
        The cores the node (with ``machine``: the machine) gives the jobs; with ``cores``.

    Raises
    ------
    FormatError
        A share out of (0, 1], or not a number (the pair named); cores or a capacity not positive,
        or one without the other.
    """

    def __init__(
        self,
        pairs: dict | None = None,
        default: float = 1.0,
        machine: bool = False,
        cores: dict | None = None,
        capacity: float | None = None,
    ):
        self.machine = bool(machine)
        self.pairs = {}
        for key, v in dict(pairs or {}).items():
            self.pairs[tuple(key)] = _share(f"pair {tuple(key)!r}", v)
        self.default = _share("default", default)
        self.cores = {m: _positive(f"cores of {m!r}", v) for m, v in dict(cores or {}).items()}
        self.capacity = None if capacity is None else _positive("capacity", capacity)
        if bool(self.cores) != (self.capacity is not None):
            raise FormatError(
                "interference: 'cores' and 'capacity' go together (the cores each model's job keeps "
                "busy, and the cores the machine gives them)"
            )

    def speed(self, job, beside) -> float:
        """The share of its solo speed ``job`` keeps beside the jobs ``beside`` (the others
        sharing a node with it): the share of the cores they add up to where every one's model has
        its cores, else ``1 / (1 + sum of 1/share - 1 over the pairs)``.

        Parameters
        ----------
        job : Job
        beside : iterable of Job
        """
        beside = list(beside)
        if self.cores and all(j.model in self.cores for j in (job, *beside)):
            own = self.cores[job.model]
            total = own + sum(self.cores[j.model] for j in beside)
            return min(1.0, self.capacity / total) / min(1.0, self.capacity / own)
        extra = 0.0
        for other in beside:
            extra += 1.0 / self.pairs.get((job.model, other.model), self.default) - 1.0
        return 1.0 / (1.0 + extra)

    def to_dict(self) -> dict:
        """The JSON format (see the module docstring)."""
        cores = {
            "capacity": self.capacity,
            "cores": [{"model": m, "cores": v} for m, v in sorted(self.cores.items(), key=str)],
        }
        return {
            "format": FORMAT,
            "default": self.default,
            **({"machine": True} if self.machine else {}),
            "pairs": [{"model": a, "beside": b, "speed": v} for (a, b), v in sorted(self.pairs.items(), key=str)],
            **(cores if self.cores else {}),
        }

    @classmethod
    def from_dict(cls, doc: dict, where: str = "interference") -> "Interference":
        """Read the JSON format.

        Parameters
        ----------
        doc : dict
        where : str
            Named in errors (a file's path).

        Raises
        ------
        FormatError
            Another format, a pair without its fields, a share out of (0, 1], cores not positive.
        """
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise FormatError(f"{where}: not a {FORMAT} document (its 'format' must be {FORMAT!r})")
        pairs = {}
        for k, p in enumerate(doc.get("pairs") or []):
            if not isinstance(p, dict) or "speed" not in p or "model" not in p or "beside" not in p:
                raise FormatError(f"{where}: pairs[{k}] needs 'model', 'beside' and 'speed'")
            pairs[(p["model"], p["beside"])] = _share(f"{where}: pairs[{k}].speed", p["speed"])
        machine = doc.get("machine", False)
        if not isinstance(machine, bool):
            raise FormatError(f"{where}: 'machine' must be true or false, got {machine!r}")
        cores = {}
        for k, c in enumerate(doc.get("cores") or []):
            if not isinstance(c, dict) or "model" not in c or "cores" not in c:
                raise FormatError(f"{where}: cores[{k}] needs 'model' and 'cores'")
            cores[c["model"]] = _positive(f"{where}: cores[{k}].cores", c["cores"])
        capacity = doc.get("capacity")
        if bool(cores) != (capacity is not None):
            raise FormatError(f"{where}: 'cores' and 'capacity' go together")
        return cls(
            pairs,
            _share(f"{where}: default", doc.get("default", 1.0)),
            machine,
            cores,
            None if capacity is None else _positive(f"{where}: capacity", capacity),
        )


def _share(what: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1:
        raise FormatError(f"{what}: a speed share must be a number in (0, 1], got {v!r}")
    return float(v)


def _positive(what: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise FormatError(f"{what}: a number of cores must be a positive number, got {v!r}")
    return float(v)
