"""The keywords ``load()`` and ``select()`` took before the option objects (``edgeaccel.options``): each still
works for one release, folded into its object with one DeprecationWarning per call that names the new spelling.
The option objects themselves are type-checked here, so that ``runtime={"threads": 2}`` is a ConfigError that
says what to write instead of an AttributeError deep in the pipeline."""

from __future__ import annotations

import difflib
import warnings
from dataclasses import dataclass, replace

from .errors import ConfigError
from .options import RuntimeOptions, ScheduleOptions, SelectionOptions, TaskOptions

# old keyword -> (the keyword taking its object now, the object's field)
MOVED: dict[str, tuple[str, str]] = {
    "precision": ("selection", "precision"),
    "goal": ("selection", "goal"),
    "profile": ("selection", "profile"),
    "calibrate": ("selection", "calibrate"),
    "calibration_inputs": ("selection", "calibration_inputs"),
    "calibration_budget_s": ("selection", "calibration_budget_s"),
    "accuracy_tolerance": ("selection", "accuracy_tolerance"),
    "strict": ("selection", "strict"),
    "threads": ("runtime", "threads"),
    "performance_hint": ("runtime", "performance_hint"),
    "cache_dir": ("runtime", "cache_dir"),
    "cache": ("runtime", "cache"),
    "runtime_options": ("runtime", "native"),
    "gpu_mem_limit_mb": ("runtime", "gpu_mem_limit_mb"),
    "isolate": ("runtime", "isolate"),
    "isolation": ("runtime", "isolate"),  # select()'s resolved IsolationLimits
    "labels": ("task_options", "labels"),
    "policy": ("schedule", "policy"),
    "power_budget_w": ("schedule", "power_budget_w"),
    "telemetry_root": ("schedule", "telemetry_root"),
}
OBJECTS = {"selection": SelectionOptions, "runtime": RuntimeOptions, "task_options": TaskOptions,
           "schedule": ScheduleOptions}


@dataclass(frozen=True)
class Options:
    """What one call asked for, every part validated."""

    selection: SelectionOptions
    runtime: RuntimeOptions
    task: TaskOptions
    schedule: ScheduleOptions | None = None  # load(policy=...) only, the older spelling of schedule()


def gather(caller: str, moved: dict, selection=None, runtime=None, task_options=None, *,
           stacklevel: int = 3) -> Options:
    """The options of a ``caller`` call: its objects (type-checked) with the older keywords ``moved`` laid over
    them, warning once with the new spelling. An unknown keyword is a TypeError, as Python's own."""
    given = {"selection": _checked(caller, "selection", selection), "runtime": _checked(caller, "runtime", runtime)}
    if isinstance(task_options, dict):  # the older dict form: still read, with the new spelling said
        task = TaskOptions.from_dict(task_options)
        _warn(f"{caller}(task_options={{...}}) as a dict is deprecated: write task_options="
              f"TaskOptions({_spelled(task_options)})", stacklevel + 1)
        given["task_options"] = task
    else:
        given["task_options"] = _checked(caller, "task_options", task_options)
    unknown = [k for k in moved if k not in MOVED]
    if unknown:
        close = difflib.get_close_matches(unknown[0], [*MOVED, "executor", "device", "task", *OBJECTS], n=1)
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}"
                        + (f"; did you mean {close[0]!r}?" if close else ""))
    changes: dict[str, dict] = {}
    for name, value in moved.items():
        where, field_name = MOVED[name]
        changes.setdefault(where, {})[field_name] = value
    if moved:
        _warn(_deprecation(caller, moved, changes), stacklevel + 1)
    for where in ("selection", "runtime", "task_options"):
        base = given[where] or OBJECTS[where]()
        given[where] = replace(base, **changes[where]) if where in changes else base
    schedule = None
    if changes.get("schedule", {}).get("policy") is not None:
        schedule = ScheduleOptions(**changes["schedule"])
    return Options(given["selection"], given["runtime"], given["task_options"], schedule)


def _checked(caller: str, keyword: str, value):
    cls = OBJECTS[keyword]
    if value is not None and not isinstance(value, cls):
        example = {"selection": "SelectionOptions(precision='f16')", "runtime": "RuntimeOptions(threads=2)",
                   "task_options": "TaskOptions(conf=0.3)"}[keyword]
        raise ConfigError(f"{caller}({keyword}=...) takes a {cls.__name__}, not {type(value).__name__}",
                          key=keyword, hint=f"write {keyword}={example} (from edgeaccel.options)")
    return value


def _deprecation(caller: str, moved: dict, changes: dict[str, dict]) -> str:
    objects = [f"{where}={OBJECTS[where].__name__}({_spelled(fields)})" for where, fields in changes.items()
               if where != "schedule"]
    text = f"{caller}({', '.join(f'{k}=' for k in moved)}) is deprecated"
    schedule = changes.get("schedule", {})
    if schedule.get("policy") is not None:  # load(policy=...): a ScheduledModel is schedule()'s
        plan = f"ScheduleOptions({_spelled(schedule)})" if len(schedule) > 1 else repr(schedule["policy"])
        return (f"{text}: write edgeaccel.schedule(model, {', '.join([plan, *objects])}) for a ScheduledModel "
                "(the option objects are in edgeaccel.options)")
    new = f"write {caller}(model, {', '.join(objects)})" if objects else ""
    if schedule:
        new = (f"{new}; " if new else "") + "power_budget_w= and telemetry_root= apply only to " \
                                             "edgeaccel.schedule(model, ScheduleOptions(...))"
    return f"{text}: {new} (the option objects are in edgeaccel.options)"


def _spelled(fields: dict) -> str:
    shown = []
    for k, v in fields.items():
        text = repr(v)
        shown.append(f"{k}={text if len(text) <= 40 else '...'}")
    return ", ".join(shown)


def _warn(message: str, stacklevel: int) -> None:
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)


def from_flat(flat: dict) -> dict:
    """``load()``'s arguments from a flat mapping of the older keywords (a cascade stage in a pipeline YAML
    file, where one level of keys is the file's format, not a deprecated call): ``executor``, ``device``,
    ``task`` as they are, the rest folded into their option objects, silently. ConfigError for a wrong value."""
    kept = {k: flat[k] for k in ("executor", "device", "task") if k in flat}
    changes: dict[str, dict] = {}
    for name, value in flat.items():
        if name in MOVED and MOVED[name][0] != "schedule":
            where, field_name = MOVED[name]
            changes.setdefault(where, {})[field_name] = value
    task = flat.get("task_options")
    task = TaskOptions.from_dict(task) if isinstance(task, dict) or task is None else _checked(
        "load", "task_options", task)
    objects = {"selection": SelectionOptions(), "runtime": RuntimeOptions(), "task_options": task}
    for where, fields in changes.items():
        objects[where] = replace(objects[where], **fields)
    return {**kept, **objects}
