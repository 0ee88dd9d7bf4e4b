"""Build the recording delegate (recording_delegate.c) with gcc for the Edge TPU tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("recording_delegate.c")


def build(out_dir: Path, name: str = "librecording_delegate.so", version: str | None = None) -> Path:
    """Compile the delegate into ``out_dir``; ``version`` replaces what its edgetpu_version() returns."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise FileNotFoundError("gcc")
    target = out_dir / name
    command = [gcc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(target), str(SOURCE)]
    if version is not None:
        command.insert(1, f'-DRECORDING_DELEGATE_VERSION="{version}"')
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    return target


def records(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
