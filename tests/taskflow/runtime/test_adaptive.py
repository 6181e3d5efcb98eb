"""The ``adaptive`` scheduler: HEFT's plan alone; inside Dask, a plan only where it is predicted to
win (the guard), decided again as the run's durations are learned; the default of taskflow.use."""

from __future__ import annotations

import time

import dask
import dask.array as da
import pytest
from distributed import Client, LocalCluster

import taskflow
from taskflow import Cluster, TaskflowError, TaskGraph, Worker, get_scheduler
from taskflow.runtime.predict import DASK, PLAN, SUBSET, choose, predict_dask, uneven
from taskflow.scheduling import AdaptiveOptions
from taskflow.runtime.adaptive_state import AdaptiveState, Phase
from taskflow.runtime.outcomes import Outcomes
from taskflow.runtime.outcomes import behind
from workflows.scientific import random_layered
from tests.conftest import NO_HTTP
from tests.taskflow.runtime import dask_states


def opts(margin, limit, spread=1.5):
    """The adaptive scheduler's options with this margin, task limit and speed spread."""
    return AdaptiveOptions(margin=margin, limit=limit, spread=spread)


def outcomes_of(book: dict) -> Outcomes:
    """An :class:`Outcomes` record from a dict: choice -> makespans, and ``predicted``, ``curves``, ``lost``."""
    book = dict(book)
    extra = {k: book.pop(k) for k in ("predicted", "curves", "lost") if k in book}
    return Outcomes(measured=book, **extra)


def test_alone_it_plans_exactly_as_heft(heft_graph, heft_cluster):
    a = get_scheduler("adaptive").schedule(heft_graph, heft_cluster)
    h = get_scheduler("heft").schedule(heft_graph, heft_cluster)
    assert a.makespan == h.makespan == 80 and a.scheduler == "adaptive"
    assert list(a.workers) == list(h.workers)


@pytest.mark.parametrize(
    "options, field",
    [
        ({"margin": 1.0}, "margin"),
        ({"margin": -0.1}, "margin"),
        ({"drift": "x"}, "drift"),
        ({"replans": -1}, "replans"),
        ({"spread": 0.5}, "spread"),
        ({"limit": 2.5}, "limit"),
        ({"ccr": 0}, "ccr"),
        ({"ccr": float("nan")}, "ccr"),
        ({"ccr": float("inf")}, "ccr"),
    ],
)
def test_bad_options_are_named(options, field):
    with pytest.raises(TaskflowError, match=f"adaptive: {field} must be"):
        get_scheduler("adaptive", **options)


def test_its_options_travel_with_it():
    p = get_scheduler("adaptive", margin=0.3, interval=0.05)
    again = get_scheduler(p.name, **p.options)
    assert (again.adaptive.margin, again.adaptive.interval, again.adaptive.spread) == (0.3, 0.05, 2.0)
    assert again.adaptive == p.adaptive and get_scheduler("heft").adaptive is None


def test_a_plan_can_win_only_on_an_uneven_cluster():
    assert not uneven(Cluster.homogeneous(2), 1.5)
    assert not uneven(Cluster.heterogeneous([1.0, 1.3]), 1.5)  # learned speeds are that noisy
    assert uneven(Cluster.heterogeneous([1.0, 4.0]), 1.5)
    shaped = Cluster([Worker("a"), Worker("b")], bandwidth=1e9, bandwidths={"a": {"b": 1e6}})
    assert uneven(shaped, 1.5)
    racks = Cluster([Worker("a"), Worker("b")], racks={"a": 0, "b": 1}, uplink=1e7)
    assert uneven(racks, 1.5)


def plan_or_dask(graph, cluster, plan, state, margin, limit):
    """The guard's choice between the plan and Dask's own: (keep, predicted, Dask's own predicted)."""
    choice, predicted, dask_own, _ = choose(graph, cluster, plan, state, opts(margin, limit), choices=(PLAN, DASK))
    return choice == PLAN, predicted, dask_own


def test_the_guard_leaves_workers_alike_to_dask_and_keeps_a_plan_that_wins_by_far():
    g = random_layered(60, ccr=0.05, seed=3)
    alike = Cluster.homogeneous(2)
    plan = get_scheduler("adaptive").schedule(g, alike)
    keep, predicted, dask_own = plan_or_dask(g, alike, plan, None, 0.15, 3000)
    assert not keep and predicted == dask_own == pytest.approx(predict_dask(g, alike, None, draws=1))
    uneven8 = Cluster.heterogeneous([1.0, 8.0])
    plan = get_scheduler("adaptive").schedule(g, uneven8)
    keep, predicted, dask_own = plan_or_dask(g, uneven8, plan, None, 0.15, 3000)
    # Dask's rules spread work by task counts and let stealing mend it: the plan wins by far (by
    # 40-48% over Python's hash seeds, which order Dask's sets)
    assert keep and predicted <= 0.85 * dask_own
    assert not plan_or_dask(g, uneven8, plan, None, 0.9, 3000)[0]  # unless it must win by 90%
    big, _, none = plan_or_dask(g, uneven8, plan, None, 0.15, 10)  # above the limit: no simulation
    assert big and none is None


def _runs(dask_scheduler):
    p = dask_scheduler.plugins["taskflow"]
    return [
        {
            "decision": r.adapt.decision,
            "planned": len(r.plan),
            "redecisions": r.adapt.redecisions,
            "predicted": r.predicted,
            "restricted": sum(
                1 for k in r.graph.ids if k in dask_scheduler.tasks and dask_scheduler.tasks[k].worker_restrictions
            ),
        }
        for r in p.runs.values()
    ]


def test_use_by_default_leaves_workers_alike_to_dask(client):
    x = da.random.RandomState(0).random((400, 400), chunks=100)
    expected = float(dask.compute((x @ x.T).sum(), scheduler="sync")[0])
    taskflow.use(client)  # the default scheduler: adaptive
    try:
        got = float((x @ x.T).sum().compute())
    finally:
        taskflow.use(client, None)
    assert got == pytest.approx(expected, rel=1e-12)
    last = client.run_on_scheduler(_runs)[-1]
    # left to Dask at once: nothing planned, nothing simulated inside Dask's scheduler
    assert last["decision"] == "dask" and last["planned"] == 0 and last["predicted"] is None


def test_runs_of_the_same_work_left_to_dask_are_predicted_by_the_earlier_ones(client):
    """Workers alike: nothing is simulated; a run of work done before is predicted to take as long
    as its earlier runs left to Dask did (their median), and the plugin's own record of the
    run's makespan says how far off that was. (``replans=0``: no run changes its mind on the way,
    so every run after the first is kept, whatever the machine's load.)"""
    from taskflow.runtime.client.session import call

    parts = [dask.delayed(_slow, pure=True)(i, dask_key_name=f"predicted-part-{i}") for i in range(6)]
    total = dask.delayed(sum, pure=True)(parts, dask_key_name="predicted-total-0")
    statuses = []
    taskflow.use(client, "adaptive", replans=0)
    try:
        for _ in range(4):
            client.compute(total, sync=True)
            statuses.append(call(client, "taskflow_status", client=client.id))
    finally:
        taskflow.use(client, None)
    assert [s["decision"] for s in statuses] == ["dask"] * 4
    assert statuses[0].get("predicted") is None and statuses[1].get("predicted") is None  # nothing earlier kept
    # the first run of its kind learns and is not kept; the second is: the third is predicted by it
    assert statuses[2]["predicted"] == pytest.approx(statuses[1]["makespan"], rel=0.02, abs=0.005)
    kept = sorted([statuses[1]["makespan"], statuses[2]["makespan"]])
    assert statuses[3]["predicted"] == pytest.approx(sum(kept) / 2, rel=0.02, abs=0.005)


def _slow(i, *deps):
    time.sleep(0.05)
    return i + sum(deps)


def test_a_plan_for_declared_uneven_speeds_is_given_up_once_the_run_shows_them_alike():
    """Declared speeds 1 and 4 on two identical workers, the scheduler held to plans (a first run is
    otherwise never planned): the plan gives the 'slow' worker 12 of the 60 tasks and sends each
    worker its share at once. The durations measured within the run show the workers alike, and
    the run is left to Dask: the tasks still waiting on the 'fast' worker are Dask's stealing's to
    move, and the 'slow' worker, idle, takes some of them."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        names = sorted(str(w["name"]) for w in c.scheduler_info()["workers"].values())
        declared = Cluster([Worker(names[0], 1.0), Worker(names[1], 4.0)])
        parts = [dask.delayed(_slow, pure=True)(i, dask_key_name=f"slow-{i}") for i in range(60)]
        total = dask.delayed(sum, pure=True)(parts, dask_key_name="total-0")
        scheduler = get_scheduler("adaptive", interval=0.05, drift=0.3, margin=0.0, choices=["plan"])
        got, rep = taskflow.compute(total, scheduler=scheduler, client=c, cluster=declared, timeout=120, report=True)
    assert got == (sum(range(60)),)
    assert rep.replans >= 1, rep.notes  # re-decided within the run
    on_slow = sum(1 for r in rep.trace.runs if r.worker == names[0] and r.task.startswith("slow-"))
    assert any(n.startswith("adaptive: left to Dask's own scheduling") for n in rep.notes), rep.notes
    # the plan alone gives it 12 of the 60 (those sent to the other worker were never moved)
    assert on_slow >= 15, (on_slow, rep.notes)


def _slower_on_worker_0(i):
    """30 ms of sleep, three times as long on the worker named 0."""
    from distributed import get_worker

    time.sleep(0.03 * (3 if str(get_worker().name) == "0" else 1))
    return i


def test_a_plan_made_again_moves_the_tasks_waiting_on_a_worker_it_learned_is_slow():
    """Worker 0 declared four times faster than worker 1 and in truth three times slower; the
    scheduler held to plans. The first plan sends worker 0 most of the 60 independent tasks at once;
    the durations measured within the run show it slow, and the plan made again moves the tasks
    still waiting there to worker 1 (without the move, worker 1 would run only its first share)."""
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        declared = Cluster([Worker("0", 4.0), Worker("1", 1.0)])
        parts = [dask.delayed(_slower_on_worker_0, pure=True)(i, dask_key_name=f"bag-{i}") for i in range(60)]
        total = dask.delayed(sum, pure=True)(parts, dask_key_name="bagsum-0")
        scheduler = get_scheduler("adaptive", interval=0.05, drift=0.3, margin=0.0, choices=["plan"])
        got, rep = taskflow.compute(total, scheduler=scheduler, client=c, cluster=declared, timeout=120, report=True)
    assert got == (sum(range(60)),)
    assert rep.replans >= 1 and any("placed by its plan" in n for n in rep.notes), (rep.replans, rep.notes)
    on_fast = sum(1 for r in rep.trace.runs if r.worker == "1" and r.task.startswith("bag-"))
    assert on_fast >= 24, (on_fast, rep.notes)  # the first plan alone gives it 12


def test_a_run_s_queued_keys_leave_out_what_each_worker_runs_first_or_said_it_was_running():
    """On a worker of two threads, the two tasks of highest priority may be running, and so may one
    its last heartbeat named: the rest of the run's processing keys wait there."""
    from taskflow.runtime.scheduler.runs import GraphRun

    g = TaskGraph()
    for k in "abcdefg":
        g.add_task(k, cost=1.0)
    busy, idle = dask_states.worker("tcp://busy:1", nthreads=2), dask_states.worker("tcp://idle:1")
    tasks = {k: dask_states.task(k, "processing", priority=(p,), processing_on=busy) for p, k in enumerate("abcde")}
    tasks["f"] = dask_states.task("f", "waiting", priority=(9,))
    tasks["g"] = dask_states.task("g", "processing", priority=(0,), processing_on=idle)
    dask_states.task("x", "processing", priority=(-1,), processing_on=busy)  # another graph's
    busy.executing = {tasks["e"]: 0.1}
    r = GraphRun("r1", g, get_scheduler("adaptive"), None, "c1", owned=True)
    assert r.queued(tasks) == ["b", "c", "d"]


