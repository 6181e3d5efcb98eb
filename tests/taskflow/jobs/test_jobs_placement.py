"""Where a job's workers go on a shared cluster, and what its neighbours cost it: placements
(consolidated, spread, contention-aware, interference-aware), uplinks shared max-min fairly by
jobs spread over racks, and Gandiva's time-slicing and packing; exact times on hand-computed runs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskflow.errors import FormatError, SchedulerError, UsageError
from taskflow.jobs import Interference, JobCluster, JobNetwork, load_job_cluster, maxmin_shares, simulate_jobs
from taskflow.jobscheduling import PLACEMENTS, Job, get_job_scheduler, job_scheduler_names, place


def finishes(run) -> dict:
    return {r.job.id: r.finish for r in run.records}


# ----------------------------------------------------------------------------- placement
def test_consolidated_takes_one_node_then_one_rack_then_the_fullest_racks():
    nodes = (0, 0, 1, 1, 2, 2, 3, 3)  # 4 nodes of 2
    racks = (0, 0, 0, 0, 1, 1, 1, 1)  # 2 racks of 2 nodes
    # 3 workers: no node holds them; rack 1 (4 free) does, rack 0 (3 free) does too and fits best
    assert place([0, 2, 3, 4, 5, 6, 7], 3, nodes, racks=racks) == (0, 2, 3)
    # 5: no rack holds them: the fuller rack's nodes first, then the other's fullest node
    assert place([0, 2, 3, 4, 5, 6, 7], 5, nodes, racks=racks) == (4, 5, 6, 7) + (2,) or place(
        [0, 2, 3, 4, 5, 6, 7], 5, nodes, racks=racks
    ) == (2, 4, 5, 6, 7)
    # without racks, nodes alone decide (the fullest first)
    assert place([0, 2, 3, 4, 5], 3, nodes) == (2, 3, 4)


def test_contention_aware_spans_the_racks_whose_uplinks_carry_the_fewest_jobs():
    nodes = tuple(range(9))
    racks = (0, 0, 0, 1, 1, 1, 2, 2, 2)
    free = [0, 1, 2, 3, 4, 6, 7]  # rack 0: 3 free, rack 1: 2, rack 2: 2
    load = {0: 1}  # a job already crosses rack 0's uplink
    assert place(free, 4, nodes, "consolidated", racks) == (0, 1, 2, 3)  # the fullest rack first
    assert place(free, 4, nodes, "contention-aware", racks, load) == (3, 4, 6, 7)  # the idle uplinks
    assert place(free, 3, nodes, "contention-aware", racks, load) == (0, 1, 2)  # one rack holds it: no uplink


def test_interference_aware_goes_where_it_and_its_neighbours_lose_least():
    table = Interference({("a", "b"): 0.5, ("b", "a"): 0.5})
    jobs = [Job("P", 0, 1, 10, model="a"), Job("Q", 0, 1, 10, model="b")]
    cluster = JobCluster(1, 2, 2)  # two nodes of two workers
    # consolidated puts Q beside P (the fullest node that fits): both at half speed
    assert finishes(simulate_jobs(jobs, cluster, "fifo", interference=table)) == pytest.approx({"P": 20, "Q": 20})
    aware = get_job_scheduler("fifo", placement="interference-aware", interference=table)
    assert finishes(simulate_jobs(jobs, cluster, aware, interference=table)) == pytest.approx({"P": 10, "Q": 10})
    with pytest.raises(SchedulerError, match="needs the interference table"):
        get_job_scheduler("sjf", placement="interference-aware")
    with pytest.raises(SchedulerError, match="placement must be one of"):
        get_job_scheduler("fifo", placement="packed")


# ----------------------------------------------------------------------------- shared uplinks
def test_maxmin_shares_fill_the_most_crowded_link_first():
    assert maxmin_shares({"a": {0, 1}, "b": {1}, "c": {1}, "d": {0}}) == pytest.approx(
        {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3, "d": 2 / 3}
    )
    assert maxmin_shares({"a": {0}}) == {"a": 1.0}
    assert maxmin_shares({}) == {}


def _narrow(model, counts, uplink):
    """An iteration: 1 s of compute, and 1 s per unit of uplink when it crosses racks."""
    return 1.0 + (1.0 / uplink if len(counts) > 1 else 0.0)


def test_jobs_across_racks_slow_each_other_as_their_shared_uplink_says():
    cluster = JobCluster(3, 1, 2, uplink=1.0)  # three racks of two workers
    net = JobNetwork(cluster, _narrow)
    # A (3 workers) takes racks 0 and 1; B (3) racks 2 and 1: both cross rack 1's uplink, half of it each,
    # an iteration 1 + 2 s against 1 s in one rack: a third of their speed. B's 1.5 s of work ends at 4.5; A
    # has done 1.5 of 3, alone on the uplinks from then at half speed: 3 s more
    jobs = [Job("A", 0, 3, 3.0, model="m"), Job("B", 0, 3, 1.5, model="m")]
    run = simulate_jobs(jobs, cluster, "fifo", network=net)
    assert finishes(run) == pytest.approx({"A": 7.5, "B": 4.5})
    assert run.violations() == []
    # in one rack each, nothing is shared: durations as given
    wide = JobCluster(2, 1, 3, uplink=1.0)
    assert finishes(simulate_jobs(jobs, wide, "fifo", network=JobNetwork(wide, _narrow))) == pytest.approx(
        {"A": 3.0, "B": 1.5}
    )
    # a model the timing does not know is not slowed
    assert net.speeds([(Job("X", 0, 3, 1.0, model=None), (0, 1, 2))]) == {"X": 1.0}
    with pytest.raises(UsageError, match="does not say its uplink"):
        JobNetwork(JobCluster(2, 1, 2), _narrow)


def test_contention_aware_placement_beats_the_oblivious_one_on_a_narrow_uplink():
    cluster = JobCluster(3, 1, 4, uplink=1.0)
    net = JobNetwork(cluster, _narrow)
    # X (6) must span two racks; then Y (6) spans two as well: oblivious, Y takes the fullest racks, one
    # of them X's; aware, it takes the rack X left alone and the idle one... both need two racks, so Y
    # shares one uplink with X either way unless it can avoid X's racks: X on racks 0-1 leaves 2 free in
    # rack 1 and 4 in rack 2: Y (6) needs both. A 2-worker Z then: aware keeps it inside one rack too.
    jobs = [Job("X", 0, 6, 6.0, model="m"), Job("Y", 0, 4, 4.0, model="m"), Job("Z", 1, 2, 2.0, model="m")]
    for how in ("consolidated", "contention-aware"):
        run = simulate_jobs(jobs, cluster, get_job_scheduler("fifo", placement=how), network=net)
        assert run.violations() == []
    aware = simulate_jobs(jobs, cluster, get_job_scheduler("fifo", placement="contention-aware"), network=net)
    oblivious = simulate_jobs(jobs, cluster, get_job_scheduler("fifo", placement="spread"), network=net)
    assert aware.metrics()["avg_jct"] < oblivious.metrics()["avg_jct"]


def test_a_job_iteration_from_its_task_graph_is_slower_across_a_narrow_uplink():
    from taskflow.training.jobnet import graph_iterations

    cluster = JobCluster(2, 1, 4, uplink=1.25e9)
    net = JobNetwork(cluster, graph_iterations(cluster))
    inside, across = net.time("resnet50", (4,)), net.time("resnet50", (2, 2))
    assert 0 < inside < across < net.time("resnet50", (2, 2), 0.5)
    assert net.time("resnet50", (2, 2)) is across  # cached: simulated once per shape
    assert net.time("no-such-model", (2, 2)) is None
    a, b = Job("a", 0, 4, 10, model="resnet50"), Job("b", 0, 4, 10, model="resnet50")
    shared = net.speeds([(a, (0, 1, 4, 5)), (b, (2, 3, 6, 7))])
    alone = net.speeds([(a, (0, 1, 4, 5))])
    assert 0 < shared["a"] < alone["a"] < 1.0


def test_a_cluster_says_its_links_and_a_wrong_one_is_one_line(tmp_path):
    p = tmp_path / "c.json"
    p.write_text('{"racks": 2, "nodes_per_rack": 1, "workers_per_node": 4, "uplink": 1.25e9, "bandwidth": 1e10}')
    c = load_job_cluster(p)
    assert (c.uplink, c.bandwidth, c.worker_racks) == (1.25e9, 1e10, (0, 0, 0, 0, 1, 1, 1, 1))
    p.write_text('{"racks": 2, "workers_per_node": 4, "uplink": -1}')
    with pytest.raises(FormatError, match="uplink must be bytes per second >= 0, got -1"):
        load_job_cluster(p)


# ----------------------------------------------------------------------------- Gandiva
def test_gandiva_time_slices_when_jobs_wait_and_starts_who_fits_between_rounds():
    one = JobCluster(1, 1, 1)
    jobs = [Job("A", 0, 1, 25), Job("B", 5, 1, 10)]
    # B waits until the round ends at 10, then takes A's worker; A comes back when B ends at 20
    run = simulate_jobs(jobs, one, get_job_scheduler("gandiva", round=10))
    assert {r.job.id: (r.finish, r.preemptions) for r in run.records} == {"A": (35, 1), "B": (20, 0)}
    assert finishes(simulate_jobs(jobs, one, get_job_scheduler("gandiva", round=10), restore=2)) == {"A": 37, "B": 20}
    # three jobs on one worker take turns, a round each
    turns = simulate_jobs(
        [Job("A", 0, 1, 20), Job("B", 0, 1, 20), Job("C", 0, 1, 20)], one, get_job_scheduler("gandiva", round=10)
    )
    assert [(a, b) for a, b, _ in turns.records[0].runs] == [(0, 10), (30, 40)]
    assert finishes(turns) == {"A": 40, "B": 50, "C": 60}
    assert "gandiva" in job_scheduler_names()


def test_gandiva_packs_by_interference_when_it_has_a_table():
    table = Interference({("a", "b"): 0.5, ("b", "a"): 0.5})
    jobs = [Job("P", 0, 1, 10, model="a"), Job("Q", 0, 1, 10, model="b")]
    g = get_job_scheduler("gandiva", interference=table)
    assert g.placement == "interference-aware"
    assert finishes(simulate_jobs(jobs, JobCluster(1, 2, 2), g, interference=table)) == pytest.approx(
        {"P": 10, "Q": 10}
    )


def test_a_machine_wide_table_slows_jobs_on_other_nodes_too():
    jobs = [Job("P", 0, 1, 10, model="a"), Job("Q", 0, 1, 10, model="b")]
    pairs = {("a", "b"): 0.5, ("b", "a"): 0.5}
    two_nodes = JobCluster(1, 2, 1)  # P and Q on nodes of their own
    assert finishes(simulate_jobs(jobs, two_nodes, "fifo", interference=Interference(pairs))) == {"P": 10, "Q": 10}
    # one machine's workers every job shares (the testbed's racks): each runs at half speed beside the other
    machine = Interference(pairs, machine=True)
    assert finishes(simulate_jobs(jobs, two_nodes, "fifo", interference=machine)) == pytest.approx({"P": 20, "Q": 20})
    doc = machine.to_dict()
    assert doc["machine"] is True and Interference.from_dict(doc).machine
    assert "machine" not in Interference(pairs).to_dict()
    with pytest.raises(FormatError, match="'machine' must be true or false"):
        Interference.from_dict({**doc, "machine": "yes"})


def test_jobs_whose_cores_add_up_past_the_machines_share_it_in_proportion():
    """Cores: a 1.2 and a 1.0 on a machine giving 2 share it as 2/2.2; a third job does not add its
    pair's slowdown again but its cores (2/3.4); a job that alone wants more than the machine has
    loses only what the others add to it. Jobs finish as the shares say."""
    table = Interference(machine=True, cores={"a": 1.2, "b": 1.0, "x": 3.0}, capacity=2.0)
    a, a2, b, x = (Job(n, 0, 1, 10, model=m) for n, m in (("A", "a"), ("A2", "a"), ("B", "b"), ("X", "x")))
    assert table.speed(a, []) == 1.0 and table.speed(a, [b]) == pytest.approx(2 / 2.2)
    assert table.speed(a, [a2, b]) == pytest.approx(2 / 3.4) and table.speed(b, [a, a2]) == pytest.approx(2 / 3.4)
    assert table.speed(x, [b]) == pytest.approx((2 / 4) / (2 / 3))
    # a model without its cores: the pairs' rule (here none: full speed)
    assert table.speed(Job("N", 0, 1, 10, model="n"), [a]) == 1.0
    # A (10 s alone) and B (5 s) start together on one machine: 2/2.2 of their speed until B ends at
    # 5 * 1.1 = 5.5 s, A then has 10 - 5.5/1.1 = 5 s of its work left alone: 10.5 s
    jobs = [Job("A", 0, 1, 10, model="a"), Job("B", 0, 1, 5, model="b")]
    assert finishes(simulate_jobs(jobs, JobCluster(1, 2, 1), "fifo", interference=table)) == pytest.approx(
        {"A": 10.5, "B": 5.5}
    )
    back = Interference.from_dict(table.to_dict())
    assert back.cores == table.cores and back.capacity == 2.0 and back.machine
    doc = table.to_dict()
    for wrong, message in (
        ({"capacity": None}, "go together"),
        ({"capacity": 0}, "capacity: a number of cores"),
        ({"cores": [{"model": "a", "cores": -1}]}, r"cores\[0\].cores"),
        ({"cores": [{"model": "a"}]}, r"cores\[0\] needs"),
    ):
        with pytest.raises(FormatError, match=message):
            Interference.from_dict({**doc, **wrong})
    with pytest.raises(FormatError, match="go together"):
        Interference(cores={"a": 1.0})


def test_the_machines_capacity_is_what_its_slowed_pairs_say():
    from taskflow.training.jobprofile import machine_capacity

    cores = {"a": 1.2, "b": 1.0}
    # a beside b kept 0.8 of its speed: 0.8 * 2.2 = 1.76 cores given; b beside a 0.75: 1.65; a pair
    # that did not slow says nothing, nor one whose share would give a job less than it had alone
    shares = {("a", "b"): 0.8, ("b", "a"): 0.75, ("a", "a"): 1.0, ("b", "b"): 0.4}
    assert machine_capacity(shares, cores) == pytest.approx((1.76 + 1.65) / 2)
    assert machine_capacity({("a", "b"): 1.0}, cores) >= 1  # nothing slowed: the machine's cores


def test_the_time_the_uplink_and_the_neighbours_add_to_an_iteration_adds_up():
    cluster = JobCluster(2, 1, 2, uplink=1.0)
    net = JobNetwork(cluster, lambda model, counts, uplink: 1.0 if len(counts) == 1 else 2.0)  # across: twice
    table = Interference({("a", "b"): 0.5, ("b", "a"): 0.5}, machine=True)
    jobs = [Job("A", 0, 2, 10, model="a"), Job("B", 0, 1, 100, model="b")]
    run = simulate_jobs(jobs, cluster, get_job_scheduler("fifo", placement="spread"), network=net, interference=table)
    a = next(r for r in run.records if r.job.id == "A")
    assert len({w // 2 for w in a.runs[0][2]}) == 2  # across the racks, beside B
    # alone 10 s; the link adds one more iteration's time, B another: 30 s (not 40: the two do not multiply)
    assert a.finish == pytest.approx(30.0)


def test_a_profiles_timing_over_racks_stretches_what_crossing_added_by_the_uplink_it_gets():
    from taskflow.training.jobprofile import JobProfile

    kind = ("mlp", 2, 32)
    prof = JobProfile({kind: 0.5}, {kind: 4.0}, Interference(), 4, 32, across={kind: 6.0}, uplink=100.0)
    label = "mlp/2w/b32"
    assert prof.iteration(label, (2,), 100.0) == 1.0  # inside one rack: its epoch alone, per iteration
    assert prof.iteration(label, (1, 1), 100.0) == 1.5  # spread at the full uplink: as measured
    assert prof.iteration(label, (1, 1), 50.0) == 2.0  # half the uplink: the 0.5 s crossing took, twice
    # shared by two jobs max-min: each gets the speed of its iteration alone over that
    cluster = JobCluster(2, 1, 2, uplink=100.0)
    net = JobNetwork(cluster, prof.iteration)
    job = Job("x", 0, 2, 1, model=label)
    assert net.speeds([(job, (0, 2))]) == {"x": pytest.approx(1.0 / 1.5)}
    assert net.speeds([(job, (0, 2)), (Job("y", 0, 2, 1, model=label), (1, 3))])["x"] == pytest.approx(0.5)


def test_taskflow_jobs_models_shared_uplinks_when_the_cluster_says_them(tmp_path, capsys):
    import json

    from taskflow.app.cli import main

    cluster, trace, out = tmp_path / "c.json", tmp_path / "t.json", tmp_path / "runs.json"
    cluster.write_text(json.dumps({"racks": 2, "nodes_per_rack": 1, "workers_per_node": 4, "uplink": 1.25e8}))
    assert (
        main(
            [
                "jobs",
                "generate",
                str(trace),
                "--cluster",
                str(cluster),
                "--count",
                "30",
                "--load",
                "1.2",
                "--models",
                "resnet50,vgg16",
                "--seed",
                "4",
                "-q",
            ]
        )
        == 0
    )
    doc = json.loads(trace.read_text())
    assert doc["cluster"]["uplink"] == 1.25e8 and {j["model"] for j in doc["jobs"]} == {"resnet50", "vgg16"}
    jct = {}
    for how in ("spread", "contention-aware"):
        assert (
            main(
                [
                    "jobs",
                    "simulate",
                    str(trace),
                    "--scheduler",
                    "fifo,gandiva",
                    "--placement",
                    how,
                    "-o",
                    str(out),
                    "-q",
                    "--crossover",
                    "0.2",
                ]
            )
            == 0
        )
        runs = json.loads(out.read_text())["runs"]
        assert [r["scheduler"] for r in runs] == ["fifo", "gandiva"]
        jct[how] = runs[0]["metrics"]["avg_jct"]
    # spread puts jobs over both racks, on the narrow uplink; contention-aware keeps them in one where it can
    assert jct["contention-aware"] < jct["spread"]
    assert "avg JCT" in capsys.readouterr().out


def test_a_preempted_job_drains_to_its_checkpoint_before_its_workers_pass_on():
    one = JobCluster(1, 1, 1)
    jobs = [Job("A", 0, 1, 10), Job("B", 2, 1, 1)]
    # SRTF preempts A for B at 2; A goes on 0.5 s to its checkpoint (kept), B starts on the worker after it
    assert finishes(simulate_jobs(jobs, one, "srtf", drain=0.5)) == pytest.approx({"A": 11.0, "B": 3.5})
    assert finishes(simulate_jobs(jobs, one, "srtf", drain=0.5, restore=1)) == pytest.approx({"A": 12.0, "B": 3.5})
    assert finishes(simulate_jobs(jobs, one, "srtf")) == pytest.approx({"A": 11.0, "B": 3.0})
    with pytest.raises(UsageError, match="drain must be seconds >= 0"):
        simulate_jobs(jobs, one, "srtf", drain=-1)


# ----------------------------------------------------------------------------- workers lost and added
def test_a_lost_worker_stops_its_job_and_the_scheduler_hears_of_it():
    from taskflow.jobscheduling import JobScheduler, WorkerAdded, WorkerLost

    two = JobCluster(1, 1, 2)
    jobs = [Job("A", 0, 2, 10), Job("B", 1, 1, 3)]
    changes = [(4, "lost", 1), (6, "added", 1)]
    # FIFO: A stops at 4 (4 s done), waits for two workers, holding B back; both back at 6: A 6-12, B 12-15
    fifo = simulate_jobs(jobs, two, "fifo", changes=changes)
    assert {r.job.id: (r.finish, r.preemptions) for r in fifo.records} == {"A": (12, 1), "B": (15, 0)}
    assert fifo.violations() == []
    # SJF: B takes the worker left at 4 (4-7); A waits for both until 7
    assert finishes(simulate_jobs(jobs, two, "sjf", changes=changes)) == {"A": 13, "B": 7}
    assert finishes(simulate_jobs(jobs, two, "fifo", changes=changes, restore=1)) == {"A": 13, "B": 16}

    heard = []

    class Listening(JobScheduler):
        name = "listening"

        def decide(self, event, view):
            heard.append((type(event).__name__, getattr(event, "job_id", None), view.down))
            return self.greedy(view.waiting, view, preempt=False)

    simulate_jobs(jobs, two, Listening(), changes=changes)
    assert ("WorkerLost", "A", (1,)) in heard and ("WorkerAdded", None, ()) in heard
    assert WorkerLost(4, 1, "A").worker == 1 and WorkerAdded(6, 1).time == 6


@pytest.mark.parametrize(
    "changes, message",
    [
        ([(1, "lost", 5)], "worker 5 is not one of the cluster's 0-1"),
        ([(1, "gone", 0)], "a change is 'lost' or 'added'"),
        ([(-1, "lost", 0)], "the time must be seconds >= 0"),
        ([(1, "added", 0)], "worker 0 cannot be added: it is not lost"),
        ([(1, "lost", 0), (2, "lost", 0)], "worker 0 cannot be lost: it is lost already"),
    ],
)
def test_a_wrong_change_of_workers_is_named(changes, message):
    with pytest.raises(UsageError, match=message):
        simulate_jobs([Job("A", 0, 1, 10)], JobCluster(1, 1, 2), "fifo", changes=changes)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.data())
def test_every_placement_gives_distinct_free_workers_and_contention_aware_spans_no_more_racks(
    racks, per_rack, per_node, data
):
    cluster = JobCluster(racks, per_rack, per_node)
    nodes, rk = cluster.nodes, cluster.worker_racks
    free = sorted(data.draw(st.sets(st.integers(0, cluster.workers - 1), min_size=1)))
    n = data.draw(st.integers(1, len(free)))
    load = {r: data.draw(st.integers(0, 3)) for r in range(racks)}
    cost = {node: data.draw(st.floats(0, 3)) for node in set(nodes)}
    got = {how: place(free, n, nodes, how, rk, load, cost) for how in PLACEMENTS}
    for how, ws in got.items():
        assert len(ws) == n and len(set(ws)) == n and set(ws) <= set(free), how
    spanned = {how: len({rk[w] for w in ws}) for how, ws in got.items()}
    assert spanned["contention-aware"] <= spanned["consolidated"]
    # consolidated uses one node when one holds the job
    by_node = {}
    for w in free:
        by_node.setdefault(nodes[w], []).append(w)
    if any(len(ws) >= n for ws in by_node.values()):
        assert len({nodes[w] for w in got["consolidated"]}) == 1


def test_every_job_scheduler_keeps_the_rules_with_neighbours_uplinks_drains_and_lost_workers():
    from taskflow.jobs import generate_trace

    cluster = JobCluster(2, 2, 4, uplink=1.0)
    trace = generate_trace(120, seed=5, cluster=cluster, load=1.3, median_duration=300, models=("a", "b"))
    table = Interference({("a", "b"): 0.7, ("b", "a"): 0.8, ("a", "a"): 0.6})
    net = JobNetwork(cluster, _narrow)
    changes = [(2000.0, "lost", 3), (2500.0, "lost", 9), (9000.0, "added", 3), (12000.0, "added", 9)]
    for name in job_scheduler_names():
        for how, crossover in [(how, None) for how in PLACEMENTS] + [("consolidated", 0.4)]:
            opts = {"round": 300} if name in ("las", "gittins", "gandiva") else {}
            sched = get_job_scheduler(name, placement=how, interference=table, crossover=crossover, **opts)
            run = simulate_jobs(
                trace, cluster, sched, interference=table, network=net, drain=5, restore=10, changes=changes
            )
            assert run.violations() == [], (name, how, run.violations()[:2])
            for r in run.records:  # at most full speed: every job ran at least its duration, less its drains
                ran = sum(b - a for a, b, _ in r.runs)
                assert ran >= r.job.duration - 5 * r.preemptions - 1e-6, (name, how, r.job.id)


# ----------------------------------------------------------------------------- Crossover
def test_crossover_lets_a_waiting_job_take_turns_on_a_running_jobs_workers():
    from taskflow.jobscheduling import crossover_speed

    one = JobCluster(1, 1, 1)
    jobs = [Job("A", 0, 1, 10), Job("B", 2, 1, 5)]
    assert finishes(simulate_jobs(jobs, one, "fifo")) == {"A": 10, "B": 15}
    # both spend 0.3 of an iteration communicating: together each runs at 1 / 1.4 of its speed. B's 5 s
    # take 7 (2 -> 9); A has done 2 + 5 by then, its last 3 alone: 12
    run = simulate_jobs(jobs, one, get_job_scheduler("fifo", crossover=0.3))
    assert finishes(run) == pytest.approx({"A": 12.0, "B": 9.0})
    assert run.shared == [("A", "B")] and run.violations() == []
    assert crossover_speed(0.3, 0.3) == pytest.approx(1 / 1.4)
    # nothing to overlap (no communication): no pairing, plain FIFO
    assert finishes(simulate_jobs(jobs, one, get_job_scheduler("fifo", crossover=0.0))) == {"A": 10, "B": 15}
    # per model, and any job scheduler: SJF pairs the same way
    sjf = simulate_jobs(
        [Job("A", 0, 1, 10, model="m"), Job("B", 2, 1, 5, model="n")],
        one,
        get_job_scheduler("sjf", crossover={"m": 0.3, "n": 0.3}),
    )
    assert finishes(sjf) == pytest.approx({"A": 12.0, "B": 9.0})
    with pytest.raises(SchedulerError, match="crossover: a communication share must be a number in \\[0, 1\\)"):
        get_job_scheduler("fifo", crossover=1.5)


def test_a_crossover_start_that_breaks_a_rule_is_named():
    from taskflow.jobscheduling import JobScheduler, Start

    class Bad(JobScheduler):
        name = "bad"

        def __init__(self, beside, workers):
            super().__init__()
            self.beside, self.ws = beside, workers

        def decide(self, event, view):
            if view.now == 0:
                return [Start("A", (0,))]
            return [Start(j.job.id, self.ws, beside=self.beside) for j in view.waiting]

    jobs = [Job("A", 0, 1, 10), Job("B", 1, 1, 5)]
    with pytest.raises(SchedulerError, match="beside job 'Z', which is not running"):
        simulate_jobs(jobs, JobCluster(1, 1, 2), Bad("Z", (0,)))
    with pytest.raises(SchedulerError, match="beside job 'A', which runs on other workers than \\[1\\]"):
        simulate_jobs(jobs, JobCluster(1, 1, 2), Bad("A", (1,)))


def test_time_slicing_and_preemption_keep_crossover_partners_on_their_workers():
    from taskflow.jobs import generate_trace

    import dataclasses

    four = JobCluster(1, 1, 4)
    trace = generate_trace(80, seed=2, cluster=four, load=2.0, median_duration=200, sizes={1: 0.7, 2: 0.3})
    elastic = [dataclasses.replace(j, max_workers=4) if k % 3 == 0 else j for k, j in enumerate(trace.jobs)]
    for name, opts in (
        ("gandiva", {"round": 60}),
        ("las", {"round": 60, "thresholds": (100,)}),
        ("srtf", {}),
        ("gittins", {"round": 60}),
    ):
        run = simulate_jobs(trace, four, get_job_scheduler(name, crossover=0.3, **opts), restore=5, drain=2)
        assert run.shared and run.violations() == [], (name, run.violations()[:2])
    # grown and shrunk elastic jobs beside Crossover partners, lost workers too
    run = simulate_jobs(
        elastic,
        four,
        get_job_scheduler("gandiva", crossover=0.3, round=60),
        restore=5,
        drain=2,
        changes=[(500.0, "lost", 2), (3000.0, "added", 2)],
    )
    assert run.violations() == [] and any(len({len(w) for _, _, w in r.runs}) > 1 for r in run.records)


# ----------------------------------------------------------------------------- elastic jobs
def test_gandiva_grows_an_elastic_job_onto_idle_workers_and_shrinks_it_when_jobs_wait():
    two = JobCluster(1, 1, 2)
    jobs = [Job("A", 0, 1, 20, max_workers=2), Job("B", 12, 1, 4)]
    # A alone on one worker; at the round's end (10) it grows onto the idle one and runs twice as fast;
    # B arrives at 12: A shrinks back to one worker, B takes the other (A: 14 s done, 18 at 16); B ends at
    # 16 and A grows again: its last 2 s at twice the speed
    run = simulate_jobs(jobs, two, get_job_scheduler("gandiva", round=10))
    a, b = run.records
    assert [(s, e, len(w)) for s, e, w in a.runs] == [(0, 10, 1), (10, 12, 2), (12, 16, 1), (16, 17, 2)]
    assert (b.start, b.finish, a.preemptions) == (12, 16, 0) and run.violations() == []
    # each resize restores the checkpoint, 1 s: at 10, 12 and 16
    assert finishes(simulate_jobs(jobs, two, get_job_scheduler("gandiva", round=10), restore=1)) == {"A": 19.5, "B": 16}
    # a rigid job is never resized
    rigid = simulate_jobs([Job("A", 0, 1, 20), Job("B", 12, 1, 4)], two, get_job_scheduler("gandiva", round=10))
    assert [len(w) for _, _, w in rigid.records[0].runs] == [1]


def test_a_resize_that_breaks_a_rule_is_named_and_an_elastic_job_is_checked_on_reading(tmp_path):
    from taskflow.jobs import load_trace
    from taskflow.jobscheduling import JobScheduler, Resize, Start

    class Resizing(JobScheduler):
        name = "resizing"

        def __init__(self, to):
            super().__init__()
            self.to = to

        def decide(self, event, view):
            if view.now == 0:
                return [Start(j.job.id, {"A": (0,), "B": (1,)}[j.job.id]) for j in view.waiting]
            return [Resize("A", self.to)]

    jobs = [Job("A", 0, 1, 10, max_workers=2), Job("B", 0, 1, 10), Job("C", 1, 1, 1)]
    three = JobCluster(1, 1, 3)
    with pytest.raises(SchedulerError, match="resizes job 'A' to 3 workers, but it may run on 1-2 workers"):
        simulate_jobs(jobs, three, Resizing((0, 1, 2)))
    with pytest.raises(SchedulerError, match="to 2 workers, but it cannot take worker 1 \\(job 'B''s\\)"):
        simulate_jobs(jobs, three, Resizing((0, 1)))
    p = tmp_path / "t.json"
    p.write_text(
        '{"format": "taskflow-jobs/1", "jobs": [{"id": "e", "arrival": 0, "workers": 4, "duration": 5, '
        '"min_workers": 8}]}'
    )
    with pytest.raises(FormatError, match="'e'.*min_workers <= workers <= max_workers, got 8, 4, 4"):
        load_trace(p)


def test_a_profiled_jobs_cost_graph_is_timed_on_its_allocation_as_a_library_model_is(tmp_path):
    from taskflow.formats import save_graph
    from taskflow.training.jobnet import graph_iterations
    from workflows.training import data_parallel

    path = str(tmp_path / "job.graph.json")
    save_graph(data_parallel("resnet50", workers=4, iterations=2), path)  # what `taskflow train --cost-graph` writes
    cluster = JobCluster(2, 1, 4, uplink=1.25e9)
    net = JobNetwork(cluster, graph_iterations(cluster))
    for counts in ((4,), (2, 2), (3, 1)):
        assert net.time(path, counts) == pytest.approx(net.time("resnet50", counts))
    assert net.time(path, (2, 2)) > net.time(path, (4,))
    assert net.time(path, (2, 1)) is None  # profiled on four ranks: not timed on three workers
    job = Job("p", 0, 4, 10.0, model=path)
    assert 0 < net.speeds([(job, (0, 1, 4, 5))])["p"] < 1


def test_ordered_allreduces_take_turns_on_an_uplink_and_slow_only_past_its_capacity():
    cluster = JobCluster(3, 1, 2, uplink=1.0)
    jobs = [Job("A", 0, 3, 3.0, model="m"), Job("B", 0, 3, 1.5, model="m")]
    # each spends half its iteration (1 s of 2) on rack 1's uplink: together they fill it, no more; both at
    # the half speed crossing racks costs alone, not the third that sharing the uplink at once gives
    ordered = simulate_jobs(jobs, cluster, "fifo", network=JobNetwork(cluster, _narrow, ordered=True))
    assert finishes(ordered) == pytest.approx({"A": 6.0, "B": 3.0})
    shared = simulate_jobs(jobs, cluster, "fifo", network=JobNetwork(cluster, _narrow))
    assert finishes(shared) == pytest.approx({"A": 7.5, "B": 4.5})
    # a third job on the same uplink: 1.5 times what it carries, each at 1 / (2 x 1.5)
    net = JobNetwork(JobCluster(4, 1, 3, uplink=1.0), _narrow, ordered=True)  # racks of workers 0-2, 3-5, ...
    three = [(Job(k, 0, 2, 1.0, model="m"), ws) for k, ws in (("a", (0, 3)), ("b", (1, 6)), ("c", (2, 9)))]
    assert net.speeds(three) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_a_profile_joined_with_later_passes_takes_each_kinds_median_and_keeps_its_interference():
    from taskflow.training.jobprofile import JobProfile

    a, b = ("mlp", 2, 32), ("cnn", 1, 32)
    table = Interference({("x", "y"): 0.5})
    first = JobProfile({a: 0.5, b: 0.1}, {a: 4.0, b: 1.0}, table, 4, 32, across={a: 6.0}, uplink=10.0)
    second = JobProfile({a: 0.3, b: 0.2}, {a: 2.0, b: 3.0}, Interference(), 4, 32, across={a: 5.0})
    third = JobProfile({a: 0.4, b: 0.3}, {a: 3.5, b: 2.0}, Interference(), 4, 32, across={a: 9.0})
    both = first.joined(second)
    assert both.epoch == {a: 3.0, b: 2.0} and both.start == {a: 0.4, b: pytest.approx(0.15)}
    assert both.across == {a: 5.5} and both.interference is table and both.uplink == 10.0
    three = both.joined(third)
    assert len(three.passes) == 3
    assert three.epoch == {a: 3.5, b: 2.0} and three.start == {a: 0.4, b: 0.2} and three.across == {a: 6.0}
    assert three.to_dict()["kinds"][0]["epochs"] == [1.0, 3.0, 2.0]  # cnn's, pass by pass
    assert three.duration(Job("j", 0, 2, 1, model="mlp", iterations=8)) == pytest.approx(0.4 + 2 * 3.5)
    with pytest.raises(UsageError, match="same kinds"):
        first.joined(JobProfile({a: 0.5}, {a: 4.0}, table, 4, 32))
