"""Real networks on one machine: a Dask scheduler and workers, each in a network namespace of its
own, joined by veth links and bridges whose rates are shaped with ``tc``.

Layout (everything inside namespaces this testbed creates; the host's interfaces are never used
or changed)::

    <id>-sw    the switch: one bridge per rack (br0, br1), the host ends of every node's link
               (v-<node>), and with two racks the inter-rack link (ir0 <-> ir1)
    <id>-s     the Dask scheduler, eth0 = 10.213.7.1, on rack 0, unshaped
    <id>-c     the client (your command), eth0 = 10.213.7.2, on rack 0, unshaped
    <id>-wK    worker wK, eth0 = 10.213.7.(11+K), its link shaped in both directions

Shaping: each worker's link has a token bucket (``tbf``) on both ends, so a worker's upload and
its download are each a shared bottleneck, as a NIC is; the inter-rack link has one in each
direction, shared by every flow between the racks. A per-pair matrix instead shapes each
worker's traffic to each destination separately (``htb``, one class per destination), so pairs
do not share. Latency cannot be shaped (``netem`` is missing in many kernels): the links add
none beyond the kernel's own, which the calibration measures.

Teardown (:meth:`Testbed.stop`, also on Ctrl-C and exceptions) ends every process in the
testbed's namespaces and deletes them, which deletes every link and bridge. A reaper process
started with the testbed does the same if its owner dies without stopping it (SIGKILL, a
crash). ``taskflow testbed --clean`` removes what a dead owner left, should the reaper have died
with it.

The package's modules: :mod:`.testbed` (the :class:`Testbed`: topology, nodes, starting Dask),
:mod:`.namespaces` (the command runner, :func:`available`, deleting namespaces), :mod:`.shaping`
(``tc`` token buckets and per-pair classes), :mod:`.cgroups` (:class:`CpuLimits`) and
:mod:`.lifetime` (the state file, the reaper, :func:`clean_stale`).
"""

from .cgroups import CpuLimits, cpu_hierarchy, cpu_limits_available, remove_cpu_groups
from .lifetime import clean_stale
from .namespaces import PREFIX, STATE_DIR, SUBNET, available, leftovers
from .testbed import MAX_WORKERS, PORT, TOPOLOGIES, Testbed, TestbedUnavailable
from ..checks import parse_rate

__all__ = [
    "Testbed",
    "TestbedUnavailable",
    "available",
    "parse_rate",
    "clean_stale",
    "leftovers",
    "TOPOLOGIES",
    "PREFIX",
    "SUBNET",
    "STATE_DIR",
    "PORT",
    "MAX_WORKERS",
    "CpuLimits",
    "cpu_hierarchy",
    "cpu_limits_available",
    "remove_cpu_groups",
]
