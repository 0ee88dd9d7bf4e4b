"""Load device profiles (``profiles/*.yaml``): safe YAML, a schema, cross-checks, then the dataclasses.

Every error is a ConfigError that names the file and the dotted key, e.g.
``profiles/rpi5.yaml:preference.latency[0]: names device 'NPU', which the profile does not list``.
Figures are checked for a citation: a number without a ``source`` URL is an error, so an uncited figure
cannot ship.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..schema import Field, load_yaml, validate
from .types import (
    DEVICE_NAMES,
    GOALS,
    KINDS,
    PRECISIONS,
    AcceleratorSpec,
    MatchRule,
    Profile,
    ThermalLimits,
)

SCHEMA_ID = "edgeaccel.profile/1"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
FIGURES = ("tops_int8", "tflops_f16", "tflops_bf16", "memory_mb", "typical_power_w")
SOURCE = Field((str, dict))  # one URL for every figure of the block, or {figure: URL}
TEMPERATURE: dict[str, Any] = {"minimum": -40, "maximum": 150}  # degrees C: anything outside is a typo (millidegrees?)

MATCH_SCHEMA = {
    "arch": Field([str]),
    "board": Field([str]),
    "compatible": Field([str]),
    "cpu_model": Field([str]),
    "cpu_flags": Field([str]),
    "devices": Field([str]),  # checked by _check_device_names: plug-ins add names
    "priority": Field(int, minimum=0, maximum=1000),
}
ACCELERATOR_SCHEMA = {
    "device": Field(str, required=True),
    "kind": Field(str, required=True, choices=KINDS),
    "name": Field(str, required=True),
    "aliases": Field([str]),
    "precisions": Field([str], choices=PRECISIONS),
    "tops_int8": Field(float, minimum=0),
    "tflops_f16": Field(float, minimum=0),
    "tflops_bf16": Field(float, minimum=0),
    "memory_mb": Field(float, minimum=0),
    "typical_power_w": Field(float, minimum=0),
    "source": SOURCE,
}
RUNTIME_ORDER_SCHEMA = {
    "device": Field(str, required=True),
    "order": Field([str], required=True),
    "why": Field(str),
}
PROFILE_SCHEMA = {
    "schema": Field(str, required=True, choices=(SCHEMA_ID,)),
    "name": Field(str, required=True),
    "title": Field(str, required=True),
    "match": Field(MATCH_SCHEMA, required=True),
    "accelerators": Field([ACCELERATOR_SCHEMA], required=True),
    "preference": Field({goal: Field([str], required=True) for goal in GOALS}, required=True),  # the listed ones
    "runtimes": Field([RUNTIME_ORDER_SCHEMA]),
    "power": Field({"budget_w": Field(float, minimum=0), "idle_w": Field(float, minimum=0), "source": SOURCE}),
    "thermal": Field({"passive_c": Field(float, **TEMPERATURE), "critical_c": Field(float, **TEMPERATURE),
                      "source": SOURCE}),
    "notes": Field(str),
}


def load_profile(path: str | os.PathLike, runtimes: Mapping[str, Any] | None = None) -> Profile:
    """Read, validate and build one profile. ``runtimes`` (name -> executor class) checks the runtime
    orders; by default the registry's (the shipped descriptors and the installed plug-ins)."""
    return parse_profile(load_yaml(path), str(path), runtimes)