def test_a_task_is_asked_over_only_where_dask_s_stealing_could_move_it(monkeypatch):
    """An actor, a long-running task, a peer-to-peer output the shuffle extension pinned, and one
    restricted away from every worker offered are not asked; a plain queued one is, to the least
    loaded worker offered; with stealing off nothing is. (Dask's own scheduler and states; its
    stealing's request to the worker is the one thing recorded instead of sent.)"""
    from taskflow.runtime.scheduler.patching import SHUFFLE_PINNED, move_queued

    victim, busy, free = (dask_states.worker(f"tcp://{a}:1") for a in ("victim", "busy", "free"))
    sched = dask_states.scheduler([victim, busy, free])
    for k in ("q1", "q2"):
        dask_states.task(k, "processing", processing_on=busy)
    asked = []
    monkeypatch.setattr(
        sched.extensions["stealing"],
        "move_task_request",
        lambda ts, v, thief: asked.append((ts.key, v.address, thief.address)) or "steal-1",
    )

    def task(key, **fields):
        return dask_states.task(key, fields.pop("state", "processing"), processing_on=victim, **fields)

    offered = [busy, free]
    assert move_queued(sched, task("plain"), offered) is True
    assert move_queued(sched, task("actor", actor=True), offered) is False
    long_running = task("long")
    victim.long_running.add(long_running)
    assert move_queued(sched, long_running, offered) is False
    assert move_queued(sched, task("pinned", annotations={SHUFFLE_PINNED: None}), offered) is False
    assert move_queued(sched, task("elsewhere", worker_restrictions={victim.address}), offered) is False
    assert move_queued(sched, task("only-busy", worker_restrictions={busy.address}), offered) is True
    waiting = dask_states.task("waiting", "waiting")
    assert move_queued(sched, waiting, offered) is False
    assert asked == [("plain", "tcp://victim:1", "tcp://free:1"), ("only-busy", "tcp://victim:1", "tcp://busy:1")]
    del sched.extensions["stealing"]
    assert move_queued(sched, task("no-stealing"), offered) is False


def test_a_hold_asks_the_tasks_waiting_outside_it_over_and_leaving_to_dask_lifts_theirs(monkeypatch):
    """A run planned on three workers, its tasks sent to them: held to worker "f", the tasks
    waiting on the others are restricted to it and asked over (the finished one is not touched);
    then left to Dask, every unfinished one, sent or not, loses its restrictions. (Dask's own
    scheduler and states; its stealing's requests and its transitions are recorded instead of
    sent to workers.)"""
    from types import SimpleNamespace

    from taskflow.runtime.scheduler.adaptation import Adaptation
    from taskflow.runtime.scheduler.runs import GraphRun

    ws = {a: dask_states.worker(f"tcp://{a}:1", name=a) for a in ("f", "s1", "s2")}
    at = {a: w.address for a, w in ws.items()}
    sched = dask_states.scheduler(ws.values())
    asked, moved = [], []
    monkeypatch.setattr(
        sched.extensions["stealing"],
        "move_task_request",
        lambda ts, victim, thief: asked.append((ts.key, thief.address)) or "steal-1",
    )
    monkeypatch.setattr(sched, "transitions", lambda recs, stimulus_id: moved.append(dict(recs)))
    g = TaskGraph()
    for k in ("done", "on-s1", "on-s2", "on-f", "later"):
        g.add_task(k, cost=1.0)
    where = {"on-s1": "s1", "on-s2": "s2", "on-f": "f"}
    tasks = sched.tasks
    for k in g.ids:
        state = "memory" if k == "done" else "processing" if k in where else "waiting"
        tasks[k] = dask_states.task(
            k,
            state,
            processing_on=ws.get(where.get(k)),
            worker_restrictions={at[where.get(k, "s1")]},
            priority=(0,),
        )
    # the plugin as the adaptive scheduler sees it: its narrow view (PluginView), over Dask's scheduler
    view = SimpleNamespace(
        dask_scheduler=sched, learned_speeds=lambda: {}, unfinished=lambda r: [k for k in g.ids if k != "done"]
    )
    plugin = Adaptation(view)
    r = GraphRun("r1", g, get_scheduler("adaptive"), None, "c1", owned=True)
    r.plan = {k: where.get(k, "s1") for k in g.ids}
    plugin._hold(r, ["later"], [at["f"]])
    assert sorted(asked) == [("on-s1", at["f"]), ("on-s2", at["f"])]
    assert {k: tasks[k].worker_restrictions for k in g.ids if k != "done"} == {
        k: {at["f"]} for k in ("on-s1", "on-s2", "on-f", "later")
    }
    assert tasks["done"].worker_restrictions == {at["s1"]}
    plugin._leave_to_dask(r, ["later"], None)
    assert all(tasks[k].worker_restrictions is None for k in g.ids if k != "done")
    assert len(asked) == 2  # each worker's one task counts as started: nothing to spread
    assert tasks["done"].worker_restrictions == {at["s1"]}


def _queue_on(victim: str, thief: str, n: int, dask_scheduler=None) -> dict:
    """Once ``n`` tasks are processing, restrict those on ``victim`` to ``thief`` and ask each over."""
    from taskflow.runtime.scheduler.patching import move_queued, restrict

    ws = dask_scheduler.workers
    mine = [ts for ts in dask_scheduler.tasks.values() if ts.state == "processing" and ts.key.startswith("queued-")]
    if len(mine) < n:
        return {"processing": len(mine)}
    on_victim = sorted((ts for ts in mine if ts.processing_on.address == victim), key=lambda ts: ts.priority)
    kept = on_victim[-1]  # the last to run, still restricted to the victim: not asked over
    refused = move_queued(dask_scheduler, kept, [ws[thief]])
    asked = 0
    for ts in on_victim[:-1]:
        restrict(ts, (thief,))
        asked += move_queued(dask_scheduler, ts, [ws[thief]])
    again = move_queued(dask_scheduler, on_victim[0], [ws[victim]])  # to where it is
    return {
        "processing": len(mine),
        "on_victim": len(on_victim),
        "asked": asked,
        "again": again,
        "refused": refused,
        "kept": kept.key,
    }


def test_tasks_sent_to_a_worker_and_not_started_are_moved_to_another_and_a_running_one_stays(client):
    """Twenty tasks sent to one worker (restricted to it), one thread: one runs, the others wait in
    its queue. Asked over to the other worker (Dask's stealing protocol), those waiting run
    there; the one running finishes where it is; one whose restrictions still say the first worker
    is not asked."""
    a, b = sorted(client.scheduler_info()["workers"])
    # each task a fifth of a second: twenty queue up behind the running one even where the machine
    # is loaded and the submissions trickle in (at 20 ms each, a busy machine ran them as they came)
    futs = [client.submit(_where, i, 0.2, key=f"queued-{i}", workers=[a], pure=False) for i in range(20)]
    deadline = time.monotonic() + 30
    while True:
        state = client.run_on_scheduler(_queue_on, victim=a, thief=b, n=15) if time.monotonic() < deadline else None
        assert state is not None, "the tasks never all reached the first worker"
        if "asked" in state:
            break
        time.sleep(0.01)
    ran = [next(iter(f.result(timeout=60))) for f in futs]
    assert state["on_victim"] == state["processing"] >= 15, state
    assert state["again"] is False and state["refused"] is False, state
    assert state["asked"] >= state["on_victim"] - 2, state  # the running one may be asked: the worker refuses
    # the one kept, the one running, and any started before the worker read its request, stay
    assert ran.count(b) >= state["on_victim"] - 4 and ran.count(a) >= 2, (ran, state)
    assert next(iter(futs[int(state["kept"].split("-")[1])].result())) == a


def _where(i, *deps):
    from distributed import get_worker

    seconds = deps[0] if deps and isinstance(deps[0], float) else 0.02
    time.sleep(seconds)
    return {get_worker().address, *(a for d in deps if not isinstance(d, float) for a in d)}


def _weighed(dask_scheduler):
    return [
        {
            "decision": r.adapt.decision,
            "guarded": r.adapt.guarded,
            "speeds": dict(r.adapt.speeds_used),
            "predictions": dict(r.adapt.predictions),
        }
        for r in dask_scheduler.plugins["taskflow"].runs.values()
    ]


def _setenv(name, value):
    import os

    os.environ[name] = value


def test_a_first_run_is_held_off_a_worker_whose_cgroup_allows_it_a_quarter_core():
    """Before any task of a graph has run, a worker's speed is the share of a core its cgroup's
    CPU limit allows (here the environment variable a worker reads where its cgroup files are
    hidden: nothing else tells the workers apart): the first run of work never seen is weighed
    as it arrives with the slow worker at a quarter of the other's speed, Dask's own against Dask's
    own held to the fast worker. Without the prior the workers look alike and the run is left to
    Dask at once, nothing weighed. (``replans=0``: what the run learns on the way does not change
    its mind.)"""
    from taskflow.runtime.worker.worker_plugin import CPU_LIMIT_ENV, cpu_limit
    from taskflow.runtime.scheduler.reading import cpu_shares

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        if any(v is not None for v in c.run(cpu_limit).values()):
            pytest.skip("this machine's cgroups limit the workers' CPU already")
        info = c.scheduler_info()["workers"]
        fast, slow = sorted(info)
        c.run(_setenv, CPU_LIMIT_ENV, "0.25", workers=[slow])
        prev = dask.delayed(_where, pure=True)(0, dask_key_name="quota-root")
        for r in range(4):
            pair = [dask.delayed(_where, pure=True)(i, prev, dask_key_name=f"quota-step-{r}-{i}") for i in range(2)]
            prev = dask.delayed(_where, pure=True)(r, *pair, dask_key_name=f"quota-join-{r}")
        taskflow.use(c, "adaptive", replans=0)  # the decision made as the graph arrives, kept
        try:
            shares = c.run_on_scheduler(cpu_shares)
            (where,) = c.compute([prev], sync=True)
            last = c.run_on_scheduler(_weighed)[-1]
        finally:
            taskflow.use(c, None)
    assert shares == {str(info[fast]["name"]): 1.0, str(info[slow]["name"]): 0.25}
    # a first run of the work predicts no plan: it takes none, and its predictions are not kept
    assert last["guarded"] == 1 and last["speeds"] == shares and set(last["predictions"]) == {"dask", "subset"}
    if last["decision"] == "subset":  # held to the fast worker: every task ran there
        assert where == {fast}


