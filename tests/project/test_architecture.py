"""The import directions of docs/architecture.md, checked on every module's syntax tree (imports
inside functions included), so the layering cannot rot."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("taskflow", "schedulers", "workflows")

#: layer -> the layers it may import (its own included)
ALLOWED = {
    "core": {"core"},
    "schedulers": {"core", "schedulers"},
    "workflows": {"core", "workflows"},
    "simulator": {"core", "simulator"},
    "runtime": {"core", "simulator", "runtime"},
    "facade": {"core", "simulator", "runtime", "advisor", "training", "facade"},
    "testbed": {"core", "simulator", "runtime", "testbed"},
    "advisor": {"core", "simulator", "runtime", "workflows", "advisor"},
    "training": {"core", "simulator", "runtime", "workflows", "training"},
    "app": {
        "core",
        "simulator",
        "runtime",
        "facade",
        "testbed",
        "advisor",
        "training",
        "app",
        "schedulers",
        "workflows",
    },
}
#: third-party packages only some layers may import (the rest stay light and Dask-free)
THIRD_PARTY = {
    "dask": {"runtime", "app"},
    "distributed": {"runtime", "app"},
    "matplotlib": {"app", "advisor", "training"},
    "torch": {"workflows", "training", "app", "runtime"},
}


def layer(module: str) -> str | None:
    """The layer of one of our modules (None: not ours)."""
    top = module.split(".")[0]
    if top in ("schedulers", "workflows"):
        return top
    if top != "taskflow":
        return None
    if module == "taskflow":
        return "facade"
    second = module.split(".")[1]
    if second in ("app", "__main__"):
        return "app"
    if second in ("simulator", "runtime", "testbed", "advisor", "training"):
        return second
    return "core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(module: str, source: str, is_package: bool) -> list:
    """``(imported module, line)`` for every import statement in ``source``, wherever it is. A
    module's own parent packages are left out: they are imported before it in any case."""
    out = []
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module
            out.append((target, node.lineno))
            for alias in node.names:  # "from pkg import submodule" imports the submodule too
                out.append((f"{target}.{alias.name}", node.lineno))
    parents = {".".join(module.split(".")[:k]) for k in range(1, module.count(".") + 1)}
    return [(t, line) for t, line in out if t not in parents]


def our_modules() -> dict:
    """module name -> (source, is_package) for every module of our three packages."""
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            mods[module_name(path)] = (path.read_text(), path.name == "__init__.py")
    return mods


def violations(modules: dict) -> list:
    """Every import that goes against :data:`ALLOWED` or :data:`THIRD_PARTY`."""
    known = set(modules) | set(our_modules())
    bad = []
    for name, (source, is_pkg) in modules.items():
        here = layer(name)
        for target, line in imports(name, source, is_pkg):
            top = target.split(".")[0]
            if top in THIRD_PARTY:
                if here not in THIRD_PARTY[top]:
                    bad.append(f"{name}:{line} imports {target} (only {sorted(THIRD_PARTY[top])} may)")
                continue
            if target not in known:
                continue  # a name imported from a module, or not ours
            there = layer(target)
            if there is not None and there not in ALLOWED[here]:
                bad.append(f"{name}:{line} ({here}) imports {target} ({there})")
    return sorted(set(bad))


def import_graph(modules: dict) -> dict:
    known = set(modules)
    graph = {}
    for name, (source, is_pkg) in modules.items():
        graph[name] = {t for t, _ in imports(name, source, is_pkg) if t in known and t != name}
    return graph


def cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_module_has_a_layer():
    mods = our_modules()
    assert {
        "taskflow.scheduling",
        "taskflow.simulator.engine",
        "taskflow.runtime.client.runner",
        "taskflow.app.cli",
    } <= set(mods)
    assert {layer(m) for m in mods} == set(ALLOWED)


def test_imports_only_go_downward():
    assert violations(our_modules()) == []


def test_no_import_cycles():
    """Package ``__init__`` files re-export their submodules; a submodule importing its own
    package's ``__init__`` back would close a cycle."""
    assert cycles(import_graph(our_modules())) == []


