"""Lines and zones from a YAML file or from the command line.

    # zones.yaml (pixels of the source's frames)
    anchor: bottom            # optional: center (default) or bottom
    lines:
      - name: door
        points: [[100, 400], [540, 400]]
    zones:
      - name: queue
        points: [[0, 0], [320, 0], [320, 240], [0, 240]]
    tracker:                  # optional: TrackerOptions fields
      max_lost_s: 2.0

On the command line: ``--line door=100,400,540,400`` and ``--zone queue=0,0,320,0,320,240,0,240``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError, InputError
from .zones import Line, Zone, Zones

KEYS = ("anchor", "lines", "zones", "tracker")


def load_zones(path: str | os.PathLike) -> tuple[Zones, dict | None]:
    """The lines and zones of a YAML file, and its ``tracker:`` options (None when it has none)."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise InputError(f"cannot read zones file {path}: {exc.strerror}", hint="give a YAML file of lines and "
                         "zones (docs/sources.md, Tracking)") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}", hint="see docs/sources.md, Tracking") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with lines: and zones:, found {type(data).__name__}")
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}", hint=f"known: {', '.join(KEYS)}")
    try:
        zones = Zones([_item(Line, x, path, "line") for x in data.get("lines") or []],
                      [_item(Zone, x, path, "zone") for x in data.get("zones") or []],
                      data.get("anchor", "center"))
    except InputError as exc:
        raise ConfigError(f"{path}: {exc.message}", hint=exc.hint) from exc
    tracker = data.get("tracker")
    if tracker is not None and not isinstance(tracker, dict):
        raise ConfigError(f"{path}: tracker: must be a mapping of TrackerOptions fields")
    return zones, tracker


def _item(kind, entry, path: Path, what: str):
    if not isinstance(entry, dict) or "points" not in entry or "name" not in entry:
        raise ConfigError(f"{path}: each {what} needs a name and points: {entry!r}")
    extra = {"margin": float(entry["margin"])} if what == "line" and "margin" in entry else {}
    return kind(str(entry["name"]), entry["points"], **extra)


def parse_spec(spec: str, kind: str):
    """``NAME=x1,y1,x2,y2,...`` from the command line: a Line (kind "line") or a Zone (kind "zone")."""
    name, sep, numbers = spec.partition("=")
    try:
        values = [float(v) for v in numbers.split(",")] if sep else []
    except ValueError:
        values = []
    if not sep or not name or not values or len(values) % 2:
        raise InputError(f"--{kind} {spec!r} is not NAME=x1,y1,x2,y2,...",
                         hint=f"e.g. --{kind} door=100,400,540,400 (pixels of the frame)")
    points = list(zip(values[::2], values[1::2], strict=True))
    return Line(name, points) if kind == "line" else Zone(name, points)


def as_zones(zones) -> Zones:
    """Zones from what ``watch(zones=...)`` was given: a Zones, a YAML path, or a list of Line and Zone."""
    if isinstance(zones, Zones):
        return zones
    if isinstance(zones, (str, os.PathLike)):
        return load_zones(zones)[0]
    items = list(zones)
    bad = [x for x in items if not isinstance(x, (Line, Zone))]
    if bad:
        raise InputError(f"zones= holds {bad[0]!r}", hint="give Line and Zone objects, a Zones, or a YAML path")
    return Zones([x for x in items if isinstance(x, Line)], [x for x in items if isinstance(x, Zone)])
