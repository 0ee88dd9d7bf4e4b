"""Old import paths of modules that moved into a package: they keep working for a release, with a
DeprecationWarning naming the new path.

The aliases are served by an import finder rather than by stub files at the old paths, so that git sees each move
as a rename (edits made elsewhere to a moved file follow it) and an alias costs nothing until it is imported. The
finder sits last on ``sys.meta_path``: Python asks it only about a name no file answers, and it answers only the
names below. An alias is the moved module itself (``sys.modules`` maps both names to one object), so attributes
and monkeypatching behave the same through either path.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
import warnings

# old path -> new path
MOVED: dict[str, str] = {
    **{f"edgeaccel.{name}": f"edgeaccel.selection.{name}"
       for name in ("selector", "calibration", "timing", "background", "guard", "failed_artifacts", "inventory")},
    "edgeaccel.bundle": "edgeaccel.modelfiles.bundle",
    "edgeaccel.vision.labels": "edgeaccel.modelfiles.labels",
    "edgeaccel.vision.metadata": "edgeaccel.modelfiles.metadata",
    "edgeaccel.vision.check": "edgeaccel.agreement.check",
}

# old package -> new package: each module below the old one is the module of the same name below the new one
PACKAGES: dict[str, str] = {"edgeaccel.probe": "edgeaccel.hardware"}

# old path -> the modules it was split into, searched in this order for a name the old module had
SPLIT: dict[str, tuple[str, ...]] = {
    "edgeaccel.cache": ("edgeaccel.selection.cache", "edgeaccel.cachedir"),
    "edgeaccel.model_pipeline": ("edgeaccel.modelfiles.pipeline", "edgeaccel.modelfiles.describe"),
}


class _AliasLoader:  # the loader protocol, without importlib.abc's import cost
    def create_module(self, spec):
        return None  # a plain module, replaced in sys.modules by exec_module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        moved = new_path(name)
        if moved:
            # the import of a module the new package lacks fails here, as it would have at the old path
            target = importlib.import_module(moved)
            warnings.warn(f"{name} moved to {moved}: import it from there", DeprecationWarning, stacklevel=2)
            # Python's import returns whatever sys.modules holds for the name after this call: the moved module
            sys.modules[name] = target
            return
        parts = [importlib.import_module(part) for part in SPLIT[name]]
        warnings.warn(f"{name} was split into {' and '.join(SPLIT[name])}: import each name from the module that "
                      "holds it now", DeprecationWarning, stacklevel=2)

        def __getattr__(attr: str):
            for part in parts:
                if hasattr(part, attr):
                    return getattr(part, attr)
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        module.__getattr__ = __getattr__


def new_path(old: str) -> str | None:
    """Where the module at ``old`` lives now (None: it did not move)."""
    if old in MOVED:
        return MOVED[old]
    package, _, rest = old.rpartition(".")
    return f"{PACKAGES[package]}.{rest}" if package in PACKAGES else None


class _AliasFinder:  # the meta path finder protocol
    def find_spec(self, fullname, path=None, target=None):
        if new_path(fullname) or fullname in SPLIT:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader())
        return None


def install() -> None:
    """Serve the old paths: one finder per interpreter, also when this module is reloaded (a new class)."""
    mine = (_AliasFinder.__module__, _AliasFinder.__qualname__)
    if not any((type(finder).__module__, type(finder).__qualname__) == mine for finder in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
