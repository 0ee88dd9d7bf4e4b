"""mypy as a gate: the files listed in pyproject.toml ([tool.mypy] files) type-check clean. The list grows one
package at a time (docs/development.md); files not on it are read for their types but not judged."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_the_listed_files_exist():
    # a file moved or renamed without updating the list would otherwise fail with mypy's own "can't find"
    # message instead of this one
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert listed, "pyproject.toml [tool.mypy] files is empty"
    missing = [f for f in listed if not (REPO / f).exists()]
    assert not missing, f"pyproject.toml [tool.mypy] files names paths that do not exist: {missing}"


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install -e '.[dev]' installs it)")
def test_mypy_finds_nothing():
    # --no-incremental: a cache written by another mypy version or checkout cannot hide an error
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary",
                          "--config-file", "pyproject.toml"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"mypy (the files of pyproject.toml [tool.mypy]):\n{run.stdout}{run.stderr}"
