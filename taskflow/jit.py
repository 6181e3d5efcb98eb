"""Loops compiled by numba only where the problem is large enough to repay loading it.

Importing numba and loading its cached machine code takes most of a second, longer than planning
a graph of a few hundred tasks takes in plain Python. So each kernel is written once, as plain
Python over numpy arrays, and decorated with :func:`kernel` instead of ``numba.njit``: a call whose
largest array argument has at least :data:`SMALL` elements runs the numba-compiled version, and
from then on every kernel of the process does (so that one plan never mixes the two, and nothing
is loaded twice); before that, and for small inputs, the Python function itself runs. Inside
:func:`compiled` every call is compiled. Both versions are the same code, so they give the same
answers.

A kernel that calls another kernel calls, when compiled, the other's compiled version: the
compiled copy of a function is made over a copy of its module's globals in which every kernel is
replaced by its compiled self, and ``List`` (a plain ``list`` in Python) by ``numba.typed.List``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import types

import numpy as np

__all__ = ["kernel", "Kernel", "compiled", "interpreted", "List", "SMALL", "fresh_caches", "STAMP"]

#: Calls whose largest array argument is smaller than this run as plain Python: about 2,000 tasks
#: on 8 workers, which HEFT plans in plain Python in 0.2 s, where loading numba takes 0.6-0.8 s.
SMALL = 16_384

#: A growable list inside kernels: Python's own, ``numba.typed.List`` when compiled.
List = list

_forced = 0
_plain = 0
_loaded = False  # a kernel has been compiled in this process: every call runs compiled
_KERNELS: list = []  # every kernel made, for the check of numba's cached machine code
_checked: set = set()  # package folders whose cached kernels were checked in this process
#: the file beside numba's cached kernels that says which sources they were compiled from
STAMP = "taskflow-kernels.stamp"


def kernel(fn=None, **options):
    """Decorate a loop to be numba-compiled (``numba.njit(**options)``) for large inputs only.

    Parameters
    ----------
    fn : function, optional
    **options
        numba's ``njit`` options (``cache=True``).

    Examples
    --------
    >>> import numpy as np
    >>> @kernel(cache=False)
    ... def total(xs):
    ...     s = 0.0
    ...     for x in xs:
    ...         s += x
    ...     return s
    >>> total(np.arange(4.0))  # small: plain Python, numba not loaded
    6.0
    """
    if fn is None:
        return functools.partial(kernel, **options)
    return Kernel(fn, options)


class Kernel:
    """A Python function and, once needed, its numba-compiled twin (see the module docstring).

    Parameters
    ----------
    fn : function
    options : dict
        numba's ``njit`` options.
    """

    def __init__(self, fn, options: dict):
        functools.update_wrapper(self, fn)
        self.py_func = fn
        self.options = dict(options)
        self._compiled = None
        _KERNELS.append(self)

    def __call__(self, *args):
        if not _plain and (_loaded or _forced or _large(args)):
            return self.dispatcher(*args)
        return self.py_func(*args)

    def __repr__(self) -> str:
        return f"<kernel {self.py_func.__module__}.{self.py_func.__qualname__}>"

    def dispatcher(self, *args):
        """The numba-compiled function (numba imported on first use); with ``args``, its result.

        Parameters
        ----------
        *args
            Called with these when given.
        """
        global _loaded
        if self._compiled is None:
            fresh_caches()
            from numba import njit
            from numba.typed import List as TypedList

            fn = self.py_func
            env = dict(fn.__globals__)  # numba reads a function's globals when it compiles it, on first call
            twin = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
            twin.__qualname__, twin.__module__, twin.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
            self._compiled = njit(**self.options)(twin)
            _loaded = True
            for name, value in fn.__globals__.items():  # the kernels it calls: their compiled selves
                if isinstance(value, Kernel):
                    env[name] = value.dispatcher()
                elif name == "List" and value is list:
                    env[name] = TypedList
        return self._compiled(*args) if args else self._compiled


def fresh_caches() -> list:
    """Forget numba's cached machine code of the project's kernels when any source file of their
    packages changed since it was written: numba checks only a kernel's own file, so a kernel
    calling one whose code changed would load the old callee, compiled into it. Returns the
    package folders checked."""
    import sys

    roots = sorted(
        {
            os.path.dirname(os.path.abspath(sys.modules[k.py_func.__module__.split(".")[0]].__file__))
            for k in _KERNELS
            if k.py_func.__module__.split(".")[0] in sys.modules
        }
    )
    for root in roots:
        if root in _checked:
            continue
        _checked.add(root)
        sources = []
        for folder, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    st = os.stat(os.path.join(folder, f))
                    sources.append((os.path.relpath(os.path.join(folder, f), root), st.st_mtime_ns, st.st_size))
        stamp = hashlib.sha1(repr(sources).encode()).hexdigest()
        path = os.path.join(root, "__pycache__", STAMP)
        try:
            with open(path, encoding="utf-8") as f:
                if f.read().strip() == stamp:
                    continue
        except OSError:
            pass
        try:
            for folder, _, files in os.walk(root):
                if os.path.basename(folder) == "__pycache__":
                    for f in files:
                        if f.endswith((".nbi", ".nbc")):
                            os.unlink(os.path.join(folder, f))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(stamp + "\n")
        except OSError:  # a package folder we may not write: numba caches elsewhere, or not at all
            pass
    return roots


def _large(args) -> bool:
    return any(isinstance(a, np.ndarray) and a.size >= SMALL for a in args)


@contextlib.contextmanager
def compiled():
    """Inside this block every kernel runs compiled, whatever its input's size (to load the
    compiled code before something is timed, or to check that both versions agree)."""
    global _forced
    _forced += 1
    try:
        yield
    finally:
        _forced -= 1


@contextlib.contextmanager
def interpreted():
    """Inside this block every kernel runs as plain Python, whatever its input's size or what
    ran before (to check that both versions agree)."""
    global _plain
    _plain += 1
    try:
        yield
    finally:
        _plain -= 1
