"""``edgeaccel.ray.deployment``: the same model as a Ray Serve application.

    app = edgeaccel.ray.deployment("model.tflite", task="classify", labels="labels.txt")
    serve.run(app, route_prefix="/classify")
    curl --data-binary @bird.png localhost:8000/classify                   # an image: the task's result JSON
    curl -H 'Content-Type: application/json' -d '{"inputs": {"input": [[...]]}}' localhost:8000/classify
    curl localhost:8000/classify                                           # GET: the model and its executor

Each replica loads the model on its own node (shipped as in map_batches) and runs it off the event loop.
A request edgeaccel refuses (bad JSON, wrong shape or type, not an image) is answered 400 with the message
and the hint; a failure of the runtime 500; the replica lives on either way.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np

from ..errors import EdgeAccelError, InputError
from ._import import import_ray_part
from .resources import actor_request
from .shipping import ModelPayload, labels_given, pack

JSON_TYPES = ("application/json", "text/json")


class ModelServer:
    """The Serve deployment's class: one loaded model per replica."""

    def __init__(self, payload: ModelPayload, task: str | None, device: str | None, threads: int | None,
                 options: dict) -> None:
        from .node import load_on_node, node_label

        self.model = load_on_node(payload, task=task, device=device, threads=threads, options=options)
        self.task = task
        self.node = node_label()

    async def __call__(self, request):
        from starlette.responses import JSONResponse

        try:
            if request.method == "GET":
                return JSONResponse(self.describe())
            body = await request.body()
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            work = (lambda: self.run_json(body)) if kind in JSON_TYPES else (lambda: self.predict_image(body))
            return JSONResponse(await asyncio.get_running_loop().run_in_executor(None, work))
        except EdgeAccelError as exc:
            client = isinstance(exc, (InputError, ValueError))
            return JSONResponse({"error": exc.message, "hint": exc.hint, "type": type(exc).__name__},
                                status_code=400 if client else 500)

    def describe(self) -> dict:
        model = self.model
        return {"model": model.info.path.name, "executor": str(model.executor), "node": self.node,
                "task": self.task, "inputs": [str(s) for s in model.inputs], "outputs": [str(s) for s in model.outputs]}

    def predict_image(self, body: bytes) -> dict:
        if self.task is None:
            raise InputError("this deployment has no task, so it takes JSON tensors, not an image",
                             hint="send Content-Type: application/json with {\"inputs\": {name: nested list}}, or "
                                  "deploy with task='classify' (or detect, segment, pose) to send images")
        from ..imageio import decode_image

        if not body:
            raise InputError("the request has no body", hint="send the image's bytes (PNG, JPEG) as the body")
        try:
            image = decode_image(body, "the request body")
        except InputError as exc:
            raise InputError(exc.message, hint="send the bytes of a PNG or JPEG image, or JSON tensors with "
                                               "Content-Type: application/json") from None
        result = self.model.predict(image).to_dict()
        result["executor"] = self.model.executor.name
        return result

    def run_json(self, body: bytes) -> dict:
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"the body is not valid JSON: {exc}",
                             hint='send {"inputs": {"<input name>": <nested list>}} or {"inputs": [<one per input>]}'
                             ) from None
        inputs = data.get("inputs") if isinstance(data, dict) else None
        specs = self.model.inputs
        if isinstance(inputs, dict):
            arrays = {k: _json_array(v, _spec(specs, k)) for k, v in inputs.items()}
        elif isinstance(inputs, list) and len(inputs) == len(specs):
            arrays = [_json_array(v, s) for v, s in zip(inputs, specs, strict=True)]
        else:
            raise InputError(f"the JSON needs \"inputs\": a dict by input name or a list of {len(specs)} "
                             f"(the model's inputs: {[str(s) for s in specs]})",
                             hint='send {"inputs": {"<input name>": <nested list>}}')
        outputs = self.model.run(arrays)
        return {"model": self.model.info.path.name, "executor": self.model.executor.name,
                "outputs": {name: {"shape": list(np.shape(a)), "datatype": str(np.asarray(a).dtype),
                                   "data": np.asarray(a).ravel().tolist()} for name, a in outputs.as_dict().items()}}


def _spec(specs, name: str):
    found = next((s for s in specs if s.name == name), None)
    if found is None:
        raise InputError(f"the model has no input {name!r}; its inputs are {[s.name for s in specs]}")
    return found


def _json_array(value, spec) -> np.ndarray:
    """Nested JSON numbers as the input's dtype; a value the dtype cannot hold is refused, not wrapped around."""
    try:
        array = np.asarray(value)
    except ValueError as exc:  # ragged lists
        raise InputError(f"input {spec.name!r} is not a rectangular nested list: {exc}") from None
    if array.dtype.kind not in "iufb":
        raise InputError(f"input {spec.name!r} holds {array.dtype} values, not numbers", hint=f"the input is {spec}")
    want = np.dtype(spec.dtype)
    if want.kind in "iu":
        if array.dtype.kind == "f" and not np.array_equal(array, np.round(array)):
            raise InputError(f"input {spec.name!r} is {want} and takes whole numbers; the JSON has fractions",
                             hint=f"the input is {spec}")
        info = np.iinfo(want)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise InputError(f"input {spec.name!r} is {want} ({info.min}..{info.max}); the JSON has values "
                             f"from {array.min()} to {array.max()}", hint=f"the input is {spec}")
    return array.astype(want)


def deployment(model, *, task: str | None = None, name: str | None = None, num_replicas: int = 1,
               threads: int | None = None, num_cpus: float | None = None, device: str | None = None,
               ship: str = "bytes", **load_options):
    """A bound Ray Serve application serving ``model`` (what ``edgeaccel.load`` takes); pass it to
    ``serve.run``. ``threads``/``num_cpus``/``device``/``ship`` as in map_batches; ``load_options`` go to
    ``edgeaccel.load`` in each replica."""
    serve = import_ray_part("serve")
    from .batches import check_options

    check_options(load_options, num_cpus, num_replicas=num_replicas, threads=threads)
    payload = pack(model, ship, labels_given(load_options), task)
    options = {k: v for k, v in load_options.items() if not (k == "labels" and payload.labels)}
    request = actor_request(device, num_cpus if num_cpus is not None else (threads or 1))
    served = serve.deployment(ModelServer, name=name or _name(model), num_replicas=num_replicas,
                              ray_actor_options=request)
    return served.bind(payload, task, device, threads, options)


def _name(model) -> str:
    from pathlib import Path

    first = model[0] if isinstance(model, (list, tuple)) else model
    return f"edgeaccel-{Path(first).stem}"
