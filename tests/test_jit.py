"""Kernels run as plain Python on small inputs and numba-compiled on large ones
(:mod:`taskflow.jit`): the two give the same plans and traces, and a command on a small graph
never loads numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import schedulers
import taskflow
from taskflow import Cluster, Worker, jit
from workflows.scientific import random_layered

from .conftest import EXAMPLES

STATIC = schedulers.available("static")


def _problem(seed):
    g = random_layered(60, shape=1.0, out_degree=2, ccr=1.0 + seed, seed=seed, bandwidth=1e3)
    c = Cluster([Worker(f"w{i}", speed=s, cores=k) for i, (s, k) in enumerate([(1, 1), (2, 2), (1.5, 1), (4, 1)])],
                bandwidth=1e3, latency=0.01)
    return g, c


@pytest.mark.parametrize("name", STATIC)
def test_every_static_policy_plans_alike_in_python_and_compiled(name):
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
    assert [(r.run, r.worker, r.start, r.finish) for r in plain.runs] == \
        [(r.run, r.worker, r.start, r.finish) for r in fast.runs]
    assert [tuple(t) for t in plain.transfers] == [tuple(t) for t in fast.transfers]


def test_a_small_graph_is_planned_without_loading_numba_and_a_large_one_with_it():
    code = ("import sys; from taskflow.app.cli import main; "
            f"main(['schedule', {str(EXAMPLES / 'heft_paper.graph.json')!r}, '--cluster', "
            f"{str(EXAMPLES / 'heft_paper.cluster.json')!r}, '--scheduler', 'heft', '-q']); "
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("heft: makespan 80  (") and lines[1:] == ["False"]
    code = ("import sys, schedulers; from taskflow import Cluster; from workflows.scientific import random_layered; "
            "g = random_layered(3000, shape=1.0, out_degree=2, ccr=1.0, seed=1, bandwidth=1.0); "
            "schedulers.get_scheduler('heft').schedule(g, Cluster.homogeneous(8)); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"
