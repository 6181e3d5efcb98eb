"""Every public function, class and method has a docstring; public functions that take parameters
have a numpydoc ``Parameters`` section, and a ``Raises`` section when they raise an error themselves;
every public module's ``__all__`` lists exactly what it makes public.

Public: a name without a leading underscore, defined in a module whose dotted path has no part
with one. A method may inherit its docstring from the interface it implements (a scheduler's
``on_ready`` is documented once, on :class:`taskflow.scheduling.DynamicScheduler`).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def public_modules() -> list:
    out = []
    for pkg in ("taskflow", "schedulers", "workflows"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if parts[-1] == "__main__" or any(p.startswith("_") for p in parts):
                continue
            out.append(".".join(parts))
    return out


def own_members(module):
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_"):
            continue
        fn = getattr(obj, "py_func", obj)  # a numba-compiled function documents its Python one
        if (inspect.isfunction(fn) or inspect.isclass(obj)) and getattr(fn, "__module__", None) == module.__name__:
            yield name, obj, fn


def raises_itself(fn) -> bool:
    """The function's own body raises an ``...Error(...)`` (not one it only lets through)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    top = tree.body[0]
    nested = {
        id(n)
        for d in ast.walk(top)
        if d is not top and isinstance(d, (ast.FunctionDef, ast.Lambda))
        for n in ast.walk(d)
    }
    for node in ast.walk(top):
        if isinstance(node, ast.Raise) and id(node) not in nested and isinstance(node.exc, ast.Call):
            name = getattr(node.exc.func, "id", getattr(node.exc.func, "attr", ""))
            if name.endswith("Error") or name in ("TaskFailed", "Exception"):
                return True
    return False


def findings() -> list:
    out = []
    for modname in public_modules():
        module = importlib.import_module(modname)
        if not (module.__doc__ or "").strip():
            out.append(f"{modname}: no module docstring")
        names = {name for name, _, _ in own_members(module)}
        listed = getattr(module, "__all__", None)
        if names and listed is None:
            out.append(f"{modname}: no __all__")
        elif listed is not None:
            out.extend(f"{modname}: {n} is public but not in __all__" for n in sorted(names - set(listed)))
            out.extend(
                f"{modname}: __all__ names {n!r}, which it does not define" for n in listed if not hasattr(module, n)
            )
        for name, obj, fn in own_members(module):
            where = f"{modname}.{name}"
            doc = inspect.getdoc(fn) if not inspect.isclass(obj) else obj.__dict__.get("__doc__")
            if not (doc or "").strip():
                out.append(f"{where}: no docstring")
                continue
            if inspect.isclass(obj):
                for mname, member in sorted(vars(obj).items()):
                    if mname.startswith("_"):
                        continue
                    target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                    if inspect.isfunction(target) and not (inspect.getdoc(getattr(obj, mname)) or "").strip():
                        out.append(f"{where}.{mname}: no docstring")
                continue
            params = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
            if params and "Parameters" not in doc:
                out.append(f"{where}: no Parameters section")
            if raises_itself(fn) and "Raises" not in doc:
                out.append(f"{where}: raises but has no Raises section")
    return out


def test_every_public_object_is_documented():
    found = findings()
    assert found == [], f"{len(found)} finding(s):\n" + "\n".join(found)


def test_the_checker_catches_an_undocumented_function(tmp_path, monkeypatch):
    """The rules themselves, on a synthetic module."""
    import sys
    import types

    mod = types.ModuleType("fake_public")
    mod.__doc__ = "A module."
    src = (
        "def documented(x):\n    '''Twice.\n\n    Parameters\n    ----------\n    x : int\n    '''\n    return 2 * x\n\n"
        "def bare(x):\n    return x\n\n"
        "def no_params(x):\n    '''Half.'''\n    return x / 2\n\n"
        "def loud(x):\n    '''Check.\n\n    Parameters\n    ----------\n    x : int\n    '''\n"
        "    if x < 0:\n        raise ValueError('negative')\n    return x\n"
    )
    path = tmp_path / "fake_public.py"
    path.write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("fake_public")
    names = {n for n, _, fn in own_members(module)}
    assert names == {"documented", "bare", "no_params", "loud"}
    assert not (inspect.getdoc(module.bare) or "")
    assert "Parameters" not in inspect.getdoc(module.no_params)
    assert raises_itself(module.loud) and not raises_itself(module.documented)
    sys.modules.pop("fake_public", None)
