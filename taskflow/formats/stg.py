"""Kasahara Standard Task Graph (STG) text files, read only.

The first number is the task count (dummy entry and exit included); then one row per task:
``id cost npred pred...``. Task N gets id ``tN``; sizes are 0; lines after the rows (``#`` comments)
are ignored. Reference: https://www.kasahara.cs.waseda.ac.jp/schedule/
"""

from __future__ import annotations

from ..checks import decimal
from ..errors import FormatError
from ..graph import TaskGraph

__all__ = ["graph_from_stg", "looks_like_stg"]


def looks_like_stg(text: str) -> bool:
    """Whether ``text`` starts like a Kasahara STG file (its first data line is a task count).

    Parameters
    ----------
    text : str
    """
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        return s.isascii() and s.isdigit()
    return False


#: Tasks an STG file may declare (each row becomes a task; bounds the memory reading takes).
MAX_STG_TASKS = 1_000_000


def graph_from_stg(text: str, source: str = "stg", name: str | None = None) -> TaskGraph:
    """A graph from a Kasahara STG file: per line a task, its cost, its predecessor count and the
    predecessors; the two dummy nodes (entry and exit, cost 0) are kept. The first line counts the
    tasks either without the two dummy nodes (the Kasahara archive's own files: n + 2 rows follow)
    or with them (n rows).

    Parameters
    ----------
    text : str
    source : str
    name : str, optional

    Raises
    ------
    FormatError
        A malformed line (its number is named) or a wrong count.
    """
    rows = []
    count = None
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        try:
            nums = [decimal(x, int) for x in s.split()]
        except ValueError:
            raise FormatError(f"{source}: line {lineno}: expected integers, got {s!r}") from None
        if count is None:
            if len(nums) != 1 or nums[0] < 0:
                raise FormatError(f"{source}: line {lineno}: expected the task count, got {s!r}")
            count = nums[0]
            if count > MAX_STG_TASKS:
                raise FormatError(
                    f"{source}: line {lineno}: declares {count:,} tasks, more than the limit of {MAX_STG_TASKS:,}"
                )
            continue
        if len(rows) == count + 2:
            raise FormatError(f"{source}: line {lineno}: more task rows than the declared {count} (+ 2 dummy nodes)")
        if len(nums) < 3 or len(nums) != 3 + nums[2]:
            raise FormatError(f"{source}: line {lineno}: expected 'id cost npred pred...', got {s!r}")
        rows.append((lineno, nums))
    if count is None:
        raise FormatError(f"{source}: empty STG file")
    if len(rows) not in (count, count + 2):
        raise FormatError(
            f"{source}: declares {count} tasks but has {len(rows)} rows (expected {count} or, "
            f"with the two dummy nodes, {count + 2})"
        )
    ids, cost, src, dst = [], [], [], []
    for lineno, (tid, c, _, *preds) in rows:
        ids.append(f"t{tid}")
        cost.append(c)
        for p in preds:
            src.append(f"t{p}")
            dst.append(f"t{tid}")
    return TaskGraph.from_columns(name or "stg", ids, cost, None, None, src, dst, [0.0] * len(src))
