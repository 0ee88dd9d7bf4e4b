"""Where the YAML data (profiles/) and the bundled samples live.

In a checkout they are at the repository root; an installed wheel carries copies under edgeaccel/data/
(pyproject.toml force-includes them), so both layouts are looked up.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    for candidate in (_PACKAGE / "data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"edgeaccel's {name}/ data folder is missing from {_PACKAGE}; reinstall edgeaccel")


def samples_dir() -> Path:
    return _PACKAGE / "samples"
