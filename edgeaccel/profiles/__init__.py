"""Device profiles: what a device family's accelerators do well, the order of preference per goal, its
power budget and thermal limits. Data lives in ``profiles/*.yaml``; see ``types.py`` for the model."""

from .types import AcceleratorSpec, Profile, ThermalLimits

__all__ = ["AcceleratorSpec", "Profile", "ThermalLimits"]
