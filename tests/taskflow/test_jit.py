"""Kernels run as plain Python on small inputs and numba-compiled on large ones
(:mod:`taskflow.jit`): the two give the same plans and traces, and a command on a small graph
never loads numba."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import schedulers
import taskflow
from taskflow import Cluster, Worker, jit
from workflows.scientific import random_layered

from tests.conftest import EXAMPLES

STATIC = schedulers.available("static")


def _problem(seed):
    g = random_layered(60, shape=1.0, out_degree=2, ccr=1.0 + seed, seed=seed, bandwidth=1e3)
    c = Cluster(
        [Worker(f"w{i}", speed=s, cores=k) for i, (s, k) in enumerate([(1, 1), (2, 2), (1.5, 1), (4, 1)])],
        bandwidth=1e3,
        latency=0.01,
    )
    return g, c


# adaptive's plan is HEFT's or heft-append's loop (both checked here): its own compile runs in make test-all
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "adaptive" else n for n in STATIC])
def test_every_static_scheduler_plans_alike_in_python_and_compiled(name):
    for seed in (0, 1):
        g, c = _problem(seed)
        options = {"budget": 0.1} if name == "optimal" else {}
        with jit.interpreted():
            plain = schedulers.get_scheduler(name, seed=seed, **options).schedule(g, c)
        with jit.compiled():
            fast = schedulers.get_scheduler(name, seed=seed, **options).schedule(g, c)
        assert plain.tasks == fast.tasks and plain.workers == fast.workers, (name, seed)
        np.testing.assert_array_equal(plain.start, fast.start)
        np.testing.assert_array_equal(plain.finish, fast.finish)


@pytest.mark.parametrize("network", ["simple", "maxmin"])
@pytest.mark.parametrize("name", ["heft", "work-stealing", "blevel-dynamic", "dask-model"])
def test_the_simulator_runs_alike_in_python_and_compiled(name, network):
    g, c = _problem(2)
    kw = dict(network=network, noise=0.2, seed=3, fail={"w1": 5.0})
    with jit.interpreted():
        plain = taskflow.simulate(g, c, name, **kw)
    with jit.compiled():
        fast = taskflow.simulate(g, c, name, **kw)
    assert [(r.run, r.worker, r.start, r.finish) for r in plain.runs] == [
        (r.run, r.worker, r.start, r.finish) for r in fast.runs
    ]
    assert [tuple(t) for t in plain.transfers] == [tuple(t) for t in fast.transfers]


def test_a_small_graph_is_planned_without_loading_numba_and_a_large_one_with_it():
    code = (
        "import sys; from taskflow.app.cli import main; "
        f"main(['schedule', {str(EXAMPLES / 'heft_paper.graph.json')!r}, '--cluster', "
        f"{str(EXAMPLES / 'heft_paper.cluster.json')!r}, '--scheduler', 'heft', '-q']); "
        "print('numba' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("heft: makespan 80  (") and lines[1:] == ["False"]
    code = (
        "import sys, schedulers; from taskflow import Cluster; from workflows.scientific import random_layered; "
        "g = random_layered(3000, shape=1.0, out_degree=2, ccr=1.0, seed=1, bandwidth=1.0); "
        "schedulers.get_scheduler('heft').schedule(g, Cluster.homogeneous(8)); print('numba' in sys.modules)"
    )
    for mode, loaded in (("always", "True"), ("never", "False")):
        env = dict(os.environ, TASKFLOW_COMPILE=mode)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
        assert out.strip() == loaded, mode
    bad = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(env, TASKFLOW_COMPILE="x")
    )
    assert "TASKFLOW_COMPILE must be auto, always or never, got 'x'" in bad.stderr


def test_a_kernel_not_cached_runs_large_inputs_as_python_until_the_process_has_spent_enough(monkeypatch):
    monkeypatch.delenv("TASKFLOW_COMPILE", raising=False)

    @jit.kernel(cache=False)  # nothing cached, ever: a first compile each process
    def total(xs):
        s = 0.0
        for x in xs:
            s += x
        return s

    big = np.ones(jit.SMALL)
    assert not total.cached()
    monkeypatch.setattr(jit, "COLD_SECONDS", 3600.0)
    assert total(big) == jit.SMALL and not total.cached()  # plain Python: it compiled nothing
    with jit.compiled(cached_only=True):
        assert total(big) == jit.SMALL and not total.cached()  # loads what is cached only
    monkeypatch.setattr(jit, "COLD_SECONDS", 0.0)  # the process has spent its plain-Python time
    assert total(big) == jit.SMALL and total.cached()  # compiled now (and from now on)
    assert total.dispatcher().signatures


def test_cached_machine_code_is_forgotten_when_a_source_of_its_package_changed(tmp_path, monkeypatch):
    """numba checks only a kernel's own file: a caller's cache would keep an old callee compiled
    in. A changed source anywhere in the package makes every cached kernel of it go."""
    import os

    from taskflow import jit

    root = tmp_path / "pkg"
    cache = root / "sub" / "__pycache__"
    cache.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "k.py").write_text("x = 1\n")
    stale = [cache / "k.f-1.py311.nbi", cache / "k.f-1.py311.1.nbc"]
    for f in stale:
        f.write_bytes(b"old")
    fake = type("K", (), {"py_func": type("F", (), {"__module__": "pkg_under_test.sub.k"})})()
    monkeypatch.setattr(jit, "_KERNELS", [fake])
    monkeypatch.setattr(jit, "_checked", set())
    module = type(os)("pkg_under_test")
    module.__file__ = str(root / "__init__.py")
    monkeypatch.setitem(__import__("sys").modules, "pkg_under_test", module)
    assert jit.fresh_caches() == [str(root)]
    assert not any(f.exists() for f in stale)  # no stamp yet: nothing cached can be trusted
    stamp = (root / "__pycache__" / jit.STAMP).read_text()
    for f in stale:
        f.write_bytes(b"new")
    monkeypatch.setattr(jit, "_checked", set())
    jit.fresh_caches()
    assert all(f.exists() for f in stale)  # nothing changed: the cache is kept
    (root / "sub" / "k.py").write_text("x = 22\n")  # a source changed
    monkeypatch.setattr(jit, "_checked", set())
    jit.fresh_caches()
    assert not any(f.exists() for f in stale) and (root / "__pycache__" / jit.STAMP).read_text() != stamp


def test_never_runs_a_kernel_compiled_in_a_forced_block_as_python_outside_it(monkeypatch):
    """``TASKFLOW_COMPILE=never`` holds for a kernel that was compiled (inside ``jit.compiled()``):
    outside the block it runs as plain Python again (a compiled kernel returns a Python float, the
    plain one numpy's)."""
    monkeypatch.setenv("TASKFLOW_COMPILE", "never")

    @jit.kernel(cache=False)
    def first(xs):
        return xs[0]

    big = np.ones(jit.SMALL)
    with jit.compiled():
        assert type(first(big)) is float
    assert type(first(big)) is np.float64
    monkeypatch.setenv("TASKFLOW_COMPILE", "auto")
    jit.compile_mode()  # (read again, as the next decision to compile reads it)
    assert type(first(big)) is float  # compiled already: it runs compiled


@jit.kernel(cache=False)
def _bump(xs, i):
    xs[i] += 1


@jit.kernel(cache=False)
def _bump_twice(xs, i):
    _bump(xs, i)
    _bump(xs, i)


def test_plain_runs_a_kernel_and_the_kernels_it_calls_as_python_on_lists_even_in_a_compiled_block():
    """A caller whose state is Python lists (the simulator's engine) runs the kernels the compiled
    loops run through ``Kernel.plain``: a kernel calling no other is its own function, one that
    does runs them all as plain Python, even where every call would otherwise be compiled."""
    assert _bump.plain is _bump.py_func
    assert _bump_twice.plain is _bump_twice.plain and _bump_twice.plain is not _bump_twice.py_func
    xs = [0, 0]
    with jit.compiled():
        _bump_twice.plain(xs, 1)
        _bump.plain(xs, 0)
    assert xs == [1, 2]
    for k in (_bump, _bump_twice):  # nothing was compiled (another kernel's compile may have made their dispatchers)
        assert k._compiled is None or not k._compiled.signatures


def test_bound_runs_a_rule_over_another_layout_through_the_callees_it_is_given():
    """``Kernel.bound`` replaces the kernels a kernel calls, at any depth, by name: the rule is
    written once and a caller whose state is laid out otherwise gives the moves that read it."""
    seen = {}
    twice = _bump_twice.bound(_bump=lambda xs, i: seen.__setitem__(i, seen.get(i, 0) + 1))
    xs = [0, 0]
    twice(xs, 1)
    assert xs == [0, 0] and seen == {1: 2}  # the callee given ran, not the kernel
    _bump_twice.plain(xs, 1)
    assert xs == [0, 2]  # the kernel's own plain version is untouched by the binding
