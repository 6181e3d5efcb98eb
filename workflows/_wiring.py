"""Data-parallel training wired as one graph, written once for both payloads: the costs-only model
(:mod:`._training_graph`, what :func:`workflows.training.training_graph` builds) and a real
PyTorch job (:mod:`._torch_graph`, what :meth:`workflows.torch_training.TorchTraining.graph`
builds).

:class:`Wiring` holds the variants' shape: per iteration, every rank computes its gradient; local
SGD steps each rank on its own and synchronises every ``sync_every`` iterations by averaging
parameters, the other modes send gradients every iteration; what is sent is cut into buckets (each
compressed where asked); each bucket is allreduced (ring, tree or parameter server,
:func:`workflows.allreduce.bucket_allreduce`, its spread phase prioritised by layer order where
asked), or gathered whole by every rank where the payload sums sparse buckets itself; a barrier
where asked; then every rank applies what it received. A payload makes the tasks: its
:meth:`~Wiring.compute`, :meth:`~Wiring.local_step`, :meth:`~Wiring.bucket`, :meth:`~Wiring.apply`
(and :meth:`~Wiring.gather`), what comes before the first iteration and after the last.
"""

from __future__ import annotations

from taskflow.graph import TaskGraph

from .allreduce import bucket_allreduce
from .mlp import nothing

__all__ = ["Wiring"]


class Wiring:
    """The iterations of one data-parallel training graph (see the module docstring).

    A payload sets, before :meth:`graph`: ``b`` (its :class:`~workflows._builder.GraphBuilder`),
    ``first`` and ``count`` (its iterations' first number and how many), ``workers``, ``mode`` (``sync``, ``local`` or ``stale``), ``sync_every``, ``n_buckets``,
    ``sent`` (each bucket's bytes on the wire), ``prio`` (each bucket's spread priority, or None),
    ``allreduce``, ``reduce_flops`` (numbers a core adds per second), ``barrier`` and ``gathers``
    (every rank gathers every rank's whole bucket instead of an allreduce).
    """

    barrier = False
    gathers = False

    def graph(self) -> TaskGraph:
        """What comes first, every iteration, what comes last: the graph."""
        self.begin()
        self.build_iterations()
        self.end()
        return self.b.graph()

    def build_iterations(self) -> None:
        """Every iteration in turn (a payload may build some and copy them)."""
        for k in range(self.count):
            self.iteration(self.first + k, k)

    def iteration(self, t: int, k: int = 0) -> None:
        """Iteration ``t`` (the ``k``-th of this graph): every rank's compute and buckets, then
        (where it synchronises) the reduction and every rank's update."""
        sync = self.mode != "local" or (t + 1) % self.sync_every == 0
        send: dict = {}
        for r in range(self.workers):
            grads = self.compute(t, k, r)
            if self.mode == "local":
                self.local_step(t, r, grads)
                if not sync:
                    continue
                grads = None  # the models are averaged: their parameters are sent
            elif grads is None:  # reduced inside the ranks' next steps
                continue
            for j in range(self.n_buckets):
                send[r, j] = self.bucket(t, r, j, grads)
        self.computed(t, k)
        if sync and send:
            received = self.reduce(t, send)
            for r in range(self.workers):
                self.apply(t, k, r, received, send)

    def reduce(self, t: int, send: dict) -> dict:
        """Every bucket's reduction in iteration ``t`` (and the barrier): ``(rank, bucket) ->
        [(task, chunk or None)]``, the pieces whose sum (in chunk order) is the reduced bucket."""
        received, mids, spread = {}, [], {}
        for j in range(self.n_buckets):
            if self.gathers:
                for r in range(self.workers):
                    received[r, j] = [(self.gather(t, r, j, send), None)]
                continue
            got, mid, spread[j], _ = bucket_allreduce(
                self.b, t, self.allreduce, self.workers, send, j, self.sent[j], self.reduce_flops, self.prio[j]
            )
            mids += mid
            for r, pieces in got.items():
                received[r, j] = pieces
        if self.barrier:  # every spread phase waits until every bucket is reduced
            gate = self.b.task(
                f"it{t}.barrier",
                0.0,
                0.0,
                {"category": "barrier", "iteration": t},
                deps=[(h, 0.0) for h in mids],
                fn=nothing,
                args=(),
            )
            for j in range(self.n_buckets):
                for h in spread[j]:
                    self.b.edge(gate, h, size=0.0)
        return received

    # ------------------------------------------------------------------ what a payload makes
    def begin(self) -> None:
        """The tasks before the first iteration (each rank's initial state)."""

    def end(self) -> None:
        """The tasks after the last iteration."""

    def compute(self, t: int, k: int, r: int):  # pragma: no cover - a payload's
        """Rank ``r``'s loading and step in iteration ``t``: its gradient (what :meth:`bucket`
        takes), or None where it is reduced inside the ranks' next steps."""
        raise NotImplementedError

    def computed(self, t: int, k: int) -> None:
        """Every rank has computed in iteration ``t``."""

    def local_step(self, t: int, r: int, grads) -> None:  # pragma: no cover - a payload's
        """Local SGD: rank ``r`` steps its model with its own gradient."""
        raise NotImplementedError

    def bucket(self, t: int, r: int, j: int, grads):  # pragma: no cover - a payload's
        """Rank ``r``'s bucket ``j`` of ``grads`` (None: of its parameters, to average), compressed
        where asked: the task its reduction sends."""
        raise NotImplementedError

    def gather(self, t: int, r: int, j: int, send: dict):  # pragma: no cover - a payload's
        """Rank ``r``'s sum of every rank's bucket ``j`` (with :attr:`gathers`)."""
        raise NotImplementedError

    def apply(self, t: int, k: int, r: int, received: dict, send: dict) -> None:  # pragma: no cover
        """Rank ``r`` applies what it received (``received[r, j]``) to its model."""
        raise NotImplementedError
