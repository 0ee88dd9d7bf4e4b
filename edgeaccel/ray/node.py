"""Inside an actor (a Ray Data worker or a Serve replica): load the shipped model on this node. edgeaccel
chooses the executor here, from this node's own hardware and runtimes (and measurements in its cache), not the
driver's; the runtime gets as many threads as Ray gave this actor CPUs."""

from __future__ import annotations

import logging

from .shipping import ModelPayload, unpack

log = logging.getLogger("edgeaccel.ray")


def assigned_cpus(default: int = 1) -> int:
    """Whole CPUs Ray assigned to the calling actor (at least 1), or ``default`` outside Ray."""
    try:
        import ray

        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    except Exception:  # not in a Ray worker
        return default
    return max(1, int(cpus)) if cpus else default


def load_on_node(payload: ModelPayload, *, task: str | None, device: str | None, threads: int | None,
                 options: dict):
    """The loaded Model. ``threads`` None: as many as the actor's CPUs."""
    import edgeaccel

    source, labels = unpack(payload)
    # no background calibration by default: every actor would spend its CPUs measuring the same candidates
    # while it should be serving the batch, and actors could end on different executors. Measurements already
    # in this node's cache still count; calibrate=True / "background" asks for it.
    from dataclasses import replace

    options = dict(options)
    selection = options.pop("selection", None) or edgeaccel.SelectionOptions(calibrate=False)
    runtime = options.pop("runtime", None) or edgeaccel.RuntimeOptions()
    if runtime.threads is None:
        runtime = replace(runtime, threads=threads or assigned_cpus())
    task_options = options.pop("task_options", None) or edgeaccel.TaskOptions()
    if labels is not None:
        task_options = replace(task_options, labels=labels)
    try:
        model = edgeaccel.load(source, task=task, device=device, selection=selection, runtime=runtime,
                               task_options=task_options, **options)
    except edgeaccel.EdgeAccelError as exc:  # Ray wraps it in ActorDiedError: its text should say where it failed
        raise type(exc)(f"on Ray node {node_label()}: {exc.message}", hint=exc.hint) from exc
    log.info("edgeaccel actor on %s: %s", node_label(), model.executor)
    return model


def node_label() -> str:
    """This node's IP address and the first 8 characters of its Ray node id."""
    try:
        import ray

        return f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
    except Exception:
        import socket

        return socket.gethostname()
