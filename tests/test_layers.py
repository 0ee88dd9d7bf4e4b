"""Layering: every import between edgeaccel's parts follows edgeaccel/_layers.py, whether it sits at module level,
inside a function, in ``importlib.import_module("...")`` or in a ``"package.module:name"`` reference."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import edgeaccel
from edgeaccel import _layers

ROOT = Path(edgeaccel.__file__).parent
# "edgeaccel.profiling.litert:collect": a reference that code elsewhere hands to importlib (entry-point style)
REFERENCE = re.compile(r"^(edgeaccel(?:\.\w+)+):\w+$")


def module_name(path: Path) -> str:
    parts = ["edgeaccel", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] != "edgeaccel":
        return False
    path = ROOT.joinpath(*parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def unit_of(dotted: str) -> str:
    """'edgeaccel.hardware.fs' -> 'hardware'; 'edgeaccel.loader' -> 'loader'; 'edgeaccel' -> 'edgeaccel'."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "edgeaccel"


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(imported edgeaccel module, line) for every import the file makes, at any depth."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def absolute(level: int, target: str) -> str:
        base = package.split(".")
        base = base[: len(base) - (level - 1)] if level > 1 else base
        return ".".join(base + ([target] if target else []))

    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.level, node.module or "") if node.level else node.module or ""
            for alias in node.names:  # `from . import errors` imports the module edgeaccel.errors
                sub = f"{base}.{alias.name}"
                found.append((sub if is_module(sub) else base, node.lineno))
        elif isinstance(node, ast.Call) and node.args and _is_import_call(node.func):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                text = arg.value
                dots = len(text) - len(text.lstrip("."))
                found.append((absolute(dots, text[dots:]) if dots else text, node.lineno))
            elif _relative_fstring(arg):
                # f".{name}" anchored at __name__: one of this package's own modules (the lazy-attribute tables)
                found.append((package, node.lineno))
            elif (path.relative_to(ROOT).as_posix(), ast.unparse(arg)) not in DYNAMIC:
                pytest.fail(f"{path.relative_to(ROOT.parent)}:{node.lineno}: an import whose target this test "
                            "cannot read; give it a literal name or a relative f-string, or read the name from a "
                            "'module:name' string literal")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and REFERENCE.match(node.value):
            found.append((REFERENCE.match(node.value).group(1), node.lineno))
    return [(target, line) for target, line in found if target == "edgeaccel" or target.startswith("edgeaccel.")]


