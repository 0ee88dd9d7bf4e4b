"""How the server opens one model of its repository: as ``edgeaccel.load`` (``edgeaccel.schedule`` under a
policy) would for one app, with the server's options spelled as load's option objects."""

from __future__ import annotations

from typing import Any


def open_model(source: Any, name: str, opts: Any) -> Any:
    """``source`` (an entry's files) as model ``name``, under ``opts`` (a ``ServeOptions``)."""
    import edgeaccel

    from ..options import RuntimeOptions, ScheduleOptions, TaskOptions

    common = dict(executor=opts.executor, task=opts.tasks.get(name),
                  runtime=RuntimeOptions(threads=opts.threads, performance_hint=opts.performance_hint,
                                         isolate=opts.isolate),
                  task_options=TaskOptions(labels=opts.labels.get(name)))
    if opts.policy:
        plan = ScheduleOptions(opts.policy, power_budget_w=opts.power_budget_w, telemetry_root=opts.telemetry_root)
        return edgeaccel.schedule(source, plan, **common)
    return edgeaccel.load(source, **common)
