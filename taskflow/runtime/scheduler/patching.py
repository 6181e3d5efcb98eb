"""What the scheduler plugin changes in Dask's own scheduler: a task held to workers
(:func:`restrict`), a queued task moved (:func:`move_queued`), the order in which planned tasks are
sent to a worker (:func:`send_planned_in_order`), replicas a planned consumer will read kept
(:func:`keep_planned_replicas`), an output sent ahead to its consumer's worker (:func:`prefetch`).
What it reads of Dask's scheduler is :mod:`.reading`."""

from __future__ import annotations

import logging

__all__ = [
    "SHUFFLE_PINNED",
    "restrict",
    "move_queued",
    "plan_first",
    "PlannedKeys",
    "send_planned_in_order",
    "keep_planned_replicas",
    "prefetch",
]

logger = logging.getLogger("taskflow.runtime")


#: the annotation under which Dask's shuffle extension keeps a peer-to-peer output task's own
#: restrictions while it pins the task to its partition's worker
SHUFFLE_PINNED = "shuffle_original_restrictions"


def restrict(ts, workers, loose: bool = False) -> None:
    """Restrict Dask task ``ts`` to the addresses ``workers`` (None: lift its restrictions). A
    peer-to-peer output task that Dask's shuffle extension pinned to its partition's worker stays
    pinned (run elsewhere, it would ask to be pinned again, which the extension refuses once it
    pinned it): the restrictions given replace the ones the extension gives back when the shuffle
    ends.

    Parameters
    ----------
    ts : distributed.scheduler.TaskState
    workers : iterable of str, or None
    loose : bool
        Whether Dask may run it elsewhere when none of ``workers`` can.
    """
    wanted = set(workers) if workers is not None else None
    if ts.annotations and SHUFFLE_PINNED in ts.annotations:
        ts.annotations[SHUFFLE_PINNED] = wanted
        return
    ts.worker_restrictions = wanted
    ts.loose_restrictions = loose if wanted else False


def move_queued(dask_scheduler, ts, workers) -> bool:
    """Ask the worker ``ts`` is queued on (sent to it, not yet started) to hand it over to the
    least loaded of ``workers`` (WorkerStates), through Dask's work-stealing extension, whose
    protocol the worker answers: a task already running stays where it is. False where nothing
    was asked: ``ts`` not processing, already on one of ``workers``, none of them valid for it
    (its restrictions, as Dask's stealing reads them), an actor, long-running, a peer-to-peer output
    Dask's shuffle extension pinned, or stealing off.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    ts : distributed.scheduler.TaskState
    workers : iterable of distributed.scheduler.WorkerState
    """
    stealing = dask_scheduler.extensions.get("stealing")
    victim = ts.processing_on
    if (
        stealing is None
        or ts.state != "processing"
        or victim is None
        or ts.actor
        or ts in victim.long_running
        or (ts.annotations and SHUFFLE_PINNED in ts.annotations)
    ):
        return False
    valid = dask_scheduler.valid_workers(ts)
    live = [ws for ws in workers if ws.address in dask_scheduler.workers and (valid is None or ws in valid)]
    if victim in live or not live:
        return False
    thief = min(live, key=lambda ws: ((len(ws.processing) + 1) / max(1, ws.nthreads), ws.address))
    return stealing.move_task_request(ts, victim, thief).startswith("steal-")


def plan_first(msgs: list, planned) -> list:
    """``msgs`` with the ``compute-task`` messages of planned tasks in priority order, each in one
    of their places; every other message keeps its place.

    Parameters
    ----------
    msgs : list of dict
        One worker's messages of one scheduler event; changed in place and returned.
    planned : container
        The keys of planned tasks.
    """
    where = [i for i, m in enumerate(msgs) if m.get("op") == "compute-task" and m.get("key") in planned]
    if len(where) > 1:
        ordered = sorted((msgs[i] for i in where), key=lambda m: m["priority"])
        for i, m in zip(where, ordered):
            msgs[i] = m
    return msgs


class PlannedKeys:
    """The keys a run's latest plan places, as ``plugin``'s runs say now (``key in``): not the
    keys of a run left to Dask's own scheduling, which Dask sends as it sends them.

    Parameters
    ----------
    plugin : TaskflowPlugin
    """

    __slots__ = ("runs", "key_run")

    def __init__(self, plugin):
        self.runs, self.key_run = plugin.runs, plugin.key_run

    def __contains__(self, key) -> bool:
        r = self.runs.get(self.key_run.get(key))
        return r is not None and key in r.plan


