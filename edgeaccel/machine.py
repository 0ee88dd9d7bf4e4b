"""What this machine offers a model: the runtimes installed (package metadata, no import), the devices the
hardware survey finds (reused for 30 s), a plug-in's devices by its own ``availability``, and the device
profile that matches them."""

from __future__ import annotations

import logging
import time

from .executors import registry
from .executors.base import Executor
from .executors.registry import runtimes
from .profiles import DeviceFacts, Profile, get_profile, load_profiles, match_profile
from .profiles.facts import facts_from_probe
from .selection.selector import MachineFacts

log = logging.getLogger("edgeaccel")


def machine_facts() -> tuple[MachineFacts, DeviceFacts]:
    """Installed runtimes (from package metadata, no import), the devices present and the CPU's flags;
    and the same facts in the form profile matching takes. A plug-in's devices are present when its
    ``availability(device)`` says so (the probe does not know its hardware)."""
    device = facts_from_probe(_probe_here())
    classes = runtimes()
    installed = {name: registry.installed_version(name) for name in classes}
    plugin_devices, absent = _plugin_presence(classes)
    facts = MachineFacts(installed=installed, devices_present=device.devices, cpu_flags=device.cpu_flags,
                         plugin_devices=plugin_devices, absent_reasons=absent, unloadable=_unloadable_here)
    return facts, device


def _unloadable_here(cls: type[Executor], device: str) -> tuple[str, str | None] | None:
    """``cls.unloadable(device)``; a plug-in's bug is its device refused, with the reason."""
    try:
        return cls.unloadable(device)
    except Exception as exc:
        log.warning("executor %s: unloadable(%r) raised %s: %s", cls.runtime, device, type(exc).__name__, exc)
        return f"{cls.runtime}.unloadable({device!r}) raised {type(exc).__name__}: {exc}", None


def _plugin_presence(classes: dict[str, type[Executor]]) -> tuple[dict[str, frozenset[str]], dict[str, str]]:
    present: dict[str, frozenset[str]] = {}
    absent: dict[str, str] = {}
    for name, cls in classes.items():
        if cls.presence == "probe":
            continue
        found = set()
        for dev, kind in cls.device_kinds.items():
            if kind == "cpu":
                continue
            try:
                available = cls.availability(dev)
            except Exception as exc:  # a plug-in's bug: its device is absent, with the reason
                log.warning("executor plug-in %s: availability(%r) raised %s: %s", name, dev, type(exc).__name__, exc)
                absent[f"{name}:{dev}"] = f"{name}.availability({dev!r}) raised {type(exc).__name__}: {exc}"
                continue
            if available:
                found.add(dev)
            else:
                absent[f"{name}:{dev}"] = f"{dev} is not available: {available.reason}"
        present[name] = frozenset(found)
    return present, absent


_PROBE_TTL_S = 30.0
_probe_cache: list = []  # [(time, report)]


def _probe_here():
    """The hardware survey without importing runtimes or reading sensors (a few ms of file reads), reused for
    30 s so that an app loading several models surveys once, yet a Coral plugged in later is seen."""
    from .hardware import survey_device as probe

    now = time.monotonic()
    if _probe_cache and now - _probe_cache[0][0] < _PROBE_TTL_S:
        return _probe_cache[0][1]
    report = probe(runtimes=False, telemetry=False)
    _probe_cache[:] = [(now, report)]
    return report


def resolve_profile(profile: Profile | str | None, facts: DeviceFacts) -> tuple[Profile | None, str]:
    """The caller's profile (an object, a shipped name or a .yaml path), else the one matching this machine."""
    if isinstance(profile, Profile):
        return profile, "given by the caller"
    if isinstance(profile, str):
        return get_profile(profile), "named by the caller"
    return match_profile(facts, load_profiles())
