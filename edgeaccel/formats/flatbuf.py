"""A bounds-checked reader for FlatBuffers tables, enough to walk a TFLite model without any runtime.

Every offset is checked against the buffer before it is followed, so a hostile file raises
``FlatBufferError`` instead of reading out of range or looping. (LiteRT's own verifier checks structure too,
but the runtime crashes on files that pass it: see tflite.py for the semantic checks on top.)
"""

from __future__ import annotations

import struct

import numpy as np

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class FlatBufferError(ValueError):
    """The bytes do not form a well-bounded FlatBuffer."""


class Table:
    """A FlatBuffers table at ``pos`` in ``buf``; fields are read by their schema index."""

    __slots__ = ("buf", "pos", "_vt", "_vt_len")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        _need(buf, pos, 4, "table")
        vt = pos - _I32.unpack_from(buf, pos)[0]
        _need(buf, vt, 4, "vtable")
        vt_len = _U16.unpack_from(buf, vt)[0]
        if vt_len < 4 or vt_len % 2:
            raise FlatBufferError(f"vtable at {vt} has a bad size {vt_len}")
        _need(buf, vt, vt_len, "vtable")
        self._vt = vt
        self._vt_len = vt_len

    def _field(self, index: int) -> int:
        """Absolute position of field ``index``, or 0 when it is absent (takes its default)."""
        slot = 4 + 2 * index
        if slot >= self._vt_len:
            return 0
        off = _U16.unpack_from(self.buf, self._vt + slot)[0]
        return self.pos + off if off else 0

    def has(self, index: int) -> bool:
        return self._field(index) != 0

    def scalar(self, index: int, fmt: str, default=0):
        p = self._field(index)
        if not p:
            return default
        size = struct.calcsize("<" + fmt)
        _need(self.buf, p, size, "scalar field")
        return struct.unpack_from("<" + fmt, self.buf, p)[0]

    def _deref(self, index: int) -> int:
        p = self._field(index)
        if not p:
            return 0
        _need(self.buf, p, 4, "offset field")
        target = p + _U32.unpack_from(self.buf, p)[0]
        _need(self.buf, target, 4, "offset target")
        return target

    def table(self, index: int) -> Table | None:
        target = self._deref(index)
        return Table(self.buf, target) if target else None

    def vector_span(self, index: int, elem_size: int) -> tuple[int, int]:
        """(start, count) of a vector of fixed-size elements, checked to lie inside the buffer."""
        target = self._deref(index)
        if not target:
            return 0, 0
        n = _U32.unpack_from(self.buf, target)[0]
        _need(self.buf, target + 4, n * elem_size, "vector")
        return target + 4, n

    def numbers(self, index: int, dtype: str) -> np.ndarray:
        dt = np.dtype(dtype)
        start, n = self.vector_span(index, dt.itemsize)
        if not n:
            return np.empty(0, dt)
        return np.frombuffer(self.buf, dt, count=n, offset=start)

    def raw_string(self, index: int) -> bytes:
        start, n = self.vector_span(index, 1)
        return bytes(self.buf[start : start + n]) if start else b""

    def string(self, index: int, default: str = "") -> str:
        start, n = self.vector_span(index, 1)
        if not start:
            return default
        raw = bytes(self.buf[start : start + n])
        return raw.decode("utf-8", errors="backslashreplace")

    def tables(self, index: int) -> list[Table]:
        start, n = self.vector_span(index, 4)
        out = []
        for i in range(n):
            p = start + 4 * i
            out.append(Table(self.buf, p + _U32.unpack_from(self.buf, p)[0]))
        return out


def root(buf: bytes) -> Table:
    _need(buf, 0, 8, "root offset")
    return Table(buf, _U32.unpack_from(buf, 0)[0])


def _need(buf: bytes, pos: int, size: int, what: str) -> None:
    if pos < 0 or size < 0 or pos + size > len(buf):
        raise FlatBufferError(f"{what} at offset {pos} (+{size} bytes) lies outside the {len(buf)}-byte file")
