"""What runs on the workers: a task's call marshalled past Dask, emulated tasks, and an in-process
reference run (:func:`execute`).

Dask replaces any string equal to a key anywhere inside a task tuple, so a task's own parameters
travel wrapped in :class:`Opaque`; a dependency's result is referenced by its position among the
task's dependencies (:class:`_Ref`) and substituted on the worker.
"""

from __future__ import annotations

import functools
import os
import sysconfig
import time
import traceback

import numpy as np

from ...errors import GraphError, RunFailed, UsageError
from ...graph import TaskGraph, TaskHandle

__all__ = ["TaskFailed", "execute", "map_leaves", "ship_code", "task_call", "Opaque", "emulate"]


def _register_sizes() -> None:
    """Teach Dask the size of a PyTorch tensor (its ``sizeof`` knows numpy, not torch: a tensor
    counted as about 80 bytes, so the bytes a training graph moves, and Dask's own estimates of
    them, were wrong). Registered lazily: nothing imports torch until a tensor is measured. This
    module runs on every worker (the tasks' calls), so every process that measures has it."""
    from dask.sizeof import sizeof

    @sizeof.register_lazy("torch")
    def _torch():
        import torch

        @sizeof.register(torch.Tensor)
        def _tensor(x):
            return int(x.element_size() * x.nelement())


_register_sizes()


class TaskFailed(RunFailed):
    """A task raised. ``task`` is its id, ``error`` the exception, ``results`` what had finished;
    ``where`` the innermost line of the user's own code it raised in (``file:line, in function``,
    or None), ``traceback_text`` the whole traceback, both in the user's files and lines (a function
    sent to the workers by value runs there as code of no file)."""

    def __init__(self, task, error, results, tb=None):
        self.task = task
        self.error = error
        self.results = results
        frames = _user_frames(tb if tb is not None else getattr(error, "__traceback__", None))
        self.where = _where(frames)
        self.traceback_text = (
            "Traceback (most recent call last):\n"
            + "".join(traceback.format_list(frames))
            + "".join(traceback.format_exception_only(type(error), error))
        )
        hint = ""
        if isinstance(error, ModuleNotFoundError) and getattr(error, "name", None):
            hint = (
                f" (the worker cannot import {error.name!r}: install it on the workers, or for a single file "
                f"of your own client.upload_file('{error.name.split('.')[0]}.py'))"
            )
        at = f" (at {self.where})" if self.where else ""
        super().__init__(f"task {task!r} failed: {type(error).__name__}: {error}{at}{hint}")


#: names of the modules ship_code sends by value: their functions run on the workers as code of no file
_SHIPPED: set = {"__main__"}
_OURS = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)  # the taskflow package
_LIBRARIES = tuple({sysconfig.get_paths()[k] + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _user_frames(tb) -> list:
    """``tb``'s frames (a traceback, or a list of frame summaries) with the frames of functions
    shipped by value given back their files (found by name and line among the shipped modules'
    code)."""
    if tb is None:
        return []
    try:
        frames = traceback.extract_tb(tb) if not isinstance(tb, list) else list(tb)
    except Exception:  # noqa: BLE001 - a traceback Dask could not rebuild: no frames
        return []
    index = None
    out = []
    for f in frames:
        if f.filename.startswith("<") and f.lineno is not None:
            if index is None:
                index = _shipped_code()
            for code in index.get(f.name, ()):
                if any(line == f.lineno for _, _, line in code.co_lines()):
                    f = traceback.FrameSummary(code.co_filename, f.lineno, f.name)
                    break
        out.append(traceback.FrameSummary(f.filename, f.lineno, f.name))  # columns of the worker's code: dropped
    return out


def _shipped_code() -> dict:
    """``{function name: [code objects]}`` of the modules sent by value (and ``__main__``)."""
    import sys
    import types

    index: dict = {}
    seen: set = set()
    for name in list(_SHIPPED):
        mod = sys.modules.get(name)
        if mod is None:
            continue
        stack = list(vars(mod).values())
        while stack and len(seen) < 100_000:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, types.CodeType):
                index.setdefault(v.co_name, []).append(v)
                stack.extend(c for c in v.co_consts if isinstance(c, types.CodeType))
            elif isinstance(v, (staticmethod, classmethod)):
                stack.append(v.__func__)
            elif isinstance(v, types.FunctionType) and v.__module__ == name:
                stack.append(v.__code__)
            elif isinstance(v, type) and v.__module__ == name:
                stack.extend(vars(v).values())
    return index


def _where(frames) -> str | None:
    """``file:line, in function`` of the innermost frame in the user's own code (not taskflow's, not
    an installed library's nor the standard library's); else of the innermost frame."""
    if not frames:
        return None
    mine = [f for f in frames if not f.filename.startswith("<") and not f.filename.startswith(_OURS + _LIBRARIES)]
    f = (mine or frames)[-1]
    path = f.filename
    try:
        rel = os.path.relpath(path)
        path = rel if not rel.startswith("..") else path
    except ValueError:  # another drive
        pass
    return f"{path}:{f.lineno}, in {f.name}"


class _Ref:
    """Stands for the result of the task's ``pos``-th dependency inside its arguments."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __reduce__(self):
        return (_Ref, (self.key,))


class Opaque:
    """Carries a task's parameters past Dask untouched (Dask replaces strings that equal a key
    anywhere in a task tuple; it does not look inside other objects)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return (Opaque, (self.value,))

    def __dask_tokenize__(self):
        # every run's keys are unique, so the object's identity is token enough (Dask would
        # otherwise pickle each payload to tokenize the graph)
        return ("taskflow-payload", id(self))


