"""What losing a worker does to a simulation: its running and queued tasks, its in-flight transfers
and the outputs held only there are lost; finished outputs still needed are recomputed
(transitively); a static plan is re-planned on the survivors with the same scheduler for the
unfinished part, a dynamic scheduler is told (``on_worker_lost``) and asked again (``on_ready``).

A part of :class:`~.engine.Simulator` (a mixin over its state); every change of a task's state goes
through the engine's transitions.
"""

from __future__ import annotations

from .states import DONE, QUEUED, WAITING

__all__ = ["Recovery"]


class Recovery:
    """Worker loss in a :class:`~.engine.Simulator`."""

    def _fail(self, w):
        """Worker ``w`` is lost: see the module docstring."""
        now = self.now
        self.alive[w] = False
        self.dead[w] = True
        affected = []
        for i in list(self.running[w]):
            self._transition(i, WAITING)
            affected.append(i)
        self.free[w] = 0
        for i in self.queued_on(w):
            self._transition(i, WAITING)
            affected.append(i)
        self.queued_est[w] = 0.0
        self._forget_ready(w)
        self.seq[w] = []
        for key, f in list(self.flows.items()):
            if f.src == w or f.dst == w:
                self.net.abort(f, now)
                self.aborted_flows += 1
                del self.flows[key]
        self._lose_copies(w)
        # outputs lost for good and still needed are recomputed (transitively)
        status = self.status
        stack = [i for i in range(self.n) if status[i] in (WAITING, QUEUED)]
        seen = set(stack)
        while stack:
            j = stack.pop()
            for k in range(self.pred_ptr[j], self.pred_ptr[j + 1]):
                p = self.pred_idx[k]
                if status[p] == DONE and self.source_of(p, self.pred_size[k]) < 0:
                    self._transition(p, WAITING)
                    affected.append(p)
                    if p not in seen:
                        seen.add(p)
                        stack.append(p)
        # inputs not computed any more, counted afresh for every task yet to start
        for j in range(self.n):
            if status[j] in (WAITING, QUEUED):
                self.npred[j] = sum(
                    1 for k in range(self.pred_ptr[j], self.pred_ptr[j + 1]) if status[self.pred_idx[k]] != DONE
                )
        if not self.dynamic:
            self._replan()
            return
        # tasks still queued on survivors may have waited on aborted transfers: ask again
        for i in range(self.n):
            if status[i] == QUEUED:
                a = self.assigned[i]
                self.token[i] += 1
                self.missing[i] = 0
                self._fetch_inputs(i, a)
                if self.npred[i] == 0 and self.missing[i] == 0:
                    self._runnable(i, a)
        ready = [i for i in range(self.n) if status[i] == WAITING and self.npred[i] == 0]
        self._call(self.scheduler.on_worker_lost, w, sorted(set(affected)), self.view)
        self._call(self.scheduler.on_ready, ready, self.view)
        for x in self.view.alive_workers():
            self._try_start(x)

    def _replan(self):
        unfinished = [self.a.ids[i] for i in range(self.n) if self.status[i] in (WAITING, QUEUED)]
        for i in range(self.n):
            if self.status[i] == QUEUED:
                self._transition(i, WAITING)
        if not unfinished:
            return
        alive_ids = [self.wids[w] for w in range(self.W) if self.alive[w]]
        survivors = self.cluster.subset(alive_ids)
        # exact costs on lost workers no longer apply
        sub = self.est_graph.subgraph(unfinished).restrict_costs(alive_ids)
        plan = self.scheduler.schedule(sub, survivors)
        self.plan_gen += 1
        self._later(self._apply_plan, (self.plan_gen, plan))
