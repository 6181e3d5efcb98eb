"""Scheduling policies, one module each, all behind :class:`schedulers.base.Scheduler`.

>>> import schedulers
>>> {"heft", "cpop", "blevel", "peft", "round-robin"} <= set(schedulers.available())
True
"""

from ._warm import warm_up
from .base import DynamicScheduler, Scheduler, available, get_scheduler, register, scheduler_class
from . import (blevel, blevel_dynamic, cpop, dask_model, etf, heft, heft_contention, heft_dup, heft_search, lookahead, mct, minmin, optimal, peft, placed,  # noqa: F401
               randomized, round_robin, work_stealing)  # (imported to register)

__all__ = ["DynamicScheduler", "Scheduler", "available", "get_scheduler", "register", "scheduler_class", "warm_up"]
