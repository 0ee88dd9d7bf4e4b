"""ruff as a gate: the rule set chosen in pyproject.toml ([tool.ruff.lint]) stays clean over the package, the
tests and the tools."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -e '.[dev]' installs it)")
def test_ruff_finds_nothing():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise",
                          "edgeaccel", "tests", "tools"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"ruff check edgeaccel tests tools:\n{run.stdout}{run.stderr}"