def parse_profile(data: Any, source: str, runtimes: Mapping[str, Any] | None = None) -> Profile:
    validate(data, PROFILE_SCHEMA, source)
    assert isinstance(data, dict)
    if not NAME_PATTERN.match(data["name"]):
        raise ConfigError("must be lower-case letters, digits and dashes (it is what profile= and "
                          "`edgeaccel profiles show` take)", path=source, key="name")
    _check_device_names(data, source)
    match = _match_rule(data["match"], source)
    accelerators = tuple(_accelerator(a, source, f"accelerators[{i}]") for i, a in enumerate(data["accelerators"]))
    known = _device_names(accelerators, source)
    preference = {goal: _device_list(data["preference"][goal], known, source, f"preference.{goal}")
                  for goal in GOALS}
    orders, why = _runtime_orders(data.get("runtimes") or [], known, source, runtimes)
    power = data.get("power") or {}
    thermal = data.get("thermal") or {}
    _check_cited(power, ("budget_w", "idle_w"), source, "power")
    _check_cited(thermal, ("passive_c", "critical_c"), source, "thermal")
    _check_order(power, "idle_w", "budget_w", source, "power")
    _check_order(thermal, "passive_c", "critical_c", source, "thermal")
    return Profile(
        name=data["name"],
        title=data["title"].strip(),
        accelerators=accelerators,
        preference=preference,
        runtimes=orders,
        power_budget_w=_number(power.get("budget_w")),
        idle_power_w=_number(power.get("idle_w")),
        thermal=ThermalLimits(_number(thermal.get("passive_c")), _number(thermal.get("critical_c")),
                              _source_text(thermal.get("source"))),
        notes=(data.get("notes") or "").strip(),
        source_file=source,
        match=match,
        power_source=_source_text(power.get("source")),
        runtime_notes=why,
    )


@functools.lru_cache(maxsize=1)
def _shipped() -> tuple[Profile, ...]:
    from .._data import data_dir

    found: dict[str, Profile] = {}
    paths = sorted(data_dir("profiles").glob("*.yaml"))
    for path, data in zip(paths, _parsed(paths), strict=True):
        profile = parse_profile(data, str(path))
        if profile.name in found:
            raise ConfigError(f"profile name {profile.name!r} is taken by {found[profile.name].source_file}",
                              path=str(path), key="name")
        found[profile.name] = profile
    return tuple(found.values())


def _parsed(paths: list) -> list:
    """The YAML of ``paths``, parsed; kept in the cache folder by a hash of their names and bytes, so that a
    later start-up reads it as JSON and needs no YAML parser (importing PyYAML is 1 MB of `edgeaccel run`'s
    peak memory). What was kept is used only for these exact bytes, and validated like freshly parsed YAML."""
    import json

    from ..digest import blake2b

    try:
        from ..cachedir import cache_root

        h = blake2b(digest_size=16)
        for path in paths:
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        kept = cache_root() / "profiles" / f"{h.hexdigest()}.json"
    except Exception:  # an unreadable file (the YAML reader reports it), no home folder: parse, keep nothing
        kept = None
    try:
        data = json.loads(kept.read_text(encoding="utf-8")) if kept is not None else None
        if isinstance(data, list) and len(data) == len(paths):
            return data
    except (OSError, ValueError):  # not kept yet, or a damaged file: parse again
        pass
    data = [load_yaml(path) for path in paths]
    if kept is not None:
        try:
            text = json.dumps(data)
            if json.loads(text) == data:  # only what JSON gives back exactly
                kept.parent.mkdir(parents=True, exist_ok=True)
                partial = kept.with_name(f"{kept.name}.{os.getpid()}.tmp")
                partial.write_text(text, encoding="utf-8")
                os.replace(partial, kept)
        except (OSError, TypeError, ValueError):
            pass  # a read-only cache: parse again next time
    return data


def load_profiles() -> dict[str, Profile]:
    """The shipped profiles by name (loaded once per process)."""
    return {p.name: p for p in _shipped()}


def get_profile(name: str) -> Profile:
    """A shipped profile by name, or a profile file by path (what ``profile=`` accepts)."""
    profiles = load_profiles()
    if name in profiles:
        return profiles[name]
    if name.endswith((".yaml", ".yml")) or os.sep in name:
        return load_profile(name)
    raise ConfigError(f"unknown profile {name!r}; known profiles: {', '.join(sorted(profiles))}",
                      hint="`edgeaccel profiles list` shows them; a path to a profile .yaml works too")


