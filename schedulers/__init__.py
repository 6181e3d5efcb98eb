"""Scheduling policies, one module each, all behind :class:`schedulers.base.Scheduler`.

>>> import schedulers
>>> "round-robin" in schedulers.available()
True
"""

from .base import Scheduler, available, get_scheduler, register, scheduler_class
from . import randomized, round_robin  # noqa: F401  (they register themselves)

__all__ = ["Scheduler", "available", "get_scheduler", "register", "scheduler_class"]
