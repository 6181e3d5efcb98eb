"""The Dask runtime: a task graph (or a Dask collection) planned by a scheduler and carried out by
Dask, laid out by the process each part runs in:

- :mod:`.client`: the user's process (connecting, :func:`use`, :func:`run`, :func:`compute`,
  calibrating, reports); it installs the scheduler plugin by name and never imports
  :mod:`.scheduler`;
- :mod:`.scheduler`: Dask's scheduler process (the plugin, its runs, the adaptive scheduler's
  decisions, what it reads of and changes in Dask's scheduler);
- :mod:`.worker`: each worker process (a task's call, the worker plugin);
- :mod:`.launch`: starting clusters (the embedded ``LocalCluster``, batch jobs);
- shared by all: :mod:`.messages` (the wire format and the names the sides look things up by),
  :mod:`.learn` (cost profiles) and :mod:`.predict` (predictions), which every side computes alike.
"""

from .client.calibrate import cluster_from_dask
from .client.dask_collections import compute
from .client.report import RunReport
from .client.runner import run
from .client.session import status, use
from .learn import CostProfile, learn_costs
from .worker.calls import TaskFailed, execute

__all__ = [
    "run",
    "compute",
    "use",
    "status",
    "execute",
    "RunReport",
    "TaskFailed",
    "cluster_from_dask",
    "learn_costs",
    "CostProfile",
]
