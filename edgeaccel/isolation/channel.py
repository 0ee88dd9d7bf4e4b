"""A run channel between the caller and its worker: tensors in a shared-memory region, a small header on the socket.

Each channel (one per concurrent caller, see executor._Worker) owns a ``Region``: a memfd the caller creates,
sizes to the model's input and output bytes (bounded), seals against shrinking and growing and hands to the worker
with the channel's socket (SCM_RIGHTS). The file reaches nothing but itself: no path, no other memory. A call is
one ``send`` and one ``recv`` on each side:

- the caller copies the inputs into the region at 64-byte aligned offsets and sends a frame whose JSON header says
  where (dtype, shape, offset per array) with a sequence number;
- the worker views the inputs in place (no copy), runs, copies the outputs into the region after the inputs and
  answers a frame that says where, with the same sequence number;
- the caller checks every offset and size against the region before reading, then copies the outputs out (the
  worker can write the region at any time, so nothing handed to the application may stay in it).

Headers are JSON, never pickle; each distinct header is parsed and checked once per channel and kept (the region's
size cannot change, so the same bytes mean the same checked offsets); per call only the header's bytes are
looked up. Tensors that do not fit the region, strings and sequences travel through the socket as before
(wire.send_json), never silently: the caller logs it at debug level and counts it in
``executor.details["isolated"]["channel"]``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import socket
from collections.abc import Sequence

import numpy as np

from . import wire

log = logging.getLogger("edgeaccel.isolation")

ALIGN = 64  # offsets of arrays in the region: runtimes vectorise their input copies
MIN_REGION = 1 << 20  # tmpfs pages cost nothing until touched: room for a model with dynamic dimensions
MAX_REGION = 256 << 20  # the bound: larger tensors go through the socket
# Linux's; elsewhere 0, and create() refuses (the caller then uses the socket)
_SEALS = getattr(fcntl, "F_SEAL_SHRINK", 0) | getattr(fcntl, "F_SEAL_GROW", 0) | getattr(fcntl, "F_SEAL_SEAL", 0)
_SCRATCH = 64 << 10  # a channel's reused receive buffer; grown (up to wire.MAX_HEADER) for a larger header
_CACHE_MAX = 64
_MAX_DIMS = 64
_SCALARS = (str, int, float, bool, type(None))


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def region_size(declared_bytes: int) -> int:
    """The region for a model whose inputs and outputs declare ``declared_bytes`` together: that, the alignment
    slack and a page-rounded margin, at least MIN_REGION, at most MAX_REGION."""
    page = mmap.PAGESIZE
    want = -(-(declared_bytes + 64 * ALIGN) // page) * page
    return max(MIN_REGION, min(MAX_REGION, want))


class Region:
    """A shared mapping of a sealed memfd. ``create`` in the caller; ``attach`` in the worker to the fd it got."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)

    @classmethod
    def create(cls, size: int) -> Region:
        """Raises OSError where memfds or sealing are not available (the caller then uses the socket)."""
        if not _SEALS or not hasattr(os, "memfd_create"):
            raise OSError("no sealed memfds on this platform")
        fd = os.memfd_create("edgeaccel-channel", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, size)
            # the worker may write the region but never change its size: a shrunk file would make this process's
            # reads past the new end a SIGBUS, a crash the worker could cause at will
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            return cls(fd, size)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def attach(cls, fd: int) -> Region:
        try:
            return cls(fd, os.fstat(fd).st_size)
        except BaseException:
            os.close(fd)
            raise

    def view(self, dtype: np.dtype, shape: tuple[int, ...], at: int) -> np.ndarray:
        return np.ndarray(shape, dtype, buffer=self.map, offset=at)

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # an array still views it (a runtime kept an input): the mapping goes with that array
            pass
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def sealed(self) -> bool:
        return fcntl.fcntl(self.fd, fcntl.F_GET_SEALS) & _SEALS == _SEALS


