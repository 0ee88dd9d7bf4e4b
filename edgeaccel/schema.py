"""A tiny schema checker for the YAML data files (profiles, runtime descriptors).

Errors name the file and the dotted key, and say what was expected, e.g.
``profiles/rpi5.yaml:thermal.passive_c: expected a number, got 'hot'``.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ConfigError


@dataclass(frozen=True)
class Field:
    """One key: ``kind`` is a type, a tuple of types, a nested dict schema, or ``[schema]`` for a list of it.
    ``minimum`` / ``maximum`` bound numbers (inclusive)."""

    kind: Any
    required: bool = False
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None


def load_yaml(path: str | os.PathLike) -> Any:
    import yaml  # a base dependency; imported here to keep `import edgeaccel` fast

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError("is not UTF-8 text", path=str(path)) from exc
    try:
        return yaml.load(text, Loader=_strict_loader(yaml))  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}", path=str(path)) from exc


@functools.lru_cache(maxsize=1)
def _strict_loader(yaml):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping: plain ``safe_load`` keeps the last
    one silently, so a profile with two ``thermal:`` blocks would lose one without a word. Built on libyaml's
    CSafeLoader where PyYAML has it (10x faster: loading every profile costs start-up time)."""

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # chosen at run time: the checker cannot see it

    class StrictSafeLoader(base):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # an unhashable key: the base class reports it
                    break
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictSafeLoader


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "a mapping",
               list: "a list"}


def validate(data: Any, schema: dict[str, Field], path: str, prefix: str = "") -> None:
    """Raise ConfigError on the first key that is unknown, missing, of the wrong type or out of range."""
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping, got {_describe(data)}", path=path, key=prefix or None)
    for key in data:
        if key not in schema:
            known = ", ".join(sorted(schema))
            raise ConfigError(f"unknown key (known keys: {known})", path=path, key=_join(prefix, key))
    for key, spec in schema.items():
        where = _join(prefix, key)
        if key not in data or data[key] is None:
            if spec.required:
                raise ConfigError("is required", path=path, key=where)
            continue
        _check_value(data[key], spec, path, where)


def _check_value(value: Any, spec: Field, path: str, where: str) -> None:
    kind = spec.kind
    if isinstance(kind, dict):
        validate(value, kind, path, where)
        return
    if isinstance(kind, list):
        if not isinstance(value, list):
            raise ConfigError(f"expected a list, got {_describe(value)}", path=path, key=where)
        for i, item in enumerate(value):
            item_spec = Field(kind[0], choices=spec.choices, minimum=spec.minimum, maximum=spec.maximum)
            _check_value(item, item_spec, path, f"{where}[{i}]")
        return
    types = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if float in types and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        wanted = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        raise ConfigError(f"expected {wanted}, got {_describe(value)}", path=path, key=where)
    if spec.choices is not None and value not in spec.choices:
        raise ConfigError(f"{value!r} is not one of {', '.join(map(str, spec.choices))}", path=path, key=where)
    if spec.minimum is not None and isinstance(value, (int, float)) and value < spec.minimum:
        raise ConfigError(f"{value} is below the minimum {spec.minimum}", path=path, key=where)
    if spec.maximum is not None and isinstance(value, (int, float)) and value > spec.maximum:
        raise ConfigError(f"{value} is above the maximum {spec.maximum}", path=path, key=where)


def _join(prefix: str, key: Any) -> str:
    return f"{prefix}.{key}" if prefix else str(key)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]