def test_runs_of_the_same_work_try_each_choice_once_then_keep_the_shorter():
    """The choice among plan, Dask's own and Dask's own on the fastest workers, on runs of one
    kind of work (the decision core alone: no Dask, no clock)."""
    from taskflow.runtime.decide import AdaptiveCore, RunRecord

    core = AdaptiveCore()
    scheduler = get_scheduler("adaptive")

    def run(sig, decision, secs, guarded=1):
        """A run of the work ``sig`` that took ``decision`` and finished its last key at ``secs``."""
        state = AdaptiveState()
        state.signature, state.decision, state.guarded = sig, decision, guarded
        return RunRecord((), scheduler, adapt=state, finished_at=[secs] if secs else [])

    def keep(r):
        core.record(r, max(r.finished_at, default=0.0))

    sig = (frozenset({"a"}), 5)
    keep(run(sig, "plan", 1.0))  # the first run of its kind learns: not kept
    assert core.outcomes[sig] == Outcomes()
    r = run(sig, None, 0)
    assert (
        core.measured_choice(r) is None and r.adapt.phase is Phase.FIXED
    )  # the guard decides, once, and is not re-decided
    keep(run(sig, "plan", 2.0))
    r = run(sig, None, 0)
    assert core.measured_choice(r) == ("dask", None)  # nothing predicted: each other choice, once
    assert r.adapt.fallback == "plan" and r.adapt.watch == pytest.approx(
        1.25 * 2.0, abs=0.01
    )  # given up at 1.25x the best so far
    keep(run(sig, "dask", 1.5))
    keep(run(sig, "dask", 9.0, guarded=2))  # changed its mind on the way: not kept
    keep(run(sig, "dask", 1.6, guarded=0))  # left to Dask at once, never guarded: kept
    # two choices only (workers alike: no subset): the shorter of the two
    choice, predicted = core.measured_choice(run(sig, None, 0), ("plan", "dask"))
    assert choice == "dask" and predicted == pytest.approx(1.55, abs=0.05)
    assert core.measured_choice(run(sig, None, 0)) == ("subset", None)  # with a slow worker: tried once
    keep(run(sig, "subset", 1.2))
    r = run(sig, None, 0)
    choice, predicted = core.measured_choice(r)
    assert choice == "subset" and predicted == pytest.approx(1.2, abs=0.05) and not r.adapt.watch
    for _ in range(3):
        keep(run(sig, "plan", 1.0))
    choice, predicted = core.measured_choice(run(sig, None, 0))
    assert choice == "plan" and predicted == pytest.approx(1.0, abs=0.05)  # median of 2.0, 1.0, 1.0, 1.0
    # another kind of work: the guard's predictions rule out a choice as far as they proved right
    other = (frozenset({"b"}), 5)
    keep(run(other, "plan", 1.0))  # learns
    guarded = run(other, "plan", 1.35)
    guarded.adapt.predictions = {"dask": 3.0, "plan": 1.0, "subset": 1.1}
    keep(guarded)
    # plan measured 35% over its prediction: the band is 1.7x the best predicted; subset in it, dask not
    assert core.measured_choice(run(other, None, 0)) == ("subset", 1.1)
    keep(run(other, "subset", 1.6))  # 45% over: the band grows to 1.9x, dask still out of it
    choice, predicted = core.measured_choice(run(other, None, 0))
    assert choice == "plan" and predicted == pytest.approx(1.35, abs=0.01)
    # plan measured 3x its prediction: the band is 5x the best predicted, dask (4.4x) in it; Dask's own,
    # measured once within 15% of the shortest, is measured once more before it is dismissed, and kept
    # unless beaten by 5%
    third = (frozenset({"c"}), 5)
    keep(run(third, "plan", 1.0))
    guarded = run(third, "plan", 1.35)
    guarded.adapt.predictions = {"dask": 2.0, "plan": 0.45}
    keep(guarded)
    assert core.measured_choice(run(third, None, 0)) == ("dask", 2.0)
    keep(run(third, "dask", 1.5))
    r = run(third, None, 0)
    choice, predicted = core.measured_choice(r)
    assert choice == "dask" and predicted == pytest.approx(1.5, abs=0.01)
    # measured again, watched like a try: a second run of a plan once took 2x its first unwatched
    assert r.adapt.fallback == "plan" and r.adapt.watch == pytest.approx(1.25 * 1.35, abs=0.01)
    keep(run(third, "dask", 1.3))
    choice, predicted = core.measured_choice(run(third, None, 0))
    assert choice == "dask" and predicted == pytest.approx(1.4, abs=0.01)  # plan's 1.35 is not 5% under it
    keep(run(third, "plan", 1.0))
    choice, predicted = core.measured_choice(run(third, None, 0))
    assert choice == "plan" and predicted == pytest.approx(1.175, abs=0.01)
    # runs of the same work that differ by 26% among themselves: a choice measured once 22% over
    # the shortest (outside 15%, inside that noise) is measured once more before it is dismissed
    noisy = (frozenset({"d"}), 5)
    keep(run(noisy, "dask", 1.0))  # learns
    for secs in (1.0, 1.3):
        keep(run(noisy, "dask", secs))
    keep(run(noisy, "subset", 1.4))  # 22% over Dask's own median of 1.15
    choice, predicted = core.measured_choice(run(noisy, None, 0), ("dask", "subset"))
    assert choice == "subset" and predicted == pytest.approx(1.4, abs=0.01)
    keep(run(noisy, "subset", 1.5))
    assert core.measured_choice(run(noisy, None, 0), ("dask", "subset"))[0] == "dask"
    steady = (frozenset({"e"}), 5)  # runs alike, but for one far off: the same 22% dismisses it at once
    keep(run(steady, "dask", 1.0))
    for secs in (1.15, 1.15, 2.3):
        keep(run(steady, "dask", secs))
    keep(run(steady, "subset", 1.4))
    assert core.measured_choice(run(steady, None, 0), ("dask", "subset"))[0] == "dask"


def _task(key, prefix, nbytes=-1, deps=()):
    """A Dask task of ``prefix`` whose output is ``nbytes`` (-1: not known yet) and inputs ``deps``."""
    return dask_states.task(key, "memory" if nbytes >= 0 else "waiting", prefix, nbytes=nbytes, dependencies=set(deps))


def test_a_prefix_whose_durations_follow_its_inputs_is_costed_per_task():
    """Cost priors from input sizes: four tasks of "work" took 0.1 s per input megabyte; a task of
    it with 8 MB of input is costed 8x one with 1 MB; a prefix whose inputs are alike, or whose
    durations do not follow them, keeps its mean."""
    from taskflow.runtime.scheduler.reading import input_scaling, observe
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()  # Dask's own guess for a prefix never run: 0.5 s
    for i, (mb, secs) in enumerate([(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)]):
        src = _task(f"s{i}", "load", nbytes=int(mb * 1e6))
        observe(p.durations, p.sizes, p.inputs, _task(f"w{i}", "work", 10, [src]), "w0", secs)
        same = _task(f"t{i}", "same", nbytes=int(1e6))  # "flat": durations that do not follow
        observe(p.durations, p.sizes, p.inputs, _task(f"f{i}", "flat", 10, [src]), "w0", 0.4 - secs + 0.1)
        observe(p.durations, p.sizes, p.inputs, _task(f"a{i}", "alike", 10, [same]), "w0", secs)
    a, b, mean = input_scaling(p.inputs["work"])
    assert (a, b, mean) == pytest.approx((0.0, 0.1, 0.25), abs=1e-9)
    assert input_scaling(p.inputs["flat"]) is None and input_scaling(p.inputs["alike"]) is None
    small, big = _task("small", "load", nbytes=int(1e6)), _task("big", "load", nbytes=int(8e6))
    new = [
        _task("x1", "work", deps=[small]),
        _task("x8", "work", deps=[big]),
        _task("f8", "flat", deps=[big]),
        _task("n8", "never", deps=[big]),
    ]
    g = p.graph_of(new)
    assert g.task("x1").cost == pytest.approx(0.1) and g.task("x8").cost == pytest.approx(0.8)
    assert g.task("f8").cost == pytest.approx(0.25)  # the prefix's mean
    # never run: what the graph's measured tasks cost on average (Dask's 0.5 s default is a placeholder)
    assert g.task("n8").cost == pytest.approx((0.1 + 0.8 + 0.25) / 3)
    assert p.graph_of([_task("n1", "never", deps=[big])]).task("n1").cost == 0.5  # nothing measured: Dask's
    assert p.graph_of(new, {"work": 2.0}).task("x8").cost == 2.0  # declared costs win


def _sort_copy(x):
    import numpy as np

    return np.sort(np.concatenate([x] * 4))[:10]


def test_a_run_learns_how_a_prefix_scales_with_its_input_bytes(client):
    """Tasks that sort inputs of 0.5 to 8 MB under taskflow.use: the plugin learns a line that
    rises with the input, and costs a 16 MB task of the prefix above an 0.5 MB one by several times.
    The evidence adds up over graphs: on a loaded machine a few milliseconds' sorts can be stretched
    past the big ones, and a second or third graph of the prefix brings the line (no more)."""
    import numpy as np

    from taskflow.runtime.scheduler.reading import input_factor, input_scaling

    def line(dask_scheduler):
        row = dask_scheduler.plugins["taskflow"].inputs.get("sortcopy")
        return row, None if row is None else input_scaling(row)

    for graph in range(3):
        arrays = [
            dask.delayed(np.random.RandomState(i).random)(int(mb * 1e6 / 8))
            for i, mb in enumerate([0.5, 1, 2, 4, 8] * 2)
        ]
        sorts = [dask.delayed(_sort_copy)(a, dask_key_name=f"sortcopy-{graph}-{i}") for i, a in enumerate(arrays)]
        taskflow.use(client)
        try:
            dask.compute(*sorts)
        finally:
            taskflow.use(client, None)
        row, found = client.run_on_scheduler(line)
        assert row is not None and row[0] == 10 * (graph + 1), row  # every task's (input, seconds) kept
        if found is not None:
            break
    assert found is not None, f"no line learned from {row}"
    assert input_factor(found, 16) / input_factor(found, 0.5) > 4  # 32x the bytes: several times the seconds


def test_the_guard_holds_dask_to_the_fast_workers_where_a_slow_one_only_lengthens_the_run():
    """Three workers, one eight times slower: Dask's own rules give the slow one its share of
    every wave; held to the two fast ones Dask's own scheduling is predicted far shorter, and is
    chosen where the plan is not a choice. On workers alike there is no subset."""
    from taskflow.runtime.predict import DASK, PLAN, SUBSET, choose, fastest_workers

    g = TaskGraph("wide")
    for i in range(24):
        g.add_task(f"t{i}", cost=1.0)
    uneven3 = Cluster.heterogeneous([8.0, 8.0, 1.0])
    assert fastest_workers(uneven3, 2.0) == [w.id for w in uneven3.workers[:2]]
    assert fastest_workers(Cluster.heterogeneous([1.0, 1.5]), 2.0) is None
    assert fastest_workers(Cluster.heterogeneous([1.0, 1.5]), 1.2) == [Cluster.heterogeneous([1.0, 1.5]).workers[1].id]
    plan = get_scheduler("adaptive").schedule(g, uneven3)
    choice, predicted, dask_own, held = choose(g, uneven3, plan, None, opts(0.15, 3000), choices=(DASK, SUBSET))
    assert choice == SUBSET and predicted <= 0.85 * dask_own and held == fastest_workers(uneven3, 2.0)
    assert predicted == pytest.approx(predict_dask(g, uneven3.subset(fastest_workers(uneven3, 2.0)), None, draws=1))
    # all three: the shortest predicted of those that beat Dask's own by the margin
    choice, predicted, _, _ = choose(g, uneven3, plan, None, opts(0.15, 3000))
    assert choice in (PLAN, SUBSET) and predicted <= 0.85 * dask_own
    alike = Cluster.homogeneous(3)
    assert choose(g, alike, plan, None, opts(0.15, 3000), choices=(DASK, SUBSET))[0] == DASK
    assert choose(g, alike, plan, None, opts(0.15, 3000), choices=(SUBSET,))[0] == DASK  # all are the fastest
    assert choose(g, uneven3, plan, None, opts(0.15, 3000), choices=(PLAN,))[0] == PLAN  # no margin to beat


@pytest.mark.parametrize("choices", [[], "plan", ["plan", "best"], [["plan"]]])
def test_bad_choices_are_named(choices):
    with pytest.raises(TaskflowError, match="adaptive: choices must be a non-empty list of plan, dask, subset"):
        get_scheduler("adaptive", choices=choices)


def test_the_guard_holds_dask_to_one_rack_where_the_link_between_racks_is_narrow_for_the_graph():
    """Two racks of two workers joined by a 1 MB/s uplink; eight 1-second sources of 10 MB each
    summed by one sink. Dask's own rules spread the sources over both racks, and the sink pulls
    half of them over the uplink (tens of seconds); held to one rack the run takes a few. The
    same graph with 10-byte outputs finds no link narrow: no subset."""
    from taskflow.runtime.predict import DASK, SUBSET, choose, narrow_pairs, narrow_rate, subsets

    def fan_in(size):
        g = TaskGraph("fan-in")
        for i in range(8):
            g.add_task(f"s{i}", cost=1.0, output_size=size)
        g.add_task("sink", cost=1.0, output_size=8)
        for i in range(8):
            g.add_edge(f"s{i}", "sink")
        return g

    racks = Cluster([Worker(w) for w in "abcd"], bandwidth=1e9, racks={"a": 0, "b": 0, "c": 1, "d": 1}, uplink=1e6)
    big = fan_in(10_000_000)
    assert narrow_rate(big) == pytest.approx(1e7)  # mean edge bytes over mean task seconds
    assert ("a", "c") in narrow_pairs(racks, narrow_rate(big)) and ("a", "b") not in narrow_pairs(
        racks, narrow_rate(big)
    )
    assert sorted(map(sorted, subsets(racks, 2.0, narrow_rate(big)))) == [["a", "b"], ["c", "d"]]
    plan = get_scheduler("adaptive").schedule(big, racks)
    choice, predicted, dask_own, held = choose(big, racks, plan, None, opts(0.15, 3000), choices=(DASK, SUBSET))
    assert choice == SUBSET and sorted(held) in (["a", "b"], ["c", "d"])
    assert predicted < 10 < dask_own  # a few seconds against tens
    small = fan_in(10)
    assert subsets(racks, 2.0, narrow_rate(small)) == []
    assert choose(small, racks, plan, None, opts(0.15, 3000), choices=(DASK, SUBSET))[0] == DASK


