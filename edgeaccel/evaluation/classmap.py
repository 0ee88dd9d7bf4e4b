"""Which dataset class each of the model's class ids stands for: by name when both name their classes (case,
spaces, ``_`` and ``-`` ignored), else by id, or as the user maps them. Every choice is said in ``how``, and the
dataset classes the model cannot find are listed instead of being scored as misses without a word."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError

HINT = ("give the model's class names (--labels FILE / labels=...), or map them yourself: "
        "--class-map DATASET_CLASS=MODEL_CLASS (ids or names), repeatable")


@dataclass
class ClassMapping:
    model_to_dataset: dict[int, int]
    how: str  # "by name", "by id" or "as given"
    unmapped: list[int] = field(default_factory=list)  # dataset classes no model class stands for

    @property
    def dataset_classes(self) -> list[int]:
        return sorted(set(self.model_to_dataset.values()))

    def describe(self, dataset_names: dict[int, str]) -> str:
        text = f"{self.how}: {len(self.dataset_classes)} of {len(self.dataset_classes) + len(self.unmapped)} " \
               "dataset classes"
        if self.unmapped:
            shown = ", ".join(dataset_names.get(c, str(c)) for c in self.unmapped[:8])
            text += f"; not in the model, left out: {shown}" + (" ..." if len(self.unmapped) > 8 else "")
        return text


def normalized(name: str) -> str:
    return " ".join(str(name).lower().replace("_", " ").replace("-", " ").split())


def map_classes(dataset_names: dict[int, str], dataset_ids: list[int], model_names: dict[int, str],
                class_map: dict | None = None) -> ClassMapping:
    dataset_ids = sorted(set(dataset_ids))
    if class_map:
        return _as_given(dataset_names, dataset_ids, model_names, class_map)
    if _named(dataset_names) and _named(model_names):
        by_name: dict[str, list[int]] = {}
        for model_id, name in model_names.items():
            by_name.setdefault(normalized(name), []).append(model_id)
        mapping = {}
        for class_id in dataset_ids:
            for model_id in by_name.get(normalized(dataset_names.get(class_id, "")), []):
                mapping[model_id] = class_id
        if not mapping:
            raise InputError(f"no class name of the model ({_some(model_names)}) is a class of the dataset "
                             f"({_some(dataset_names)})", hint=HINT)
        return ClassMapping(mapping, "by name", [c for c in dataset_ids if c not in mapping.values()])
    known = set(model_names) if model_names else set(dataset_ids)
    mapping = {c: c for c in dataset_ids if c in known}
    if not mapping:
        raise InputError(f"the model's class ids ({_some(model_names)}) and the dataset's ({dataset_ids[:8]}) have "
                         "none in common", hint=HINT)
    return ClassMapping(mapping, "by id", [c for c in dataset_ids if c not in mapping])


def _named(names: dict[int, str]) -> bool:
    """True when the names are names, not ids written as text."""
    return bool(names) and any(str(v) != str(k) for k, v in names.items())


def _some(names) -> str:
    items = list(names.values())[:6] if isinstance(names, dict) else list(names)[:6]
    return ", ".join(map(str, items)) + (" ..." if len(names) > 6 else "") if items else "none named"


def _as_given(dataset_names, dataset_ids, model_names, class_map: dict) -> ClassMapping:
    mapping = {}
    for dataset_key, model_key in class_map.items():
        dataset_id = _resolve(dataset_key, dataset_names, dataset_ids, "dataset")
        model_id = _resolve(model_key, model_names, None, "model")
        mapping[model_id] = dataset_id
    return ClassMapping(mapping, "as given", [c for c in dataset_ids if c not in mapping.values()])


def _resolve(key, names: dict[int, str], ids, whose: str) -> int:
    text = str(key).strip()
    for class_id, name in names.items():
        if normalized(name) == normalized(text):
            return class_id
    if text.lstrip("-").isdigit():
        value = int(text)
        if ids is None or value in ids or value in names:
            return value
    raise InputError(f"--class-map: {key!r} is no class of the {whose} ({_some(names) if names else 'ids only'})",
                     hint=HINT)
