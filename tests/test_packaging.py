"""What the wheel leaves out (pyproject.toml [tool.hatch.build.targets.wheel] exclude: the fuzzers and the sandbox
probe) nothing in the wheel needs: no shipped module imports the fuzzers, and only the test hook reaches the probe,
with a clear error where it is absent."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

import edgeaccel
from edgeaccel.errors import ConfigError

ROOT = Path(edgeaccel.__file__).parent
EXCLUDED = ("edgeaccel/fuzzing", "edgeaccel/isolation/probe.py")
# the only shipped modules that may name the probe: the worker runs it, and SandboxProbe checks its choices
PROBE_USERS = {"isolation/worker.py", "isolation/limits.py"}


def _excluded_from_pyproject() -> list[str]:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    config = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    return config["tool"]["hatch"]["build"]["targets"]["wheel"]["exclude"]


def test_the_wheel_excludes_the_test_code():
    assert sorted(_excluded_from_pyproject()) == sorted(EXCLUDED)


def _imported(path: Path) -> set[str]:
    """Every module name the file imports, absolute or relative (as written after the dots), at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.add(base)
            names.update(f"{base}.{a.name}" if base else a.name for a in node.names)
    return names


def _names_the_probe(rel: str, names: set[str]) -> bool:
    in_isolation = rel.startswith("isolation/")  # there `from . import probe` / `from .probe import ...`
    return any(n.startswith(("isolation.probe", "edgeaccel.isolation.probe"))
               or in_isolation and (n == "probe" or n.startswith("probe.")) for n in names)


def test_no_shipped_module_needs_what_the_wheel_leaves_out():
    shipped = [p for p in ROOT.rglob("*.py")
               if not any(p.relative_to(ROOT.parent).as_posix().startswith(e) for e in EXCLUDED)]
    found_users = set()
    for path in shipped:
        rel = path.relative_to(ROOT).as_posix()
        names = _imported(path)
        assert not any("fuzzing" in n for n in names), f"{rel} imports the fuzzers, which the wheel leaves out"
        if _names_the_probe(rel, names):
            assert rel in PROBE_USERS, f"{rel} imports the sandbox probe, which the wheel leaves out"
            found_users.add(rel)
    assert found_users == PROBE_USERS  # the scan sees the imports it is there to see


def test_a_sandbox_probe_without_the_probe_module_says_so(monkeypatch):
    # an installed wheel: find_spec finds no probe module (the real one, in this checkout, is hidden)
    real = importlib.util.find_spec

    def no_probe(name, *args):
        return None if name == "edgeaccel.isolation.probe" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_probe)
    from edgeaccel.isolation import SandboxProbe

    with pytest.raises(ConfigError) as caught:
        SandboxProbe(files=("/etc/hostname",))
    assert "test hook" in str(caught.value) and caught.value.hint and "source checkout" in caught.value.hint
