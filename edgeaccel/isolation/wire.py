"""Frames over a Unix stream socket between the caller and its worker, arrays sent without extra copies.

A frame is a small prefix (header length, buffer count, each buffer's length), a header, then raw buffers,
written with one ``sendmsg`` (scatter-gather: an input array goes from the caller's memory to the socket
without being pickled into a bytes object first) and read with ``recv_into`` preallocated, writable buffers.

The two directions differ on purpose:
- caller -> worker: the header is a pickle (protocol 5, arrays as out-of-band buffers). The worker trusts
  its caller.
- worker -> caller: the header is JSON and arrays are described by dtype and shape, checked before use.
  The worker runs an untrusted model; a runtime bug that let the model take the worker over must not
  become code execution in the caller, which unpickling would allow.
"""

from __future__ import annotations

import json
import pickle
import socket
import struct
from collections.abc import Sequence

import numpy as np

_PREFIX = struct.Struct("<II")
_LEN = struct.Struct("<Q")
MAX_HEADER = 16 << 20
MAX_BUFFERS = 4096


class WireError(Exception):
    """The peer closed the connection or sent a frame that breaks the protocol."""


class WireLimitError(WireError):
    """A frame declares more bytes of arrays than the receiver accepts (IsolationLimits.output_bytes)."""

    def __init__(self, declared: int, limit: int) -> None:
        super().__init__(f"frame declares {declared} bytes of arrays, above the {limit}-byte limit")
        self.declared, self.limit = declared, limit


def send_frame(sock: socket.socket, header: bytes, buffers: Sequence) -> None:
    views = [memoryview(b).cast("B") for b in buffers]
    prefix = _PREFIX.pack(len(header), len(views)) + b"".join(_LEN.pack(v.nbytes) for v in views)
    _send_all(sock, [memoryview(prefix), memoryview(header), *views])


def _send_all(sock: socket.socket, views: list[memoryview]) -> None:
    views = [v for v in views if v.nbytes]
    while views:
        # MSG_NOSIGNAL: a dead peer is an EPIPE error, never a SIGPIPE that would kill an embedding process
        # which did not ignore it (Python ignores it; a C host may not)
        sent = sock.sendmsg(views[:512], (), socket.MSG_NOSIGNAL)  # IOV_MAX is 1024 on Linux
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


def recv_frame(sock: socket.socket, max_bytes: int) -> tuple[bytes, list[bytearray]]:
    """One frame; raises WireError on EOF or on sizes past the limits (a confused or hostile peer)."""
    head = _recv_exact(sock, _PREFIX.size)
    header_len, count = _PREFIX.unpack(head)
    if header_len > MAX_HEADER or count > MAX_BUFFERS:
        raise WireError(f"frame declares a {header_len}-byte header and {count} buffers")
    lengths = list(struct.unpack(f"<{count}Q", _recv_exact(sock, 8 * count))) if count else []
    if sum(lengths) > max_bytes:
        raise WireLimitError(sum(lengths), max_bytes)
    header = bytes(_recv_exact(sock, header_len))
    buffers = [_recv_exact(sock, n) for n in lengths]
    return header, buffers


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise WireError("the peer closed the connection")
        got += k
    return buf


# -- caller -> worker: pickle with out-of-band buffers ------------------------------------------------------
def send_pickle(sock: socket.socket, message: object) -> None:
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    send_frame(sock, header, [b.raw() for b in buffers])


def recv_pickle(sock: socket.socket, max_bytes: int = 1 << 62) -> object:
    header, buffers = recv_frame(sock, max_bytes)
    return pickle.loads(header, buffers=buffers)


# -- worker -> caller: JSON and described arrays ------------------------------------------------------------
# Fixed-width kinds only; no object dtype: the caller never builds an array whose elements the worker chose.
_ARRAY_KINDS = frozenset("biufcSU")
# String tensors (LiteRT: bytes, ONNX Runtime: str) come back from the runtimes as object arrays: they travel as
# their elements' bytes, concatenated, with each element's length in the header, and are rebuilt as bytes or str.
_STRINGS = {"bytes": bytes, "str": str}


