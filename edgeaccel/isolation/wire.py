"""Frames over a Unix stream socket between the caller and its worker, arrays sent without extra copies.

A frame is a fixed prefix (sequence number, header length, buffer count, total bytes of buffers), each buffer's
length, a header, then raw buffers, written with one ``sendmsg`` (scatter-gather: an input array goes from the
caller's memory to the socket without being copied into a bytes object first) and read with two ``recv_into``
calls: the prefix, then the rest into one fresh bytearray whose slices become the arrays (no further copy;
measured: a syscall per piece cost more than the copies on small models). Run calls use channel.py: tensors in a
shared-memory region, the same prefix and a JSON header on the socket; these functions carry the load handshake,
and the arrays that do not fit the region.

The load request (caller -> worker) is a pickle (protocol 5): the worker trusts its caller. Run requests and
every reply are JSON with arrays described by dtype and shape and checked before use: the worker runs an
untrusted model, and a runtime bug that let the model take the worker over must not become code execution in
the caller, which unpickling would allow. The JSON of a given set of dtypes and shapes is encoded and decoded
once (cached): per call only the buffer sizes are checked against it.
"""

from __future__ import annotations

import json
import pickle
import socket
import struct
from collections.abc import Sequence

import numpy as np

PREFIX = struct.Struct("<IIIQ")  # sequence number, header bytes, buffer count, buffer bytes
SEQ = struct.Struct("<I")
_LEN = struct.Struct("<Q")
MAX_HEADER = 16 << 20
# what the caller reads of a header from its worker: dtype, shape and offset per array, an error's message. Small,
# because each of its bytes may become far more memory once parsed (a string array's lengths list: one object each)
REPLY_HEADER = 1 << 20
MAX_BUFFERS = 4096


class WireError(Exception):
    """The peer closed the connection or sent a frame that breaks the protocol."""


class WireClosedError(WireError):
    """The peer closed the connection (a worker that died), as opposed to a frame that breaks the protocol."""


class WireLimitError(WireError):
    """A frame declares more bytes of arrays than the receiver accepts (IsolationLimits.output_bytes)."""

    def __init__(self, declared: int, limit: int) -> None:
        super().__init__(f"frame declares {declared} bytes of arrays, above the {limit}-byte limit")
        self.declared, self.limit = declared, limit


def send_frame(sock: socket.socket, header: bytes, buffers: Sequence, seq: int = 0) -> None:
    views = [memoryview(b).cast("B") for b in buffers]
    sizes = [v.nbytes for v in views]
    prefix = PREFIX.pack(seq, len(header), len(views), sum(sizes)) + struct.pack(f"<{len(sizes)}Q", *sizes)
    _send_all(sock, [memoryview(prefix), memoryview(header), *views])


def _send_all(sock: socket.socket, views: list[memoryview]) -> None:
    views = [v for v in views if v.nbytes]
    while views:
        # MSG_NOSIGNAL: a dead peer is an EPIPE error, never a SIGPIPE that would kill an embedding process
        # which did not ignore it (Python ignores it; a C host may not)
        try:
            sent = sock.sendmsg(views[:512], (), socket.MSG_NOSIGNAL)  # IOV_MAX is 1024 on Linux
        except BlockingIOError:  # SO_SNDTIMEO ran out (set_timeout): the peer stopped reading
            raise TimeoutError("timed out") from None
        while sent:
            if sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0