def test_mid_run_the_guard_holds_to_the_rack_where_the_inputs_already_are():
    """Mid-run, eight sinks each read one 10 MB output already computed on rack (a, b); the uplink
    moves 1 MB/s. Held to that rack the rest takes about a second; held to the other it pulls all
    80 MB over the uplink; Dask's own places each sink beside its input. Predicted with the inputs
    where they sit, the hold on the far rack is never taken."""
    from taskflow.runtime.predict import DASK, SUBSET, choose, predict_dask, with_inputs

    racks = Cluster(
        [Worker(w, address=f"tcp://{w}:1") for w in "abcd"],
        bandwidth=1e9,
        racks={"a": 0, "b": 0, "c": 1, "d": 1},
        uplink=1e6,
    )
    g = TaskGraph("rest")
    for i in range(8):
        g.add_task(f"sink-{i}", cost=0.2, output_size=8)
    inputs = {f"load-{i}": ("ab"[i % 2], 10_000_000, [f"sink-{i}"]) for i in range(8)}
    placed, pinned = with_inputs(g, inputs)
    assert len(placed) == 16 and pinned == {f"load-{i}": "ab"[i % 2] for i in range(8)}
    assert placed.arrays.cost.tolist()[8:] == [0.0] * 8 and placed.arrays.m == 8
    near = predict_dask(placed, racks, None, draws=1, pinned=pinned, within=["a", "b"])
    far = predict_dask(placed, racks, None, draws=1, pinned=pinned, within=["c", "d"])
    own = predict_dask(placed, racks, None, draws=1, pinned=pinned)
    assert near < 2.0 and own < 2.0 and far > 40.0  # the far rack pulls 80 MB over 1 MB/s
    assert predict_dask(g, racks.subset(["c", "d"]), None, draws=1) < 2.0  # blind to where the inputs are
    plan = get_scheduler("adaptive").schedule(g, racks)
    choice, _, _, held = choose(
        g,
        racks,
        plan,
        None,
        opts(0.15, 3000),
        choices=(DASK, SUBSET),
        candidates=[["c", "d"], ["a", "b"]],
        inputs=inputs,
    )
    assert choice == DASK or sorted(held) == ["a", "b"]
    assert choose(
        g, racks, plan, None, opts(0.15, 3000), choices=(SUBSET,), candidates=[["c", "d"], ["a", "b"]], inputs=inputs
    )[3] == ["a", "b"]


def test_a_link_once_narrow_for_a_kind_of_work_stays_narrow_for_it():
    """Runs of the same work learn their tasks' costs anew, and the machine's load moves them: a
    link narrow for one run's graph (12 MB/s against 20 MB/s) stays narrow for the next run's
    graph of the same work whose costs make it narrow only below 10 MB/s; another kind of work is
    weighed by its own graph."""
    from taskflow.runtime.decide import AdaptiveCore, RunRecord
    from taskflow.runtime.predict import narrow_pairs

    def pair(cost):
        g = TaskGraph("pair")
        g.add_task("a", cost=cost)
        g.add_task("b", cost=cost)
        g.add_edge("a", "b", size=2e6)  # narrow below 2e6 / (cost x ccr 10)
        return g

    links = Cluster([Worker("a"), Worker("b")], bandwidth=1e9, bandwidths={"a": {"b": 12e6}, "b": {"a": 12e6}})
    core = AdaptiveCore()
    scheduler = get_scheduler("adaptive")
    first = RunRecord(pair(0.01), scheduler)
    first.adapt.signature = (frozenset({"work"}), 1)
    assert core.narrow_rate(first, links, first.graph) == pytest.approx(20e6) and core.narrow_seen
    later = RunRecord(pair(0.02), scheduler)
    later.adapt.signature = first.adapt.signature
    assert core.narrow_rate(later, links, later.graph) == pytest.approx(20e6)
    assert narrow_pairs(links, core.narrow_rate(later, links, later.graph)) == {("a", "b"), ("b", "a")}
    other = RunRecord(pair(0.02), scheduler)
    other.adapt.signature = (frozenset({"else"}), 1)
    assert core.narrow_rate(other, links, other.graph) == pytest.approx(10e6)
    assert not narrow_pairs(links, core.narrow_rate(other, links, other.graph))


def test_mid_run_a_hold_in_place_is_weighed_though_no_link_looks_narrow_now(monkeypatch):
    """A run held to one worker decides again mid-run, when the costs learned since make no link
    narrow and the workers look alike: the hold in place is still among the subsets weighed (it
    gives way only to a choice predicted ``margin`` shorter), not dropped unweighed."""

    import taskflow.runtime.scheduler.adaptation as adaptation
    import taskflow.runtime.decide as decide
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.predict import SUBSET
    from taskflow.runtime.scheduler.runs import GraphRun

    g = TaskGraph("rest")
    for i in range(4):
        g.add_task(f"t-{i}", cost=1.0)
    cluster = Cluster([Worker("a", address="tcp://10.0.0.1:1"), Worker("b", address="tcp://10.0.0.2:1")], bandwidth=1e9)
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    seen = {}

    def choose(graph, c, plan, state, options, *, choices, candidates, **k):
        seen.update(choices=choices, candidates=candidates)
        return (SUBSET, 1.0, 1.2, candidates[0]) if candidates else ("dask", 1.0, 1.0, None)

    monkeypatch.setattr(decide, "choose", choose)
    monkeypatch.setattr(adaptation, "dask_state", lambda *a, **k: None)
    r = GraphRun("r1", g, get_scheduler("adaptive"), None, "c1", owned=True)
    r.adapt.guarded, r.adapt.decision, r.adapt.held = 1, SUBSET, ("tcp://10.0.0.1:1",)
    p.adaptation.guard(r, g.subgraph(["t-2", "t-3"]), cluster, None)
    assert SUBSET in seen["choices"] and seen["candidates"] == [["a"]] and r.adapt.decision == SUBSET
    r.adapt.held = ()
    r.adapt.decision = "dask"
    p.adaptation.guard(r, g.subgraph(["t-3"]), cluster, None)
    assert SUBSET not in seen["choices"]  # nothing held, nothing narrow: no subset to weigh


def test_a_rate_learned_one_way_counts_both_ways_until_the_other_is_measured(monkeypatch):
    """Only w1 has sent to w0 so far (9 MB/s): the live cluster takes w0 -> w1 at the same rate,
    not at the default, which made a hold onto w1 look free of the bytes it pulls from w0. A rate
    measured each way is kept as measured; one declared is not replaced by a mirrored one."""

    from taskflow.runtime.scheduler import plugin as plugin_module
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import GraphRun

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler(dask_states.worker(f"tcp://10.0.0.{i}:1", name=f"w{i}") for i in range(3))
    p.dask_scheduler.bandwidth = 1e8
    g = TaskGraph("g")
    g.add_task("t", cost=1.0)
    rates = {"w1": {"w0": 9e6}}
    monkeypatch.setattr(plugin_module, "received_rates", lambda dask_scheduler: rates)
    r = GraphRun("r1", g, get_scheduler("adaptive"), None, "c1", owned=True)
    c = p.live_cluster(r)
    assert c.bandwidths["w1"]["w0"] == c.bandwidths["w0"]["w1"] == 9e6
    assert "w2" not in c.bandwidths and "w2" not in c.bandwidths["w0"]
    rates["w0"] = {"w1": 20e6}
    c = p.live_cluster(r)
    assert c.bandwidths["w1"]["w0"] == 9e6 and c.bandwidths["w0"]["w1"] == 20e6
    declared = Cluster([Worker(f"w{i}") for i in range(3)], bandwidth=1e9, bandwidths={"w0": {"w2": 5e6}})
    rates.clear()
    rates["w2"] = {"w0": 9e6}
    c = p.live_cluster(GraphRun("r2", g, get_scheduler("adaptive"), declared, "c1", owned=True))
    assert c.bandwidths["w0"]["w2"] == 5e6 and c.bandwidths["w2"]["w0"] == 9e6


def _wide_plugin(n: int):
    """``n`` independent 1-second tasks, two workers (4x apart), the adaptive scheduler and a scheduler
    plugin without Dask (only its bookkeeping is exercised)."""

    from taskflow.runtime.scheduler.plugin import TaskflowPlugin

    g = TaskGraph("wide")
    for i in range(n):
        g.add_task(f"t{i}", cost=1.0)
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    return g, Cluster.heterogeneous([4.0, 1.0]), get_scheduler("adaptive"), p


def test_a_run_that_begins_left_to_dask_makes_its_first_choice_mid_run_by_the_measured_runs():
    """A graph with a peer-to-peer shuffle begins left to Dask and chooses once its tasks show
    uneven workers: that first choice, on the unfinished part, follows the earlier runs of the same
    work (here Dask's own, measured shortest) and is not re-decided; a second choice within a run
    is the guard's own, and such a run is not kept (it changed its mind)."""
    from taskflow.runtime.scheduler.runs import GraphRun

    g, cluster, scheduler, p = _wide_plugin(12)
    sig = (frozenset({"t"}), 3)
    p.adaptation.outcomes[sig] = outcomes_of({"plan": [2.0, 2.1], "dask": [1.0, 1.1], "subset": [1.9, 2.0]})
    r = GraphRun("r1", g, scheduler, None, "c1", owned=True)
    r.adapt.signature, r.started = sig, time.monotonic()
    part = g.subgraph([f"t{i}" for i in range(6, 12)])  # mid-run: half of it finished
    plan = scheduler.schedule(part, cluster)
    assert (
        p.adaptation.guard(r, part, cluster, plan) == pytest.approx(1.05)
        and r.adapt.decision == DASK
        and r.adapt.phase is Phase.FIXED
    )
    p.adaptation.record(r)
    assert p.adaptation.outcomes[sig].measured["dask"][-1] < 1.0  # kept: its one choice
    twice = GraphRun("r2", g, scheduler, None, "c1", owned=True)
    twice.started = time.monotonic() - 0.5
    twice.adapt.signature, twice.adapt.decision, twice.adapt.guarded = sig, PLAN, 2
    p.adaptation.record(twice)
    assert p.adaptation.outcomes[sig].measured["plan"] == [2.0, 2.1]  # chose twice: not kept


def test_a_choice_tried_for_the_first_time_is_given_up_once_it_runs_past_its_watch(monkeypatch):
    """A run trying Dask's own on the fastest workers, watched against a plan measured at 1 s:
    at 1.25 s it is given up, the unfinished part is planned, the tried choice is measured as
    long as it ran (it lost already), and the run, which changed its mind, is not kept."""

    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.predict import SUBSET
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun

    g = TaskGraph("wide")
    for i in range(12):
        g.add_task(f"t{i}", cost=1.0)
    cluster = Cluster.heterogeneous([4.0, 1.0])
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    monkeypatch.setattr(p, "live_cluster", lambda r: cluster)
    monkeypatch.setattr(p, "unfinished", lambda r: [f"t{i}" for i in range(6, 12)])
    sig = (frozenset({"t"}), 3)
    p.adaptation.outcomes[sig] = outcomes_of(
        {"plan": [1.0], "dask": [], "subset": [], "predicted": {"plan": 1.0, "subset": 0.9}}
    )
    r = GraphRun("r1", g, get_scheduler("adaptive"), cluster, "c1", owned=True)
    r.adapt.signature, r.started, r.state = sig, time.monotonic(), RUNNING
    assert p.adaptation._measured_choice(r, ("plan", "subset")) == (SUBSET, 0.9) and r.adapt.watch == pytest.approx(
        1.25
    )
    r.adapt.decision = SUBSET
    p.adaptation.learn_within(r, "t", 0.1, cluster.ids[0], "s1")  # within its watch: nothing changes
    assert r.adapt.decision == SUBSET and p.adaptation.outcomes[sig].measured["subset"] == []
    r.started -= 1.3
    p.adaptation.learn_within(r, "t", 0.1, cluster.ids[0], "s2")
    assert r.adapt.decision == PLAN and set(r.plan) == {f"t{i}" for i in range(6, 12)} and r.state == RUNNING
    assert p.adaptation.outcomes[sig].measured["subset"] == [pytest.approx(1.3, abs=0.05)]  # measured as long as it ran
    p.adaptation.record(r)
    assert (
        p.adaptation.outcomes[sig].measured["plan"] == [1.0] and len(p.adaptation.outcomes[sig].measured["subset"]) == 1
    )  # not kept

    def again():
        later = GraphRun("r2", g, get_scheduler("adaptive"), cluster, "c1", owned=True)
        later.adapt.signature = sig
        return later

    assert p.adaptation._measured_choice(again(), ("plan", "subset"))[0] == PLAN
    p.adaptation.outcomes[sig].measured["plan"].append(1.3)  # subset's 1.3 is now within 15% of the plan's median...
    assert (
        p.adaptation._measured_choice(again(), ("plan", "subset"))[0] == PLAN
    )  # ... but it lost a race: not tried again
    p.adaptation.outcomes[sig].lost.clear()
    assert (
        p.adaptation._measured_choice(again(), ("plan", "subset"))[0] == SUBSET
    )  # a close second measured once, were it not


