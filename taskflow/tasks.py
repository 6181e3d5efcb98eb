"""A task seen from outside its graph: the :class:`TaskHandle` that makes another task depend on it
(pass it in that task's arguments), and :class:`Task`, the read-only view of one task."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

__all__ = ["TaskHandle", "Task", "handles_in"]


class TaskHandle:
    """A reference to a task of a graph; pass it in another task's ``args`` to depend on it."""

    __slots__ = ("graph", "id")

    def __init__(self, graph, id: Hashable):  # graph: the TaskGraph it belongs to
        self.graph = graph
        self.id = id

    def __repr__(self) -> str:
        return f"TaskHandle({self.id!r})"

    def __eq__(self, other):
        return isinstance(other, TaskHandle) and other.graph is self.graph and other.id == self.id

    def __hash__(self):
        return hash((id(self.graph), self.id))


@dataclass(frozen=True)
class Task:
    """A read-only view of one task."""

    id: Hashable
    cost: float
    costs: dict | None
    output_size: float
    cores: int
    fn: Any = None
    args: tuple = ()
    kwargs: dict | None = None
    meta: dict | None = None


def handles_in(obj, out: list) -> None:
    """Collect the TaskHandles found in ``obj`` (nested lists, tuples, sets and dict values).

    Parameters
    ----------
    obj : object
        A task's ``args`` or ``kwargs``.
    out : list
        Appended to.
    """
    if isinstance(obj, TaskHandle):
        out.append(obj)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        for x in obj:
            handles_in(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            handles_in(x, out)
