"""The workers a real job run gives out (taskflow.training.jobworkers): numbered once, lost and
joined as Dask's cluster says, on racks."""

from __future__ import annotations

import contextlib
import time

import pytest
from distributed import Client, LocalCluster

from taskflow.errors import UsageError
from taskflow.training.jobworkers import POLL_SECONDS, Workers, check_racks, workers_of

from tests.conftest import NO_HTTP


def settle(c, n):
    end = time.monotonic() + 60
    while len(c.scheduler_info(n_workers=-1)["workers"]) != n:
        assert time.monotonic() < end, "the cluster did not reach its workers in 60 s"
        time.sleep(0.02)


@contextlib.contextmanager
def in_process(n):
    """A real cluster of ``n`` workers in this process (quick to start, scale and stop)."""
    with (
        LocalCluster(
            n_workers=n, processes=False, threads_per_worker=1, dashboard_address=None, scheduler_kwargs=NO_HTTP
        ) as lc,
        Client(lc) as c,
    ):
        yield lc, c


def test_workers_lost_and_joined_are_said_once_each_by_their_numbers():
    with in_process(3) as (lc, c):
        names = workers_of(c)
        assert names == ["0", "1", "2"]
        ws = Workers(c, names, {"0": "r0", "1": "r0", "2": "r1"})
        assert ws.look(now=True) == ((), ()) and ws.nodes == (0, 0, 1)
        lc.scale(2)  # worker 2 goes
        settle(c, 2)
        assert ws.look() == ((), ())  # within the poll's interval: not looked
        time.sleep(POLL_SECONDS)
        assert ws.look() == ((2,), ()) and ws.down == {2}
        assert ws.look(now=True) == ((), ())  # said once
        lc.scale(4)  # two join: worker 2 back under its name, and a name the run has not seen
        settle(c, 4)
        assert ws.look(now=True) == ((), (2, 3)) and not ws.down
        assert ws.names == ["0", "1", "2", "3"] and set(workers_of(c)) == {"0", "1", "2", "3"}
        # worker 3 joined under a name the racks do not give: on a rack of its own
        assert ws.nodes == (0, 0, 1, 2) and ws.racks == ws.nodes
        lc.scale(3)  # worker 3 goes and comes back, at another address, between two looks
        settle(c, 3)
        lc.scale(4)
        settle(c, 4)
        assert ws.look(now=True) == ((3,), (3,)) and not ws.down and len(ws.names) == 4


def test_workers_of_names_a_number_by_its_value():
    with in_process(2) as (_, c):
        assert workers_of(c) == ["0", "1"]
        with pytest.raises(UsageError, match="worker '1' of the Dask cluster has no rack"):
            check_racks({"0": "a"}, workers_of(c))
        with pytest.raises(UsageError, match="the racks name worker 'x'"):
            check_racks({"0": "a", "1": "a", "x": "b"}, workers_of(c))