def test_a_try_falling_behind_the_progress_of_the_choice_measured_shortest_is_given_up_early(monkeypatch):
    """Dask's own measured twice at 2 s, its tasks finishing evenly: a run trying the plan that
    has finished 2 of its 10 tasks at 1 s (the reference had at 0.4 s: 2.5x behind) is given up
    long before its 2.5 s watch, and the plan is measured as long as it would run at that pace
    (2.5 x 2 s), not as the 1 s it ran. Before a fifth of its tasks finished it is not raced."""
    from taskflow.runtime.outcomes import behind, progress_curve
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun

    g, cluster, scheduler, p = _wide_plugin(10)
    monkeypatch.setattr(p, "live_cluster", lambda r: cluster)
    monkeypatch.setattr(p, "unfinished", lambda r: [f"t{i}" for i in range(2, 10)])
    sig = (frozenset({"t"}), 3)
    p.adaptation.outcomes[sig] = outcomes_of(
        {"plan": [], "dask": [], "subset": [], "predicted": {"plan": 1.5, "dask": 2.0}}
    )
    for _ in range(2):  # two runs of Dask's own: a task finishes every 0.2 s
        done = GraphRun("d", g, scheduler, cluster, "c1", owned=True)
        done.adapt.signature, done.adapt.decision, done.adapt.guarded, done.state = sig, DASK, 1, RUNNING
        done.started = time.monotonic() - 2.0
        for i in range(10):
            done.key_moved(f"t{i}", "memory")
        done.finished_at = [done.started + 0.2 * (i + 1) for i in range(10)]
        assert progress_curve(done, 5) == pytest.approx([0.4, 0.8, 1.2, 1.6, 2.0])
        p.adaptation.record(done)
    assert (
        len(p.adaptation.outcomes[sig].curves[DASK]) == 2
        and p.adaptation.outcomes[sig].measured["dask"] == [pytest.approx(2.0, abs=0.05)] * 2
    )
    r = GraphRun("r1", g, scheduler, cluster, "c1", owned=True)
    r.adapt.signature, r.state = sig, RUNNING
    assert p.adaptation._measured_choice(r, (PLAN, DASK)) == (PLAN, 1.5) and r.adapt.watch == pytest.approx(
        2.5, abs=0.1
    )
    assert r.adapt.reference[1] == pytest.approx(0.2) and r.adapt.reference[-1] == pytest.approx(2.0)
    r.adapt.decision, r.started = PLAN, time.monotonic() - 1.0
    r.key_moved("t0", "memory")
    assert behind(r, 1.0) == 0.0  # a tenth done: not raced yet
    p.adaptation.learn_within(r, "t", 0.1, cluster.ids[0], "s1")
    assert r.adapt.decision == PLAN and p.adaptation.outcomes[sig].measured["plan"] == []
    r.key_moved("t1", "memory")
    assert behind(r, 1.0) == pytest.approx(2.5)  # two tenths at 1 s; the reference's at 0.4 s
    p.adaptation.learn_within(r, "t", 0.1, cluster.ids[0], "s2")
    assert r.adapt.decision == DASK and r.adapt.reference == [] and r.adapt.watch == 0.0
    assert r.adapt.path == [PLAN, DASK]  # the status (and the suite) show the try, not only where it ended
    assert p.adaptation.outcomes[sig].measured["plan"] == [
        pytest.approx(5.0, rel=0.05)
    ]  # its pace, not the second it ran
    again = GraphRun("r2", g, scheduler, cluster, "c1", owned=True)
    again.adapt.signature = sig
    assert p.adaptation._measured_choice(again, (PLAN, DASK))[0] == DASK