class _Call(Opaque):
    """A task's ``(fn, args, kwargs)``, pickled with cloudpickle, so functions of the caller's own
    modules (registered by :func:`ship_code`) travel by value and need no import where they run.
    Each function is pickled once however many tasks call it, each payload once however often it
    is sent."""

    __slots__ = ("blob",)

    def __init__(self, value):
        super().__init__(value)
        self.blob = None

    def __reduce__(self):
        if self.blob is None:
            import cloudpickle

            fn, args, kwargs = self.value
            self.blob = (_function_blob(fn), cloudpickle.dumps((args, kwargs)))
        return (_load_call, self.blob)


_BLOBS: dict = {}  # id(fn) -> (fn, its pickle): the function is kept so that its id stays its own


def _function_blob(fn) -> bytes:
    hit = _BLOBS.get(id(fn))
    if hit is None or hit[0] is not fn:
        import cloudpickle

        if len(_BLOBS) > 10_000:
            _BLOBS.clear()
        hit = _BLOBS[id(fn)] = (fn, cloudpickle.dumps(fn))
    return hit[1]


@functools.lru_cache(maxsize=1024)
def _load_function(blob: bytes):
    import cloudpickle

    return cloudpickle.loads(blob)


def _load_call(fn_blob: bytes, rest: bytes) -> "_Call":
    import cloudpickle

    args, kwargs = cloudpickle.loads(rest)
    return _Call((_load_function(fn_blob), args, kwargs))


class _Positional(Opaque):
    """A task's function called with its dependencies' results, in order, as its only arguments
    (``fn(a, b)`` for ``args=(a, b)``): the commonest task, carried as just its pickled function,
    with no arguments to pickle on the client or to substitute on the worker."""

    __slots__ = ()

    def __reduce__(self):
        return (_load_positional, (_function_blob(self.value),))


def _load_positional(fn_blob: bytes) -> "_Positional":
    return _Positional(_load_function(fn_blob))


def _call_positional(payload, *dep_values):
    return payload.value(*dep_values)


def _installed(path: str) -> bool:
    """Whether a module file belongs to the Python installation (stdlib, site-packages)."""
    import os
    import site
    import sysconfig

    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    path = os.path.realpath(path)
    return any(path.startswith(os.path.realpath(r) + os.sep) for r in roots if r)


def ship_code(graph: TaskGraph) -> list:
    """Make the callables of ``graph`` runnable on workers that cannot import them: the caller's
    own modules (not installed, not ours) are pickled by value (``cloudpickle``), and every
    callable is checked to pickle at all.

    Parameters
    ----------
    graph : TaskGraph

    Returns
    -------
    list of str
        The modules now sent by value.

    Raises
    ------
    TaskflowError
        A task's callable cannot be pickled (the task is named).
    """
    import sys

    import cloudpickle

    shipped, seen = [], {}
    ids = graph.arrays.ids
    for i, (fn, _args, _kwargs) in graph.calls().items():
        name = getattr(fn, "__module__", None) or getattr(getattr(fn, "func", None), "__module__", None)
        if name and name != "__main__":
            top = name.split(".")[0]
            mod = sys.modules.get(top)
            path = getattr(mod, "__file__", None)
            if (
                mod is not None
                and path
                and top not in ("taskflow", "schedulers", "workflows")
                and top not in shipped
                and not _installed(path)
            ):
                cloudpickle.register_pickle_by_value(mod)
                _SHIPPED.add(top)
                shipped.append(top)
        key = id(fn)
        if key not in seen:
            try:
                cloudpickle.dumps(fn)
                seen[key] = True
            except Exception as e:  # noqa: BLE001 - whatever pickling raised, the task is named
                raise UsageError(
                    f"task {ids[i]!r}: its callable {fn!r} cannot be sent to the workers: {type(e).__name__}: {e}"
                ) from None
    return shipped