@pytest.mark.parametrize(
    "name, source, expected",
    [
        (
            "schedulers.fake",
            "def plan():\n    from taskflow.simulator import simulate\n",
            "(schedulers) imports taskflow.simulator",
        ),
        (
            "schedulers.fake",
            "import taskflow.runtime.client.runner\n",
            "(schedulers) imports taskflow.runtime.client.runner",
        ),
        ("taskflow.fake", "def f():\n    import schedulers\n", "(core) imports schedulers"),
        ("taskflow.fake", "from .simulator import simulate\n", "(core) imports taskflow.simulator"),
        ("taskflow.simulator.fake", "from ..runtime import run\n", "(simulator) imports taskflow.runtime"),
        (
            "taskflow.runtime.fake",
            "def f():\n    from ..app.plot import gantt\n",
            "(runtime) imports taskflow.app.plot",
        ),
        ("workflows.fake", "from taskflow import simulator\n", "(workflows) imports taskflow.simulator"),
        ("taskflow.fake", "import distributed\n", "imports distributed (only ['app', 'runtime'] may)"),
        (
            "taskflow.simulator.fake",
            "def f():\n    import matplotlib.pyplot\n",
            "imports matplotlib.pyplot (only ['advisor', 'app', 'training'] may)",
        ),
        (
            "taskflow.simulator.fake",
            "import torch\n",
            "imports torch (only ['app', 'runtime', 'training', 'workflows'] may)",
        ),
    ],
)
def test_a_forbidden_import_is_caught(name, source, expected):
    found = violations({name: (source, False)})
    assert found and all(f.startswith(f"{name}:") for f in found) and any(expected in f for f in found), found


def test_allowed_imports_pass_and_cycles_are_found():
    assert (
        violations(
            {"schedulers.fake": ("from taskflow.scheduling import Scheduler\nfrom .ranks import b_level\n", False)}
        )
        == []
    )
    assert violations({"taskflow.app.fake": ("import schedulers\nfrom ..runtime import run\n", False)}) == []
    mods = {"taskflow.a": ("from . import b\n", False), "taskflow.b": ("def f():\n    from .a import x\n", False)}
    assert cycles(import_graph(mods)) == [["taskflow.a", "taskflow.b"]]


# ---------------------------------------------------------------- the architecture page says what is
def _layout() -> set:
    """The paths the Layout block of docs/architecture.md names (folders end in '/')."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    stack, out = [], set()
    for line in block.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        names = line.strip().split("  ")[0].split(", ")
        stack = stack[:depth]
        for name in names:
            out.add("/".join(stack + [name]))
        if names[-1].endswith("/"):
            stack.append(names[-1].rstrip("/"))
    return out


def test_the_architecture_page_lists_every_module_of_taskflow_and_only_files_that_exist():
    listed = _layout()
    missing_on_disk = sorted(p for p in listed if not (ROOT / p.rstrip("/")).exists())
    assert missing_on_disk == []
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "taskflow").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(modules - listed) == []


def test_the_architecture_page_names_exactly_the_modules_over_500_lines_each_with_a_reason():
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Modules over 500 lines", 1)[1].split("\n## ", 1)[0]
    named = dict(re.findall(r"^- `([^`]+\.py)`: (.+)$", section, re.M))
    long = {
        str(p.relative_to(ROOT))
        for pkg in ("taskflow", "schedulers", "workflows")
        for p in (ROOT / pkg).rglob("*.py")
        if len(p.read_text().splitlines()) > 500
    }
    assert set(named) == long and all(len(why.split()) >= 4 for why in named.values())
    assert not [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if len(p.read_text().splitlines()) > 600]


def test_no_private_name_crosses_a_module():
    """``from .x import _name`` (or ``x._name(...)`` on a module of ours) reaches into another
    module's privates: what another module needs is public there, documented and in ``__all__``."""
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text())
            ours = set()
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.ImportFrom)
                    and node.module != "__future__"
                    and (node.level or (node.module or "").split(".")[0] in PACKAGES)
                ):
                    for alias in node.names:
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}")
                        ours.add(alias.asname or alias.name)
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ours
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert found == []


def test_no_bare_taskflow_error_is_raised():
    """Each failure says what failed by its class (a usage error, a scheduler that cannot, a cluster
    that would not start, a testbed, a run that failed, ...), still a TaskflowError: the base class
    itself is never made outside taskflow/errors.py."""
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path.name == "errors.py" and path.parent.name == "taskflow":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "TaskflowError":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []


