"""A shared cluster: job traces (native, Tiresias' CSV), the job schedulers as decision cores, and
the job-level simulator's exact completion times on hand-computed traces; every decision checked."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taskflow.errors import FormatError, SchedulerError, TaskflowError, UnknownSchedulerError
from taskflow.jobs import JobCluster, JobTrace, generate_trace, load_job_cluster, load_trace, save_trace, simulate_jobs
from taskflow.jobscheduling import Job, JobScheduler, Preempt, Start, get_job_scheduler, job_scheduler_names, place

TWO = JobCluster(1, 1, 2)
#: A holds both workers from 0; B (both) arrives at 1; C (one) at 2
ABC = [Job("A", 0, 2, 10), Job("B", 1, 2, 5), Job("C", 2, 1, 3)]


def times(run) -> dict:
    return {r.job.id: (r.start, r.finish, r.preemptions) for r in run.records}


# ----------------------------------------------------------------------------- hand-computed runs
def test_fifo_runs_in_arrival_order_and_the_head_blocks_the_rest():
    assert times(simulate_jobs(ABC, TWO, "fifo")) == {"A": (0, 10, 0), "B": (10, 15, 0), "C": (15, 18, 0)}
    # C (one worker) could start beside nothing at 10, but B arrived first: strict order, C waits
    run = simulate_jobs([Job("A", 0, 1, 4), Job("B", 1, 2, 2), Job("C", 2, 1, 1)], TWO, "fifo")
    assert times(run) == {"A": (0, 4, 0), "B": (4, 6, 0), "C": (6, 7, 0)}


def test_sjf_starts_the_fewest_workers_first_and_backfills():
    assert times(simulate_jobs(ABC, TWO, "sjf")) == {"A": (0, 10, 0), "B": (13, 18, 0), "C": (10, 13, 0)}
    run = simulate_jobs([Job("A", 0, 1, 4), Job("B", 1, 2, 2), Job("C", 2, 1, 1)], TWO, "sjf")
    assert times(run) == {"A": (0, 4, 0), "C": (2, 3, 0), "B": (4, 6, 0)}  # C beside A, B after


def test_srtf_preempts_for_the_shortest_remaining_and_leaves_a_worker_idle_rather_than_break_the_order():
    run = simulate_jobs(ABC, TWO, "srtf")
    # 1: B (5 left) displaces A (9 left); 2: C (3) displaces B (4): C holds one worker, B and A (two
    # each) do not fit in the other; 5: B; 9: A
    assert times(run) == {"A": (0, 18, 1), "B": (1, 9, 1), "C": (2, 5, 0)}
    m = run.metrics()
    assert m["avg_jct"] == pytest.approx((18 + 8 + 3) / 3) and m["preemptions"] == 2
    assert m["utilization"] == pytest.approx((2 * 18 - 3) / (2 * 18))  # one worker idle from 2 to 5


def test_a_preempted_job_pays_its_restore_on_restart():
    run = simulate_jobs(ABC, TWO, "srtf", restore=0.5)
    # B restarts at 5 and restores until 5.5; A restarts at 9.5 and restores until 10
    assert times(run) == {"A": (0, 19.0, 1), "B": (1, 9.5, 1), "C": (2, 5, 0)}


def test_las_queues_by_attained_worker_seconds_and_preempts_at_its_rounds():
    sched = get_job_scheduler("las", thresholds=(4,), round=1)
    run = simulate_jobs(ABC, TWO, sched)
    # 2: A has 4 worker-seconds (queue 1), B none: B displaces A; 4: B reaches queue 1, C (queue 0)
    # runs, A and B (two each) do not fit beside it; 7: A (first in queue 1), then B
    assert times(run) == {"A": (0, 15, 1), "B": (2, 18, 1), "C": (4, 7, 0)}


def test_las_without_thresholds_reached_is_first_come_first_served_and_its_guard_promotes_the_starved():
    assert times(simulate_jobs(ABC, TWO, "las")) == times(simulate_jobs(ABC, TWO, "fifo"))
    # L runs 5 s (10 worker-seconds: queue 1); then a stream of short jobs (queue 0) keeps it waiting
    jobs = [Job("L", 0, 2, 30)] + [Job(f"S{k}", 5 + 2 * k, 2, 2) for k in range(10)]
    plain = simulate_jobs(jobs, TWO, get_job_scheduler("las", thresholds=(10,), round=1))
    assert plain.records[0].finish == 50  # starved until the stream ends at 25, then 25 s more
    guard = simulate_jobs(jobs, TWO, get_job_scheduler("las", thresholds=(10,), round=1, promote=1.0))
    assert plain.records[0].longest_wait() == 20
    # waited as long as it last ran (5 s): back in queue 0, first come, it runs again at 10
    assert guard.records[0].runs[1][0] == 10 and guard.records[0].longest_wait() <= 5 + 1
    assert max(r.finish for r in guard.records) == 50  # work conserved: the same last finish


def test_gittins_runs_the_job_likeliest_to_finish_within_its_quantum():
    # past jobs were 2 or 20 worker-seconds: a job that has run 1 worker-second at 1 worker is
    # likely to end within a quantum of 3 (index 1/2), one that has run 3 is not (it is one of the
    # 20s): the newcomer (attained 0) goes before the old one in the same queue
    g = get_job_scheduler("gittins", thresholds=(100,), round=1, distribution=[2, 2, 2, 20])
    assert g.index(0, 3) > g.index(3, 3) == pytest.approx(0.0)
    jobs = [Job("old", 0, 1, 20), Job("new", 3, 1, 2)]
    run = simulate_jobs(jobs, JobCluster(1, 1, 1), g)
    assert times(run) == {"old": (0, 22, 1), "new": (3, 5, 0)}  # LAS would finish new at 22
    assert times(simulate_jobs(jobs, JobCluster(1, 1, 1), get_job_scheduler("las", thresholds=(100,))))["new"][1] == 22


# ----------------------------------------------------------------------------- every decision checked
class _Greedy(JobScheduler):
    name, how = "bad", "double"

    def decide(self, event, view):
        w = view.free[:1] or (0,)
        return [Start(j.job.id, w * j.job.workers if self.how == "double" else w) for j in view.waiting]


@pytest.mark.parametrize("how, message", [("double", "asks for 2"), ("taken", "which is job 'A''s")])
def test_a_decision_that_breaks_a_rule_is_named(how, message):
    s = _Greedy()
    s.how = how
    jobs = [Job("A", 0, 1, 5), Job("B", 0, 2, 5)] if how == "double" else [Job("A", 0, 1, 5), Job("B", 1, 1, 5)]
    if how == "taken":
        s.decide = lambda event, view: [Start(j.job.id, (0,)) for j in view.waiting]
    with pytest.raises(SchedulerError, match=message):
        simulate_jobs(jobs, TWO, s)


def test_a_scheduler_that_never_starts_a_job_is_an_error_not_a_hang():
    class Idle(JobScheduler):
        name = "idle"

        def decide(self, event, view):
            return []

    with pytest.raises(SchedulerError, match="waiting on an idle cluster"):
        simulate_jobs(ABC, TWO, Idle())

    class Flap(JobScheduler):  # preempts and restarts for ever
        name, round = "flap", 1.0

        def decide(self, event, view):
            return [Preempt(j.job.id) for j in view.running] + [
                Start(j.job.id, view.free[: j.job.workers]) for j in view.waiting[:0]
            ]

    with pytest.raises(SchedulerError, match="idle cluster|events"):
        simulate_jobs([Job("A", 0, 1, 1e6)], TWO, Flap())


def test_invariants_hold_on_a_generated_loaded_trace_for_every_scheduler():
    cluster = JobCluster(2, 2, 4)
    trace = generate_trace(300, seed=3, cluster=cluster, load=1.2, median_duration=600)
    for name in job_scheduler_names():
        run = simulate_jobs(
            trace, cluster, get_job_scheduler(name, **({"round": 120} if name in ("las", "gittins") else {})), restore=5
        )
        m = run.metrics()
        assert m["jobs"] == 300 and 0 < m["utilization"] <= 1.0 + 1e-9
        for r in run.records:  # none started before it arrived; every job ran its whole duration
            assert r.start >= r.arrival and r.finish >= r.start + r.job.duration - 1e-6
        assert all(0 <= n <= cluster.workers for _, n in run.busy) and run.violations() == []
        if not get_job_scheduler(name).preemptive:
            assert m["preemptions"] == 0
    srtf, fifo = (simulate_jobs(trace, cluster, n).metrics()["avg_jct"] for n in ("srtf", "fifo"))
    assert srtf < fifo  # the oracle beats first come, first served on a loaded heavy-tailed trace


def test_placement_consolidates_or_spreads():
    nodes = (0, 0, 0, 0, 1, 1, 1, 1)
    assert place([1, 2, 4, 5, 6, 7], 3, nodes) == (4, 5, 6)  # the node that holds it alone
    assert place([1, 2, 4, 5, 6], 3, nodes) == (4, 5, 6)
    assert place([0, 1, 4, 5], 4, nodes) == (0, 1, 4, 5)
    assert place([0, 1, 2, 4, 5, 6], 4, nodes, "spread") == (0, 1, 4, 5)
    with pytest.raises(SchedulerError, match="3 workers asked for, 2 free"):
        place([0, 1], 3, nodes)


# ----------------------------------------------------------------------------- traces on disk
TIRESIAS = """job_id,num_gpu,submit_time,iterations,model_name,duration,interval
1,2,0,1000,resnet50,10,0
2,2,1,500,vgg16,5,0
3,1,2,300,resnet50,3,0
"""


def test_a_tiresias_trace_and_cluster_spec_load_as_they_are(tmp_path):
    (tmp_path / "t.csv").write_text(TIRESIAS)
    (tmp_path / "c.csv").write_text(
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,1,2,32,128\n"
    )
    trace, cluster = load_trace(tmp_path / "t.csv"), load_job_cluster(tmp_path / "c.csv")
    assert [(j.id, j.arrival, j.workers, j.duration, j.model, j.iterations) for j in trace.jobs] == [
        ("1", 0, 2, 10, "resnet50", 1000),
        ("2", 1, 2, 5, "vgg16", 500),
        ("3", 2, 1, 3, "resnet50", 300),
    ]
    assert cluster.workers == 2 and cluster.cores_per_node == 32 and cluster.memory_per_node == 128
    assert times(simulate_jobs(trace, cluster, "srtf")) == {"1": (0, 18, 1), "2": (1, 9, 1), "3": (2, 5, 0)}
    save_trace(trace, tmp_path / "n.json")  # the native format, and back
    again = load_trace(tmp_path / "n.json")
    assert again.jobs == trace.jobs and json.loads((tmp_path / "n.json").read_text())["format"] == "taskflow-jobs/1"
    save_trace(again, tmp_path / "t2.csv")
    assert load_trace(tmp_path / "t2.csv").jobs == trace.jobs


@pytest.mark.parametrize(
    "text, message",
    [
        ("job_id,num_gpu,submit_time\n1,2,0\n", "needs the column(s) iterations, model_name, duration, interval"),
        (TIRESIAS.replace("1,2,0,1000", "1,2,-4,1000"), "line 2, job '1': arrival must be >= 0, got -4"),
        (TIRESIAS.replace("2,2,1,500", "2,two,1,500"), "line 3, job '2': num_gpu must be a whole number"),
        (TIRESIAS.replace(",5,0\n", ",nan,0\n"), "line 3, job '2': duration must be a number"),
        (TIRESIAS.replace("3,1,2,300", "3,0,2,300"), "job '3': workers must be >= 1"),
        ("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n", "a trace of no job"),
    ],
)
def test_a_wrong_trace_is_one_line_naming_the_line_the_job_and_the_field(tmp_path, text, message):
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(FormatError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        load_trace(tmp_path / "t.csv")
    assert "\n" not in str(e.value)


def test_a_job_larger_than_the_cluster_is_refused_or_set_aside_and_a_cluster_needs_workers(tmp_path):
    jobs = [Job("big", 0, 4, 1), Job("ok", 0, 1, 1)]
    with pytest.raises(FormatError, match="job 'big' asks for 4 workers, the cluster has 2"):
        simulate_jobs(jobs, TWO, "fifo")
    run = simulate_jobs(jobs, TWO, "fifo", skip_too_large=True)
    assert [r.job.id for r in run.records] == ["ok"] and run.to_dict()["rejected"][0]["id"] == "big"
    (tmp_path / "c.csv").write_text(
        "num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,0,8,32,128\n"
    )
    with pytest.raises(FormatError, match="nodes_per_rack must be an integer >= 1"):
        load_job_cluster(tmp_path / "c.csv")
    with pytest.raises(FormatError, match="appears twice"):
        JobTrace([Job("x", 0, 1, 1), Job("x", 1, 1, 1)])
    (tmp_path / "n.json").write_text(
        json.dumps({"format": "taskflow-jobs/1", "jobs": [{"id": "a", "arrival": 0, "workers": 1}]})
    )
    with pytest.raises(FormatError, match=r"job 1 \('a'\): missing field 'duration'"):
        load_trace(tmp_path / "n.json")


def test_unknown_schedulers_and_options_are_named():
    with pytest.raises(
        UnknownSchedulerError, match="unknown scheduler .lifo..*known schedulers: fifo, gandiva, gittins, las"
    ):
        get_job_scheduler("lifo")
    with pytest.raises(SchedulerError, match="takes no option 'quantum'"):
        get_job_scheduler("las", quantum=3)
    with pytest.raises(SchedulerError, match="thresholds must be"):
        get_job_scheduler("las", thresholds=(5, 2))
    with pytest.raises(TaskflowError, match="round must be a number > 0"):
        get_job_scheduler("gittins", round=0)


def test_generated_traces_are_seeded_and_shaped_as_asked():
    cluster = JobCluster(1, 4, 8)
    a, b = generate_trace(2000, seed=1, cluster=cluster), generate_trace(2000, seed=1, cluster=cluster)
    assert a.jobs == b.jobs and a.jobs != generate_trace(2000, seed=2, cluster=cluster).jobs
    ws = [j.workers for j in a.jobs]
    assert set(ws) <= {1, 2, 4, 8, 16, 32} and ws.count(1) > len(ws) / 2
    d = sorted(j.duration for j in a.jobs)
    assert d[len(d) // 2] == pytest.approx(1200, rel=0.15) and d[-1] > 20 * d[len(d) // 2]  # heavy-tailed
    arr = [j.arrival for j in a.jobs]
    offered = sum(j.service for j in a.jobs) / (arr[-1] - arr[0]) / cluster.workers
    assert 0.4 < offered < 2.5  # about the 0.9 load asked for (a heavy tail makes it noisy)
    day = generate_trace(3000, seed=1, rate=120, arrivals="diurnal", swing=0.8)
    hours = [int(j.arrival // 3600) % 24 for j in day.jobs]
    assert hours.count(6) > 2 * hours.count(18)  # the rate peaks a quarter day in, ebbs three quarters in


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    sizes=st.lists(st.floats(0.5, 1e6, allow_nan=False), min_size=0, max_size=40),
    learnt=st.lists(st.floats(0.5, 1e6, allow_nan=False), max_size=5),
    a=st.floats(0.0, 1e6),
    quantum=st.floats(1.0, 1e6) | st.just(float("inf")),
)
def test_the_gittins_index_is_its_definition_as_sizes_are_learnt(sizes, learnt, a, quantum):
    from taskflow.jobscheduling import Finished

    g = get_job_scheduler("gittins", distribution=sizes)
    for x in learnt:  # sizes learnt from finished jobs join the distribution
        g.decide(Finished(0.0, "x", x), _empty_view())
        g.index(a, quantum)
    every = sorted([*sizes, *learnt])
    above = [s for s in every if s > a]
    spent = sum(min(s - a, quantum) for s in above)
    want = sum(1 for s in above if s - a <= quantum) / spent if above and spent > 0 else 0.0
    assert g.index(a, quantum) == pytest.approx(want, rel=1e-9, abs=1e-15)


def _pieces(a, b, records):
    """``[a, b]`` cut at every start and end of any run."""
    cuts = sorted({a, b, *(t for r in records for x, y, _ in r.runs for t in (x, y) if a < t < b)})
    return list(zip(cuts, cuts[1:]))


def _empty_view():
    from taskflow.jobscheduling import View

    return View(0.0, (0, 1), (0, 0), ())


def test_jobs_sharing_a_node_run_at_the_speeds_the_interference_table_gives():
    from taskflow.jobs import Interference

    slow = Interference({("a", "b"): 0.5, ("b", "a"): 0.8})
    jobs = [Job("A", 0.0, 1, 10.0, model="a"), Job("B", 0.0, 1, 4.0, model="b")]
    one_node = simulate_jobs(jobs, JobCluster(1, 1, 2), "fifo", interference=slow)
    # B: 4 s of work at 0.8 -> ends at 5; A: 2.5 s done by then at 0.5, the 7.5 left alone -> 12.5
    assert {r.job.id: r.finish for r in one_node.records} == pytest.approx({"A": 12.5, "B": 5.0})
    apart = simulate_jobs(jobs, JobCluster(1, 2, 1), "fifo", interference=slow)  # a node each: no slowdown
    assert {r.job.id: r.finish for r in apart.records} == pytest.approx({"A": 10.0, "B": 4.0})
    # a preempted job leaves its node: its neighbour speeds up from then (LAS: C arrives, A is preempted)
    three = [*jobs, Job("C", 1.0, 1, 1.0, model="c")]
    las = simulate_jobs(three, JobCluster(1, 1, 2), get_job_scheduler("las", thresholds=(0.5,)), interference=slow)
    done = {r.job.id: r.finish for r in las.records}
    assert las.metrics()["preemptions"] == 1 and done["C"] == pytest.approx(2.0)  # c slows nobody, nobody slows c
    # A ran 1 s at 0.5 beside B; whichever of A and B stayed ran 1 s beside C at full speed, then they share
    # again: every job's work is done exactly (the finish times follow from the shares alone)
    for r in las.records:
        work = 0.0
        for a, b, _ in r.runs:
            for t0, t1 in _pieces(a, b, las.records):
                others = {
                    o.job.model for o in las.records if o is not r and any(x < t1 and y > t0 for x, y, _ in o.runs)
                }
                work += (t1 - t0) * (slow.speed(r.job, [Job("o", 0, 1, 1, model=m) for m in others]))
        assert work == pytest.approx(r.job.duration)
    assert Interference.from_dict(slow.to_dict()).pairs == slow.pairs
    with pytest.raises(TaskflowError, match="pairs\\[0\\].speed"):
        Interference.from_dict(
            {"format": "taskflow-interference/1", "pairs": [{"model": "a", "beside": "b", "speed": 1.5}]}
        )


def test_a_run_that_breaks_a_rule_is_caught_by_its_own_check():
    from taskflow.jobs import JobRecord, JobRun

    a, b = Job("a", 0.0, 2, 5.0), Job("b", 1.0, 1, 5.0)
    good = JobRun(
        "x",
        2,
        [
            JobRecord(a, 0.0, 0.0, 5.0, runs=[(0.0, 5.0, (0, 1))]),
            JobRecord(b, 1.0, 5.0, 10.0, runs=[(5.0, 10.0, (1,))]),
        ],
        [(0.0, 2)],
    )
    assert good.violations() == []
    twice = JobRun("x", 2, [good.records[0], JobRecord(b, 1.0, 4.0, 9.0, runs=[(4.0, 9.0, (1,))])], [(0.0, 2)])
    assert any("worker 1 held by jobs 'a'" in v for v in twice.violations())
    early = JobRun("x", 2, [JobRecord(b, 1.0, 0.5, 5.5, runs=[(0.5, 5.5, (0,))])], [(0.0, 1)])
    assert any("outside its arrival" in v for v in early.violations())


# ----------------------------------------------------------------------------- the command line
def test_taskflow_jobs_generate_then_simulate_writes_only_what_it_is_asked_to(tmp_path, capsys):
    from taskflow.app.cli import main

    trace = tmp_path / "t.json"
    assert main(["jobs", "generate", str(trace), "--workers", "16", "--count", "40", "--seed", "2", "-q"]) == 0
    out = tmp_path / "runs.json"
    assert main(["jobs", "simulate", str(trace), "--scheduler", "fifo,srtf", "-o", str(out), "-q"]) == 0
    table = capsys.readouterr().out
    assert "srtf" in table and "fifo" in table and "avg JCT" in table
    doc = json.loads(out.read_text())
    assert [r["scheduler"] for r in doc["runs"]] == ["fifo", "srtf"] and len(doc["runs"][0]["jobs"]) == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.json", "t.json"]
    # the trace simulated is never overwritten by an output
    before = trace.read_bytes()
    assert main(["jobs", "simulate", str(trace), "-o", str(trace)]) == 2
    assert main(["jobs", "simulate", str(trace), "--plot", str(trace)]) == 2
    assert trace.read_bytes() == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["simulate", "T", "--scheduler", "fifo", "--round", "5"], "--round goes with las, gittins or gandiva"),
        (["simulate", "T", "--scheduler", "fifo", "--promote", "5"], "--promote go with las or gittins"),
        (["simulate", "T", "--placement", "interference-aware"], "needs the interference table"),
        (["simulate", "T", "--interference", "NEW"], "new.json"),
        (["simulate", "T", "--crossover", "1.5"], "--crossover"),
        (["simulate", "T", "--scheduler", "nope"], "nope"),
        (["simulate", "T", "--workers", "4"], "asks for"),
        (["run", "T"], "--data DIR"),
        (["generate", "NEW"], "--cluster FILE or --workers N"),
    ],
)
def test_taskflow_jobs_refuses_bad_input_in_one_line(tmp_path, capsys, argv, message):
    from taskflow.app.cli import main

    trace = tmp_path / "t.json"
    main(["jobs", "generate", str(trace), "--workers", "16", "--count", "20", "-q"])
    capsys.readouterr()
    argv = [str(trace) if a == "T" else str(tmp_path / "new.json") if a == "NEW" else a for a in argv]
    assert main(["jobs", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_median_run_stands_for_repeats_job_by_job():
    from taskflow.app.jobs_real import median_run

    jobs = [Job("A", 0, 1, 4), Job("B", 1, 1, 2)]
    runs = [
        simulate_jobs([dataclasses.replace(j, duration=j.duration * f) for j in jobs], TWO, "fifo")
        for f in (1.0, 3.0, 2.0)
    ]
    med = median_run(runs)
    assert [(r.job.id, r.start, r.finish) for r in med.records] == [("A", 0, 8.0), ("B", 1, 5.0)]
    assert med.metrics()["avg_jct"] == pytest.approx((8 + 4) / 2)
    assert median_run(runs[:1]) is runs[0]


def test_las_attained_service_counts_the_workers_held_waiting_for_a_drain_and_a_restore_included():
    """Attained service is workers x seconds held, as the real runner counts it: J1 takes J0's four
    workers at 1 s and waits 0.05 s for J0 to drain to its checkpoint; at the 2 s round it has held
    them 4 worker-seconds and goes down a queue (counting only its progress, it would have run to
    3 s). Hand-computed: J2 and J3 start at 2 s and run from 2.05; J0 restarts at 3.05, pays its
    0.3 s restore and has 10 - 1.05 s left (it progressed while draining): 12.3 s; J1 after it."""
    jobs = [Job("J0", 0, 4, 10.0), Job("J1", 0.5, 4, 3.0), Job("J2", 1.0, 1, 1.0), Job("J3", 1.2, 1, 0.6)]
    run = simulate_jobs(
        jobs, JobCluster(1, 1, 4), get_job_scheduler("las", thresholds=(4,), round=1), restore=0.3, drain=0.05
    )
    runs = {r.job.id: [round(t, 9) for a, b, *_ in r.runs for t in (a, b)] for r in run.records}
    assert runs == {"J0": [0, 1.0, 3.05, 12.3], "J1": [1.0, 2.0, 12.3, 14.6], "J2": [2.0, 3.05], "J3": [2.0, 2.65]}
    assert run.violations() == []


def test_jobs_run_says_a_worker_lost_or_joined_in_one_line():
    from taskflow.app.cli.jobs import worker_line
    from taskflow.jobscheduling import Tick, WorkerAdded, WorkerLost

    names = ["0", "1"]
    assert worker_line(WorkerLost(3.04, 1, "a"), names) == "3.0 s: worker '1' was lost: job 'a' stops and waits again"
    assert worker_line(WorkerLost(4.0, 0, None), names) == "4.0 s: worker '0' was lost"
    assert worker_line(WorkerAdded(5.0, 1), names) == "5.0 s: worker '1' is back"
    assert worker_line(WorkerAdded(6.0, 2), names) == "6.0 s: worker number 2 (joined) is free"
    assert worker_line(Tick(1.0), names) is None
