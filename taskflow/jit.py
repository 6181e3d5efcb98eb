"""Loops compiled by numba only where the problem is large enough to repay loading it.

Importing numba and loading its cached machine code takes most of a second, longer than planning
a graph of a few hundred tasks takes in plain Python. So each kernel is written once, as plain
Python over numpy arrays, and decorated with :func:`kernel` instead of ``numba.njit``: a call whose
largest array argument has at least :data:`SMALL` elements runs the numba-compiled version, and
from then on every kernel of the process does (so that one plan rarely mixes the two, and nothing
is loaded twice); before that, and for small inputs, the Python function itself runs. Inside
:func:`compiled` every call is compiled. Both versions are the same code, so they give the same
answers.

Compiling a kernel the first time (no machine code cached by numba beside its source: a fresh
install, or a source changed) takes seconds, ten or more for the largest: more than most problems
take in plain Python. So a kernel whose machine code is not cached (:meth:`Kernel.cached`) runs as
plain Python even for large inputs until the process has spent :data:`COLD_SECONDS` in such calls;
then it compiles (and numba caches it for the next process). ``TASKFLOW_COMPILE=always`` compiles
large inputs whatever the cache, ``never`` runs every kernel as plain Python (the variable is read
at each decision to compile; a kernel compiled already goes by it as last read, so that its calls
cost no lookup).

A kernel that calls another kernel calls, when compiled, the other's compiled version: the
compiled copy of a function is made over a copy of its module's globals in which every kernel is
replaced by its compiled self, and ``List`` (a plain ``list`` in Python) by ``numba.typed.List``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import threading
import time
import types

import numpy as np

__all__ = [
    "kernel",
    "Kernel",
    "compiled",
    "interpreted",
    "List",
    "SMALL",
    "COLD_SECONDS",
    "cached",
    "compile_mode",
    "fresh_caches",
    "STAMP",
]

#: Calls whose largest array argument is smaller than this run as plain Python: about 2,000 tasks
#: on 8 workers, which HEFT plans in plain Python in 0.2 s, where loading numba takes 0.6-0.8 s.
SMALL = 16_384

#: Seconds a process runs large calls of kernels whose machine code is not cached as plain Python
#: before it compiles them (a first compile costs seconds; most problems are done sooner).
COLD_SECONDS = 3.0

#: A growable list inside kernels: Python's own, ``numba.typed.List`` when compiled.
List = list

_forced = 0
_forced_cached = 0
_plain = 0
_loaded = False  # a kernel has been compiled in this process: every call runs compiled
_spent = 0.0  # seconds of large calls of kernels not cached, run as plain Python in this process
_never = False  # TASKFLOW_COMPILE was "never" when last read (compile_mode)


class _Nesting(threading.local):
    depth = 0  # kernels running as plain Python in this thread, one inside another


_nesting = _Nesting()
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
    >>> float(total(np.arange(4.0)))  # small: plain Python, numba not loaded
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
        self._on_disk = None  # numba's machine code for it found cached (looked for once)
        self._plain_fn = None  # (plain)
        _KERNELS.append(self)

    def __call__(self, *args):
        if _nesting.depth:  # (the common case inside a plain-Python kernel, without a frame more)
            return self.py_func(*args)
        return self.call(args)

    def call(self, args: tuple, large: bool | None = None):
        """Run on ``args``, compiled or as plain Python as a call would be.

        Parameters
        ----------
        args : tuple
            The kernel's arguments.
        large : bool, optional
            Whether the input counts as large (by default, whether an array in ``args`` has
            :data:`SMALL` elements: give it where the arrays are inside tuples, which are not
            looked into).
        """
        if _nesting.depth:  # called by a kernel running as plain Python: so does this one
            return self.py_func(*args)  # (its lists are Python's, which compiled code cannot take)
        fast = self._compiled  # compiled in this process already: every call runs compiled, unless told not to
        if fast is not None and not _plain and (_forced or not _never):
            return fast(*args)
        if _forced_cached and not _plain and not _forced and self.cached() and compile_mode() != "never":
            return self.dispatcher(*args)
        if _plain or not (_loaded or _forced or (_large(args) if large is None else large)):
            return self._run_python(args, False)
        mode = compile_mode()
        if mode == "never" and not _forced:
            return self._run_python(args, False)
        if _forced or mode == "always" or _spent >= COLD_SECONDS or self.cached():
            return self.dispatcher(*args)
        return self._run_python(args, True)  # not cached: plain Python, timed, until the process has spent enough

    @property
    def plain(self):
        """The plain Python version, to call as often as a method: the function itself where it
        calls no other kernel, else :meth:`bound` with nothing replaced (the kernels it calls run as
        their plain Python too). For callers whose state is Python lists, which compiled code cannot take."""
        if self._plain_fn is None:
            self._plain_fn = self.bound()
        return self._plain_fn

    def bound(self, **callees):
        """The plain Python version with the kernels it calls, at any depth, replaced by name:
        ``callees`` where given, else their own plain Python versions. One definition of a rule,
        run over another layout of its state: the caller supplies the few kernels that read and
        write that layout (as a network model supplies its moves), and the rule calls them.

        Parameters
        ----------
        **callees
            Functions to call instead of the kernels of those names.

        Examples
        --------
        >>> @kernel(cache=False)
        ... def get(xs, i):
        ...     return xs[i]
        >>> @kernel(cache=False)
        ... def twice(xs, i):
        ...     return 2 * get(xs, i)
        >>> twice.bound(get=lambda xs, i: xs.get(i, 0))({"a": 3}, "a")
        6
        """
        fn = self.py_func
        env = fn.__globals__
        calls = {name: env[name] for name in fn.__code__.co_names if isinstance(env.get(name), Kernel)}
        if not calls and not callees:
            return fn
        env = dict(env)
        for name, callee in calls.items():
            env[name] = callees[name] if name in callees else callee.bound(**callees)
        for name in callees.keys() & fn.__code__.co_names:
            env[name] = callees[name]
        twin = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
        twin.__qualname__, twin.__module__, twin.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        return twin

    def _run_python(self, args, timed: bool):
        """The plain Python version on ``args``, the kernels it calls too; with ``timed``, its
        seconds added to the process's (:data:`COLD_SECONDS`)."""
        global _spent
        t0 = time.perf_counter() if timed else 0.0
        _nesting.depth = _nesting.depth + 1
        try:
            return self.py_func(*args)
        finally:
            _nesting.depth -= 1
            if timed:
                _spent += time.perf_counter() - t0

    def cached(self) -> bool:
        """Whether calling the compiled version costs a load, not a compile: it was compiled in
        this process, or numba's cached machine code for it lies beside its source (checked as
        :func:`fresh_caches` leaves it: a changed source of its package has none)."""
        if self._compiled is not None:
            return True
        if self._on_disk is None:
            self._on_disk = self._found()
        return self._on_disk

    def _found(self) -> bool:
        """numba's cached machine code for this kernel lies beside its source."""
        fresh_caches()
        module = sys.modules.get(self.py_func.__module__)
        path = getattr(module, "__file__", None)
        if not path:
            return False
        folder, stem = os.path.split(os.path.splitext(os.path.abspath(path))[0])
        head = f"{stem}.{self.py_func.__qualname__}-"
        tail = f".py{sys.version_info[0]}{sys.version_info[1]}.nbi"
        try:
            names = os.listdir(os.path.join(folder, "__pycache__"))
        except OSError:
            return False
        return any(n.startswith(head) and n.endswith(tail) for n in names)

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


