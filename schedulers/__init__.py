"""Schedulers, one module each, all behind :class:`schedulers.base.Scheduler`.

Each scheduler is found by name through the entry-point group ``taskflow.schedulers`` (listed in
``setup.cfg``), as a user's own package adds one: a module is imported only when its scheduler is
first asked for. ``taskflow.get_scheduler`` and ``schedulers.get_scheduler`` are the same function.

>>> import schedulers
>>> {"heft", "cpop", "blevel", "peft", "round-robin"} <= set(schedulers.available())
True
"""

from ._warm import warm_up
from .base import DynamicScheduler, Scheduler, available, get_scheduler, register, scheduler_class

__all__ = ["DynamicScheduler", "Scheduler", "available", "get_scheduler", "register", "scheduler_class", "warm_up"]
