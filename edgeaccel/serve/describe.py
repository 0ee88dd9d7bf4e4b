"""How the server describes a loaded model: the protocol's metadata (tensors, platform, and in its parameters the
executors, policy, devices, batching, the vision task and what the accuracy guard refused) and Triton's model configuration."""

from __future__ import annotations

import logging
from typing import Any

from .tensors import datatype_of

log = logging.getLogger("edgeaccel.serve")
VERSION = "1"  # one version per model: the repository holds one artifact set per name


def metadata(served: Any, options: Any) -> dict:
    """The Open Inference Protocol's model metadata, with what edgeaccel adds in its parameters."""

    def tensor(t) -> dict:
        shape = [-1] * 1 if t.unranked else [-1 if d is None else int(d) for d in t.shape]
        return {"name": t.name, "datatype": datatype_of(t.dtype), "shape": shape}

    model = served.model
    return {"name": served.name, "versions": [VERSION], "platform": served.platform,
            "inputs": [tensor(t) for t in model.inputs], "outputs": [tensor(t) for t in model.outputs],
            "parameters": {"executors": ", ".join(model.executors), "policy": str(model.policy),
                           "priority": served.priority, "devices": ", ".join(dict.fromkeys(served.devices)),
                           "isolated": any("isolated" in (info.details or {}) for info in model.executors.values()),
                           "performance_hint": options.performance_hint,
                           "threads": options.threads or "every core", **_streams(model),
                           "batching": served.batching, **_task(served.name, model), **_refused(model)}}


def _streams(model: Any) -> dict:
    """What overlapping requests run on, where an executor adapts (``performance_hint`` adaptive)."""
    for info in model.executors.values():
        details = info.details or {}
        if details.get("adaptive"):
            width, streams = details.get("stream_threads"), details["throughput_streams"]
            if width is None:  # the runtime's own streams (OpenVINO): how many requests it takes at once
                return {"streams": f"{streams} requests at once, in {info.runtime}'s own streams"}
            return {"streams": f"{streams} x {width} thread{'s' if width != 1 else ''}"}
    return {}


def config(served: Any, options: Any) -> dict:
    """The model as Triton's model configuration describes it (what tritonclient's get_model_config reads):
    ``max_batch_size`` > 0 only for a batched model, whose ``dims`` then leave out the batch dimension."""
    meta = metadata(served, options)
    batched = served.batcher is not None

    def tensor(t: dict) -> dict:
        return {"name": t["name"], "data_type": f"TYPE_{'STRING' if t['datatype'] == 'BYTES' else t['datatype']}",
                "dims": t["shape"][1:] if batched else t["shape"]}

    config = {"name": served.name, "platform": meta["platform"],
              "max_batch_size": options.max_batch if batched else 0,
              "input": [tensor(t) for t in meta["inputs"]], "output": [tensor(t) for t in meta["outputs"]]}
    described = _pipeline_json(served.model)
    if described:  # Triton's ModelConfig.parameters: how a client turns an image into the input tensor
        config["parameters"] = {"edgeaccel.pipeline": {"string_value": described}}
    return config


def _task(name: str, model: Any) -> dict:
    """The model's vision task and how to send it images (absent for a tensor-only model): a client that reads
    the metadata finds the image endpoints without reading the docs."""
    try:
        task = model.task
    except Exception:  # a --task that does not fit: said at load, and by /predict
        return {}
    if task is None:
        return {}
    from ..sources.state import state_pairs

    streams = []
    if task.name == "detect" or task.kind == "yolo-seg":
        streams.append("boxes get track_id")
    if state_pairs(model, None):
        streams.append("each frame runs on the state the one before left")
    return {"task": f"{task.name} ({task.kind})",
            "images": f"POST /v2/models/{name}/predict with an image body, or /infer with one BYTES input of "
                      f"encoded images answered in the BYTES output 'result' (schema edgeaccel.vision/1)"
                      + (f"; stream=NAME (and timestamp=SECONDS) sends a video's frames: {', '.join(streams)}"
                         if streams else "")}


def _refused(model: Any) -> dict:
    """The executors the accuracy guard kept out of this model, and why (absent when none was)."""
    refused = [str(event) for event in getattr(model, "fallbacks", ()) if event.stage == "guard"]
    return {"refused": "; ".join(refused)} if refused else {}


def _pipeline_json(model) -> str | None:
    """The model's pipeline (size, layout, normalization, letterbox, labels...) as JSON, or None."""
    import json

    try:
        described = model.pipeline.to_dict()
    except Exception as exc:  # a broken sidecar must not take the config endpoint down: say it in the log
        log.warning("no pipeline description for %s: %s", getattr(model.info, "path", "?"), exc)
        return None
    return json.dumps(described, sort_keys=True) if described else None
