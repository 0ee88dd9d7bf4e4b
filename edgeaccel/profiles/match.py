"""Which profile fits a machine: a pure function of a few facts, so tests drive it from tables.

The facts come from the probe (``facts.facts_from_probe``). The most specific profile whose rule matches wins:
highest priority first, then the one with more conditions; the generic x86 / Arm profiles match on
architecture alone with priority 0, so they are the fallbacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .types import MatchRule, Profile

# platform.machine() spells some architectures more than one way
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


@dataclass(frozen=True)
class DeviceFacts:
    """What matching needs to know about a machine."""

    arch: str = ""  # platform.machine(): x86_64, aarch64, armv7l
    cpu_model: str = ""  # /proc/cpuinfo "model name" (x86) or the "Model"/"Hardware" line (Arm boards)
    cpu_flags: frozenset[str] = frozenset()  # ISA flags: avx512f, avx512_bf16, asimddp, ...
    board: str = ""  # /proc/device-tree/model: "Raspberry Pi 5 Model B Rev 1.0"
    devices: frozenset[str] = frozenset({"CPU"})  # present devices: CPU, GPU, NPU, CUDA, TensorRT, EdgeTPU, TPU
    # Added beyond the probe's board name: /proc/device-tree/compatible names the SoC ("rockchip,rk3588"),
    # which identifies RK3588 boards whose model string does not say RK3588 ("Radxa ROCK 5 Model B").
    compatible: tuple[str, ...] = field(default=())

    @property
    def normalized_arch(self) -> str:
        arch = self.arch.strip().lower()
        return _ARCH_ALIASES.get(arch, arch)


@dataclass(frozen=True)
class ProfileMatch:
    profile: Profile
    reason: str
    score: tuple[int, int]  # (priority, number of conditions met): higher is more specific


def rank_profiles(facts: DeviceFacts, profiles: Iterable[Profile] | Mapping[str, Profile]) -> list[ProfileMatch]:
    """Every profile whose rule matches ``facts``, most specific first (what `explain` can show)."""
    if isinstance(profiles, Mapping):
        profiles = profiles.values()
    found = []
    for profile in profiles:
        reasons = _reasons(profile.match, facts)
        if reasons is not None:
            score = (profile.match.priority, _conditions(profile.match))
            found.append(ProfileMatch(profile, " and ".join(reasons), score))
    found.sort(key=lambda m: (-m.score[0], -m.score[1], m.profile.name))
    return found


def match_profile(facts: DeviceFacts,
                  profiles: Iterable[Profile] | Mapping[str, Profile]) -> tuple[Profile | None, str]:
    """The most specific matching profile and why, e.g. ("rpi5-coral-usb", "board 'Raspberry Pi 5 Model B
    Rev 1.0' and device EdgeTPU"). (None, reason) when no profile matches (an architecture no profile
    covers); the caller then runs without one or names one with ``profile=``."""
    ranked = rank_profiles(facts, profiles)
    if not ranked:
        arch = facts.normalized_arch or "unknown"
        return None, f"no profile matches this machine (arch {arch!r}, board {facts.board!r})"
    best = ranked[0]
    return best.profile, best.reason


def _reasons(rule: MatchRule, facts: DeviceFacts) -> list[str] | None:
    """The conditions ``facts`` meet, in words; None as soon as one condition fails."""
    reasons: list[str] = []
    if rule.board or rule.compatible:
        board = _find(rule.board, [facts.board]) if facts.board else None
        compat = _find(rule.compatible, facts.compatible)
        if board is not None:
            reasons.append(f"board {facts.board!r}")
        elif compat is not None:
            reasons.append(f"device-tree compatible {compat!r}")
        else:
            return None
    if rule.cpu_model:
        if _find(rule.cpu_model, [facts.cpu_model]) is None:
            return None
        reasons.append(f"CPU {facts.cpu_model!r}")
    if rule.cpu_flags:
        flags = {f.lower() for f in facts.cpu_flags}
        if not all(f in flags for f in rule.cpu_flags):
            return None
        reasons.append(f"CPU flag{'s' if len(rule.cpu_flags) > 1 else ''} {', '.join(rule.cpu_flags)}")
    if rule.devices:
        if not all(d in facts.devices for d in rule.devices):
            return None
        reasons.append(f"device{'s' if len(rule.devices) > 1 else ''} {', '.join(rule.devices)}")
    if rule.arch:
        if facts.normalized_arch not in rule.arch:
            return None
        if not reasons:  # the arch is worth saying only when it is all that matched (the fallbacks)
            reasons.append(f"arch {facts.normalized_arch} (generic fallback)" if rule.priority == 0
                           else f"arch {facts.normalized_arch}")
    return reasons


def _conditions(rule: MatchRule) -> int:
    """How many conditions a rule sets (board and compatible count once: they name the same thing)."""
    groups = (rule.board or rule.compatible, rule.cpu_model, rule.cpu_flags, rule.devices, rule.arch)
    return sum(1 for g in groups if g)


def _find(needles: Iterable[str], haystacks: Iterable[str]) -> str | None:
    """The first haystack that contains any needle, case-insensitively."""
    lowered = [n.lower() for n in needles]
    for hay in haystacks:
        if hay and any(n in hay.lower() for n in lowered):
            return hay
    return None