def _is_import_call(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name in ("import_module", "__import__")


def _relative_fstring(arg: ast.expr) -> bool:
    return (isinstance(arg, ast.JoinedStr) and bool(arg.values) and isinstance(arg.values[0], ast.Constant)
            and str(arg.values[0].value).startswith("."))


# Calls whose argument is a runtime value handed over by the registry or an executor class; what they load is
# checked where the string is written (the REFERENCE literals above).
DYNAMIC = {
    ("executors/registry.py", "module_name"), ("executors/litert.py", "module_name"),
    ("profiling/collect.py", "module"), ("ray/_import.py", "f'ray.{name}'"),
    # the deprecated old paths of moved modules: each alias loads its new home, named in _moved's tables
    ("_moved.py", "moved"), ("_moved.py", "part"),
}


@functools.lru_cache(maxsize=1)  # one parse of the tree for all the tests below
def module_edges() -> dict[tuple[str, str], list[str]]:
    """(importing module, imported module) -> where, for every import between two of edgeaccel's modules."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        source = module_name(path)
        for target, line in imports_of(path):
            while not is_module(target):  # `import edgeaccel.x.y as z` or a name past a module
                target = target.rpartition(".")[0]
            if target != source:
                edges.setdefault((source, target), []).append(f"{path.relative_to(ROOT.parent)}:{line}")
    return edges


@functools.lru_cache(maxsize=1)
def all_edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where: the module edges between two units."""
    edges: dict[tuple[str, str], list[str]] = {}
    for (source, target), where in module_edges().items():
        if unit_of(source) != unit_of(target):
            edges.setdefault((unit_of(source), unit_of(target)), []).extend(where)
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one node: each is a set of nodes that import each other,
    directly or through the others (Tarjan's algorithm, iterative so a deep chain cannot overflow the stack)."""
    graph: dict[str, list[str]] = {}
    for source, target in edges:
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if child < len(graph[node]):
                work.append((node, child + 1))
                nxt = graph[node][child]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def test_the_collector_sees_function_level_string_and_reference_imports():
    """The kinds of import the old check missed are found: if one of these moves, pick another real example."""
    edges = all_edges()
    facade = ROOT / "__init__.py"  # edgeaccel.probe's attributes: importlib.import_module(".hardware", __name__)
    line = next(number for number, text in enumerate(facade.read_text().splitlines(), 1)
                if 'import_module(".hardware"' in text)
    assert ("edgeaccel.hardware", line) in imports_of(facade)
    registry = ROOT / "executors" / "registry.py"  # "litert": "edgeaccel.executors.litert:LiteRTExecutor"
    line = next(number for number, text in enumerate(registry.read_text().splitlines(), 1)
                if '"edgeaccel.executors.litert:LiteRTExecutor"' in text)
    assert ("edgeaccel.executors.litert", line) in imports_of(registry)
    assert any("model.py" in where for where in edges.get(("model", "vision"), []))  # inside a method


def test_every_unit_is_in_the_layer_table():
    units = {unit_of(module_name(path)) for path in ROOT.rglob("*.py")}
    unknown = sorted(unit for unit in units if _layers.layer_of(unit) is None)
    assert not unknown, f"add {unknown} to a layer in edgeaccel/_layers.py"


def test_imports_point_down_the_layers_or_are_listed_exceptions():
    climbing = []
    for (source, dest), where in sorted(all_edges().items()):
        low, high = _layers.layer_of(source), _layers.layer_of(dest)
        if low is None or high is None or high <= low or (source, dest) in _layers.EXCEPTIONS:
            continue
        climbing.append(f"{source} -> {dest} ({_layers.LAYERS[high][0]} is above {_layers.LAYERS[low][0]}): "
                        + ", ".join(where))
    assert not climbing, "imports that climb the layers of edgeaccel/_layers.py:\n" + "\n".join(climbing)


def test_listed_exceptions_still_exist_and_say_why():
    edges = all_edges()
    stale = [pair for pair in _layers.EXCEPTIONS if pair not in edges]
    assert not stale, f"these imports are gone: remove them from EXCEPTIONS in edgeaccel/_layers.py: {stale}"
    assert all(reason.strip() for reason in _layers.EXCEPTIONS.values())


def test_nothing_imports_the_cli():
    """The CLI imports the library, never the reverse."""
    users = {source: where for (source, dest), where in all_edges().items() if dest == "cli" and source != "__main__"}
    assert not users, f"library code imports edgeaccel.cli: {users}"


def describe_cycle(component: frozenset[str], edges: dict[tuple[str, str], list[str]]) -> str:
    inside = [f"  {a} -> {b}: {', '.join(where[:3])}" for (a, b), where in sorted(edges.items())
              if a in component and b in component]
    return f"{sorted(component)}\n" + "\n".join(inside)


def test_the_cycle_finder_finds_a_cycle_through_three_and_leaves_a_chain_alone():
    edges = {("a", "b"): [], ("b", "c"): [], ("c", "a"): [], ("c", "d"): [], ("d", "e"): []}
    assert cycles(edges) == [frozenset("abc")]
    assert cycles({("a", "b"): [], ("b", "c"): []}) == []
    two = {("a", "b"): [], ("b", "a"): [], ("b", "c"): [], ("c", "d"): [], ("d", "c"): [], ("d", "e"): []}
    assert sorted(map(sorted, cycles(two))) == [["a", "b"], ["c", "d"]]
    # a cycle reached only through a long chain, and one closed by an edge back to the start of that chain
    chain = {(str(n), str(n + 1)): [] for n in range(3000)}
    assert cycles({**chain, ("3000", "2998"): []}) == [frozenset({"2998", "2999", "3000"})]
    assert cycles({**chain, ("3000", "0"): []}) == [frozenset(str(n) for n in range(3001))]


@pytest.mark.parametrize("level", ["module", "unit"])
def test_no_import_cycles(level):
    """No two of edgeaccel's modules (nor units) import each other, directly or through others, counting
    function-level, importlib and "module:name" imports: each part can be read, tested and moved knowing only
    what is below it. A cycle still being cut is listed in _layers.CYCLES_LEFT with its reason."""
    edges = module_edges() if level == "module" else all_edges()
    found = cycles(edges)
    new = [describe_cycle(c, edges) for c in found if c not in _layers.CYCLES_LEFT]
    assert not new, f"import cycles between {level}s (cut one import of each):\n" + "\n".join(new)
    listed = [c for c in _layers.CYCLES_LEFT if (level == "module") == any("." in member for member in c)]
    gone = [sorted(c) for c in listed if c not in found]
    assert not gone, f"these cycles are gone: remove them from CYCLES_LEFT in edgeaccel/_layers.py: {gone}"
