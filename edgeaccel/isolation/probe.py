"""The test hook (IsolationLimits(probe=SandboxProbe(...))): inside a sandboxed worker, attempt what a model
that took over its runtime would try, and report what happened. Never runs unless a caller asks for it.

Each outcome is {"action", "outcome": "refused" | "allowed", "detail"}. Writing into the worker's own temp
folder is attempted too and must be allowed: it shows the sandbox refuses selectively, not everything.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
from pathlib import Path


def run(files: list[str], tcp_port: int, unix_socket: str, model_folder: str, temp_folder: str,
        address_space: int, open_files: int) -> list[dict]:
    marker = f"edgeaccel-probe-{os.getpid()}"
    attempts = [("read /etc/passwd", lambda: _read("/etc/passwd"))]
    for path in files:
        attempts.append((f"read {path}", lambda p=path: _read(p)))
        attempts.append((f"write beside {path}", lambda p=path: _write(Path(p).parent / marker)))
    attempts += [
        ("write /tmp", lambda: _write(Path("/tmp") / marker)),
        ("write into the model's folder", lambda: _write(Path(model_folder) / marker)),
        ("write into its own temp folder", lambda: _write(Path(temp_folder) / marker)),
        (f"connect to 127.0.0.1:{tcp_port}", lambda: _connect(tcp_port)),
        *([(f"connect to {unix_socket}", lambda: _connect_unix(unix_socket))] if unix_socket else []),
        ("start /bin/sh", _shell),
        ("execve /bin/sh", _exec),
        ("ptrace its caller", _ptrace_parent),
        ("read its caller's memory", _read_parent_memory),
        ("signal its caller", lambda: os.kill(os.getppid(), 0)),
        ("allocate past its address-space limit", lambda: _allocate(address_space)),
        ("open more files than its limit", lambda: _open_many(open_files)),
    ]
    results = []
    for action, attempt in attempts:
        try:
            detail = attempt()
            outcome = "allowed"
        except (OSError, MemoryError, subprocess.SubprocessError) as exc:
            detail, outcome = f"{type(exc).__name__}: {exc}", "refused"
        results.append({"action": action, "outcome": outcome, "detail": str(detail)[:200]})
    return results


def _read(path: str) -> str:
    with open(path, "rb") as handle:
        return f"read {len(handle.read(64))} bytes"


def _write(path: Path) -> str:
    with open(path, "w") as handle:
        handle.write("written by a sandboxed worker\n")
    return f"wrote {path}"


def _connect(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        return "connected"


def _connect_unix(path: str) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect(path)
        return "connected"


def _shell() -> str:
    out = subprocess.run(["/bin/sh", "-c", "echo started"], capture_output=True, timeout=5)
    return f"exit {out.returncode}: {out.stdout!r}"


def _exec() -> str:
    # An argument longer than the kernel's MAX_ARG_STRLEN (128 KiB): without the sandbox execve fails with E2BIG
    # before the point of no return, so the probe never replaces the worker; seccomp refuses it (EPERM) earlier.
    os.execv("/bin/sh", ["sh", "-c", "x" * (256 << 10)])
    return "unreachable"


def _ptrace_parent() -> str:
    # PTRACE_PEEKDATA without attaching: never stops the caller (an attach that worked would, and hang the test
    # run). Unsandboxed the kernel answers ESRCH (not traced); seccomp answers EPERM before it looks.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    ctypes.set_errno(0)
    libc.ptrace(2, os.getppid(), None, None)
    code = ctypes.get_errno()
    if code:
        raise OSError(code, os.strerror(code))
    return "peeked"


def _read_parent_memory() -> str:
    """process_vm_readv of 8 bytes of the caller's first mapping: how a taken-over worker would read its keys."""
    parent, address = os.getppid(), 0x400000
    try:
        with open(f"/proc/{parent}/maps") as maps:
            address = int(maps.readline().split("-")[0], 16)
    except OSError:
        pass  # sandboxed: /proc/<caller> is closed; try the usual address of an executable's first page
    libc = ctypes.CDLL(None, use_errno=True)
    libc.process_vm_readv.restype = ctypes.c_ssize_t

    class IoVec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    buf = ctypes.create_string_buffer(8)
    local, remote = IoVec(ctypes.addressof(buf), 8), IoVec(address, 8)
    got = libc.process_vm_readv(parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    if got < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return f"read {got} bytes of its caller's memory"


def _allocate(address_space: int) -> str:
    if not address_space:
        raise MemoryError("no address-space limit on this worker's device: its resident limit kills it instead")
    block = bytearray(address_space + (64 << 20))
    return f"allocated {len(block)} bytes"


def _open_many(limit: int) -> str:
    handles = []
    try:
        for _ in range(limit + 1 if limit else 4096):
            handles.append(open("/dev/null", "rb"))
        return f"opened {len(handles)} files"
    finally:
        for handle in handles:
            handle.close()


# -- a worker that lies on its channel (SandboxProbe.bad_reply) -------------------------------------------------
def _frame(channel, arrays: list[dict], seq_offset: int = 0, header: bytes | None = None) -> bytes:
    """A reply frame whose header places ``arrays`` in the region (or says ``header``), numbered as asked."""
    from . import wire

    header = header if header is not None else json.dumps({"ok": True, "arrays": arrays}).encode()
    return wire.PREFIX.pack(channel.seq + seq_offset, len(header), 0, 0) + header


def _resize_then_answer(channel, outputs: list, end: int, size: int) -> None:
    """Lay the outputs out in the region, try to shrink or grow it, then send the reply. The caller reads the
    outputs from its mapping after the resize: past a shrunk file's end that read would be a SIGBUS, killing the
    caller; the seals refuse the resize."""
    frame = channel.place({"ok": True}, outputs, end)
    try:
        os.ftruncate(channel.region.fd, size)
    except OSError:
        pass
    channel.sock.sendall(frame)


def _size(channel) -> int:
    return channel.region.size if channel.region is not None else 1 << 20


# kind -> (channel, outputs, end of the inputs in the region) -> sends it
BAD_REPLIES = {
    "offset past the region": lambda c, o, e: c.sock.sendall(
        _frame(c, [{"dtype": "|u1", "shape": [64], "at": _size(c) - 8}])),
    "negative offset": lambda c, o, e: c.sock.sendall(_frame(c, [{"dtype": "|u1", "shape": [8], "at": -64}])),
    "size past the region": lambda c, o, e: c.sock.sendall(
        _frame(c, [{"dtype": "<f8", "shape": [_size(c) // 8 + 1], "at": 0}])),
    "a dimension numpy cannot hold": lambda c, o, e: c.sock.sendall(
        _frame(c, [{"dtype": "<f4", "shape": [0, 1 << 70], "at": 0}])),
    "an object array": lambda c, o, e: c.sock.sendall(_frame(c, [{"dtype": "|O", "shape": [1], "at": 0}])),
    "a dtype of no size": lambda c, o, e: c.sock.sendall(_frame(c, [{"dtype": "|S0", "shape": [1 << 62], "at": 0}])),
    "a wrong sequence number": lambda c, o, e: c.sock.sendall(_frame(c, [], seq_offset=7)),
    "a header that is not JSON": lambda c, o, e: c.sock.sendall(_frame(c, [], header=b"{\xff}\x00[")),
    "a garbage prefix": lambda c, o, e: c.sock.sendall(_frame(c, [])[:4] + b"\xff" * 16),
    "two frames at once": lambda c, o, e: c.sock.sendall(_frame(c, []) * 2),
    "shrink the region": lambda c, o, e: _resize_then_answer(c, o, e, 0),
    "grow the region": lambda c, o, e: _resize_then_answer(c, o, e, _size(c) * 2),
}


def send_bad_reply(kind: str, channel, outputs: list, end: int) -> None:
    try:
        BAD_REPLIES[kind](channel, outputs, end)
    except OSError:  # the caller already hung up on an earlier lie
        pass
