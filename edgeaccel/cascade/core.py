"""``Cascade``: a detector, then models that run on the crops of what the stage before found, each on its own
executor; ``predict(image)`` is the first stage's DetectResult, every box carrying its later stages' answers
(``box.stages[name]``) in the original image's pixels."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .config import read_pipeline
from .geometry import CropOptions
from .stage import LOAD_KEYS, STAGE_KEYS, Stage, boxes_of

PLACEMENTS = ("auto", "as-loaded")


class Cascade:
    """Stages in order: dicts (``model`` a path or a loaded model, ``name``, ``classes``, ``min_score``,
    ``max_crops``, ``crop`` (``CropOptions`` fields) and ``load()`` options such as ``executor``/``device``/
    ``task``) or ``Stage`` objects. ``placement="auto"`` moves a stage off a device another stage uses onto the
    next device its ranking offers when that makes the slowest device faster (``placement`` says what it did);
    "as-loaded" keeps what ``load`` chose for each. Close it (or use ``with``) to close the models it loaded."""

    def __init__(self, stages: Sequence[Any], *, placement: str = "auto", base: str | os.PathLike | None = None):
        if placement not in PLACEMENTS:
            raise ConfigError(f"placement must be one of {', '.join(PLACEMENTS)}, not {placement!r}")
        if not stages or len(stages) < 2:
            raise ConfigError("a cascade needs at least two stages: a detector, then a model on its crops",
                              hint="for one model alone use edgeaccel.load(...).predict")
        self.stages: list[Stage] = []
        try:
            for i, spec in enumerate(stages):
                self.stages.append(spec if isinstance(spec, Stage) else _stage(spec, i, base))
            _check(self.stages)
            self.placement: list[str] = []
            if placement == "auto":
                from .placement import place

                self.placement = place(self.stages)
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_file(cls, path: str | os.PathLike, **options) -> Cascade:
        """The cascade a pipeline YAML file describes (docs/cascade.md); ``options`` override its own."""
        return load_cascade(path, **options)

    def predict(self, image):
        """The first stage's DetectResult on ``image`` (a path, PIL image or RGB array), each box carrying what
        the later stages found on its crop (``box.stages``); ``timing_ms`` adds each later stage's time."""
        from ..vision.preprocess import as_rgb

        rgb = as_rgb(image)
        result = self.first(rgb)
        for k in range(1, len(self.stages)):
            self.later(k, rgb, result)
        return result

    def first(self, rgb):
        result = self.stages[0].model.predict(rgb)
        result.timing_ms = dict(result.timing_ms)
        return result

    def later(self, k: int, rgb, result) -> dict:
        """Stage ``k`` (1 or more) on the boxes its parent found in ``result``; its counts and time."""
        parent = None if k == 1 else self.stages[k - 1].name
        stage = self.stages[k]
        done = stage.on_boxes(rgb, boxes_of(result, parent))
        result.timing_ms[stage.name] = done["ms"]
        return done

    def describe(self) -> list[dict]:
        """Each stage: name, model, executor, device, task."""
        return [{"name": s.name, "model": str(s.model.info.path), "executor": s.executor_name, "device": s.device,
                 "task": getattr(s.model.task, "name", None)} for s in self.stages]

    def watch(self, source, *more_sources, **options):
        """Frames of ``source`` (and of ``more_sources``: anything ``edgeaccel.sources.open_source`` opens: a
        video, an image folder, a camera, a stream, an iterable of arrays) through the stages: one lane per
        device running its stages' models, CPU work on other threads, bounded, sources taken in turn, with the
        drop policy, ``policy=`` (thermal, power, ...) shedding in a stated order, and ``track=``/``zones=``
        on the first stage's boxes. A ``CascadeRun``: iterate it for ``CascadeFrame``s, then read
        ``report()``. See ``live.CascadeRun`` and docs/cascade.md."""
        from .live import CascadeRun

        name = options.pop("name", None)
        if name is not None:
            options.setdefault("names", [name])
        return CascadeRun(self, [source, *more_sources], **options)

    def close(self) -> None:
        for stage in self.stages:
            stage.close()

    def __enter__(self) -> Cascade:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Cascade(" + " -> ".join(f"{s.name} on {s.executor_name}" for s in self.stages) + ")"


def _stage(spec: Any, index: int, base) -> Stage:
    if not isinstance(spec, dict):
        raise ConfigError(f"stage {index + 1} is a {type(spec).__name__}, not a mapping",
                          hint="each stage: {model: path, name: ..., crop: {...}}")
    unknown = set(spec) - set(STAGE_KEYS)
    if unknown:
        raise ConfigError(f"stage {index + 1}: unknown keys {sorted(unknown)}", hint=f"known: {', '.join(STAGE_KEYS)}")
    if "model" not in spec:
        raise ConfigError(f"stage {index + 1} names no model", hint="model: path/to/model.tflite")
    name = str(spec.get("name") or f"stage{index + 1}")
    crop = CropOptions.from_dict(spec.get("crop"), f"stage {name!r}")
    classes = spec.get("classes")
    if classes is not None:
        classes = frozenset(classes if isinstance(classes, (list, tuple, set)) else [classes])
    model = spec["model"]
    options = {k: spec[k] for k in LOAD_KEYS if k in spec}
    owned = isinstance(model, (str, os.PathLike, list))
    if owned:
        from ..load_keywords import from_flat
        from ..loader import load

        if base is not None and not os.path.isabs(os.fspath(model)):
            model = os.path.join(base, os.fspath(model))
        options.setdefault("calibrate", False)  # a stage's first crops must not wait for a measurement
        loaded = load(model, **from_flat(options))
    elif options:
        raise ConfigError(f"stage {name!r}: load options {sorted(options)} given with a model already loaded",
                          hint="pass them to edgeaccel.load, or give the model's path")
    else:
        loaded = model
    try:
        return Stage(name, loaded, classes, float(spec.get("min_score", 0.0)), int(spec.get("max_crops", 16)),
                     crop, owned, model if owned else None, options)
    except BaseException:
        if owned:
            loaded.close()
        raise


def _check(stages: list[Stage]) -> None:
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise ConfigError(f"stage names must differ: {names}", hint="name: each stage")
    for stage in stages[:-1]:  # every stage with one after it must find boxes for it
        task = stage.model.task
        if task is None or task.name != "detect":
            found = "no vision task" if task is None else f"task {task.name!r}"
            raise ConfigError(f"stage {stage.name!r} has {found}: a stage with another after it must detect boxes "
                              "for it to crop", hint="put detectors first; give task: detect if it is one")
    for stage in stages:
        if stage.model.task is None:
            raise ConfigError(f"stage {stage.name!r}: no vision task recognized for {stage.model.info.path}",
                              hint="give task: classify / detect / pose / segment (and labels:)")


def load_cascade(path: str | os.PathLike, **options) -> Cascade:
    """The Cascade ``path`` describes; ``options`` (placement=) override the file's."""
    data = read_pipeline(path)
    options.setdefault("placement", data.get("placement", "auto"))
    try:
        return Cascade(data["stages"], base=Path(path).resolve().parent, **options)
    except ConfigError as exc:
        if exc.path:
            raise
        raise ConfigError(exc.message, path=str(path), hint=exc.hint) from exc
