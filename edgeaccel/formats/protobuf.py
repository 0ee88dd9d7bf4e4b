"""A bounds-checked protobuf wire-format reader: enough to describe an ONNX model without onnx installed.

Length-delimited fields come back as (start, end) spans into the caller's buffer, so a 500 MB initializer is
skipped, never copied.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """The bytes are not well-formed protobuf."""


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise ProtobufError(f"varint runs past the end at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError(f"varint longer than 10 bytes at offset {pos}")


def fields(buf, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int, Any]]:
    """Yield (field number, wire type, value) for each field in buf[start:end].

    value is an int for varint and fixed fields, and a (start, end) span for length-delimited ones: the wire type
    says which, so callers test the wire type and the value is typed Any.
    """
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"field number 0 at offset {pos}")
        value: int | tuple[int, int]
        if wire == VARINT:
            value, pos = read_varint(buf, pos, end)
        elif wire == FIXED64:
            if pos + 8 > end:
                raise ProtobufError(f"fixed64 field {number} runs past the end")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        elif wire == FIXED32:
            if pos + 4 > end:
                raise ProtobufError(f"fixed32 field {number} runs past the end")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        elif wire == LENGTH:
            n, pos = read_varint(buf, pos, end)
            if pos + n > end:
                raise ProtobufError(f"field {number} declares {n} bytes but only {end - pos} remain")
            value = (pos, pos + n)
            pos += n
        else:
            raise ProtobufError(f"unsupported wire type {wire} for field {number} at offset {pos}")
        yield number, wire, value


def text(buf, span: tuple[int, int]) -> str:
    return bytes(buf[span[0] : span[1]]).decode("utf-8", errors="backslashreplace")


def signed(value: int) -> int:
    """Interpret a varint as int64 (negative numbers are 10-byte two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def packed_varints(buf, span: tuple[int, int]) -> list[int]:
    out, pos = [], span[0]
    while pos < span[1]:
        v, pos = read_varint(buf, pos, span[1])
        out.append(signed(v))
    return out