def set_timeout(sock: socket.socket, seconds: float) -> None:
    """A blocking socket whose reads and writes give up after ``seconds`` (raising TimeoutError), enforced by
    the kernel (SO_RCVTIMEO/SO_SNDTIMEO): Python's own socket timeout polls before every recv and send, a
    system call more each (measured: a tiny model's call went from about 146 to 93 us)."""
    sock.settimeout(None)
    whole = int(seconds)
    timeval = struct.pack("@ll", whole, int((seconds - whole) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def recv_frame(sock: socket.socket, max_bytes: int, max_header: int = MAX_HEADER) -> tuple[bytes, list[memoryview]]:
    """One frame; raises WireError on EOF or on sizes past the limits (a confused or hostile peer).
    Polling for the reply before sleeping was tried: on 2 busy cores it doubled a tiny model's call."""
    _, header_len, count, total = PREFIX.unpack(_recv_exact(sock, PREFIX.size))
    check_prefix(header_len, count, total, max_bytes, max_header)
    return split_body(memoryview(_recv_exact(sock, 8 * count + header_len + total)), count, header_len)


def check_prefix(header_len: int, count: int, total: int, max_bytes: int, max_header: int = MAX_HEADER) -> None:
    if header_len > max_header or count > MAX_BUFFERS:
        raise WireError(f"frame declares a {header_len}-byte header and {count} buffers")
    if total > max_bytes:
        raise WireLimitError(total, max_bytes)


def split_body(body: memoryview, count: int, header_len: int) -> tuple[bytes, list[memoryview]]:
    """A frame after its prefix: the buffers' lengths, the header, the buffers (slices of ``body``)."""
    lengths = struct.unpack_from(f"<{count}Q", body)
    total = len(body) - 8 * count - header_len
    if sum(lengths) != total:
        raise WireError(f"frame declares {total} bytes of arrays but buffers of {sum(lengths)}")
    start = 8 * count + header_len
    header = bytes(body[8 * count:start])
    buffers = []
    for n in lengths:
        buffers.append(body[start:start + n])
        start += n
    return header, buffers


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        try:
            k = sock.recv_into(view[got:], n - got)
        except BlockingIOError:  # SO_RCVTIMEO ran out (set_timeout)
            raise TimeoutError("timed out") from None
        if k == 0:
            raise WireClosedError("the peer closed the connection")
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
ARRAY_KINDS = frozenset("biufcSU")
# String tensors (LiteRT: bytes, ONNX Runtime: str) come back from the runtimes as object arrays: they travel as
# their elements' bytes, concatenated, with each element's length in the header, and are rebuilt as bytes or str.
_STRINGS = {"bytes": bytes, "str": str}


# A message of scalars ({"ok": true}, {"op": "run"}) with plain arrays: header per (message, dtypes and shapes),
# and each header's parsed and checked form. Bounded: a worker sending ever new shapes only stops the caching.
_encoded: dict[tuple, bytes] = {}
_decoded: dict[bytes, tuple[dict, list[tuple[np.dtype, tuple[int, ...], int]]]] = {}
_CACHE_MAX = 256
_SCALARS = (str, int, float, bool, type(None))


def send_json(sock: socket.socket, message: dict, arrays: Sequence[np.ndarray] = (), seq: int = 0) -> None:
    """``arrays``: the outputs; an output may also be a list of arrays (an ONNX sequence), sent as a
    'sequence' entry with an empty buffer followed by its items."""
    if all(type(a) is np.ndarray and not a.dtype.hasobject for a in arrays) \
            and all(type(v) in _SCALARS for v in message.values()):
        contiguous = [np.asarray(a, order="C") for a in arrays]
        key = (tuple(message.items()), tuple((a.dtype.str, a.shape) for a in contiguous))
        header = _encoded.get(key)
        if header is None:
            header = json.dumps(dict(message, arrays=[{"dtype": d, "shape": list(s)} for d, s in key[1]])).encode()
            if len(_encoded) < _CACHE_MAX:
                _encoded[key] = header
        send_frame(sock, header, contiguous, seq)
        return
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
    send_frame(sock, json.dumps(dict(message, arrays=described)).encode(), buffers, seq)


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
        odd = type(next(v for v in items if not isinstance(v, (bytes, str)))).__name__
        raise TypeError(f"an object array holds {odd} objects; only numeric arrays and arrays of strings or bytes "
                        "cross to or from a worker")
    encoded = [v.encode("utf-8") if isinstance(v, str) else v for v in items]
    return kind, b"".join(encoded), [len(v) for v in encoded]


def recv_json(sock: socket.socket, max_bytes: int, max_header: int = REPLY_HEADER) -> tuple[dict, list[np.ndarray]]:
    return decode_json(*recv_frame(sock, max_bytes, max_header))


def decode_json(header: bytes, buffers: list) -> tuple[dict, list[np.ndarray]]:
    """A frame's JSON header and buffers as (message, arrays), every array checked against its buffer."""
    cached = _decoded.get(header)
    if cached is not None and len(cached[1]) == len(buffers):
        message, plain = cached
        if any(len(b) != n for (_, _, n), b in zip(plain, buffers, strict=True)):
            raise WireError("malformed reply from the worker: an array does not match its buffer")
        return dict(message), [np.frombuffer(b, dtype).reshape(shape)
                               for (dtype, shape, _), b in zip(plain, buffers, strict=True)]
    message, arrays = _parse_json(header, buffers)
    if len(_decoded) < _CACHE_MAX and all(type(v) in _SCALARS for k, v in message.items() if k != "arrays") \
            and all(isinstance(a, np.ndarray) and a.dtype.kind in ARRAY_KINDS for a in arrays):
        _decoded[header] = ({k: v for k, v in message.items() if k != "arrays"},
                            [(a.dtype, a.shape, a.nbytes) for a in arrays])  # checked by _parse_json just now
    return message, arrays


def _parse_json(header: bytes, buffers: list) -> tuple[dict, list]:
    try:
        message = json.loads(header)
        described = message["arrays"]
        if not isinstance(message, dict) or len(described) != len(buffers):
            raise ValueError("array count differs from buffer count")
        arrays: list = []
        pending = 0  # items still to go into the last sequence
        for d, b in zip(described, buffers, strict=True):
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
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, OverflowError) as exc:
        # RecursionError: JSON nested past the interpreter's depth, a reply a worker can send at will
        raise WireError(f"malformed reply from the worker: {type(exc).__name__}: {str(exc)[:200]}") from None
    return message, arrays


def _array(described: dict, buffer: bytearray) -> np.ndarray:
    shape = tuple(int(d) for d in described["shape"])
    if any(d < 0 for d in shape):
        raise ValueError(f"refused array shape {shape}")
    if described["dtype"] == "object":
        return _strings(described, buffer, shape)
    dtype = np.dtype(str(described["dtype"]))
    if dtype.kind not in ARRAY_KINDS or dtype.hasobject:
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
    view, start = bytes(buffer), 0  # a copy: str/bytes elements must not share the frame's memory
    for k, n in enumerate(lengths):
        chunk = view[start:start + n]
        out[k] = chunk.decode("utf-8") if make is str else chunk
        start += n
    return out.reshape(shape)
