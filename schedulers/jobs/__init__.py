"""Job schedulers, one module each, behind :class:`taskflow.jobscheduling.JobScheduler`: which job
of a shared cluster runs on which workers (the task schedulers one level up: see
:mod:`taskflow.jobscheduling`). Found by name through the entry-point group
``taskflow.job_schedulers`` (listed in ``setup.cfg``).

>>> from taskflow.jobscheduling import job_scheduler_names
>>> {"fifo", "sjf", "srtf", "las", "gittins"} <= set(job_scheduler_names())
True
"""
