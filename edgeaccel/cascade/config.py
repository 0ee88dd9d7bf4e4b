"""A cascade from a pipeline YAML file (paths relative to the file)::

    # faces.yaml
    placement: auto            # or as-loaded
    live: {drop: none, queue_size: 4}   # and policy: thermal (power_budget_w:, policy_interval_s:)
    stages:
      - name: face
        model: face_detection_short_range.tflite
      - name: mesh
        model: face_landmark.tflite
        max_crops: 4
        crop: {scale: 1.5, rotate: [0, 1, 0]}
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError, InputError

KEYS = ("stages", "placement", "live")
LIVE_KEYS = ("drop", "queue_size", "policy", "power_budget_w", "policy_interval_s")


def read_pipeline(path: str | os.PathLike) -> dict:
    """The file's mapping, checked: its keys, its stages a list, its live options known."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read cascade file {path}: {exc.strerror}",
                         hint="give a YAML file with stages: (docs/cascade.md)") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}", hint="see docs/cascade.md") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with stages:, found {type(data).__name__}",
                          hint="see docs/cascade.md")
    unknown = set(data) - set(KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}", hint=f"known: {', '.join(KEYS)}")
    if not isinstance(data.get("stages"), list):
        raise ConfigError(f"{path}: stages: must be a list of stages", hint="stages: [{model: det.tflite}, ...]")
    live = data.get("live") or {}
    if not isinstance(live, dict) or set(live) - set(LIVE_KEYS):
        raise ConfigError(f"{path}: live: takes {', '.join(LIVE_KEYS)}", hint="live: {drop: oldest, queue_size: 4}")
    return data
