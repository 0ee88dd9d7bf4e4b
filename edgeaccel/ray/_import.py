"""Ray itself, imported only when a function of edgeaccel.ray needs it, with the install hint when it is missing."""

from __future__ import annotations

from ..errors import RuntimeNotInstalledError

INSTALL_HINT = "pip install 'edgeaccel[ray]' (Ray Data and Ray Serve, ray[data,serve] >= 2.9)"


def import_ray():
    """The ``ray`` module, or RuntimeNotInstalledError saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"edgeaccel.ray needs Ray, which is not installed here ({exc})",
                                       hint=INSTALL_HINT) from exc
    return ray


def import_ray_part(name: str):
    """``ray.data`` or ``ray.serve``: a Ray installed without that extra gets the same hint."""
    import importlib

    import_ray()
    try:
        return importlib.import_module(f"ray.{name}")
    except ImportError as exc:
        raise RuntimeNotInstalledError(f"ray.{name} cannot be imported ({exc}): Ray is installed without its "
                                       f"'{name}' extra", hint=INSTALL_HINT) from exc