def send_planned_in_order(dask_scheduler, plugin) -> None:
    """A worker given several ready tasks at once starts the first to arrive, and only then
    follows priorities; Dask sends a graph's first ready tasks in the order of the priorities the
    graph arrived with, before the plugin set the plan's (on a graph of chains, each worker got its
    roots in the reverse of the plan's order). The scheduler's ``send_all`` (every message a
    scheduler event sends) now sends each worker its planned tasks in priority order
    (:func:`plan_first`), whichever way the graph was submitted (``run``, ``compute``, ``use``).
    Tasks of Dask's own scheduling are sent as Dask sends them.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    plugin : TaskflowPlugin
        Its runs say which tasks are planned, and where.
    """
    # Dask's own send_all, kept once: a plugin registered again wraps it, not the earlier wrapper
    send_all = dask_scheduler.__dict__.get("_taskflow_send_all") or dask_scheduler.send_all
    dask_scheduler._taskflow_send_all = send_all

    def send_planned_in_order(client_msgs, worker_msgs):
        if any(r.plan for r in list(plugin.runs.values())):  # (a run left to Dask has no plan)
            planned = PlannedKeys(plugin)
            for msgs in worker_msgs.values():
                try:
                    plan_first(msgs, planned)
                except Exception:  # noqa: BLE001 - an order we cannot make never stops Dask's messages
                    logger.exception("taskflow: could not order the tasks sent to a worker")
        return send_all(client_msgs, worker_msgs)

    dask_scheduler.send_all = send_planned_in_order


def keep_planned_replicas(dask_scheduler, plugin) -> None:
    """Dask's active memory manager drops replicas of an output beyond one per consumer not yet
    placed, from whichever worker it likes, every 2 s: it would drop an output sent ahead to the
    worker of its planned consumer (the plugin's prefetch), which then fetches it
    again. Its ``ReduceReplicas`` policy is swapped for one that drops the same number of replicas
    but never from the worker a waiting consumer is planned on.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    plugin : TaskflowPlugin
        Its runs say which tasks are planned, and where.
    """
    try:
        from distributed.active_memory_manager import ReduceReplicas, Suggestion
    except ImportError:  # a distributed without the memory manager: nothing drops replicas
        return
    amm = getattr(dask_scheduler, "extensions", {}).get("amm")
    if amm is None:
        return

    class KeepPlannedReplicas(ReduceReplicas):
        """``ReduceReplicas``, never dropping a replica a planned waiting consumer will read."""

        def run(self):
            for s in super().run():
                keep = plugin.planned_holders(s.ts)
                if not keep:
                    yield s
                    continue
                candidates = {ws for ws in s.ts.who_has or () if ws.address not in keep}
                if candidates:
                    yield Suggestion("drop", s.ts, candidates)

    for policy in list(amm.policies):
        if type(policy) is ReduceReplicas:
            amm.policies.discard(policy)
            amm.add_policy(KeepPlannedReplicas())


def prefetch(dask_scheduler, key, planned_address, min_bytes: int, stimulus_id: str) -> None:
    """``key`` is in memory: send it now (if it is at least ``min_bytes``) to each other worker a
    plan puts a dependent of it on, where that dependent still waits for other inputs. Dask alone
    moves an input only once its consumer is ready and placed; a plan knows the consumer's worker
    in advance, so the transfer overlaps the inputs still being computed, as the plan's cost model
    assumes.

    Parameters
    ----------
    dask_scheduler : distributed.Scheduler
    key : str
    planned_address : callable
        Key -> the address of the worker a plan puts it on, or None.
    min_bytes : int
    stimulus_id : str
    """
    ts = dask_scheduler.tasks.get(key)
    if ts is None or not ts.who_has or ts.nbytes < min_bytes:
        return  # a small output moves as fast with its consumer's other inputs, in one message
    holders = {ws.address for ws in ts.who_has}
    targets = set()
    for dts in ts.dependents:
        if dts.state != "waiting" or not dts.waiting_on:
            continue  # ready now (Dask sends it with its inputs' whereabouts) or not planned here
        addr = planned_address(dts.key)
        if addr is not None and addr not in holders and addr in dask_scheduler.stream_comms:
            targets.add(addr)
    for addr in targets:
        dask_scheduler.request_acquire_replicas(addr, [key], stimulus_id=stimulus_id)
