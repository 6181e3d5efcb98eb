"""What clients ask the scheduler plugin (:class:`ClientMessages`, a part of
:class:`~.plugin.TaskflowPlugin`): ``taskflow_use`` (a scheduler for a client's graphs),
``taskflow_register`` (a run and its plan), ``taskflow_status``, ``taskflow_dask_state`` and
``taskflow_forget``. Each answers a dict; a request it cannot serve is ``{"status": "error",
"error": one line}``, never an exception in Dask's scheduler."""

from __future__ import annotations

import time

from ...errors import TaskflowError
from ...scheduling import get_scheduler, require_runnable
from ..messages import cluster_from_message, graph_from_payload, plan_message
from .patching import restrict
from .reading import dask_state
from .runs import FAILED, PLANNED, GraphRun

__all__ = ["ClientMessages"]


class ClientMessages:
    """The plugin's answers to its clients (the handlers :meth:`.plugin.TaskflowPlugin.start`
    installs). It reads and writes the plugin's ``runs``, ``key_run`` and ``schedulers`` and
    moves a run through the plugin's ``move``."""

    def handle_use(self, client: str, scheduler: str | None = None, options: dict | None = None) -> dict:
        """Place every graph ``client`` submits from now on with ``scheduler`` (None: stop).

        Parameters
        ----------
        client : str
            The client's id.
        scheduler : str, optional
        options : dict, optional
            Options for the scheduler's constructor.
        """
        if scheduler is None:
            self.schedulers.pop(client, None)
            return {"status": "OK"}
        try:
            sch = get_scheduler(scheduler, **(options or {}))
            if sch.kind == "static":
                require_runnable(sch, "dask")
        except TaskflowError as e:
            return {"status": "error", "error": str(e)}
        if sch.kind != "static":
            return {
                "status": "error",
                "error": f"{sch.name!r} is a dynamic scheduler; inside Dask a static scheduler "
                f"places tasks (for Dask's own scheduling, use none)",
            }
        self.schedulers[client] = (scheduler, dict(options or {}))
        return {"status": "OK"}

    def handle_register(
        self,
        run: str,
        graph: dict,
        scheduler: str,
        options: dict | None = None,
        cluster: str | None = None,
        client: str | None = None,
        estimate: bool = False,
        prefix_costs: dict | None = None,
        hold: bool = False,
    ) -> dict:
        """Register a run and plan it on the live workers.

        Parameters
        ----------
        run : str
            A unique id.
        graph : dict
            A :func:`graph_payload`.
        scheduler : str
        options : dict, optional
        cluster : str, optional
            The declared cluster, a :func:`.messages.cluster_message` (a cluster file's text): speeds
            by worker name, network, overhead; the live workers' cores and addresses win.
        client : str, optional
        estimate : bool
            The graph's costs are placeholders: estimate them from what Dask knows (and
            ``prefix_costs``) when its tasks arrive, and plan then.
        prefix_costs : dict, optional
            Task-name prefix -> seconds, for ``estimate``.
        hold : bool
            Plan on the declared cluster's workers only (:attr:`GraphRun.only`).

        Returns
        -------
        dict
            ``status``; the plan (``keys``, ``workers`` by name, ``start``, ``finish``) and the live
            workers (``workers_info``: name, address, cores, speed), or ``error``.
        """
        try:
            sch = get_scheduler(scheduler, **(options or {}))
            if sch.kind == "static":
                require_runnable(sch, "dask")
            g = graph_from_payload(graph)
            declared = cluster_from_message(cluster) if cluster is not None else None
        except TaskflowError as e:
            return {"status": "error", "error": str(e)}
        if sch.kind != "static":
            return {
                "status": "error",
                "error": f"{sch.name!r} is a dynamic scheduler; the plugin places with static ones",
            }
        r = GraphRun(run, g, sch, declared, client, owned=False, estimate=estimate, prefix_costs=prefix_costs)
        if hold and declared is not None:
            r.only = frozenset(str(w) for w in declared.ids)
        self.runs[run] = r
        for k in g.ids:
            self.key_run[k] = run
        plan = None if estimate else self.move(r, PLANNED)
        if r.state == FAILED:
            return {"status": "error", "error": r.error}
        return {"status": "OK", **plan_message(plan), "workers_info": self._workers_message(r)}

    def handle_status(self, run: str | None = None, plan: bool = False, client: str | None = None) -> dict:
        """What happened to a run (and to the cluster).

        Parameters
        ----------
        run : str, optional
        plan : bool
            Include the run's latest plan (key -> worker name).
        client : str, optional
            Without ``run``: the latest run made for this client's graphs under ``taskflow.use``.
        """
        out = {
            "workers": len(self.dask_scheduler.workers),
            "lost_all_since": self.lost_all_since,
            "grace": self.grace,
            "now": time.time(),
            "learned_speeds": self.learned_speeds(),
        }
        r = self.runs.get(run)
        if r is None and run is None and client is not None:
            r = next((x for x in reversed(self.runs.values()) if x.owned and x.client == client), None)
        if r is not None:
            out.update(
                run=r.id,
                replans=r.replans,
                error=r.error,
                predicted=r.predicted,
                state=r.state.value,
                decision=r.adapt.decision,
                path=list(r.adapt.path),
                redecisions=r.adapt.redecisions,
                phase=r.adapt.phase.value,
                makespan=r.ended - r.started if r.ended and r.started else None,
            )
            if plan:
                out["plan"] = [[k, w] for k, w in r.plan.items()]
        return out

    def handle_dask_state(self, prefixes=()) -> dict:
        """What Dask's own scheduling will decide a graph submitted now from (see
        :func:`dask_state`).

        Parameters
        ----------
        prefixes : list of str
            The task prefixes whose duration estimates are wanted.
        """
        return dask_state(self.dask_scheduler, prefixes)

    def handle_forget(self, run: str) -> dict:
        """Drop a finished run.

        Parameters
        ----------
        run : str
        """
        r = self.runs.pop(run, None)
        if r is not None:
            self._release(r)
        return {"status": "OK"}

    def _release(self, r: GraphRun) -> None:
        """Its keys are free again (a graph sending them is a new run) and keep no restriction."""
        tasks = self.dask_scheduler.tasks if self.dask_scheduler is not None else {}
        for k in r.graph.ids:
            if self.key_run.get(k) == r.id:
                del self.key_run[k]
                ts = tasks.get(k)
                if ts is not None and (k in r.plan or r.adapt.held):
                    # Dask keeps a task's state while the client's release is on its way: a
                    # graph sent again with the same keys (one collection computed twice)
                    # would inherit the old plan's restrictions
                    restrict(ts, None)