def _match_rule(m: dict, source: str) -> MatchRule:
    rule = MatchRule(
        arch=tuple(a.lower() for a in m.get("arch") or ()),
        board=tuple(m.get("board") or ()),
        compatible=tuple(m.get("compatible") or ()),
        cpu_model=tuple(m.get("cpu_model") or ()),
        cpu_flags=tuple(f.lower() for f in m.get("cpu_flags") or ()),
        devices=tuple(m.get("devices") or ()),
        priority=int(m.get("priority") or 0),
    )
    # A rule without a condition would match every machine and shadow every profile below its priority.
    if not (rule.arch or rule.board or rule.compatible or rule.cpu_model or rule.cpu_flags or rule.devices):
        raise ConfigError("needs at least one condition (arch, board, compatible, cpu_model, cpu_flags, devices)",
                          path=source, key="match")
    for key in ("board", "compatible", "cpu_model"):
        for i, text in enumerate(m.get(key) or ()):
            if not text.strip():
                raise ConfigError("is empty: an empty substring matches everything", path=source,
                                  key=f"match.{key}[{i}]")
    for i, text in enumerate(m.get("compatible") or ()):
        # A compatible string is "vendor,device". Unquoted in a YAML flow list, [rockchip,rk3588] is two
        # items, and "rockchip" alone would match every Rockchip board.
        if "," not in text:
            raise ConfigError(f"{text!r} is not a 'vendor,device' compatible string (in a [flow, list] quote "
                              "it: [\"rockchip,rk3588\"])", path=source, key=f"match.compatible[{i}]")
    return rule


def _accelerator(a: dict, source: str, where: str) -> AcceleratorSpec:
    _check_cited(a, FIGURES, source, where)
    return AcceleratorSpec(
        device=a["device"],
        kind=a["kind"],
        name=a["name"].strip(),
        precisions=tuple(a.get("precisions") or ()),
        tops_int8=_number(a.get("tops_int8")),
        tflops_f16=_number(a.get("tflops_f16")),
        memory_mb=_number(a.get("memory_mb")),
        typical_power_w=_number(a.get("typical_power_w")),
        source=_source_text(a.get("source")),
        aliases=tuple(a.get("aliases") or ()),
        tflops_bf16=_number(a.get("tflops_bf16")),
    )


def known_device_names() -> tuple[str, ...]:
    """What a profile may name: the probe's device names and every registered executor's devices (a plug-in's
    "Hailo8" included), so that a typo ("EdgeTpu") is an error at load time, not a device that never ranks."""
    from ..executors.registry import runtimes

    extra = [d for cls in runtimes().values() for d in cls.device_kinds if d not in DEVICE_NAMES]
    return (*DEVICE_NAMES, *dict.fromkeys(extra))


def _check_device_names(data: dict, source: str) -> None:
    named = [(f"match.devices[{i}]", d) for i, d in enumerate((data.get("match") or {}).get("devices") or ())]
    for i, acc in enumerate(data["accelerators"]):
        named.append((f"accelerators[{i}].device", acc["device"]))
        named += [(f"accelerators[{i}].aliases[{j}]", d) for j, d in enumerate(acc.get("aliases") or ())]
    if all(d in DEVICE_NAMES for _, d in named):
        return
    known = known_device_names()
    for key, device in named:
        if device not in known:
            raise ConfigError(f"{device!r} is not a device name the probe or an installed executor uses (known: "
                              f"{', '.join(known)}); if an executor plug-in drives it, install the plug-in",
                              path=source, key=key)


def _device_names(accelerators: tuple[AcceleratorSpec, ...], source: str) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for i, acc in enumerate(accelerators):
        for j, name in enumerate(acc.devices):
            key = f"accelerators[{i}].device" if j == 0 else f"accelerators[{i}].aliases[{j - 1}]"
            if name in seen:
                raise ConfigError(f"device {name!r} is already listed at {seen[name]}", path=source, key=key)
            seen[name] = key
    return tuple(seen)


