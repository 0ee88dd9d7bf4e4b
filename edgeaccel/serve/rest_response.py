"""An /infer answer's body: the outputs the request asks for, as JSON values or binary data (the binary tensor
extension: ``binary_data_output``, ``binary_data`` per output, ``Inference-Header-Content-Length``). Binary
outputs are views of the arrays, written as they are (http_answer.py); nothing here copies them."""

from __future__ import annotations

import json

from .errors import ServeError
from .http_answer import Body
from .rest_request import parameters
from .tensors import datatype_of, to_json, to_view

HEADER_LENGTH = b"inference-header-content-length"


def chosen_outputs(name: str, request: dict, outputs: dict) -> list[tuple[str, bool]]:
    """The outputs the request asks for, in order, each with whether it goes as binary data."""
    given = request.get("parameters") if isinstance(request.get("parameters"), dict) else {}
    binary_default = bool(given.get("binary_data_output", False))
    wanted = request.get("outputs")
    if wanted is None:
        return [(n, binary_default) for n in outputs]
    if not isinstance(wanted, list):
        raise ServeError(400, "'outputs' must be a list of {name, parameters}")
    chosen = []
    for item in wanted:
        out_name = item.get("name") if isinstance(item, dict) else None
        if out_name not in outputs:
            raise ServeError(400, f"model '{name}' has no output {out_name!r}; its outputs are {list(outputs)}")
        binary = parameters(item, f"output '{out_name}'").get("binary_data", binary_default)
        chosen.append((out_name, bool(binary)))
    return chosen


def infer_response(name: str, request: dict, outputs: dict, chosen: list[tuple[str, bool]]) -> tuple[Body, list]:
    tensors, blobs = [], []
    for out_name, binary in chosen:
        array = outputs[out_name]
        tensor = {"name": out_name, "datatype": datatype_of(array.dtype), "shape": list(array.shape)}
        if binary:
            blob = to_view(array)  # written as it is (or joined once for a small answer), never copied to bytes
            tensor["parameters"] = {"binary_data_size": len(blob)}
            blobs.append(blob)
        else:
            tensor["data"] = to_json(array)
        tensors.append(tensor)
    reply = {"model_name": name, "model_version": "1", "outputs": tensors}
    executor = getattr(outputs, "executor", None)
    if executor:  # which executor answered: identical requests answered by two differ only across a change
        reply["parameters"] = {"executor": executor}
    if request.get("id") is not None:
        reply["id"] = request["id"]
    head = json.dumps(reply, separators=(",", ":")).encode()
    if not blobs:
        return head, [b"application/json"]
    return [head, *blobs], [b"application/octet-stream", [(HEADER_LENGTH, str(len(head)).encode())]]
