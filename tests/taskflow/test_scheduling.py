"""The scheduler interface and registry: names found through the entry-point group, a plugin package
of a user's own, dynamic schedulers' schedules, and what importing the core pulls in."""

import subprocess
import sys
import textwrap

import pytest

import taskflow
from taskflow import Cluster, TaskflowError, UnknownSchedulerError, scheduling
from workflows.scientific import random_layered

PLUGIN = '''
from taskflow.scheduling import Scheduler
from taskflow.schedule import Schedule


class OneWorker(Scheduler):
    """Everything on the first worker, in topological order."""

    name = "one-worker"
    summary = "all tasks on the first worker (a test plugin)"

    def plan(self, model):
        a = model.arrays
        t, rows = 0.0, []
        for i in a.topo.tolist():
            d = float(model.durations[i, 0])
            rows.append((a.ids[i], model.cluster.ids[0], t, t + d))
            t += d
        return Schedule(*map(list, zip(*rows)), scheduler=self.name)


class NotAScheduler:
    name = "not-a-scheduler"
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A package installed the way pip leaves one: its code and a dist-info with entry points."""
    (tmp_path / "tf_plugin_pkg").mkdir()
    (tmp_path / "tf_plugin_pkg" / "__init__.py").write_text(PLUGIN)
    info = tmp_path / "tf_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tf-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent("""\
        [taskflow.schedulers]
        one-worker = tf_plugin_pkg:OneWorker
        missing = tf_plugin_pkg:NoSuchClass
        not-a-scheduler = tf_plugin_pkg:NotAScheduler
        misnamed = tf_plugin_pkg:OneWorker
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(scheduling, "_ENTRY_POINTS", None)  # read the entry points afresh
    monkeypatch.setattr(scheduling, "_REGISTRY", dict(scheduling._REGISTRY))
    yield tmp_path
    sys.modules.pop("tf_plugin_pkg", None)


def test_a_plugin_package_adds_a_scheduler_by_name_everywhere(plugin, tmp_path):
    assert "one-worker" in taskflow.available() and "heft" in taskflow.available()
    assert "tf_plugin_pkg" not in sys.modules  # listed without importing it
    g = random_layered(30, seed=3)
    c = Cluster.homogeneous(3)
    plan = taskflow.plan(g, c, "one-worker").validate(g, c)
    assert set(plan.workers) == {"w0"} and plan.makespan == pytest.approx(g.total_cost)
    trace = taskflow.simulate(g, c, "one-worker", network="simple")
    assert {r.worker for r in trace.runs} == {"w0"} and trace.makespan == pytest.approx(g.total_cost)
    # and the command line, which knows nothing of the plugin
    from taskflow.app.cli import main

    path = tmp_path / "g.json"
    taskflow.save_graph(g, path)
    assert (
        main(
            ["schedule", str(path), "--workers", "3", "--scheduler", "one-worker", "-q", "-o", str(tmp_path / "p.json")]
        )
        == 0
    )
    assert set(taskflow.load_schedule(tmp_path / "p.json").workers) == {"w0"}


def test_the_scheduler_list_shows_plugins_and_names_a_broken_one(plugin, capsys):
    from taskflow.app.cli import main

    assert main(["schedulers"]) == 0
    lines = {ln.split()[0]: ln for ln in capsys.readouterr().out.splitlines()}
    assert "all tasks on the first worker (a test plugin)" in lines["one-worker"]
    assert "broken" in lines["missing"] and "NoSuchClass" in lines["missing"]
    assert lines["heft"].split()[1] == "static" and lines["work-stealing"].split()[1] == "dynamic"


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing", "entry point 'tf_plugin_pkg:NoSuchClass' failed to load: AttributeError"),
        ("not-a-scheduler", "entry point 'tf_plugin_pkg:NotAScheduler' is not a Scheduler class"),
        ("misnamed", "entry point 'tf_plugin_pkg:OneWorker' names a class called 'one-worker'"),
    ],
)
def test_a_broken_plugin_is_named(plugin, name, message):
    with pytest.raises(TaskflowError, match=f"scheduler '{name}': {message}"):
        taskflow.get_scheduler(name)
    assert name in taskflow.available()  # listed by name; left out where classes are needed
    assert name not in taskflow.available("static") and "one-worker" in taskflow.available("static")


def test_unknown_names_list_the_known_ones():
    with pytest.raises(UnknownSchedulerError, match="known schedulers: adaptive, blevel, blevel-dynamic, cpop"):
        taskflow.get_scheduler("heftt")


def test_register_refuses_a_taken_name():
    class Impostor(scheduling.Scheduler):
        name = "heft"

    taskflow.get_scheduler("heft")  # make sure the real one is registered
    with pytest.raises(ValueError, match="scheduler name 'heft' is taken by HEFT"):
        scheduling.register(Impostor)


def test_a_dynamic_scheduler_has_no_plan_but_taskflow_plan_simulates_it():
    g = random_layered(40, seed=5, bandwidth=100.0)
    c = Cluster.heterogeneous([1.0, 2.0, 3.0], bandwidth=100.0)
    with pytest.raises(TaskflowError, match="'work-stealing' is a dynamic scheduler.*taskflow.plan"):
        taskflow.get_scheduler("work-stealing").schedule(g, c)
    plan = taskflow.plan(g, c, "work-stealing").validate(g, c)
    ran = taskflow.simulate(g, c, "work-stealing", network="simple")
    assert plan.makespan == ran.makespan and plan.worker_of() == {r.task: r.worker for r in ran.runs}
    heft = taskflow.plan(g, c, "heft")
    assert heft.worker_of() == taskflow.get_scheduler("heft").schedule(g, c).worker_of()


def test_importing_the_core_pulls_in_neither_dask_nor_the_schedulers_nor_plotting():
    code = (
        "import sys, taskflow; g = taskflow.TaskGraph(); g.add_task('a'); "
        "print(sorted(m for m in ('distributed', 'dask', 'matplotlib', 'schedulers', 'workflows', "
        "'taskflow.simulator', 'taskflow.runtime', 'taskflow.app') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = (
        "import sys, taskflow; taskflow.simulate(taskflow.TaskGraph(), taskflow.Cluster.homogeneous(1), 'heft'); "
        "print(sorted(m for m in ('distributed', 'matplotlib', 'taskflow.runtime', 'schedulers.heft') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['schedulers.heft']"  # the scheduler, found by name; still no Dask


@pytest.mark.parametrize(
    "spelling, name",
    [
        ("HEFT", "heft"),
        ("work_stealing", "work-stealing"),
        ("Work Stealing", "work-stealing"),
        ("critical-path", "cpop"),
        ("Critical_Path", "cpop"),
        ("B-Level", "blevel"),
        ("round_robin", "round-robin"),
    ],
)
def test_scheduler_names_are_forgiving(spelling, name):
    from taskflow.scheduling import get_scheduler

    assert get_scheduler(spelling).name == name


def test_dask_names_no_scheduler_and_says_which_is_dasks_own():
    """One word per thing: "dask" is Dask itself (and one of adaptive's choices), no alias."""
    from taskflow.errors import UnknownSchedulerError
    from taskflow.scheduling import get_scheduler

    with pytest.raises(UnknownSchedulerError, match="Dask's own scheduling is 'work-stealing'"):
        get_scheduler("dask")


def test_an_unknown_scheduler_name_suggests_the_closest():
    from taskflow.errors import UnknownSchedulerError
    from taskflow.scheduling import get_scheduler

    with pytest.raises(UnknownSchedulerError, match="did you mean 'heft'"):
        get_scheduler("hfet")
    with pytest.raises(UnknownSchedulerError) as e:
        get_scheduler("zzzz")
    assert "did you mean" not in str(e.value)