def send_json(sock: socket.socket, message: dict, arrays: Sequence[np.ndarray] = ()) -> None:
    """``arrays``: the outputs; an output may also be a list of arrays (an ONNX sequence), sent as a
    'sequence' entry with an empty buffer followed by its items."""
    described, buffers = [], []
    for a in arrays:
        if isinstance(a, (list, tuple)):
            described.append({"dtype": "sequence", "shape": [], "length": len(a)})
            buffers.append(b"")
            items = a
        else:
            items = [a]
        for item in items:
            if not isinstance(item, np.ndarray) and not np.isscalar(item):
                raise TypeError(f"an output holds a {type(item).__name__}; only arrays, strings and lists of "
                                "arrays can be sent back")
            entry, buffer = _describe(item)
            described.append(entry)
            buffers.append(buffer)
    send_frame(sock, json.dumps(dict(message, arrays=described)).encode(), buffers)


def _describe(a) -> tuple[dict, object]:
    # not np.ascontiguousarray: it turns a 0-d array (a scalar output) into shape (1,)
    a = np.asarray(a, order="C")
    if a.dtype.hasobject:
        kind, data, lengths = _encode_strings(a)
        return {"dtype": "object", "strings": kind, "shape": list(a.shape), "lengths": lengths}, data
    return {"dtype": a.dtype.str, "shape": list(a.shape)}, a


def _encode_strings(a: np.ndarray) -> tuple[str, bytes, list[int]]:
    items = a.ravel().tolist()
    kind = "str" if items and all(isinstance(v, str) for v in items) else "bytes"
    if kind == "bytes" and not all(isinstance(v, bytes) for v in items):
        raise TypeError(f"an output array holds {type(next(v for v in items if not isinstance(v, (bytes, str))))} "
                        "objects; only strings can be sent back")
    encoded = [v.encode("utf-8") if isinstance(v, str) else v for v in items]
    return kind, b"".join(encoded), [len(v) for v in encoded]


def recv_json(sock: socket.socket, max_bytes: int) -> tuple[dict, list[np.ndarray]]:
    header, buffers = recv_frame(sock, max_bytes)
    try:
        message = json.loads(header)
        described = message["arrays"]
        if not isinstance(message, dict) or len(described) != len(buffers):
            raise ValueError("array count differs from buffer count")
        arrays: list = []
        pending = 0  # items still to go into the last sequence
        for d, b in zip(described, buffers):
            if d["dtype"] == "sequence":
                if pending or len(b):
                    raise ValueError("a sequence inside a sequence, or with data of its own")
                pending = int(d["length"])
                if pending < 0:
                    raise ValueError("a sequence of negative length")
                arrays.append([])
                continue
            item = _array(d, b)
            if pending:
                arrays[-1].append(item)
                pending -= 1
            else:
                arrays.append(item)
        if pending:
            raise ValueError("a sequence shorter than it declared")
    except (ValueError, KeyError, TypeError) as exc:
        raise WireError(f"malformed reply from the worker: {exc}") from exc
    return message, arrays


def _array(described: dict, buffer: bytearray) -> np.ndarray:
    shape = tuple(int(d) for d in described["shape"])
    if any(d < 0 for d in shape):
        raise ValueError(f"refused array shape {shape}")
    if described["dtype"] == "object":
        return _strings(described, buffer, shape)
    dtype = np.dtype(str(described["dtype"]))
    if dtype.kind not in _ARRAY_KINDS or dtype.hasobject:
        raise ValueError(f"refused array {dtype} {shape}")
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(buffer):
        raise ValueError(f"array {dtype} {shape} does not match its {len(buffer)}-byte buffer")
    return np.frombuffer(buffer, dtype).reshape(shape)


def _strings(described: dict, buffer: bytearray, shape: tuple[int, ...]) -> np.ndarray:
    make = _STRINGS[str(described["strings"])]
    lengths = [int(n) for n in described["lengths"]]
    if len(lengths) != int(np.prod(shape, dtype=np.int64)) or any(n < 0 for n in lengths) \
            or sum(lengths) != len(buffer):
        raise ValueError(f"string array {shape} does not match its lengths and {len(buffer)}-byte buffer")
    out = np.empty(len(lengths), dtype=object)
    view, start = bytes(buffer), 0
    for k, n in enumerate(lengths):
        chunk = view[start:start + n]
        out[k] = chunk.decode("utf-8") if make is str else chunk
        start += n
    return out.reshape(shape)
