"""How decisions reach the simulator: a static plan (and a re-plan) applied in plan order, a dynamic
scheduler's answers to events, both after ``scheduler_interval`` and ``decision_latency``.

A part of :class:`~.engine.Simulator` (a mixin over its state); every change of a task's state goes
through the engine's transitions.
"""

from __future__ import annotations

from ..errors import SchedulerError
from .events import EventKind
from .states import DONE, QUEUED, RUNNING

__all__ = ["Decisions"]

_APPLY, _WAKE = EventKind.APPLY, EventKind.WAKE


class Decisions:
    """Plans and scheduler calls of a :class:`~.engine.Simulator`."""

    def first_plan(self):
        """The plan the run starts from: the one given (checked to place every task once), else
        the scheduler's; counted as a plan made (``plan_gen``)."""
        if self.plan is not None:
            plan = self.plan
            missing = set(self.a.ids) - set(plan.tasks)
            if missing or len(plan.tasks) != self.n:
                raise SchedulerError(
                    f"plan does not place every task exactly once (e.g. {sorted(missing, key=str)[:1]})"
                )
        else:
            plan = self.scheduler.schedule(self.est_graph, self.cluster, cost_model=self.cost_model)
        self.plan_gen += 1
        return plan

    def _initial_plan(self):
        plan = self.first_plan()
        self._later(self._apply_plan, (self.plan_gen, plan))

    def _apply_plan(self, item):
        gen, plan = item
        if gen != self.plan_gen:
            return  # overtaken by a re-plan (a worker was lost before this plan took effect)
        index, cidx = self.a.index, self.cluster.index
        rows = sorted(range(len(plan)), key=lambda k: (plan.start[k], plan.finish[k], index[plan.tasks[k]]))
        for w in range(self.W):
            self.seq[w] = []
            self.ptr[w] = 0
        touched = set()
        for pos, k in enumerate(rows):
            i = index[plan.tasks[k]]
            self.plan_rank[i] = pos
            if self.status[i] in (RUNNING, DONE):
                continue
            w = cidx[plan.workers[k]]
            if not self.alive[w]:
                raise RuntimeError(
                    f"plan puts task {plan.tasks[k]!r} on lost worker {plan.workers[k]!r} (internal error)"
                )
            self.seq[w].append(i)
            self._transition(i, QUEUED, w)
            touched.add(w)
        for w in touched:
            self._try_start(w)

    def _call(self, hook, *args):
        if self.interval <= 0 and self.latency_decision <= 0:
            self._apply(hook(*args))
            return
        self.pending_calls.append((hook, args))
        if self.wake_at is None:
            self.wake_at = max(self.now, self.last_call + self.interval)
            self._push(self.wake_at, _WAKE, None)

    def _later(self, fn, arg):
        """Run ``fn(arg)`` (a decision) after the decision latency."""
        if self.latency_decision <= 0:
            fn(arg)
        else:
            self._push(self.now + self.latency_decision, _APPLY, (fn, arg))

    def _wake(self):
        self.wake_at = None
        self.last_call = self.now
        calls, self.pending_calls = self.pending_calls, []
        decisions = []
        for hook, args in calls:
            decisions.extend(hook(*args) or [])
        self._later(self._apply, decisions)

    def _apply(self, payload):
        if isinstance(payload, tuple) and len(payload) == 2 and callable(payload[0]):
            payload[0](payload[1])
            return
        if not payload:
            return
        bi = [i for i, _ in payload]
        bw = [w for _, w in payload]
        touched = self.touched
        nt = self._apply_k(
            self.C, None, self.G, self.T, self.K, self.F, self.net, None, None, None, None, bi, bw, len(bi), touched,
            self.now, self.fetch_ready,
        )  # fmt: skip
        for w in touched[:nt]:
            if self.dynamic and self.alive[w] and not self.running[w] and not self.nqueued[w]:
                self._call(self.scheduler.on_idle, w, self.view)