def cached(kernels) -> bool:
    """Whether every kernel of ``kernels`` loads without compiling (:meth:`Kernel.cached`), or
    ``TASKFLOW_COMPILE=always`` says to compile anyway.

    Parameters
    ----------
    kernels : iterable of Kernel
    """
    mode = compile_mode()
    return mode == "always" or (mode == "auto" and all(k.cached() for k in kernels))


def compile_mode() -> str:
    """``TASKFLOW_COMPILE``: ``auto`` (the default: see the module docstring), ``always`` or
    ``never``.

    Raises
    ------
    UsageError
        Another value.
    """
    global _never
    mode = os.environ.get("TASKFLOW_COMPILE", "auto") or "auto"
    if mode not in ("auto", "always", "never"):
        from .errors import UsageError

        raise UsageError(f"TASKFLOW_COMPILE must be auto, always or never, got {mode!r}")
    _never = mode == "never"  # (what a kernel compiled already goes by, until the mode is read again)
    return mode


def _large(args) -> bool:
    return any(isinstance(a, np.ndarray) and a.size >= SMALL for a in args)


@contextlib.contextmanager
def compiled(cached_only: bool = False):
    """Inside this block every kernel runs compiled, whatever its input's size (to load the
    compiled code before something is timed, or to check that both versions agree).

    Parameters
    ----------
    cached_only : bool
        Only the kernels whose machine code is cached (:meth:`Kernel.cached`): the others as
        outside the block (to load what loads quickly, compiling nothing).
    """
    global _forced, _forced_cached
    if cached_only:
        _forced_cached += 1
    else:
        _forced += 1
    try:
        yield
    finally:
        if cached_only:
            _forced_cached -= 1
        else:
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
