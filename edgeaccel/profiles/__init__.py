"""Device profiles: what a device family's accelerators do well, the order of preference per goal, its
power budget and thermal limits. Data lives in ``profiles/*.yaml``; ``types.py`` is the model,
``loader.py`` reads and validates (the YAML parser is imported on first load, not here), ``match.py``
picks the profile for a machine, ``facts.py`` reads cheap facts from /proc.
"""

from .loader import get_profile, load_profile, load_profiles
from .match import DeviceFacts, ProfileMatch, match_profile, rank_profiles
from .types import AcceleratorSpec, MatchRule, Profile, ThermalLimits

__all__ = [
    "AcceleratorSpec",
    "DeviceFacts",
    "MatchRule",
    "Profile",
    "ProfileMatch",
    "ThermalLimits",
    "get_profile",
    "load_profile",
    "load_profiles",
    "match_profile",
    "rank_profiles",
]
