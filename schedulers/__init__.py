"""Scheduling policies, one module each, all behind :class:`schedulers.base.Scheduler`.

>>> import schedulers
>>> {"heft", "cpop", "blevel", "peft", "round-robin"} <= set(schedulers.available())
True
"""

from ._warm import warm_up
from .base import Scheduler, available, get_scheduler, register, scheduler_class
from . import blevel, cpop, etf, heft, mct, minmin, peft, randomized, round_robin  # noqa: F401  (register)

__all__ = ["Scheduler", "available", "get_scheduler", "register", "scheduler_class", "warm_up"]