def _device_list(names: list[str], known: tuple[str, ...], source: str, where: str) -> tuple[str, ...]:
    for i, name in enumerate(names):
        if name not in known:
            raise ConfigError(f"names device {name!r}, which the profile does not list (listed: {', '.join(known)})",
                              path=source, key=f"{where}[{i}]")
        if name in names[:i]:
            raise ConfigError(f"names device {name!r} twice", path=source, key=f"{where}[{i}]")
    return tuple(names)


def _runtime_orders(entries: list[dict], known: tuple[str, ...], source: str,
                    runtimes: Mapping[str, Any] | None) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    if entries and runtimes is None:
        from ..executors.registry import runtimes as registry  # imported only when a profile orders runtimes

        runtimes = registry()
    orders: dict[str, tuple[str, ...]] = {}
    why: dict[str, str] = {}
    for i, entry in enumerate(entries):
        device, where = entry["device"], f"runtimes[{i}]"
        if device not in known:
            raise ConfigError(f"names device {device!r}, which the profile does not list (listed: {', '.join(known)})",
                              path=source, key=f"{where}.device")
        if device in orders:
            raise ConfigError(f"device {device!r} has a runtime order already", path=source, key=f"{where}.device")
        for j, name in enumerate(entry["order"]):
            desc = runtimes.get(name) if runtimes is not None else None
            if desc is None:
                raise ConfigError(f"unknown runtime {name!r} (known: {', '.join(sorted(runtimes or ()))})",
                                  path=source, key=f"{where}.order[{j}]")
            reached = [t.name for t in getattr(desc, "targets", ())] or [d for d, _ in desc.devices]
            if device not in reached:
                raise ConfigError(f"runtime {name!r} does not reach {device} (it reaches {', '.join(reached)})",
                                  path=source, key=f"{where}.order[{j}]")
        orders[device] = tuple(entry["order"])
        if entry.get("why"):
            why[device] = " ".join(entry["why"].split())
    return orders, why


def _check_cited(block: dict, figures: tuple[str, ...], source: str, where: str) -> None:
    """Every figure given must carry a citation: ``source`` a URL, or ``{figure: URL}`` for each figure."""
    given = [f for f in figures if block.get(f) is not None]
    cited = block.get("source")
    if isinstance(cited, dict):
        for key, url in cited.items():
            if key not in figures:
                raise ConfigError(f"cites {key!r}, which is not a figure here (figures: {', '.join(figures)})",
                                  path=source, key=f"{where}.source.{key}")
            if not isinstance(url, str) or not _has_url(url):
                raise ConfigError("expected a URL (http:// or https://)", path=source, key=f"{where}.source.{key}")
        missing = [f for f in given if f not in cited]
        if missing:
            raise ConfigError(f"{missing[0]} is given but not cited: add it to {where}.source",
                              path=source, key=f"{where}.{missing[0]}")
    elif given and not (isinstance(cited, str) and _has_url(cited)):
        raise ConfigError(f"{given[0]} is given but {where}.source has no URL: cite the vendor's page, or "
                          "leave the figure null and say why in a comment", path=source, key=f"{where}.{given[0]}")


def _check_order(block: dict, low: str, high: str, source: str, where: str) -> None:
    if block.get(low) is not None and block.get(high) is not None and block[low] > block[high]:
        raise ConfigError(f"{block[low]} is above {high} ({block[high]})", path=source, key=f"{where}.{low}")


def _has_url(text: str) -> bool:
    return "https://" in text or "http://" in text


def _source_text(cited: Any) -> str:
    if isinstance(cited, dict):
        return "; ".join(f"{k}: {v}" for k, v in cited.items())
    return " ".join(str(cited).split()) if cited else ""


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


__all__ = ["SCHEMA_ID", "get_profile", "load_profile", "load_profiles", "parse_profile"]