def map_leaves(obj, leaf):
    """``obj`` with ``leaf(x)`` applied to every item of nested lists, tuples, sets and dict values.

    Parameters
    ----------
    obj : object
    leaf : callable
    """
    if isinstance(obj, list):
        return [map_leaves(x, leaf) for x in obj]
    if isinstance(obj, tuple):
        return tuple(map_leaves(x, leaf) for x in obj)
    if isinstance(obj, dict):
        return {k: map_leaves(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        return type(obj)(map_leaves(x, leaf) for x in obj)
    return leaf(obj)


def _substitute(obj, values):
    return map_leaves(obj, lambda x: values[x.key] if isinstance(x, _Ref) else x)


def _execute(payload, *dep_values):
    fn, args, kwargs = payload.value
    return fn(*_substitute(args, dep_values), **_substitute(kwargs, dep_values))


def emulate(payload, *deps):
    """Sleep for this task's duration on the worker running it; return ``nbytes`` real bytes.

    Parameters
    ----------
    payload : Opaque
        The task's durations per worker, output size and scales.
    *deps
        Its inputs' results (only waited for).
    """
    from distributed import get_worker

    cost, costs, speeds, time_scale, nbytes = payload.value
    name = str(get_worker().name)
    seconds = costs[name] if name in costs else cost / speeds.get(name, 1.0)
    time.sleep(seconds * time_scale)
    return np.zeros(int(nbytes), dtype=np.uint8)


def task_call(fn, args, kwargs, preds: list) -> tuple:
    """The function and first argument of a task's Dask tuple (its dependencies' results follow):
    ``fn`` called with the dependencies' results alone when ``args`` are exactly the handles of
    ``preds`` in order and there are no keyword arguments, else the whole call with each handle
    replaced by its dependency's position.

    Parameters
    ----------
    fn : callable
    args : tuple
    kwargs : dict
    preds : list
        The task's dependencies (task ids) in the order their results are passed.
    """
    if (
        not kwargs
        and len(args) == len(preds)
        and all(isinstance(x, TaskHandle) and x.id == p for x, p in zip(args, preds))
    ):
        return _call_positional, _Positional(fn)
    pos = {p: k for k, p in enumerate(preds)}
    return _execute, _Call((fn, _to_refs(args, pos), _to_refs(kwargs, pos)))


def _to_refs(obj, key_of):
    """Handles -> _Ref(position of the dependency); ``key_of`` maps a task id to that position."""
    return map_leaves(obj, lambda x: _Ref(key_of[x.id]) if isinstance(x, TaskHandle) else x)


def execute(graph: TaskGraph) -> dict:
    """Run an executable graph in this process, one task at a time in topological order (no Dask):
    for debugging a graph and for a reference result. Returns ``{task id: result}``.

    Parameters
    ----------
    graph : TaskGraph

    Raises
    ------
    TaskflowError
        A task has no callable.
    TaskFailed
        A task raised; names it, with the results computed before.

    >>> g = TaskGraph()
    >>> a = g.add_task("a", fn=lambda: 2)
    >>> b = g.add_task("b", fn=lambda x, y: x * y, args=(a, 21))
    >>> execute(g)["b"]
    42
    """
    if not graph.executable:
        raise GraphError(f"graph {graph.name!r} has tasks without a callable; it can only be emulated (run())")
    results: dict = {}

    def value(x):
        return results[x.id] if isinstance(x, TaskHandle) else x

    for t in graph.topological_order():
        fn, args, kwargs = graph.call(t)
        try:
            results[t] = fn(*map_leaves(args, value), **map_leaves(kwargs, value))
        except Exception as exc:
            raise TaskFailed(t, exc, results) from exc
    return results