def test_a_try_of_the_plan_races_its_own_timeline_not_dask_s_progress(monkeypatch):
    """A plan finishes keys in an order of its own: this one finishes its first at 0.6 s and its
    tenth at 1.5 s, where Dask's own (measured twice at 2 s) finishes one every 0.2 s. At 0.7 s,
    two tenths done, the try is 1.75x behind Dask's curve and right on its own timeline: it goes
    on (Dask's curve would have given it up). At 2 s with four tenths done it runs 2.2x behind its
    plan, projected at 2.2 x 1.5 s = 3.3 s, more than a quarter longer than Dask's 2 s: given up
    and measured at that projection. A try of a hold still races Dask's curve."""
    from taskflow.runtime.scheduler import adaptation
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun
    from taskflow.schedule import Schedule

    g, cluster, scheduler, p = _wide_plugin(10)
    monkeypatch.setattr(adaptation, "dask_state", lambda *a: None)
    monkeypatch.setattr(p, "live_cluster", lambda r: cluster)
    monkeypatch.setattr(p, "unfinished", lambda r: [f"t{i}" for i in range(4, 10)])
    sig = (frozenset({"t"}), 3)
    curve = [0.2 * ((i + 2) // 2) for i in range(20)]  # a twentieth of ten tasks: one finished
    p.adaptation.outcomes[sig] = outcomes_of(
        {
            "plan": [],
            "dask": [2.0, 2.0],
            "subset": [],
            "predicted": {"plan": 1.5, "dask": 2.0},
            "curves": {DASK: [curve, curve]},
        }
    )
    finish = [0.5 + 0.1 * (i + 1) for i in range(10)]
    plan = Schedule(g.ids, [cluster.ids[0]] * 10, [f - 0.1 for f in finish], finish, "adaptive")
    made = []
    r = GraphRun("r1", g, scheduler, cluster, "c1", owned=True)
    r.adapt.signature, r.state, r.started = sig, RUNNING, time.monotonic()
    p.adaptation.guard(r, g, cluster, lambda: made.append(1) or plan)
    assert r.adapt.decision == PLAN and made == [1] and r.adapt.watch == pytest.approx(2.5)
    assert r.adapt.reference[3] == pytest.approx(0.7, abs=0.01) and r.adapt.reference[-1] == pytest.approx(
        1.5, abs=0.01
    )
    assert r.adapt.pace == pytest.approx(2.0 / 1.5, rel=0.01)
    r.started = time.monotonic() - 0.7
    for i in range(2):
        r.key_moved(f"t{i}", "memory")
    assert behind(r, 0.7) == pytest.approx(0.75, rel=0.02)  # on its plan; Dask's curve: 0.7 / 0.4
    p.adaptation.learn_within(r, "t", 0.1, cluster.ids[0], "s1")
    assert r.adapt.decision == PLAN and p.adaptation.outcomes[sig].measured["plan"] == []
    r.started = time.monotonic() - 2.0
    for i in range(2, 4):
        r.key_moved(f"t{i}", "memory")
    p.adaptation.learn_within(r, "t", 0.1, cluster.ids[0], "s2")
    assert r.adapt.decision == DASK and r.adapt.path == [PLAN, DASK]
    assert p.adaptation.outcomes[sig].measured["plan"] == [pytest.approx(2.0 / 0.9 * 1.5, rel=0.03)]

    hold = GraphRun("r2", g, get_scheduler("adaptive", choices=["subset", "dask"]), cluster, "c1", owned=True)
    hold.adapt.signature, hold.state, hold.started = sig, RUNNING, time.monotonic()
    p.adaptation.outcomes[sig].predicted["subset"] = 1.6
    p.adaptation.guard(hold, g, cluster, lambda: made.append(1) or plan)
    assert hold.adapt.decision == SUBSET and made == [1] and hold.adapt.reference == pytest.approx(curve)


def test_a_plan_left_to_dask_mid_run_spreads_its_queue_over_the_workers_by_their_learned_speeds(monkeypatch):
    """A plan sent twelve tasks to a worker measured four times slower than the other, which has
    none: left to Dask (a try given up), the latest queued ones are asked over to the fast worker
    while that shortens the slow one's share (one thread each: ten move; the slow worker's
    highest-priority task, counted as started, and one more stay). A run never planned moves
    nothing."""

    from taskflow.runtime.scheduler import adaptation
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun

    slow, fast = dask_states.worker("tcp://slow:1", name="slow"), dask_states.worker("tcp://fast:1", name="fast")
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler([slow, fast])
    monkeypatch.setattr(p.dask_scheduler, "transitions", lambda recs, stimulus_id: None)  # (sent to no worker)
    tasks = p.dask_scheduler.tasks
    for i in range(12):
        tasks[f"t{i}"] = dask_states.task(f"t{i}", "processing", priority=(i,), processing_on=slow)
    g = TaskGraph("queue")
    for k in tasks:
        g.add_task(k, cost=1.0)
    monkeypatch.setattr(p, "learned_speeds", lambda: {"slow": 0.25, "fast": 1.0})
    moved = []

    def move(dask_scheduler, ts, workers):
        moved.append((ts.key, [ws.name for ws in workers]))
        ts.processing_on.processing.discard(ts)
        ts.processing_on = workers[0]
        workers[0].processing.add(ts)
        return True

    monkeypatch.setattr(adaptation, "move_queued", move)
    monkeypatch.setattr(adaptation, "restrict", lambda ts, where: None)
    r = GraphRun("r1", g, get_scheduler("adaptive"), None, "c1", owned=True)
    r.state, r.plan = RUNNING, {k: "slow" for k in tasks}
    p.adaptation._leave_to_dask(r, list(tasks), None)
    assert r.adapt.decision == DASK and r.plan == {}
    # the latest first; an eleventh would make the fast worker's share (11) longer than the slow one's (2 at 0.25: 8)
    assert [k for k, _ in moved] == [f"t{i}" for i in range(11, 1, -1)] and {w for _, (w,) in moved} == {"fast"}
    assert {ts.key for ts in slow.processing} == {"t0", "t1"}
    moved.clear()
    again = GraphRun("r2", g, get_scheduler("adaptive"), None, "c1", owned=True)
    again.state = RUNNING
    p.adaptation._leave_to_dask(again, list(tasks), None)  # nothing of it was planned
    assert moved == []


def test_a_first_run_left_to_dask_on_workers_alike_spends_nothing_on_links_it_could_not_act_on(monkeypatch):
    """A first run takes no plan where Dask's own can run it: a first run left to Dask on workers
    alike whose scheduler may not hold it to a subset neither estimates its unfinished tasks nor weighs
    its links as its tasks finish. Where it may be held (by default), or with ``choices=["plan"]``,
    a narrow link can make it decide again."""

    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun

    g = TaskGraph("wide")
    for i in range(8):
        g.add_task(f"t{i}", cost=1.0)
    racks = Cluster(
        [Worker(w) for w in "abcd"],
        bandwidth=1e9,  # learned: a rate per pair
        bandwidths={a: {b: 1e3 for b in ("cd" if a in "ab" else "ab")} for a in "abcd"},
    )
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    looked = []
    monkeypatch.setattr(p.adaptation, "_spread", lambda r, c: 1.0)
    monkeypatch.setattr(p, "live_cluster", lambda r: looked.append("cluster") or racks)
    monkeypatch.setattr(p.adaptation, "_estimate_unfinished", lambda r: looked.append("estimate") or None)
    for choices, expected in (
        (["dask"], []),
        (["dask", "plan"], []),
        (None, ["cluster", "estimate"]),
        (["plan"], ["cluster", "estimate"]),
    ):
        scheduler = get_scheduler("adaptive", **({"choices": choices} if choices else {}))
        r = GraphRun("r1", g, scheduler, racks, "c1", owned=True)
        r.state, r.adapt.decision, r.adapt.signature = RUNNING, DASK, (frozenset({"t"}), 3)
        looked.clear()
        p.adaptation.learn_within(r, "t", 0.1, "a", "s1")
        assert looked == expected and r.adapt.decision == DASK


def test_a_run_left_to_dask_on_one_host_builds_no_cluster_as_its_tasks_finish(monkeypatch):
    """Rates between workers of one host are never narrow: a later run left to Dask there (a plan
    measured before, so a narrow link could make it decide again) neither builds the live cluster
    nor estimates its unfinished tasks as its tasks finish; on two hosts it weighs its links."""

    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun

    g = TaskGraph("wide")
    for i in range(8):
        g.add_task(f"t{i}", cost=1.0)
    p = TaskflowPlugin()
    looked = []
    monkeypatch.setattr(p.adaptation, "_spread", lambda r, c: 1.0)
    monkeypatch.setattr(p, "live_cluster", lambda r: looked.append("cluster") or None)
    monkeypatch.setattr(p.adaptation, "_estimate_unfinished", lambda r: looked.append("estimate") or None)
    monkeypatch.setattr(p, "learned_speeds", lambda: looked.append("speeds") or {})
    racks = Cluster([Worker("a"), Worker("b")], bandwidth=1e9, racks={"a": 0, "b": 1}, uplink=1e8)
    for hosts, declared, expected in (
        (("127.0.0.1", "127.0.0.1"), None, []),
        (("10.0.0.1", "10.0.0.2"), None, ["cluster"]),
        (("127.0.0.1", "127.0.0.1"), racks, ["cluster"]),
    ):  # emulated racks: weighed
        p.dask_scheduler = dask_states.scheduler(
            dask_states.worker(f"tcp://{h}:{4000 + i}", name=f"w{i}") for i, h in enumerate(hosts)
        )
        r = GraphRun("r1", g, get_scheduler("adaptive"), declared, "c1", owned=True)
        r.state, r.adapt.decision, r.adapt.signature = RUNNING, DASK, (frozenset({"t"}), 3)
        p.adaptation.outcomes[r.adapt.signature] = outcomes_of({"plan": [2.0], "dask": [1.0]})
        looked.clear()
        p.adaptation.learn_within(r, "t", 0.1, "a", "s1")
        assert looked == expected and r.adapt.decision == DASK


def test_mid_run_a_hold_in_place_gives_way_only_to_a_choice_predicted_margin_shorter(monkeypatch):
    """Dask's own is the default a choice must beat by ``margin``; mid-run a hold in place is:
    predicted within the margin of Dask's own either way, whatever runs keeps running (first runs
    on a quarter-core worker flipped from a hold to Dask's own and back on estimates a few percent
    apart); one predicted 20% longer than Dask's own gives way."""
    import taskflow.runtime.predict as predict
    from taskflow.runtime.predict import DASK, SUBSET, choose

    g = TaskGraph("w")
    g.add_task("t", cost=1.0)
    cluster = Cluster([Worker("a"), Worker("b")], bandwidth=1e9)
    held = {"subset": 0.95}
    monkeypatch.setattr(
        predict, "predict_dask", lambda graph, c, state, draws=1, **kw: 1.0 if len(c.workers) == 2 else held["subset"]
    )

    def pick(incumbent=DASK):
        return choose(
            g, cluster, None, None, opts(0.15, 3000), choices=(DASK, SUBSET), candidates=[["a"]], incumbent=incumbent
        )[0]

    assert pick() == DASK and pick(SUBSET) == SUBSET  # 5% apart: neither gives way
    held["subset"] = 0.8
    assert pick() == SUBSET and pick(SUBSET) == SUBSET
    held["subset"] = 1.2
    assert pick() == DASK and pick(SUBSET) == DASK  # Dask's own 1.0 <= 0.85 x 1.2


def test_rates_learned_between_workers_of_one_host_are_never_a_narrow_link():
    """Two workers on one machine's loopback, a busy receiver taking a shuffle in at 200 MB/s:
    that rate is the receiver's CPU, not a link, and holding Dask to one of them cannot beat it.
    The same rate between two hosts is a narrow link for the same graph; a rate the run declares
    between workers of one host (an emulated network) counts as declared."""

    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.predict import across_hosts
    from taskflow.runtime.scheduler.runs import GraphRun

    g = TaskGraph("heavy")
    g.add_task("a", cost=0.001)
    g.add_task("b", cost=0.001)
    g.add_edge("a", "b", size=4e6)  # 4 MB per millisecond of compute: narrow below 4 GB/s at ccr 1

    def two(addresses, rate=2e8):
        workers = [Worker(w, address=a) for w, a in zip("ab", addresses)]
        return Cluster(workers, bandwidth=1e9, bandwidths={"a": {"b": rate}, "b": {"a": rate}})

    local = two(["tcp://127.0.0.1:4001", "tcp://127.0.0.1:4002"])
    apart = two(["tcp://10.0.0.1:4001", "tcp://10.0.0.2:4001"])
    assert across_hosts(local).bandwidths == {} and across_hosts(apart).bandwidths == apart.bandwidths
    assert across_hosts(local, {"a": {"b"}}).bandwidths == {"a": {"b": 2e8}}
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    scheduler = get_scheduler("adaptive")
    assert not p.adaptation._narrow(GraphRun("r1", g, scheduler, None, "c1", owned=True), local)
    assert p.adaptation._narrow(GraphRun("r2", g, scheduler, None, "c1", owned=True), apart)
    assert p.adaptation._narrow(GraphRun("r3", g, scheduler, local, "c1", owned=True), local)  # declared: as declared


def test_a_run_left_to_dask_at_once_is_predicted_by_what_its_earlier_runs_measured_shortest():
    from taskflow.runtime.outcomes import shortest_measured

    assert shortest_measured({}) is None and shortest_measured({"plan": [], "dask": []}) is None
    assert shortest_measured({"plan": [1.0, 3.0], "dask": [1.5], "subset": [0.5, 0.6, 0.9]}) == ("subset", 0.6)
    assert shortest_measured({"plan": [0.97], "dask": [1.0]}) == ("dask", 1.0)  # not 5% shorter: Dask's own
    assert shortest_measured({"plan": [0.9], "dask": [1.0]}, ("dask",)) == ("dask", 1.0)


def test_restrictions_given_to_a_task_dask_s_shuffle_pinned_wait_for_the_shuffle_to_end():
    """A P2P output task the shuffle extension pinned keeps its pin: a hold (or its lifting)
    replaces the restrictions the extension gives back when the shuffle ends."""

    from taskflow.runtime.scheduler.patching import SHUFFLE_PINNED, restrict

    free = dask_states.task("free", "waiting")
    restrict(free, ["tcp://a", "tcp://b"])
    assert free.worker_restrictions == {"tcp://a", "tcp://b"} and not free.loose_restrictions
    restrict(free, ["tcp://a"], loose=True)
    assert free.worker_restrictions == {"tcp://a"} and free.loose_restrictions
    restrict(free, None)
    assert free.worker_restrictions is None and not free.loose_restrictions
    pinned = dask_states.task("pinned", "waiting", annotations={SHUFFLE_PINNED: None}, worker_restrictions={"tcp://c"})
    restrict(pinned, ["tcp://a", "tcp://b"])
    assert pinned.worker_restrictions == {"tcp://c"} and pinned.annotations[SHUFFLE_PINNED] == {"tcp://a", "tcp://b"}
    restrict(pinned, None)
    assert pinned.worker_restrictions == {"tcp://c"} and pinned.annotations[SHUFFLE_PINNED] is None


def test_a_run_with_a_peer_to_peer_shuffle_is_weighed_only_before_it_starts_and_only_for_a_hold(monkeypatch):
    """Before any task runs, a P2P graph on uneven workers is worth deciding for (its guard may
    hold it, never plan it); once started it is not, and a held one keeps its hold (the shuffle's
    outputs are pinned within it)."""

    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.predict import SUBSET
    from taskflow.runtime.scheduler.runs import GraphRun

    g = TaskGraph("p2p")
    for name in ("rechunk-transfer-1", "shuffle-barrier-1", "rechunk-p2p-1", "sum-1"):
        g.add_task(name, cost=1.0)
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    tasks = p.dask_scheduler.tasks
    tasks.update({k: dask_states.task(k, "waiting", worker_restrictions={"tcp://fast"}) for k in g.ids})
    cluster = Cluster.heterogeneous([4.0, 1.0])
    monkeypatch.setattr(p.adaptation, "_spread", lambda r, c: 4.0)
    monkeypatch.setattr("taskflow.runtime.scheduler.adaptation.dask_state", lambda *a: None)  # Dask's defaults
    keys = list(g.ids)
    r = GraphRun("r1", g, get_scheduler("adaptive"), cluster, "c1", owned=True)
    assert p.adaptation.worth_planning(r, keys, cluster)  # not started: a hold may pay
    only_plan = GraphRun("r2", g, get_scheduler("adaptive", choices=["plan"]), cluster, "c1", owned=True)
    assert not p.adaptation.worth_planning(only_plan, keys, cluster) and only_plan.adapt.decision == DASK
    r.adapt.held = ("tcp://fast",)
    r.adapt.decision = SUBSET
    assert not p.adaptation.worth_planning(r, keys[1:], cluster)  # started, held: kept as it is
    assert r.adapt.decision == SUBSET and all(ts.worker_restrictions == {"tcp://fast"} for ts in tasks.values())
    r.adapt.held = ()
    assert (
        not p.adaptation.worth_planning(r, keys[1:], cluster) and r.adapt.decision == DASK
    )  # started, not held: Dask's own
    plan = get_scheduler("adaptive").schedule(g, cluster)
    fresh = GraphRun("r3", g, get_scheduler("adaptive"), cluster, "c1", owned=True)
    p.adaptation.guard(fresh, g, cluster, plan)
    assert fresh.adapt.decision != PLAN and PLAN not in fresh.adapt.predictions  # Dask's shuffle places its outputs


def _p2p_states(transfer_prefix="rechunk-transfer"):
    """Dask task states of a peer-to-peer shuffle: 2 sources of 8 MB, each read by a transfer
    task, a barrier, 4 outputs of the shuffle (keys in partition order 3, 1, 0, 2), and the
    scheduler they sit in, with the CPU and other time its workers said the transfers took."""

    def task(key, prefix, deps=(), nbytes=-1):
        ts = dask_states.task(key, "memory" if nbytes >= 0 else "waiting", prefix, nbytes=nbytes)
        for d in deps:
            ts.add_dependency(d)
        return ts

    src = [task(("x", i), "x", nbytes=8_000_000) for i in range(2)]
    tr = [task((transfer_prefix, i), transfer_prefix, [src[i]]) for i in range(2)]
    bar = task("shuffle-barrier-1", "shuffle-barrier", tr)
    outs = [task(("rechunk-p2p", j), "rechunk-p2p", [bar], nbytes=4_000_000) for j in (3, 1, 0, 2)]
    metrics = {
        ("execute", transfer_prefix, "thread-cpu", "seconds"): 1.0,
        ("execute", transfer_prefix, "thread-noncpu", "seconds"): 3.0,
    }
    sched = dask_states.scheduler()
    sched.cumulative_worker_metrics.update(metrics)
    return sched, src + tr + [bar] + outs


def test_a_peer_to_peer_shuffle_s_bytes_go_from_each_transfer_task_to_each_output(monkeypatch):
    """No task edge carries a P2P shuffle's bytes: the model adds them (each transfer task's input
    split evenly over the outputs; through the barrier above P2P_PAIRS pairs), costs the barrier
    nothing and a transfer task its measured CPU share, and marks each output's place in the
    range sharding (in partition order)."""
    from taskflow.analysis import task_kind
    from taskflow.runtime.scheduler import reading

    sched, tss = _p2p_states()
    durations = {"rechunk-transfer": {"w0": [4.0, 2]}, "shuffle-barrier": {"w0": [5.0, 1]}}
    g = reading.estimated_graph(sched, tss, durations, {}, {})
    cost = dict(zip(g.ids, g.arrays.cost.tolist()))
    assert cost["shuffle-barrier-1"] == 0.0  # what Dask measured of it is the wait for the bytes
    assert cost[("rechunk-transfer", 0)] == pytest.approx(2.0 * 0.25)  # a quarter of it on the CPU
    edges = {
        (g.ids[s], g.ids[d]): b for s, d, b in zip(*(x.tolist() for x in (g.arrays.src, g.arrays.dst, g.arrays.size)))
    }
    for i in range(2):
        for j in range(4):
            assert edges[(("rechunk-transfer", i), ("rechunk-p2p", j))] == pytest.approx(2_000_000)
    assert sum(
        b for (s, d), b in edges.items() if s[0] == "rechunk-transfer" and d[0] == "rechunk-p2p"
    ) == pytest.approx(16_000_000)
    metas = {g.ids[i]: md for i, md in g.metas().items()}
    assert [metas[("rechunk-p2p", j)]["p2p"] for j in range(4)] == [(j, 4) for j in range(4)]
    assert {k for k, md in metas.items() if "p2p" in md} == {("rechunk-p2p", j) for j in range(4)}
    # each task's kind is its Dask prefix: the model of Dask's scheduling finds Dask's durations by it
    assert {task_kind(g, k) for k in g.ids} == {ts.prefix.name for ts in tss}
    assert task_kind(g, ("rechunk-transfer", 0)) == "rechunk-transfer"
    monkeypatch.setattr(reading, "P2P_PAIRS", 1)  # a large shuffle: through its barrier
    g = reading.estimated_graph(sched, tss, durations, {}, {})
    edges = {
        (g.ids[s], g.ids[d]): b for s, d, b in zip(*(x.tolist() for x in (g.arrays.src, g.arrays.dst, g.arrays.size)))
    }
    assert edges[(("rechunk-transfer", 0), "shuffle-barrier-1")] == pytest.approx(8_000_000)
    assert edges[("shuffle-barrier-1", ("rechunk-p2p", 2))] == pytest.approx(4_000_000)
    assert len(edges) == 2 + 2 + 4  # no edge from a transfer task to an output


def test_the_spread_counts_a_worker_s_prefix_only_with_enough_tasks_and_seconds():
    """Three tasks of half a millisecond, one of them hit by a scheduling hiccup, are no evidence
    of a slow worker; 3 tasks and 0.05 s of them are (a quarter-core worker shows it at once)."""
    from types import SimpleNamespace

    from taskflow.runtime.scheduler.adaptation import MIN_SECONDS, MIN_TASKS
    from taskflow.runtime.measured import relative_speeds
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler(dask_states.worker(f"tcp://{a}:1", name=a) for a in ("w0", "w1"))
    undeclared = SimpleNamespace(cluster=None)  # a run of Dask work: no speeds declared
    p.durations = {"sum": {"w0": [0.0015, 3], "w1": [0.0045, 3]}}  # 3x apart, 6 ms in all
    assert relative_speeds(p.durations)["w0"] == pytest.approx(3**0.5)  # what the costs learn from
    assert p.adaptation._spread(undeclared, None) == 1.0  # not what the guard weighs workers by
    p.durations["work"] = {"w0": [0.1, MIN_TASKS], "w1": [0.4, MIN_TASKS]}  # a quarter-core worker
    assert p.adaptation._spread(undeclared, None) == pytest.approx(4.0)
    p.durations["work"]["w0"] = [MIN_SECONDS / 2, MIN_TASKS]
    assert p.adaptation._spread(undeclared, None) == 1.0


def test_a_worker_s_cold_first_task_does_not_make_it_look_slow():
    """A worker's first task of a prefix pays once for imports and caches (400 ms against 20 ms):
    two identical workers stay alike for the guard, the speeds and the costs; a worker slow in
    every task (held to a quarter core) stays 4x slower."""
    from types import SimpleNamespace

    from taskflow.runtime.scheduler.reading import compared, observe, warm
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin

    def task(i):
        return dask_states.task(f"part-{i}", "memory", "part", nbytes=1000)

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler(dask_states.worker(f"tcp://{a}:1", name=a) for a in ("w0", "w1", "w2"))
    undeclared = SimpleNamespace(cluster=None)
    for i in range(8):
        observe(p.durations, p.sizes, p.inputs, task(i), "w0", 0.02)
        observe(p.durations, p.sizes, p.inputs, task(i), "w1", 0.4 if i == 0 else 0.02)  # its first one cold
    assert p.durations["part"]["w1"][0] == pytest.approx(0.54)  # kept as measured
    assert warm(p.durations)["part"] == {"w0": [pytest.approx(0.14), 7], "w1": [pytest.approx(0.14), 7]}
    assert p.adaptation._spread(undeclared, None) == pytest.approx(1.0)
    assert p.learned_speeds() == {"w0": pytest.approx(1.0), "w1": pytest.approx(1.0)}
    for i in range(8):
        observe(p.durations, p.sizes, p.inputs, task(i), "w2", 0.08 + (0.3 if i == 0 else 0.0))
    assert p.adaptation._spread(undeclared, None) == pytest.approx(4.0)
    assert warm({"x": {"w0": [0.5, 2]}}) == {"x": {"w0": [0.5, 2]}}  # without the longest: as it is
    # a graph of uniquely named tasks: a prefix per task, each on one worker, compares no workers
    # and is not walked each time the speeds are learned again
    before = p.learned_speeds()
    for i in range(3000):
        observe(
            p.durations,
            p.sizes,
            p.inputs,
            dask_states.task(f"t{i}", "memory", f"t{i}", nbytes=0),
            f"w{i % 3}",
            5.0,
        )
    assert len(p.durations) == 3001 and set(compared(p.durations)) == {"part"}
    assert p.learned_speeds() == before and p.adaptation._spread(undeclared, None) == pytest.approx(4.0)


def test_until_a_run_of_the_work_is_measured_the_guard_takes_no_plan_but_predicts_it(monkeypatch):
    """A plan on costs learned from a few tasks can be far off (on a worker held to a CPU quota,
    HEFT's plan of a bag ran 4x Dask's own), and before a run of the same work is measured nothing
    can watch it: the first runs pick among Dask's own choices; the plan's prediction by the first
    run kept is kept, and the next run tries it, watched."""

    import taskflow.runtime.scheduler.adaptation as adaptation
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import GraphRun

    g = random_layered(60, ccr=0.05, seed=3)
    uneven8 = Cluster.heterogeneous([1.0, 8.0])
    plan = get_scheduler("adaptive").schedule(g, uneven8)
    assert plan_or_dask(g, uneven8, plan, None, 0.15, 3000)[0]  # a plan predicted to win by far
    seen = {}
    choice, predicted, dask_own, _ = choose(
        g, uneven8, plan, None, opts(0.15, 3000), choices=(PLAN, DASK), predictions=seen, unwatched=(PLAN,)
    )
    assert choice == DASK and predicted == dask_own and seen[PLAN] <= 0.85 * dask_own
    assert choose(g, uneven8, plan, None, opts(0.15, 3000), choices=(PLAN,), unwatched=(PLAN,))[0] == PLAN  # no other
    assert (
        choose(g, uneven8, plan, None, opts(0.15, 10), choices=(PLAN, DASK), unwatched=(PLAN,))[0] == DASK
    )  # unsimulated

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    monkeypatch.setattr(adaptation, "dask_state", lambda *a: None)
    scheduler = get_scheduler("adaptive", choices=["plan", "dask"])
    sig = (frozenset({"t"}), len(g))
    for book in (None, {"plan": [], "dask": [], "subset": []}):  # the first run of the work; the second
        if book is not None:
            p.adaptation.outcomes[sig] = outcomes_of(book)
        r = GraphRun("r1", g, scheduler, uneven8, "c1", owned=True)
        r.adapt.signature = sig
        p.adaptation.guard(r, g, uneven8, plan)
        assert r.adapt.decision == DASK
        if book is not None:  # (the very first run's predictions are not kept: it predicts no plan)
            assert r.adapt.predictions[PLAN] <= 0.85 * r.adapt.predictions[DASK]
    p.adaptation.outcomes[sig] = outcomes_of(
        {"plan": [], "dask": [2.0], "subset": [], "predicted": dict(r.adapt.predictions)}
    )
    r = GraphRun("r3", g, scheduler, uneven8, "c1", owned=True)
    r.adapt.signature = sig
    p.adaptation.guard(r, g, uneven8, plan)  # measured once: the plan is tried, watched against Dask's own
    assert r.adapt.decision == PLAN and r.adapt.watch == pytest.approx(1.25 * 2.0) and r.adapt.fallback == DASK


def test_a_run_the_measured_runs_leave_to_dask_makes_no_plan(monkeypatch):
    """HEFT's list loop over hundreds of tasks blocks Dask's event loop for milliseconds, a few
    percent of a short run: the guard makes the plan only where it needs it. The very first run of
    a kind of work makes none (it cannot take it, and its predictions are not kept); the first run
    kept predicts the plan (made once); a later run whose measured runs choose Dask's own or a hold
    makes none; one whose measured runs choose the plan leaves it to the caller. A scheduler whose
    only choice is the plan makes it."""
    from types import SimpleNamespace

    import taskflow.runtime.scheduler.adaptation as adaptation
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import GraphRun, Unplannable, plan_maker

    g = random_layered(60, ccr=0.05, seed=3)
    uneven8 = Cluster.heterogeneous([1.0, 8.0])
    scheduler = get_scheduler("adaptive")
    made = []

    def counting():
        made.append(1)
        return scheduler.schedule(g, uneven8)

    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    monkeypatch.setattr(adaptation, "dask_state", lambda *a: None)
    sig = (frozenset({"t"}), len(g))

    def guard(book):
        p.adaptation.outcomes[sig] = outcomes_of(book)
        r = GraphRun("r", g, scheduler, uneven8, "c1", owned=True)
        r.adapt.signature = sig
        p.adaptation.guard(r, g, uneven8, counting)
        return r

    first = GraphRun("r", g, scheduler, uneven8, "c1", owned=True)
    first.adapt.signature = sig
    p.adaptation.guard(first, g, uneven8, counting)  # the first run of this work: its predictions are not kept
    assert made == [] and set(first.adapt.predictions) == {DASK, SUBSET} and first.adapt.decision in (DASK, SUBSET)
    r = guard({"plan": [], "dask": [], "subset": []})  # the first run kept of this work: predicted
    assert len(made) == 1 and PLAN in r.adapt.predictions
    for shortest in (DASK, SUBSET):
        book = {"plan": [3.0, 3.1], "dask": [2.0, 2.1], "subset": [2.5, 2.6]}
        book[shortest] = [1.0, 1.1]
        r = guard(book)
        assert r.adapt.decision == shortest and len(made) == 1  # no plan made
    r = guard({"plan": [1.0, 1.1], "dask": [2.0, 2.1], "subset": [2.5, 2.6]})
    assert r.adapt.decision == PLAN and len(made) == 1  # the plugin makes it after the guard
    only = GraphRun("r", g, get_scheduler("adaptive", choices=["plan"]), uneven8, "c1", owned=True)
    only.adapt.signature = (frozenset({"other"}), len(g))
    p.adaptation.guard(only, g, uneven8, counting)  # the plan alone: made, whatever the run
    assert len(made) == 2 and only.adapt.decision == PLAN

    make = plan_maker(SimpleNamespace(scheduler=scheduler), g, uneven8)
    assert make() is make()  # made once
    broken = SimpleNamespace(scheduler=SimpleNamespace(name="broken", schedule=lambda *a: 1 / 0))
    with pytest.raises(Unplannable, match=r"broken could not plan the run on workers \['w0', 'w1'\]: ZeroDivision"):
        plan_maker(broken, g, uneven8)()


def test_a_worker_never_measured_keeps_its_declared_speed_beside_the_measured_ones():
    """A run held off the slow worker measures only the fast ones: the next run on that cluster
    must still see the declared slow worker slow (it was seen as alike, and the next run, left to
    Dask, ran on it), and learned speeds (about 1) are compared with declared ones (8, 8, 1) on
    the same scale (they agree: no re-decision)."""

    from taskflow.runtime.outcomes import drifted
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import GraphRun

    g = TaskGraph("wide")
    g.add_task("t0", cost=1.0)
    declared = Cluster([Worker("wa", 8.0), Worker("wb", 8.0), Worker("wc", 1.0)])
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler(dask_states.worker(f"tcp://{a}:1", name=a) for a in ("wa", "wb", "wc"))
    p.durations = {"nap": {"wa": [1.0, 8], "wb": [1.0, 8]}}  # 8 tasks of 1/8 s on each fast worker
    r = GraphRun("r1", g, get_scheduler("adaptive"), declared, "c1", owned=True)
    assert p.adaptation._spread(r, declared) == pytest.approx(8.0)
    p.durations["nap"]["wc"] = [1.0, 8]  # once measured alike, it is alike
    assert p.adaptation._spread(r, declared) == pytest.approx(1.0)
    assert not drifted({"wa": 8.0, "wb": 8.0, "wc": 1.0}, {"wa": 1.0, "wb": 1.0}, 0.2)
    assert drifted({"wa": 4.0, "wb": 1.0}, {"wa": 1.0, "wb": 1.0}, 0.2)
    assert drifted({"wa": 8.0, "wb": 8.0}, {"wa": 1.3, "wb": 0.77}, 0.2)
    assert not drifted({"wa": 8.0}, {"wa": 1.0}, 0.2)  # one worker: nothing relative to compare


def test_the_inputs_placed_are_those_computed_or_running_on_a_known_worker():
    """Mid-run, an unfinished task's input in memory counts by its nbytes on its holder, one still
    running by its prefix's mean output on the worker running it; an input on no known worker is
    left out, and readers come in the order of the keys given."""

    from taskflow.runtime.scheduler.reading import placed_inputs

    workers = {a: dask_states.worker(a) for a in ("tcp://a:1", "tcp://b:1", "tcp://gone:1")}

    def ts(key, prefix, nbytes=-1, holders=(), running=None, deps=()):
        state = "memory" if holders else "processing" if running else "waiting"
        t = dask_states.task(key, state, prefix, nbytes=nbytes, processing_on=workers.get(running))
        t.who_has = {workers[a] for a in holders}
        for d in deps:
            t.add_dependency(d)
        return t

    done = ts("load-1", "load", nbytes=8_000_000, holders=["tcp://b:1", "tcp://a:1"])
    going = ts("load-2", "load", running="tcp://b:1")
    lost = ts("load-3", "load", nbytes=5, holders=["tcp://gone:1"])
    tasks = {t.key: t for t in (done, going, lost)}
    tasks["sum-2"] = ts("sum-2", "sum", deps=[done, going, lost])
    tasks["sum-1"] = ts("sum-1", "sum", deps=[done])
    out = placed_inputs(tasks, ["sum-2", "sum-1"], {"tcp://a:1": "a", "tcp://b:1": "b"}, {"load": [6e6, 2]})
    assert out == {"load-1": ("a", 8e6, ["sum-2", "sum-1"]), "load-2": ("b", 3e6, ["sum-2"])}


def test_a_prediction_of_dask_s_own_stops_drawing_orders_once_two_agree(monkeypatch):
    """Dask's sets of tasks are walked in an order drawn per prediction: where the first two
    draws agree the order does not matter and no more are simulated (each costs the scheduler's
    event loop); where they differ, every draw is averaged."""
    from types import SimpleNamespace

    import taskflow.simulator as simulator
    from taskflow.runtime.predict import DASK_DRAWS, DRAWS_AGREE

    g = TaskGraph("g")
    g.add_task("t", cost=1.0)
    seeds = []

    def fake(spans):
        def simulate(graph, cluster, scheduler, network=None, scheduler_options=None, seed=0):
            seeds.append(seed)
            return SimpleNamespace(makespan=spans(seed))

        return simulate

    monkeypatch.setattr(simulator, "simulate", fake(lambda seed: 2.0 + 0.5 * DRAWS_AGREE * (seed % 2)))
    assert predict_dask(g, Cluster.homogeneous(2), None) == pytest.approx(2.0 + 0.25 * DRAWS_AGREE)
    assert seeds == [0, 1]
    seeds.clear()
    monkeypatch.setattr(simulator, "simulate", fake(lambda seed: 2.0 + 0.1 * seed))
    assert predict_dask(g, Cluster.homogeneous(2), None) == pytest.approx(2.0 + 0.1 * (DASK_DRAWS - 1) / 2)
    assert seeds == list(range(DASK_DRAWS))


def test_a_try_of_a_hold_races_the_whole_cluster_at_the_pace_of_the_workers_it_keeps(monkeypatch):
    """Held to the fast worker of a cluster of speeds 4 and 1, a run does four fifths of the
    cluster's work per second while both are busy: it starts 1.25x behind Dask's own on every
    worker, and wins only at the end (no wave waits for the slow worker). Its race allows for
    that pace: 1.4x behind the reference at a fifth of its tasks is 1.12x at that pace (kept);
    1.7x is 1.36x (given up). A try of Dask's own against a hold races at its own pace."""
    from taskflow.runtime.outcomes import behind
    from taskflow.runtime.scheduler.runs import RUNNING, GraphRun

    g, cluster, scheduler, p = _wide_plugin(10)
    monkeypatch.setattr(p, "live_cluster", lambda r: cluster)
    sig = (frozenset({"t"}), 3)
    p.adaptation.outcomes[sig] = outcomes_of(
        {
            "plan": [],
            "dask": [2.0, 2.0],
            "subset": [],
            "predicted": {"dask": 2.0, "subset": 1.7},
            "curves": {DASK: [[0.2 * (i + 1) for i in range(10)]] * 2},
        }
    )
    r = GraphRun("r1", g, scheduler, cluster, "c1", owned=True)
    r.adapt.signature, r.state = sig, RUNNING
    p.adaptation.guard(r, g, cluster, None)
    assert r.adapt.decision == "subset" and r.adapt.fallback == DASK and r.adapt.pace == pytest.approx(1.25)
    r.started = time.monotonic()
    r.key_moved("t0", "memory")
    r.key_moved("t1", "memory")
    assert behind(r, 0.56) == pytest.approx(1.12)  # 0.56 s for two tenths; the reference's at 0.4 s
    assert behind(r, 0.68) == pytest.approx(1.36)
    p.adaptation.outcomes[sig] = outcomes_of(
        {
            "plan": [],
            "dask": [],
            "subset": [1.6, 1.6],
            "predicted": {"dask": 1.7, "subset": 1.6},
            "curves": {"subset": [[0.16 * (i + 1) for i in range(10)]] * 2},
        }
    )
    r = GraphRun("r2", g, scheduler, cluster, "c1", owned=True)
    r.adapt.signature, r.state = sig, RUNNING
    p.adaptation.guard(r, g, cluster, None)
    assert r.adapt.decision == DASK and r.adapt.fallback == "subset" and r.adapt.pace == 1.0


def test_the_guard_orders_the_graph_once_for_every_prediction_of_dask_s_own(monkeypatch):
    """``dask.order`` of a few hundred tasks takes tens of milliseconds of Dask's event loop: the
    guard's predictions of Dask's own and of each hold share one ordering, and predict what each
    prediction alone does."""
    import taskflow.runtime.predict as predict

    g = random_layered(80, ccr=0.5, seed=4)
    cluster = Cluster.heterogeneous([1.0, 4.0, 4.0])
    plan = get_scheduler("adaptive").schedule(g, cluster)
    calls = []
    real = predict.dask_priorities
    monkeypatch.setattr(predict, "dask_priorities", lambda *a, **k: calls.append(1) or real(*a, **k))
    seen = {}
    choose(g, cluster, plan, None, opts(0.15, 3000, spread=2.0), predictions=seen)
    assert len(calls) == 1 and set(seen) == {DASK, PLAN, SUBSET}
    assert seen[DASK] == pytest.approx(predict_dask(g, cluster, None, draws=1))
    fast = [w.id for w in cluster.workers if w.speed > 1.0]
    assert seen[SUBSET] == pytest.approx(predict_dask(g, cluster.subset(fast), None, draws=1))


def _shuffle_graph(n: int = 16) -> TaskGraph:
    """A task shuffle as the suite's dataframes make it: ``n`` partitions of 3 MB (20 ms each to
    make at speed 1), each split to ``n`` outputs of 5 ms."""
    g = TaskGraph("shuffle")
    for i in range(n):
        g.add_task(f"part{i}", cost=0.02, output_size=3e6)
    for j in range(n):
        g.add_task(f"out{j}", cost=0.005)
        for i in range(n):
            g.add_edge(f"part{i}", f"out{j}")
    return g


def _cross_bytes(g, plan) -> float:
    where = dict(zip(plan.tasks, plan.workers))
    return sum(g.edge_size(p, k) for k in g.ids for p in g.predecessors(k) if where[p] != where[k])


def test_inside_dask_the_plan_charges_transfers_to_both_ends_cpu():
    """A cgroup-throttled worker serves its outputs with the quarter core its tasks need: HEFT,
    counting only the network, spread a shuffle over both workers and the plan ran 1.5x Dask's own.
    With the CPU a transfer takes from each end (per message and per byte, at speed 1), the plan
    gives the slow worker fewer tasks and moves a fifth fewer bytes at least, every schedule still
    validates, costs of zero give a valid plan too, and a task of several cores (or no CPU costs given) keeps HEFT's own plan."""
    from schedulers._transfer_cpu import transfer_cpu_schedule
    from schedulers.base import to_schedule
    from taskflow.costs import CostModel

    g = _shuffle_graph()
    cluster = Cluster.heterogeneous([0.4, 2.5], bandwidth=200e6)
    heft = get_scheduler("heft").schedule(g, cluster)
    scheduler = get_scheduler("adaptive")
    assert scheduler.schedule(g, cluster).workers == heft.workers  # alone: HEFT's plan
    cpu = scheduler.inside_dask(0.002, 2.5e-9).schedule(g, cluster)
    assert scheduler.transfer_cpu is None  # a copy plans inside Dask; this one is as it was
    cpu.validate(g, cluster)
    assert _cross_bytes(g, cpu) < 0.8 * _cross_bytes(g, heft)
    slow = cluster.workers[0].id
    assert cpu.workers.count(slow) < heft.workers.count(slow)
    free = to_schedule(
        CostModel(g, cluster).densified(), transfer_cpu_schedule(CostModel(g, cluster).densified(), 0.0, 0.0), "x"
    )
    free.validate(g, cluster)
    multi = TaskGraph("multi")
    multi.add_task("a", cost=1.0, cores=2)
    two = Cluster([Worker("w0", 1.0, 2), Worker("w1", 4.0, 2)])
    inside = scheduler.inside_dask(0.002, 2.5e-9)
    assert inside.schedule(multi, two).workers == get_scheduler("heft").schedule(multi, two).workers


def test_the_plugin_gives_an_adaptive_run_s_plan_the_learned_transfer_cpu(monkeypatch):
    """Inside Dask the plugin plans an adaptive run with transfer costs from what it learned (a
    transfer costs each end Dask's cost per task, at speed 1, plus its bytes' copying), on a copy
    of the run's scheduler: the run's own is left as it was."""

    from taskflow.runtime.scheduler.overhead import BYTE_SECONDS
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import GraphRun

    g = _shuffle_graph()
    cluster = Cluster.heterogeneous([0.4, 2.5], bandwidth=200e6)
    p = TaskflowPlugin()
    p.dask_scheduler = dask_states.scheduler()
    r = GraphRun("r", g, get_scheduler("adaptive"), None, "c1", owned=True)
    monkeypatch.setattr(p, "live_cluster", lambda r: cluster)
    monkeypatch.setattr(p, "unfinished", lambda r: list(g.ids))
    monkeypatch.setattr(p.adaptation, "worth_planning", lambda r, keys, c: True)
    monkeypatch.setattr(p.gaps, "overhead", lambda speeds: 0.003)

    def guard(r, sub, c, make, shift):
        r.adapt.decision = PLAN
        return float(make().makespan)

    monkeypatch.setattr(p.adaptation, "guard", guard)
    planned_by = []
    inside_dask = r.scheduler.inside_dask
    monkeypatch.setattr(
        r.scheduler, "inside_dask", lambda *cpu: planned_by.append(cpu) or inside_dask(*cpu), raising=False
    )
    plan = p._plan(r)
    assert planned_by == [(0.003, BYTE_SECONDS)] and r.scheduler.transfer_cpu is None
    heft = get_scheduler("heft").schedule(g, cluster)
    assert plan is not None and r.plan and _cross_bytes(g, plan) < _cross_bytes(g, heft)


def test_the_adaptive_phase_moves_only_by_its_table():
    """A run's phase with the adaptive scheduler: undecided, then learning (the guard's predictions,
    or left to Dask), trying (watched), given up, fixed; a move the table lacks is refused, and a
    try given up hands over its fallback once."""
    from taskflow.runtime.adaptive_state import PHASE_MOVES

    assert set(PHASE_MOVES) == set(Phase) and PHASE_MOVES[Phase.FIXED] == frozenset()
    state = AdaptiveState()
    assert state.phase is Phase.UNDECIDED and state.take_fallback() is None
    with pytest.raises(RuntimeError, match="no move from undecided to given up"):
        state.give_up()
    state.move(Phase.LEARNING)
    state.move(Phase.LEARNING)  # staying is no move
    state.try_choice(2.5, DASK, [0.1, 0.2])
    assert (state.phase, state.watch, state.fallback) == (Phase.TRYING, 2.5, DASK)
    with pytest.raises(RuntimeError, match="no move from trying to fixed"):
        state.move(Phase.FIXED)
    state.give_up()
    assert (state.phase, state.watch, state.reference, state.redecisions, state.guarded) == (
        Phase.GIVEN_UP,
        0.0,
        [],
        1,
        1,
    )
    assert state.take_fallback() == DASK and state.phase is Phase.FIXED and state.take_fallback() is None
    with pytest.raises(RuntimeError, match="no move from fixed to learning"):
        state.move(Phase.LEARNING)
    state.decision = PLAN
    state.decision = PLAN
    state.decision = DASK
    assert state.path == [PLAN, DASK]


def test_the_run_status_says_the_state_and_the_phase_as_plain_words():
    """The plugin's status reply carries a run's state and adaptive phase as strings (they cross
    the wire to clients), and a run's state is one of :class:`RunState`."""
    from taskflow.runtime.scheduler.plugin import TaskflowPlugin
    from taskflow.runtime.scheduler.runs import GraphRun, RunState

    g = TaskGraph()
    g.add_task("a", cost=1.0)
    p = TaskflowPlugin()
    p.dask_scheduler = type("S", (), {"workers": {}, "tasks": {}})()
    r = GraphRun("r1", g, get_scheduler("adaptive"), None, "c1", owned=True)
    p.runs[r.id] = r
    reply = p.handle_status(run="r1")
    assert type(reply["state"]) is str and reply["state"] == "registered" and r.state is RunState.REGISTERED
    assert type(reply["phase"]) is str and reply["phase"] == "undecided"