#: the runtime's sides (a process each) and the sides each may import; every side may import the
#: shared modules (taskflow/runtime/*.py: the wire format, cost profiles, predictions)
SIDES = {
    "client": {"client", "worker", "launch"},
    "scheduler": {"scheduler"},
    "worker": {"worker"},
    "launch": {"launch", "worker"},
}


def _side(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["taskflow", "runtime"] and parts[2] in SIDES else None


def test_the_runtime_is_laid_out_by_process():
    """The client never imports the scheduler's code (it installs the plugin by name), the scheduler
    and the workers import only their own side and the shared modules, launchers only the workers'
    names; the shared modules import no side."""
    found = []
    for path in sorted((ROOT / "taskflow" / "runtime").rglob("*.py")):
        name = module_name(path)
        here = _side(name)
        for target, line in imports(name, path.read_text(), path.name == "__init__.py"):
            there = _side(target)
            if there is None or (here is None and name == "taskflow.runtime"):
                continue  # not a side; the package's own re-exports of the public calls
            if here is None:
                found.append(f"{name}:{line} (shared) imports {target}")
            elif there not in SIDES[here]:
                found.append(f"{name}:{line} ({here}) imports {target} ({there})")
    assert found == []
    assert set(SIDES) == {
        p.name for p in (ROOT / "taskflow" / "runtime").iterdir() if p.is_dir() and p.name != "__pycache__"
    }


def test_a_constant_is_defined_once_and_a_capability_is_declared_not_looked_for():
    """``CHOICES`` (what the adaptive scheduler may run a graph by) has one definition; no module
    asks a scheduler ``getattr(scheduler, "adaptive", ...)``: the base class declares the capability."""
    defined, probed = [], []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "CHOICES" for t in node.targets
                ):
                    defined.append(str(path.relative_to(ROOT)))
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "getattr"
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in ("adaptive", "choices")
                ):
                    probed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert defined == ["taskflow/scheduling.py"] and probed == []


def test_the_adaptive_scheduler_reaches_the_plugin_only_through_its_view():
    """The adaptive scheduler's part is an object the plugin owns; it touches the plugin through the
    members :class:`PluginView` declares and nothing private of it."""
    from taskflow.runtime.scheduler.adaptation import PluginView

    declared = {n for n in vars(PluginView) if not n.startswith("_")} | set(PluginView.__annotations__)
    path = ROOT / "taskflow" / "runtime" / "scheduler" / "adaptation.py"
    used = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "plugin"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == "self"
        ):
            used.add(node.attr)
    assert used and used <= declared, used - declared
    plugin = (ROOT / "taskflow" / "runtime" / "scheduler" / "plugin.py").read_text()
    # the adaptive part is owned, not inherited: the plugin is its handlers of clients and of Dask's events
    assert "class TaskflowPlugin(ClientMessages, SchedulerPlugin)" in plugin and "Adapting" not in plugin


def _assigned(node) -> list:
    """What ``node`` assigns to (each target of a tuple on its own); nothing where it is no assignment."""
    targets = (
        node.targets
        if isinstance(node, ast.Assign)
        else [node.target]
        if isinstance(node, (ast.AugAssign, ast.AnnAssign))
        else []
    )
    return [leaf for t in targets for leaf in (t.elts if isinstance(t, ast.Tuple) else [t])]


def _assigned_attributes(path: Path, names: set) -> list:
    """``(function, attribute, line)`` for each assignment to ``<x>.<name>`` in ``path``, ``name`` in ``names``."""
    found = []
    tree = ast.parse(path.read_text())
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            for leaf in _assigned(node):
                if isinstance(leaf, ast.Attribute) and leaf.attr in names:
                    found.append((fn.name, leaf.attr, node.lineno))
    return found


