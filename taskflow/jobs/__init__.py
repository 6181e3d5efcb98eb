"""A shared cluster: training jobs arriving over time, job schedulers deciding who runs where.

* :mod:`.model`: :class:`JobCluster` (racks of nodes of workers), :class:`JobTrace`;
* :mod:`.formats`: the native JSON trace, Tiresias' CSV trace and cluster spec;
* :mod:`.generate`: seeded traces shaped like Philly's and Helios';
* :mod:`.simulate`: :func:`simulate_jobs`, the job-level simulator;
* :mod:`.run`: :class:`JobRun`, what a run did (simulated or real), and the papers' metrics;
* :mod:`.interference`: :class:`Interference`, the slowdowns of jobs sharing a node;
* :mod:`.network`: :class:`JobNetwork`, the slowdowns of jobs sharing racks' uplinks.

The job schedulers (FIFO, SJF, SRTF, Tiresias' LAS and Gittins, ...) are decision cores
(:mod:`taskflow.jobscheduling`), one module each in :mod:`schedulers.jobs`.
"""

from .formats import load_job_cluster, load_trace, save_trace
from .generate import generate_trace
from .interference import Interference
from .model import JobCluster, JobTrace
from .network import JobNetwork, maxmin_shares
from .run import JobRecord, JobRun
from .simulate import simulate_jobs

__all__ = [
    "JobCluster",
    "JobTrace",
    "load_trace",
    "save_trace",
    "load_job_cluster",
    "generate_trace",
    "simulate_jobs",
    "JobRun",
    "JobRecord",
    "Interference",
    "JobNetwork",
    "maxmin_shares",
]
