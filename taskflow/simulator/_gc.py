"""Python's cyclic garbage collector held back while simulations run (:class:`FewerCollections`)."""

from __future__ import annotations

import gc
import threading

__all__ = ["FewerCollections"]


class FewerCollections:
    """Python's cyclic garbage collector runs less often while any simulation runs (its first
    threshold at least 100,000 allocations): a run allocates millions of small objects that hold
    no cycles, and each full collection walks every live one (a fifth of a large run's time).
    Collection still happens; the thresholds come back when the last concurrent run ends."""

    runs = 0  # simulations running now, in any thread
    saved = None  # the thresholds before the first of them
    lock = threading.Lock()

    def __enter__(self):
        cls = FewerCollections
        with cls.lock:
            if cls.runs == 0:
                cls.saved = gc.get_threshold()
                t0, t1, t2 = cls.saved
                if t0:  # 0: collection switched off by the user; left so
                    gc.set_threshold(max(t0, 100_000), max(t1, 50), max(t2, 50))
            cls.runs += 1

    def __exit__(self, *exc):
        cls = FewerCollections
        with cls.lock:
            cls.runs -= 1
            if cls.runs == 0:
                gc.set_threshold(*cls.saved)
        return False
