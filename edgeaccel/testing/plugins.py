"""Install executor plug-ins for real, for a test: a distribution (``*.dist-info`` with METADATA, RECORD and
entry_points.txt, and its module) written into a folder put on ``sys.path``, then ``registry.refresh()``;
``uninstall`` takes it all back. edgeaccel finds the plug-in exactly as it finds one installed by pip, through
the ``edgeaccel.executors`` entry-point group, and so does a subprocess given the folder on PYTHONPATH
(``edgeaccel probe``, ``edgeaccel explain``)::

    from edgeaccel.testing.emulated import emulated_accelerator
    from edgeaccel.testing.plugins import installed_plugins

    FastGPU = emulated_accelerator("fastgpu", device="FastGPU", kind="gpu", speedup=10)
    with installed_plugins(tmp_path, FastGPU) as plugin:
        model = edgeaccel.load("m.tflite")          # ranks fastgpu:FastGPU like a built-in
        registered = plugin.classes["fastgpu"]    # the class the registry made from the module on disk
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..executors import registry

if TYPE_CHECKING:
    from .emulated import EmulatedExecutor


@dataclass
class InstalledPlugin:
    folder: Path  # on sys.path (and what a subprocess needs on PYTHONPATH)
    distribution: str
    module: str
    classes: dict[str, type] = field(default_factory=dict)  # runtime -> the class the registry registered

    def pythonpath(self, *more: str | os.PathLike) -> str:
        """PYTHONPATH for a subprocess that must see the plug-in (and ``more``, e.g. the project's root)."""
        return os.pathsep.join([str(self.folder), *map(str, more), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def install(folder: str | os.PathLike, *emulated: type[EmulatedExecutor],
            distribution: str = "edgeaccel-emulated-accelerators", version: str = "0.0.1", module: str | None = None, source: str | None = None,
            entry_points: dict[str, str] | None = None) -> InstalledPlugin:
    """Write a distribution holding ``emulated`` classes (from ``emulated_accelerator``), or a module's
    ``source`` with its ``entry_points`` ({name: "module:Class"}), into ``folder``; put it on sys.path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    module = module or re.sub(r"\W", "_", distribution.lower())
    if source is None:
        variables = {cls.runtime: re.sub(r"\W", "_", cls.runtime).upper() for cls in emulated}
        source = ('"""Emulated accelerators written by edgeaccel.testing.plugins: answers by a CPU runtime, every '
                  'figure simulated."""\n\nfrom edgeaccel.testing.emulated import Faults, emulated_accelerator\n\n'
                  + "".join(cls.spec.source(variables[cls.runtime]) for cls in emulated))
        entry_points = {name: f"{module}:{var}" for name, var in variables.items()}
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    info = folder / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
                                   "Summary: executor plug-ins written by edgeaccel.testing for a test\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n" + "".join(f"{n} = {t}\n" for n, t in (entry_points or {}).items()))
    (info / "top_level.txt").write_text(f"{module}\n")
    (info / "RECORD").write_text(f"{module}.py,,\n{info.name}/METADATA,,\n{info.name}/entry_points.txt,,\n"
                                 f"{info.name}/top_level.txt,,\n{info.name}/RECORD,,\n")
    return activate(folder, distribution, module)


def activate(folder: str | os.PathLike, distribution: str, module: str) -> InstalledPlugin:
    """Put ``folder`` (a pip ``--target`` folder, or one ``install`` wrote) on sys.path and register its plug-ins."""
    folder = Path(folder)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    sys.modules.pop(module, None)
    importlib.invalidate_caches()
    registry.refresh()
    plugin = InstalledPlugin(folder, distribution, module)
    plugin.classes = {name: registry.get(name) for name in registry.runtimes()
                      if registry.plugin_distribution(name) == distribution}
    return plugin


def uninstall(plugin: InstalledPlugin) -> None:
    """Take the folder off sys.path, forget the module and register again: edgeaccel as before."""
    while str(plugin.folder) in sys.path:
        sys.path.remove(str(plugin.folder))
    for name in [m for m in sys.modules if m == plugin.module or m.startswith(f"{plugin.module}.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    registry.refresh()


@contextmanager
def installed_plugins(folder: str | os.PathLike, *emulated: type, **kwargs) -> Iterator[InstalledPlugin]:
    plugin = install(folder, *emulated, **kwargs)
    try:
        yield plugin
    finally:
        uninstall(plugin)
