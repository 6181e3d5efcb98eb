"""Interference among co-located jobs: how much slower a job runs beside others on its nodes.

Jobs that share a node share its memory bandwidth, its PCIe and network links and, on a CPU
cluster, its cores: each runs slower than alone. Gandiva (Xiao et al., OSDI'18, Section 3.3)
measured this per pair of models and packs the pairs that slow each other least; the later DL-cluster
papers use such a table. :class:`Interference` is that table: ``speed[(a, b)]``, the share of its
solo speed a job of model ``a`` keeps beside one of model ``b`` (1: no slowdown), read by the job
simulator (:func:`~taskflow.jobs.simulate_jobs`) whenever the jobs sharing a node change. Beside
several jobs the slowdowns add: each neighbour adds the extra time its pair costs (a share ``s``
costs ``1/s - 1`` of the job's solo time), as jobs sharing a node's cores do. A table is measured
by running the pairs together and alone (:func:`taskflow.training.jobprofile.profile_jobs` on real
training jobs), or written by hand.

The format (JSON): ``{"format": "taskflow-interference/1", "default": 1.0, "pairs": [{"model":
"resnet8", "beside": "small-cnn", "speed": 0.8}, ...]}``, with ``"machine": true`` where the
slowdowns hold among every running job of the cluster, not only those sharing a node (a table
measured on one machine whose workers every job shares: the testbed's racks).
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

    Raises
    ------
    FormatError
        A share out of (0, 1], or not a number (the pair named).
    """

    def __init__(self, pairs: dict | None = None, default: float = 1.0, machine: bool = False):
        self.machine = bool(machine)
        self.pairs = {}
        for key, v in dict(pairs or {}).items():
            self.pairs[tuple(key)] = _share(f"pair {tuple(key)!r}", v)
        self.default = _share("default", default)

    def speed(self, job, beside) -> float:
        """The share of its solo speed ``job`` keeps beside the jobs ``beside`` (the others
        sharing a node with it): ``1 / (1 + sum of 1/share - 1 over the pairs)``.

        Parameters
        ----------
        job : Job
        beside : iterable of Job
        """
        extra = 0.0
        for other in beside:
            extra += 1.0 / self.pairs.get((job.model, other.model), self.default) - 1.0
        return 1.0 / (1.0 + extra)

    def to_dict(self) -> dict:
        """The JSON format (see the module docstring)."""
        return {"format": FORMAT, "default": self.default, **({"machine": True} if self.machine else {}),
                "pairs": [{"model": a, "beside": b, "speed": v} for (a, b), v in sorted(self.pairs.items(), key=str)]}

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
            Another format, a pair without its fields, a share out of (0, 1].
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
        return cls(pairs, _share(f"{where}: default", doc.get("default", 1.0)), machine)


def _share(what: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v <= 1:
        raise FormatError(f"{what}: a speed share must be a number in (0, 1], got {v!r}")
    return float(v)
