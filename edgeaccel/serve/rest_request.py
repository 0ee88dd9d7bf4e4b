"""An /infer request's body as tensors: the JSON part, the binary part (binary tensor extension), and each
input checked as it is read (tensors.py), before the model is looked at. Every mistake is a 400 saying what was
wrong; nothing here runs a model."""

from __future__ import annotations

import json
from typing import Any

from .errors import ServeError
from .tensors import from_bytes, from_json, refuse_unserved


def request_id(request: dict) -> str:
    """The request's 'id' (the protocol's optional string, echoed in the answer); a 400 for any other type
    (a number or an object echoed back would break a client matching answers by id)."""
    value = request.get("id")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ServeError(400, f"the request's 'id' is a string, not {type(value).__name__} {json.dumps(value)[:40]}; "
                              "send it quoted")
    return value


def parse_json(data: bytes) -> dict:
    """The body as a JSON object (Python's parser takes NaN and Infinity, which JSON has not: tensors.py refuses
    them in tensor data)."""
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


def parse(body: bytes, header_length: bytes | None) -> tuple[dict, dict]:
    """The request object and its inputs as arrays by name."""
    request, binary = split(body, header_length)
    parameters(request, "the request")
    return request, inputs_of(request, binary)


def split(body: bytes, header_length: bytes | None) -> tuple[dict, memoryview]:
    """The JSON part and the binary part of an infer body (binary tensor extension)."""
    if header_length is None:
        return parse_json(body), memoryview(b"")
    if not header_length.isdigit() or int(header_length) > len(body):
        raise ServeError(400, f"Inference-Header-Content-Length {header_length.decode('latin-1')!r} is not the "
                              f"length of the JSON part of a {len(body)}-byte body")
    n = int(header_length)
    return parse_json(body[:n]), memoryview(body)[n:]


def inputs_of(request: dict, binary: memoryview) -> dict:
    """Each input as an array, from its JSON 'data' or its slice of the binary part (binary_data_size)."""
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
        given_parameters = parameters(tensor, where)
        refuse_unserved(given_parameters, where)
        size = given_parameters.get("binary_data_size")
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
            refuse_unserved(parameters(item, f"output {item.get('name')!r}"), f"output {item.get('name')!r}")
    if offset != len(binary):
        raise ServeError(400, f"{len(binary) - offset} bytes of binary data after the JSON header belong to no "
                              "input (binary_data_size of the inputs adds up to less)")
    return arrays


def parameters(item: dict, where: str) -> dict:
    """An input's, output's or request's 'parameters': an object (a list or a number there is a 400, not a crash)."""
    value = item.get("parameters")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ServeError(400, f"{where}: 'parameters' must be a JSON object of names and values, "
                              f"not {type(value).__name__}")
    return value


def timeout_s(parameters: Any) -> float | None:
    """The request's own timeout: Triton's 'timeout' parameter, in microseconds."""
    if not isinstance(parameters, dict) or "timeout" not in parameters:
        return None
    value = parameters["timeout"]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise ServeError(400, f"parameter 'timeout' is in microseconds and positive, not {value!r}")
    return value / 1e6
