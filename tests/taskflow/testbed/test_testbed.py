"""The network testbed: Dask workers in network namespaces on links shaped with tc.

Tests that make namespaces need root and ``ip netns`` (CI has both); elsewhere they skip and say
why. Each checks that nothing is left behind: no namespace, no host link, no process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from taskflow import TaskflowError, save_cluster
from taskflow import testbed as tbm
from taskflow.testbed import namespaces
from taskflow.app.cli import main

ROOT = Path(__file__).resolve().parents[3]
needs_testbed = pytest.mark.skipif(bool(tbm.available()), reason=f"no testbed here: {tbm.available()}")


def _host_links() -> list:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())


def _gone(tb_id: str, pids=(), timeout: float = 20.0) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        alive = [p for p in pids if _alive(p)]
        if not any(ns.startswith(tb_id) for ns in tbm.leftovers()) and not alive:
            return True
        time.sleep(0.2)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours is dead
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _cpu_groups_of(owner: int) -> list:
    base, _ = tbm.cpu_hierarchy()
    return [d for d in os.listdir(base) if d.startswith(f"{tbm.PREFIX}-cpu-{owner}-")] if base else []


# ---------------------------------------------------------------- anywhere (no root needed)
def test_rates_are_read_as_tc_writes_them():
    assert tbm.parse_rate("200mbit") == 25e6
    assert tbm.parse_rate("1gbit") == 125e6
    assert tbm.parse_rate("500kbit") == 62_500
    assert tbm.parse_rate("25mbps") == 25e6  # tc's bps is bytes per second
    assert tbm.parse_rate(1e6) == 1e6
    for bad in ("fast", "10 parsecs", "-5mbit", "0mbit", "inf", True):
        with pytest.raises(TaskflowError, match="rate"):
            tbm.parse_rate(bad)


def test_the_declared_model_is_the_narrowest_link_of_each_pair():
    tb = tbm.Testbed(workers=4, topology="two-racks", bandwidth="200mbit", inter_rack="20mbit")
    assert [tb.rack(n) for n in tb.names] == [0, 0, 1, 1]
    assert tb.rate("w0", "w1") == 25e6 and tb.rate("w0", "w2") == 2.5e6 and tb.rate("w3", "w1") == 2.5e6
    m = tb.cluster()
    assert m.bandwidth_between("w1", "w3") == 2.5e6 and m.bandwidth_between("w2", "w3") == 25e6
    assert m.racks == {"w0": 0, "w1": 0, "w2": 1, "w3": 1} and m.uplink == 2.5e6
    slow = tbm.Testbed(workers=3, topology="slow-link", bandwidth="100mbit", slow_worker="w1")
    assert slow.rate("w0", "w2") == 12.5e6 and slow.rate("w0", "w1") == slow.rate("w1", "w2") == 1.25e6
    mx = tbm.Testbed(workers=2, topology="matrix", matrix={"w0": {"w1": "8mbit"}})
    assert mx.rate("w0", "w1") == 1e6 and mx.rate("w1", "w0") == float("inf")
    for kwargs, msg in (
        ({"topology": "ring"}, "unknown topology 'ring'"),
        ({"workers": 0}, "workers must be"),
        ({"topology": "slow-link", "slow_worker": "w9"}, "slow worker 'w9'"),
        ({"topology": "matrix"}, "needs a matrix"),
        ({"topology": "matrix", "matrix": {"w0": {"w0": "1mbit"}}}, "bad destination 'w0'"),
    ):
        with pytest.raises(TaskflowError, match=msg):
            tbm.Testbed(**{"workers": 2, **kwargs})


def test_racks_through_a_core_are_declared_with_their_uplink():
    tb = tbm.Testbed(workers=7, topology="racks", racks=3, bandwidth="200mbit", inter_rack="40mbit")
    assert [tb.rack(n) for n in tb.names] == [0, 0, 0, 1, 1, 2, 2]  # consecutive, as even as 7 allows
    assert tb.rate("w0", "w2") == 25e6 and tb.rate("w0", "w3") == 5e6 and tb.rate("w6", "w5") == 25e6
    m = tb.cluster()
    assert m.racks == {n: tb.rack(n) for n in tb.names} and m.uplink == 5e6
    assert m.bandwidth_between("w5", "w1") == 5e6 and m.bandwidth_between("w3", "w4") == 25e6
    assert "each rack's uplink and downlink to the core: 40 Mbit/s" in tb.describe()
    for racks in (1, 8, True, "2"):
        with pytest.raises(TaskflowError, match="racks needs 2 to 7 racks"):
            tbm.Testbed(workers=7, topology="racks", racks=racks)


def test_the_cli_refuses_more_racks_than_workers(capsys):
    assert main(["testbed", "--workers", "3", "--topology", "racks", "--racks", "4", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err == "error: racks needs 2 to 3 racks (one worker each at least), got 4\n"


def test_without_root_the_cli_says_what_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(namespaces, "_AVAILABLE", [])
    monkeypatch.setattr(namespaces.os, "geteuid", lambda: 1000)
    assert main(["testbed", "--workers", "2", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the testbed needs root") and err.count("\n") == 1
    with pytest.raises(tbm.TestbedUnavailable, match="needs root"):
        tbm.Testbed(workers=1).start()


def test_the_cli_needs_a_command(capsys):
    assert main(["testbed", "--workers", "2"]) == 2
    assert "give the command to run inside the testbed after --" in capsys.readouterr().err
    before = tbm.leftovers()
    assert main(["testbed", "--workers", "2", "--", "/nonexistent/cmd"]) == 2
    assert "cannot run '/nonexistent/cmd' in the testbed: no such command" in capsys.readouterr().err
    assert tbm.leftovers() == before  # refused before any namespace is made


def test_testbed_workers_get_the_environment_dask_s_nanny_gives_its_worker():
    """Testbed workers run without a nanny; they get what a nanny would set before starting one
    (one OpenMP, MKL and OpenBLAS thread a process), or each worker's linear algebra starts a
    thread per core and the workers contend (the suite's SVD tasks took about 10x longer on two racks)."""
    import dask

    from taskflow.runtime.launch.local import nanny_environ

    env = nanny_environ()
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    with dask.config.set(
        {"distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 4}, "distributed.nanny.environ": {"EXTRA": "x"}}
    ):
        assert nanny_environ() == {"OMP_NUM_THREADS": "4", "EXTRA": "x"}


# ---------------------------------------------------------------- real namespaces (root)
SCRIPT = r"""
import json, sys
import taskflow
from taskflow import TaskGraph, load_cluster
model = load_cluster(sys.argv[1])
size = int(sys.argv[2])
g = TaskGraph("across")
slow = {w: 60.0 for w in model.ids}
# a on w0 (rack 0), b on w3 (rack 1): any other place costs a minute, the transfer seconds
g.add_task("a", cost=0.05, costs={**slow, "w0": 0.05}, output_size=size)
g.add_task("b", cost=0.05, costs={**slow, "w3": 0.05})
g.add_task("c", cost=0.05, costs={**slow, "w1": 0.05}, output_size=size)
g.add_task("d", cost=0.05, costs={**slow, "w1": 0.05})
g.add_edge("a", "b")
g.add_edge("c", "d")
rep = taskflow.run(g, "heft", cluster=model, quiet=True, timeout=120)
print(json.dumps({"placed": {r.task: r.worker for r in rep.trace.runs},
                  "transfers": [[t.task, t.source, t.destination, t.bytes, t.finish - t.start]
                                for t in rep.trace.transfers]}))
"""


@pytest.mark.slow
@pytest.mark.testbed
@needs_testbed
def test_a_transfer_across_the_slow_link_takes_at_least_size_over_its_rate(tmp_path):
    before = _host_links()
    size = 4 << 20
    with tbm.Testbed(workers=4, topology="two-racks", bandwidth="200mbit", inter_rack="20mbit") as tb:
        ids = [ns for ns in tbm.leftovers() if ns.startswith(tb.id)]
        assert len(ids) == 7  # switch, scheduler, client, 4 workers
        pids = [p.pid for p in tb.procs.values()] + [tb.reaper.pid]
        save_cluster(tb.cluster(), tmp_path / "cluster.json")
        p = tb.exec([sys.executable, "-c", SCRIPT, str(tmp_path / "cluster.json"), str(size)], timeout=180)
        assert p.returncode == 0, p.stderr[-3000:]
        out = json.loads(p.stdout.strip().splitlines()[-1])
        assert _host_links() == before  # nothing made in the host's namespace
    assert out["placed"] == {"a": "w0", "b": "w3", "c": "w1", "d": "w1"}
    moved = {t[0]: t for t in out["transfers"]}
    assert set(moved) == {"a"} and moved["a"][1:3] == ["w0", "w3"] and moved["a"][3] >= size
    # 4 MiB over the 20 Mbit/s inter-rack link: at least 1.68 s (the bucket's 16 KiB burst aside)
    assert moved["a"][4] >= (size - (16 << 10)) / tb.inter_rack
    assert moved["a"][4] < 3 * size / tb.inter_rack
    assert _gone(tb.id, pids, timeout=10)
    assert _host_links() == before


@pytest.mark.slow
@pytest.mark.testbed
@needs_testbed
def test_calibration_per_pair_recovers_the_shaped_rates():
    script = (
        "import json; from distributed import Client; from taskflow.runtime import cluster_from_dask\n"
        "m = cluster_from_dask(Client(timeout='30s'), pairs=True)\n"
        "print(json.dumps({a: {b: m.bandwidth_between(a, b) for b in m.ids if b != a} for a in m.ids}))"
    )
    with tbm.Testbed(workers=3, topology="slow-link", bandwidth="160mbit", slow_bandwidth="16mbit") as tb:
        p = tb.exec([sys.executable, "-c", script], timeout=240)
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
        for a, row in got.items():
            for b, rate in row.items():
                assert abs(rate - tb.rate(a, b)) <= 0.15 * tb.rate(a, b), (a, b, rate, tb.rate(a, b))
    assert got["w0"]["w2"] < got["w0"]["w1"] / 5  # the slow link is seen as slow


@pytest.mark.slow
@pytest.mark.testbed
@needs_testbed
def test_calibration_finds_three_racks_behind_a_core_switch():
    script = (
        "import json; from distributed import Client; from taskflow.runtime import cluster_from_dask\n"
        "m = cluster_from_dask(Client(timeout='30s'), pairs=True)\n"
        "print(json.dumps({'racks': m.racks, 'uplink': m.uplink}))"
    )
    with tbm.Testbed(workers=6, topology="racks", racks=3, bandwidth="100mbit", inter_rack="20mbit") as tb:
        p = tb.exec([sys.executable, "-c", script], timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
        want = {n: tb.rack(n) for n in tb.names}
    assert got["racks"] is not None and len(set(got["racks"].values())) == 3
    same = {(a, b) for a in want for b in want if want[a] == want[b]}
    assert {(a, b) for a in got["racks"] for b in got["racks"] if got["racks"][a] == got["racks"][b]} == same
    assert abs(got["uplink"] - 2.5e6) <= 0.15 * 2.5e6  # 20 Mbit/s


CHILD = r"""
import sys, time
from taskflow.testbed import Testbed, cpu_limits_available
tb = Testbed(workers=2, bandwidth="100mbit", cpus=None if cpu_limits_available() else {"w1": 0.5}).start()
print(tb.id, *[p.pid for p in tb.procs.values()], tb.reaper.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.testbed
@needs_testbed
def test_an_owner_killed_outright_leaves_nothing_behind():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        line = child.stdout.readline().split()
        assert line, "the testbed did not start"
        tb_id, pids = line[0], [int(x) for x in line[1:]]
        assert any(ns.startswith(tb_id) for ns in tbm.leftovers())
        assert bool(_cpu_groups_of(child.pid)) == (not tbm.cpu_limits_available())
        child.send_signal(signal.SIGKILL)  # no finally, no atexit: the reaper must clean up
        child.wait(timeout=10)
        assert _gone(tb_id, pids[:-1], timeout=20), tbm.leftovers()
        assert not (tbm.STATE_DIR / f"{tb_id}.json").exists()
        assert not _cpu_groups_of(child.pid)  # the CPU limit's group went too
    finally:
        if child.poll() is None:
            child.kill()


@pytest.mark.testbed
@needs_testbed
def test_ctrl_c_on_the_cli_ends_the_command_and_removes_everything():
    before = _host_links()
    proc = subprocess.Popen(
        [sys.executable, "-m", "taskflow", "testbed", "--workers", "2", "--bandwidth", "50mbit", "--", "sleep", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        t0 = time.monotonic()
        mine = []
        while time.monotonic() - t0 < 60 and not mine:
            mine = [ns for ns in tbm.leftovers() if ns.endswith("-c")]
            time.sleep(0.2)
        assert mine, "the testbed did not come up"
        tb_id = mine[0][:-2]
        while time.monotonic() - t0 < 60 and not namespaces.ns_pids(mine[0]):
            time.sleep(0.2)  # the command has started in the client namespace
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        out, err = proc.communicate(timeout=30)
        assert proc.returncode in (130, -signal.SIGINT, 128 + signal.SIGINT), err
        assert _gone(tb_id, timeout=10), tbm.leftovers()
        assert _host_links() == before
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.testbed
@needs_testbed
def test_the_cli_runs_the_command_beside_the_cluster_and_returns_its_status(tmp_path):
    script = (
        "import os; from distributed import Client; from taskflow import load_cluster\n"
        "c = Client(timeout='30s'); ws = sorted(w['name'] for w in c.scheduler_info()['workers'].values())\n"
        "m = load_cluster(os.environ['TASKFLOW_TESTBED_CLUSTER'])\n"
        "print(ws, m.ids, m.bandwidth_between('w0', 'w2')); raise SystemExit(7)"
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "taskflow",
            "testbed",
            "--workers",
            "3",
            "--topology",
            "slow-link",
            "--bandwidth",
            "80mbit",
            "--",
            sys.executable,
            "-c",
            script,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 7, p.stderr[-2000:]
    assert p.stdout.strip() == "['w0', 'w1', 'w2'] ['w0', 'w1', 'w2'] 1000000.0"
    assert "w2: 10.213.7.13, rack 0, link 8 Mbit/s" in p.stderr
    tb_id = p.stderr.split("testbed ", 1)[1].split(":", 1)[0]
    assert tb_id.startswith(tbm.PREFIX) and _gone(tb_id, timeout=5)


@pytest.mark.testbed
@needs_testbed
def test_a_per_pair_matrix_shapes_each_direction_on_its_own():
    script = (
        "import json; from distributed import Client; from taskflow.runtime.client.calibrate import measure_pairs\n"
        "c = Client(timeout='30s')\n"
        "ws = {w['name']: a for a, w in c.scheduler_info()['workers'].items()}\n"
        "print(json.dumps(measure_pairs(c, ws)))"
    )
    with tbm.Testbed(workers=2, topology="matrix", matrix={"w0": {"w1": "40mbit"}, "w1": {"w0": "8mbit"}}) as tb:
        p = tb.exec([sys.executable, "-c", script], timeout=120)
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
    assert abs(got["w0"]["w1"] - 5e6) <= 0.15 * 5e6, got
    assert abs(got["w1"]["w0"] - 1e6) <= 0.15 * 1e6, got


# ---------------------------------------------------------------- CPU limits (root, a cgroup cpu controller)
needs_cpu_limits = pytest.mark.skipif(
    bool(tbm.cpu_limits_available()), reason=f"no CPU limits here: {tbm.cpu_limits_available()}"
)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_cpu_limits_refuse_bad_figures():
    if tbm.cpu_limits_available():
        with pytest.raises(TaskflowError, match="root|cgroup"):
            tbm.CpuLimits({os.getpid(): 0.5})
        return
    for bad in (0, -1, float("nan"), "half", True):
        with pytest.raises(TaskflowError, match="not a positive number of cores"):
            tbm.CpuLimits({os.getpid(): bad})
    with pytest.raises(TaskflowError, match="cpus: unknown worker 'w9'"):
        tbm.Testbed(workers=2, cpus={"w9": 0.5})
    with pytest.raises(TaskflowError, match=r"cpus\['w1'\]"):
        tbm.Testbed(workers=2, cpus={"w1": 0})


def test_the_cli_refuses_a_malformed_cpus_option(capsys):
    assert main(["testbed", "--workers", "2", "--cpus", "w1:0.5", "--", "true"]) == 2
    assert "--cpus: 'w1:0.5' is not WORKER=CORES" in capsys.readouterr().err


@needs_cpu_limits
def test_a_cpu_limit_holds_a_busy_process_to_its_share_and_is_removed_after():
    from taskflow.runtime.worker.worker_plugin import cpu_limit

    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with tbm.CpuLimits({busy.pid: 0.25}) as cl:
            assert cpu_limit(f"/proc/{busy.pid}") == pytest.approx(0.25)
            c0, t0 = _cpu_seconds(busy.pid), time.monotonic()
            time.sleep(1.5)
            share = (_cpu_seconds(busy.pid) - c0) / (time.monotonic() - t0)
            groups = list(cl.groups)
        assert 0.1 <= share <= 0.4, share  # a quarter of a core, not the whole one it would take
        assert groups and not any(os.path.exists(g) for g in groups)
        assert cpu_limit(f"/proc/{busy.pid}") is None  # back in the root group, unlimited
    finally:
        busy.kill()
        busy.wait()


SPEEDS = r"""
import json, time
from distributed import Client
from taskflow.runtime import cluster_from_dask

def spin(_):
    t = time.perf_counter()
    acc = 0
    for i in range(1_500_000):
        acc = (acc + i * i) % 1_000_003
    return time.perf_counter() - t

c = Client(timeout="30s")
addrs = {w["name"]: a for a, w in c.scheduler_info()["workers"].items()}
took = {n: min(c.submit(spin, k, workers=[a], pure=False).result() for k in range(3)) for n, a in addrs.items()}
model = cluster_from_dask(c, calibrate=True)
from taskflow.runtime.worker.worker_plugin import cpu_limit
# each worker names itself: a worker reconnecting under load is briefly missing from scheduler_info()
limits = dict(c.run(lambda dask_worker: (str(dask_worker.name), cpu_limit())).values())
import os
blas = sorted(set(c.run(lambda: os.environ.get("OPENBLAS_NUM_THREADS")).values()))
print(json.dumps({"took": took, "speeds": {w.id: w.speed for w in model.workers}, "limits": limits, "blas": blas}))
"""


@pytest.mark.slow
@pytest.mark.testbed
@needs_testbed
@needs_cpu_limits
def test_a_testbed_worker_with_a_quarter_core_is_four_times_slower_and_calibration_says_so():
    with tbm.Testbed(workers=2, cpus={"w1": 0.25}) as tb:
        assert tb.cluster().worker("w1").speed == pytest.approx(0.25)
        groups = list(tb.cpu_limits.groups)
        p = tb.exec([sys.executable, "-c", SPEEDS], timeout=240)
        assert p.returncode == 0, p.stderr[-3000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["limits"] == {"w0": None, "w1": 0.25}  # read in the worker's own namespace
    assert got["blas"] == ["1"]  # one BLAS thread a worker, as Dask's nanny would start it
    # really slower: a quarter core at most, less when the two cores are busy with other work
    # (clean CI runs measured 5.7x); calibration, which divides a kernel's CPU time by the
    # worker's share of a core, says several times slower too. Both carry the load of the two
    # shared cores (the unlimited worker calibrated at 2.3 and at 3.5 in two CI runs: ratios 3.6
    # and 6.0), so the bounds are wide; a missed limit would give about 1x
    assert 2.5 <= got["took"]["w1"] / got["took"]["w0"] <= 10.0, got
    assert 2.5 <= got["speeds"]["w0"] / got["speeds"]["w1"] <= 10.0, got
    assert not any(os.path.exists(g) for g in groups)
