"""Structure-aware OpenVINO IR mutations: the .xml is edited element by element (shapes, element types,
constant offsets and sizes, port dimensions, edges, layer types), the .bin is left as it is. The result
parses as XML, so it reaches edgeaccel's IR checks and OpenVINO's reader."""

from __future__ import annotations

import random
import xml.etree.ElementTree as ET

ELEMENT_TYPES = ("f32", "f16", "i8", "u8", "i32", "i64", "u1", "u4", "boolean", "bogus")
INT_EDGES = ("0", "-1", "1", "3", "65536", "2147483647", "9223372036854775807", "-9223372036854775808")


def mutate(data: bytes, rng: random.Random, count: int | None = None) -> tuple[bytes, list[str]]:
    root = ET.fromstring(data)
    done = []
    for _ in range(count or rng.randint(1, 3)):
        try:
            what = rng.choice(_MUTATORS)(root, rng)
        except (IndexError, ValueError):
            what = None
        if what:
            done.append(what)
    return ET.tostring(root, encoding="utf-8"), done


def _layer(root, rng, kind: str | None = None):
    layers = [layer for layer in root.iterfind("layers/layer") if kind is None or layer.get("type") == kind]
    return rng.choice(layers)


def const_span(root, rng):
    data = _layer(root, rng, "Const").find("data")
    key = rng.choice(("offset", "size"))
    data.set(key, rng.choice(INT_EDGES))
    return f"Const {key} = {data.get(key)}"


def data_shape(root, rng):
    data = _layer(root, rng).find("data")
    if data is None or data.get("shape") is None:
        raise ValueError
    dims = data.get("shape").split(",") if data.get("shape") else []
    if dims and rng.random() < 0.7:
        dims[rng.randrange(len(dims))] = rng.choice(INT_EDGES)
    else:
        dims.append("2")
    data.set("shape", ",".join(dims))
    return f"shape = {data.get('shape')}"


def element_type(root, rng):
    data = _layer(root, rng).find("data")
    if data is None or data.get("element_type") is None:
        raise ValueError
    data.set("element_type", rng.choice(ELEMENT_TYPES))
    return f"element_type = {data.get('element_type')}"


def port_dim(root, rng):
    dims = list(root.iterfind("layers/layer/*/port/dim"))
    dim = rng.choice(dims)
    dim.text = rng.choice(INT_EDGES)
    return f"port dim = {dim.text}"


def edge(root, rng):
    e = rng.choice(list(root.iterfind("edges/edge")))
    key = rng.choice(("from-layer", "from-port", "to-layer", "to-port"))
    e.set(key, rng.choice(("0", "1", "-1", "99999", e.get(key))))
    return f"edge {key} = {e.get(key)}"


def drop(root, rng):
    which = rng.choice(("layers", "edges"))
    parent = root.find(which)
    child = rng.choice(list(parent))
    parent.remove(child)
    return f"one of {which} removed"


def layer_type(root, rng):
    layer = _layer(root, rng)
    layer.set("type", rng.choice(("Convolution", "Add", "Reshape", "Const", "Parameter", "Result", "Bogus",
                                  "GroupConvolution", "FakeQuantize", "Transpose")))
    return f"layer type = {layer.get('type')}"


def attribute(root, rng):
    layer = _layer(root, rng)
    data = layer.find("data")
    if data is None or not data.attrib:
        raise ValueError
    key = rng.choice(sorted(data.attrib))
    value = data.get(key)
    parts = value.split(",")
    parts[rng.randrange(len(parts))] = rng.choice(INT_EDGES)
    data.set(key, ",".join(parts))
    return f"{layer.get('type')} {key} = {data.get(key)}"


_MUTATORS = (const_span, const_span, data_shape, data_shape, element_type, port_dim, port_dim, edge, drop,
             layer_type, attribute, attribute, attribute)
