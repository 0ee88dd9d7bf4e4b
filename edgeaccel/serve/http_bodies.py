"""The bodies of the Open Inference Protocol's HTTP infer call: the request's JSON and binary tensor data in,
the response's JSON and binary outputs out (the binary tensor extension: ``Inference-Header-Content-Length``,
``binary_data_size``, ``binary_data`` / ``binary_data_output``). Pure functions of bytes and arrays, raising
ServeError with the status to answer; rest.py routes and does the I/O."""

from __future__ import annotations

import json
from typing import Any


from .errors import ServeError
from .http_answer import Body
from .tensors import datatype_of, from_bytes, from_json, refuse_unserved, to_json, to_view

HEADER_LENGTH = b"inference-header-content-length"


def json_object(data: bytes) -> dict:
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ServeError(400, f"the request is not valid JSON: {exc}") from None
    except RecursionError:  # '[[[[...' nested deeper than the parser goes: a bad request, not a server fault
        raise ServeError(400, "the request's JSON is nested too deeply; tensor data is a flat or nested list "
                              "as deep as the tensor's shape") from None
    if not isinstance(value, dict):
        raise ServeError(400, "the request must be a JSON object")
    return value


def parse_infer(body: bytes, header_length: bytes | None) -> tuple[dict, dict]:
    request, binary = split_body(body, header_length)
    parameters_of(request, "the request")
    return request, infer_inputs(request, binary)


def split_body(body: bytes, header_length: bytes | None) -> tuple[dict, memoryview]:
    """The JSON part and the binary part of an infer body (binary tensor extension)."""
    if header_length is None:
        return json_object(body), memoryview(b"")
    if not header_length.isdigit() or int(header_length) > len(body):
        raise ServeError(400, f"Inference-Header-Content-Length {header_length.decode('latin-1')!r} is not the "
                              f"length of the JSON part of a {len(body)}-byte body")
    n = int(header_length)
    return json_object(body[:n]), memoryview(body)[n:]


def infer_inputs(request: dict, binary: memoryview) -> dict:
    given = request.get("inputs")
    if not isinstance(given, list) or not given:
        raise ServeError(400, "the request has no 'inputs' list: each input is {name, shape, datatype, data}")
    arrays, offset = {}, 0
    for i, tensor in enumerate(given):
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise ServeError(400, f"inputs[{i}] must be an object with a 'name'")
        where = f"input '{tensor['name']}'"
        if tensor["name"] in arrays:
            raise ServeError(400, f"{where} is given twice")
        parameters = parameters_of(tensor, where)
        refuse_unserved(parameters, where)
        size = parameters.get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise ServeError(400, f"{where}: binary_data_size is a whole number of bytes, not {size!r}")
            if offset + size > len(binary):
                raise ServeError(400, f"{where}: binary_data_size {size!r} goes past the {len(binary)} bytes of "
                                      "binary data after the JSON header")
            arrays[tensor["name"]] = from_bytes(binary[offset:offset + size], tensor.get("datatype"),
                                                tensor.get("shape"), where)
            offset += size
        elif "data" in tensor:
            arrays[tensor["name"]] = from_json(tensor["data"], tensor.get("datatype"), tensor.get("shape"), where)
        else:
            raise ServeError(400, f"{where} has neither 'data' nor a 'binary_data_size' parameter")
    wanted = request.get("outputs")
    for item in wanted if isinstance(wanted, list) else ():  # before the model runs for a request it cannot answer
        if isinstance(item, dict):
            refuse_unserved(parameters_of(item, f"output {item.get('name')!r}"), f"output {item.get('name')!r}")
    if offset != len(binary):
        raise ServeError(400, f"{len(binary) - offset} bytes of binary data after the JSON header belong to no "
                              "input (binary_data_size of the inputs adds up to less)")
    return arrays


def parameters_of(item: dict, where: str) -> dict:
    """An input's, output's or request's 'parameters': an object (a list or a number there is a 400, not a crash)."""
    value = item.get("parameters")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ServeError(400, f"{where}: 'parameters' must be a JSON object of names and values, "
                              f"not {type(value).__name__}")
    return value


def timeout_s_of(parameters: Any) -> float | None:
    """The request's own timeout: Triton's 'timeout' parameter, in microseconds."""
    if not isinstance(parameters, dict) or "timeout" not in parameters:
        return None
    value = parameters["timeout"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ServeError(400, f"parameter 'timeout' is in microseconds and positive, not {value!r}")
    return value / 1e6


def chosen_outputs(name: str, request: dict, outputs: dict) -> list[tuple[str, bool]]:
    """The outputs the request asks for, in order, each with whether it goes as binary data."""
    parameters = request.get("parameters") if isinstance(request.get("parameters"), dict) else {}
    binary_default = bool(parameters.get("binary_data_output", False))
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
        binary = parameters_of(item, f"output '{out_name}'").get("binary_data", binary_default)
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
