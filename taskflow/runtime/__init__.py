"""The Dask runtime: a task graph (or a Dask collection) planned by a policy and carried out by Dask.

One module per job: :mod:`.calls` (what runs on the workers, :func:`execute`), :mod:`.calibrate`
(the cluster model of a live cluster), :mod:`.dask_graph` (the Dask graph), :mod:`.plugin` (placement inside the scheduler), :mod:`.session` (the client's
side of the plugin, :func:`use`), :mod:`.runner` (:func:`run`: submit, watch, recover), :mod:`.report`
(:class:`RunReport`), :mod:`.dask_collections` (:func:`compute`), :mod:`.learn` (:func:`learn_costs`),
:mod:`.local` (the embedded ``LocalCluster``, whose workers reuse freed memory).
"""

from .calibrate import cluster_from_dask
from .calls import TaskFailed, execute
from .dask_collections import compute
from .learn import CostProfile, learn_costs
from .report import RunReport
from .runner import run
from .session import status, use

__all__ = ["run", "compute", "use", "status", "execute", "RunReport", "TaskFailed", "cluster_from_dask", "learn_costs",
           "CostProfile"]