class Channel:
    """One end of a run channel. ``copy_out``: arrays read from the region are copied into fresh memory (the caller:
    the worker may write the region at any time) or handed out as views of it (the worker: its caller does not
    touch the region until the reply; the views of a header are made once and kept). ``stats`` (caller only):
    where fallbacks to the socket are counted."""

    def __init__(self, sock: socket.socket, region: Region | None, max_bytes: int, copy_out: bool,
                 stats: dict | None = None, max_header: int = wire.MAX_HEADER) -> None:
        self.sock, self.region, self.max_bytes, self.copy_out = sock, region, max_bytes, copy_out
        self.max_header = max_header
        self.stats = stats
        self.seq = 0
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._plans: dict[tuple, tuple[bytearray, list[np.ndarray], int] | str] = {}
        self._headers: dict[bytes, tuple[dict, list[np.ndarray], int]] = {}  # header -> its checked arrays

    def close(self) -> None:
        self._plans.clear()
        self._headers.clear()
        self.sock.close()
        if self.region is not None:
            self.region.close()

    # -- sending ------------------------------------------------------------------------------------------------
    def send(self, message: dict, arrays: Sequence = (), start: int = 0) -> str | None:
        """One frame with sequence number ``self.seq``: the arrays in the region from offset ``start`` when they
        fit, else through the socket. Returns why the socket carried them, or None."""
        placed = self.place(message, arrays, start)
        if type(placed) is bytearray:
            self._send(placed)
            return None
        wire.send_json(self.sock, message, arrays, self.seq)
        return placed

    def place(self, message: dict, arrays: Sequence, start: int) -> bytearray | str | None:
        """Copy the arrays into the region; returns the frame that says where, or why they cannot go there (None:
        there are none)."""
        if not arrays:
            return None
        try:
            key = (tuple(message.items()), start, tuple([(type(a), a.dtype, a.shape) for a in arrays]))
        except AttributeError:  # a list, a string: not an array
            return "strings or sequences"
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(message, arrays, start)
            if len(self._plans) < _CACHE_MAX:
                self._plans[key] = plan
        if type(plan) is not tuple:
            return plan
        frame, targets, _ = plan
        for target, a in zip(targets, arrays, strict=True):
            target[...] = a  # same dtype and shape (the key): a plain copy, 3x cheaper than np.copyto
        wire.SEQ.pack_into(frame, 0, self.seq)
        return frame

    def _plan(self, message: dict, arrays: Sequence[np.ndarray], start: int) -> tuple | str:
        """The frame and the region's target views for arrays of these dtypes and shapes, or why they go by socket."""
        if any(type(a) is not np.ndarray or a.dtype.hasobject for a in arrays) \
                or not all(type(v) in _SCALARS for v in message.values()):
            return "strings or sequences"
        total = sum(a.nbytes for a in arrays)
        if self.region is None:
            return f"{total} bytes of arrays, and this channel has no shared region"
        described, targets, at = [], [], _aligned(start)
        for a in arrays:
            if at + a.nbytes > self.region.size:
                return (f"{total} bytes of arrays from offset {start} do not fit the {self.region.size}-byte shared "
                        "region")
            described.append({"dtype": a.dtype.str, "shape": list(a.shape), "at": at})
            targets.append(self.region.view(a.dtype, a.shape, at))
            at = _aligned(at + a.nbytes)
        header = json.dumps(dict(message, arrays=described)).encode()
        return bytearray(wire.PREFIX.pack(0, len(header), 0, 0) + header), targets, at

    def _send(self, frame: bytearray) -> None:
        try:
            self.sock.sendall(frame)
        except BlockingIOError:  # SO_SNDTIMEO ran out (wire.set_timeout): the peer stopped reading
            raise TimeoutError("timed out") from None

    # -- receiving ----------------------------------------------------------------------------------------------
    def recv(self, expect_seq: int | None = None) -> tuple[dict, list, int]:
        """One frame: (message, arrays, end of its arrays in the region). ``expect_seq``: the caller's check that
        the reply answers its request. Raises wire.WireError on anything malformed, naming what."""
        view = self._view
        got = self._recv_into(view)
        while got < wire.PREFIX.size:
            got += self._recv_into(view[got:])
        seq, header_len, count, total = wire.PREFIX.unpack_from(view)
        if expect_seq is not None and seq != expect_seq:
            raise wire.WireError(f"a reply numbered {seq} to request {expect_seq}")
        self.seq = seq  # the worker answers with its request's number
        wire.check_prefix(header_len, count, total, self.max_bytes, self.max_header)
        need = wire.PREFIX.size + 8 * count + header_len + total
        if count:
            return self._recv_socket_frame(got, need, count, header_len)
        if total:
            raise wire.WireError(f"frame declares {total} bytes of arrays but no buffers")
        if need > len(view):  # a header for very many arrays: a larger buffer from now on
            self._scratch = bytearray(need)
            self._scratch[:got] = view[:got]
            self._view = view = memoryview(self._scratch)
        while got < need:
            got += self._recv_into(view[got:])
        if got != need:
            raise wire.WireError(f"{got - need} bytes beyond the frame (a second frame before a request)")
        header = bytes(view[wire.PREFIX.size:need])
        cached = self._headers.get(header)
        if cached is None:
            cached = self._parse(header)
            if len(self._headers) < _CACHE_MAX:
                self._headers[header] = cached
        message, views, end = cached
        if self.copy_out:
            return message, [v.copy() for v in views], end
        return message, list(views), end

    def _recv_into(self, view: memoryview) -> int:
        try:
            got = self.sock.recv_into(view)
        except BlockingIOError:  # SO_RCVTIMEO ran out (wire.set_timeout)
            raise TimeoutError("timed out") from None
        if got == 0:
            raise wire.WireClosedError("the peer closed the connection")
        return got

    def _recv_socket_frame(self, got: int, need: int, count: int, header_len: int) -> tuple[dict, list, int]:
        """A frame with arrays in it (too large for the region, strings, sequences): read into fresh memory."""
        if got > need:
            raise wire.WireError(f"{got - need} bytes beyond the frame (a second frame before a request)")
        body = bytearray(need - wire.PREFIX.size)
        body[:got - wire.PREFIX.size] = self._view[wire.PREFIX.size:got]
        body_view = memoryview(body)
        filled = got - wire.PREFIX.size
        while filled < len(body):
            filled += self._recv_into(body_view[filled:])
        header, buffers = wire.split_body(body_view, count, header_len)
        message, arrays = wire.decode_json(header, buffers)
        if arrays and self.stats is not None:
            if all(type(a) is np.ndarray and not a.dtype.hasobject for a in arrays):
                size = self.region.size if self.region is not None else 0
                why = f"outputs of {sum(len(b) for b in buffers)} bytes (shared region: {size} bytes)"
            else:
                why = "outputs with strings or sequences"
            self.stats["socket_outputs"] = self.stats.get("socket_outputs", 0) + 1
            self.stats["last_fallback"] = why
            log.debug("isolated run: %s came through the socket", why)
        return message, arrays, 0

    def _parse(self, header: bytes) -> tuple[dict, list[np.ndarray], int]:
        """A region frame's header, every offset and size checked against the region."""
        try:
            message = json.loads(header)
            if not isinstance(message, dict):
                raise ValueError("the header is not an object")
            described = message.pop("arrays", [])
            if not isinstance(described, list) or len(described) > wire.MAX_BUFFERS:
                raise ValueError("'arrays' is not a list of at most 4096 entries")
            if not all(type(v) in _SCALARS for v in message.values()):
                raise ValueError("a header field that is not a scalar")
            entries, end, total = [], 0, 0
            for i, d in enumerate(described):
                dtype, shape, at, nbytes = _entry(d)
                if self.region is None:
                    raise ValueError("arrays in a shared region this channel does not have")
                if at + nbytes > self.region.size:
                    raise ValueError(f"array {i} ({dtype} {list(shape)}: {nbytes} bytes at offset {at}) reaches "
                                     f"past the {self.region.size}-byte shared region")
                entries.append((dtype, shape, at))
                end, total = max(end, _aligned(at + nbytes)), total + nbytes
            views = [self.region.view(*e) for e in entries]  # numpy's own checks too (a dimension past intp)
        except Exception as exc:  # whatever the worker's header makes json or numpy raise (a warning as error too)
            raise wire.WireError(f"malformed frame: {type(exc).__name__}: {exc}") from None
        if total > self.max_bytes:
            raise wire.WireLimitError(total, self.max_bytes)
        return message, views, end


def _entry(described) -> tuple[np.dtype, tuple[int, ...], int, int]:
    """One array's dtype, shape, offset and size from its JSON, refused unless every part is plain."""
    if not isinstance(described, dict):
        raise ValueError("an array entry that is not an object")
    shape, at = described["shape"], described["at"]
    if not isinstance(shape, list) or len(shape) > _MAX_DIMS or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"refused array shape {str(shape)[:80]}")
    if type(at) is not int or at < 0:
        raise ValueError(f"refused array offset {str(at)[:40]}")
    dtype = np.dtype(str(described["dtype"]))
    if dtype.kind not in wire.ARRAY_KINDS or dtype.hasobject or not dtype.itemsize:
        # itemsize 0 ("S0"): any count of elements in 0 bytes, and numpy's copy of them allocates one byte each
        raise ValueError(f"refused array dtype {dtype} (itemsize {dtype.itemsize})")
    count = 1
    for n in shape:
        count *= n
    return dtype, tuple(shape), at, count * dtype.itemsize