def test_a_run_s_state_and_the_adaptive_phase_change_only_through_their_one_method():
    """A run's state changes only in ``TaskflowPlugin.move`` (and its construction), an adaptive
    phase only in ``AdaptiveState.move`` (and its construction): no module of the runtime assigns
    either anywhere else."""
    stray = []
    for path in sorted((ROOT / "taskflow" / "runtime").rglob("*.py")):
        for fn, attr, line in _assigned_attributes(path, {"state", "phase"}):
            allowed = (attr == "state" and (fn, path.name) in {("move", "plugin.py"), ("__init__", "runs.py")}) or (
                attr == "phase"
                and (fn, path.name) in {("move", "adaptive_state.py"), ("__init__", "adaptive_state.py")}
            )
            if not allowed:
                stray.append(f"{path.name}:{line} {fn} sets .{attr}")
    assert stray == []


def test_a_run_s_adaptive_state_is_changed_only_by_its_own_methods():
    """The adaptive state is one record changed only by its transitions (``AdaptiveState.decide``,
    ``hold``, ``race``, ...): no module of the runtime but its own assigns a field of a run's
    ``adapt``, nor appends to one in place."""
    stray = []
    for path in sorted((ROOT / "taskflow" / "runtime").rglob("*.py")):
        if path.name == "adaptive_state.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            for leaf in _assigned(node):
                while isinstance(leaf, ast.Subscript):  # r.adapt.speeds_used[w] = ...
                    leaf = leaf.value
                if (
                    isinstance(leaf, ast.Attribute)
                    and isinstance(leaf.value, ast.Attribute)
                    and leaf.value.attr == "adapt"
                ):
                    stray.append(f"{path.name}:{node.lineno} sets adapt.{leaf.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "update", "clear", "pop", "setdefault", "extend")
                and isinstance(node.func.value, ast.Attribute)
                and isinstance(node.func.value.value, ast.Attribute)
                and node.func.value.value.attr == "adapt"
            ):
                stray.append(f"{path.name}:{node.lineno} changes adapt.{node.func.value.attr} in place")
    assert stray == []


#: where "policy" still means something else than our schedulers: HEFT's insertion policy, a paper's
#: title, Dask's active memory manager's policies, and the earlier spellings still read
OTHER_POLICIES = (
    "insertion policy",
    "rescheduling policy",
    "amm.policies",
    "add_policy",
    "ReduceReplicas",
    "(policy)",
    "for policy in list(amm",
    "--policy",
    'EARLIER = "TASKFLOW_POLICY"',
    "use(client, scheduler, policy=",
    '"policy" in options',
    'options.pop("policy")',
    'policy="cpop"',
    "scheduling policy",
    '["amm"].policies',
)


def test_our_scheduling_algorithms_have_one_word():
    """Our scheduling algorithms are *schedulers* in code, CLI, Python API and docs (the reason is in
    docs/architecture.md); "policy" is left only where it means something else (:data:`OTHER_POLICIES`)."""
    found = []
    paths = [
        p
        for pkg in (*PACKAGES, "tests", "benchmarks", "docs")
        for p in (ROOT / pkg).rglob("*")
        if p.suffix in (".py", ".md") and "__pycache__" not in p.parts
    ]
    for path in [*paths, ROOT / "README.md", ROOT / "setup.cfg", ROOT / "Makefile"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if (
                re.search(r"polic(y|ies)", line, re.I)
                and not any(ok in line for ok in OTHER_POLICIES)
                and path.name != "test_architecture.py"
            ):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert found == []


def test_tests_are_laid_out_like_the_code():
    """Each test module sits in the folder of the package it tests (tests/taskflow/<subpackage>/,
    tests/schedulers/, tests/workflows/), or in tests/project/ (the whole tree) or tests/hpc/."""
    misplaced = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT / "tests").parent
        parts = rel.parts
        if parts in (("project",), ("hpc",), ("schedulers",), ("workflows",), ("taskflow",)):
            continue
        if len(parts) == 2 and parts[0] == "taskflow" and (ROOT / "taskflow" / parts[1] / "__init__.py").exists():
            continue
        misplaced.append(str(path.relative_to(ROOT)))
    assert misplaced == []
    # every folder of tests is a package: pytest then never puts tests/taskflow on sys.path, where it
    # would hide the real taskflow
    assert [
        str(d.relative_to(ROOT))
        for d in (ROOT / "tests").rglob("*")
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("test_*.py")) and not (d / "__init__.py").exists()
    ] == []
