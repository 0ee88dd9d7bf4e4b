"""OpenVINO IR (.xml topology + .bin weights) read safely: no DTDs, no entities, weights checked in range."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.parsers import expat
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from ..errors import ModelValidationError
from ..modelinfo import TensorSpec

ELEMENT_TYPES: dict[str, np.dtype | None] = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i16": np.dtype(np.int16),
    "u16": np.dtype(np.uint16),
    "i32": np.dtype(np.int32),
    "u32": np.dtype(np.uint32),
    "i64": np.dtype(np.int64),
    "u64": np.dtype(np.uint64),
    "boolean": np.dtype(np.bool_),
    "string": np.dtype(object),
    "bf16": None,
}
# Bits per element, for checking that each constant's byte size matches its shape.
ELEMENT_BITS = {"u1": 1, "i4": 4, "u4": 4, "nf4": 4, "f4e2m1": 4, "bf16": 16, "f8e4m3": 8, "f8e5m2": 8}


@dataclass(frozen=True)
class IrConst:
    name: str
    element_type: str
    shape: tuple[int | None, ...]  # None: a dimension the IR leaves dynamic (checked before use)
    offset: int
    size: int


@dataclass(frozen=True)
class IrModel:
    version: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    layer_types: tuple[str, ...]
    constants: tuple[IrConst, ...]


def looks_like_ir(head: bytes) -> bool:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"<") and b"<net" in head


def _refuse_dtd(*_args) -> NoReturn:
    raise ModelValidationError(
        "the OpenVINO IR XML declares a DTD or entities, which IR files never need",
        hint="the file may be malicious (an XML bomb or external entity); export the IR again",
    )


def parse(xml_bytes: bytes) -> IrModel:
    """Parse with expat directly so that DTDs and entity declarations can be refused outright:
    the IR never needs them, and they are how XML bombs and external-entity reads work."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.buffer_text = True
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    parser.StartDoctypeDeclHandler = _refuse_dtd
    parser.EntityDeclHandler = _refuse_dtd
    parser.UnparsedEntityDeclHandler = _refuse_dtd
    parser.ExternalEntityRefHandler = _refuse_dtd
    try:
        parser.Parse(xml_bytes, True)
        root = builder.close()
    except (expat.ExpatError, AssertionError) as exc:
        raise ModelValidationError(f"the OpenVINO IR XML does not parse: {exc}") from exc
    if root.tag != "net":
        raise ModelValidationError(f"the XML's root element is <{root.tag}>, not the IR's <net>")
    try:
        return _parse_net(root)
    except ModelValidationError:
        raise
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        raise ModelValidationError(f"the OpenVINO IR XML is malformed: {exc}") from exc


def _parse_net(root: ET.Element) -> IrModel:
    layers = {}
    order = []
    for layer in root.iterfind("layers/layer"):
        layers[layer.get("id")] = layer
        order.append(layer)
    port_names: dict[tuple[str | None, str | None], str] = {}  # (layer id, port id): a missing id is None
    for layer in order:
        for port in layer.iterfind("output/port"):
            names = port.get("names") or ""
            # Names are comma separated; a literal comma inside a name is escaped as "\,".
            first = names.replace("\\,", "\0").split(",")[0].replace("\0", ",").strip()
            port_names[(layer.get("id"), port.get("id"))] = first or layer.get("name", "")
    sources = {
        (e.get("to-layer"), e.get("to-port")): (e.get("from-layer"), e.get("from-port"))
        for e in root.iterfind("edges/edge")
    }
    inputs, outputs, constants = [], [], []
    for layer in order:
        kind = layer.get("type", "")
        data = layer.find("data")
        if kind == "Parameter":
            etype = data.get("element_type", "") if data is not None else ""
            name = port_names.get((layer.get("id"), "0"), layer.get("name", ""))
            shape = (data.get("shape", "") if data is not None else "").strip()
            # "..." is a dynamic rank (any shape), not one dynamic dimension
            inputs.append(TensorSpec(name, () if shape == "..." else _shape(shape), _dtype(etype),
                                     unranked=shape == "..."))
        elif kind == "Result":
            result_port = layer.find("input/port")
            src = sources.get((layer.get("id"), result_port.get("id") if result_port is not None else "0"))
            src_layer = layers.get(src[0]) if src else None
            name = port_names.get(src, layer.get("name", "")) if src else layer.get("name", "")
            dims = tuple(_dim(d.text or "") for d in result_port.iterfind("dim")) if result_port is not None else ()
            etype = ""
            if src is not None and src_layer is not None:
                for p in src_layer.iterfind("output/port"):
                    if p.get("id") == src[1]:
                        etype = (p.get("precision") or "").lower()
            outputs.append(TensorSpec(name, dims, _dtype(_precision_to_type(etype))))
        elif kind == "Const" and data is not None:
            constants.append(
                IrConst(
                    layer.get("name", ""),
                    data.get("element_type", ""),
                    _shape(data.get("shape", "")),
                    int(data.get("offset", "0")),
                    int(data.get("size", "0")),
                )
            )
    return IrModel(
        version=int(root.get("version", "0") or 0),
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        layer_types=tuple(sorted({layer.get("type", "") for layer in order})),
        constants=tuple(constants),
    )


def _dim(text: str) -> int | None:
    text = text.strip()
    if not text or text in ("?", "-1") or ".." in text:
        return None
    return int(text)


def _shape(text: str) -> tuple[int | None, ...]:
    text = text.strip()
    if not text:
        return ()
    return tuple(_dim(part) for part in text.split(","))


def _precision_to_type(precision: str) -> str:
    return {"fp32": "f32", "fp16": "f16", "fp64": "f64", "bool": "boolean"}.get(precision, precision)


def _dtype(etype: str) -> np.dtype:
    dtype = ELEMENT_TYPES.get(etype)
    return dtype if dtype is not None else np.dtype(object)


def check_weights(model: IrModel, bin_size: int) -> None:
    """Every constant must lie inside the .bin and have the byte size its shape and type need."""
    for c in model.constants:
        if c.offset < 0 or c.size < 0 or c.offset + c.size > bin_size:
            raise ModelValidationError(
                f"constant {c.name!r} reads bytes {c.offset}..{c.offset + c.size} of a {bin_size}-byte .bin",
                hint="the .bin does not belong to this .xml or is truncated; keep the pair from one export",
            )
        bits = ELEMENT_BITS.get(c.element_type)
        dtype = ELEMENT_TYPES.get(c.element_type)
        if bits is None and dtype is not None and dtype != np.dtype(object):
            bits = dtype.itemsize * 8
        dims = [d for d in c.shape if d is not None]
        if bits is None or len(dims) != len(c.shape):
            continue
        need = (int(np.prod(dims, dtype=np.int64)) * bits + 7) // 8
        if need != c.size:
            raise ModelValidationError(
                f"constant {c.name!r} of shape {list(c.shape)} {c.element_type} needs {need} bytes "
                f"but the XML gives it {c.size}",
                hint="the IR is corrupted; export it again",
            )
