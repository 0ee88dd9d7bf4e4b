"""The run channel of isolated workers (channel.py): tensors through a sealed shared-memory region, a small JSON
header and a sequence number on the socket.

The worker is untrusted: through the test hook SandboxProbe(bad_reply=...) a real worker answers with each kind of
malformed reply a worker taken over by its model could send (offsets and sizes past the region, a wrong sequence
number, garbage), and the caller must refuse it with a clear error and stop that worker, never read past the
region or crash. The worker also tries to shrink and grow the region under its caller (which would make the
caller's reads a SIGBUS): the seals refuse it and the answers stay right.
"""

from __future__ import annotations

import logging
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS
from edgeaccel import IsolationLimits
from edgeaccel.errors import WorkerCrashedError
from edgeaccel.isolation import SandboxProbe
from edgeaccel.isolation import channel as channels
from edgeaccel.isolation.probe import BAD_REPLIES

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: worker processes

TINY = MODELS / "split_concat.tflite"


def tiny_inputs(model, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, s.shape, dtype=np.uint8) for s in model.inputs]


def test_tensors_travel_through_a_sealed_shared_region():
    with edgeaccel.load(TINY, strict=True) as direct, edgeaccel.load(TINY, strict=True, isolate=True) as isolated:
        for seed in range(3):
            x = tiny_inputs(direct, seed)
            for got, want in zip(isolated.run(x), direct.run(x), strict=True):
                np.testing.assert_array_equal(got, want)
        got = isolated.run(x)
        got[0][...] = 0  # outputs are the caller's own memory: changing one changes nothing in the next call
        np.testing.assert_array_equal(isolated.run(x)[0], direct.run(x)[0])
        channel = isolated.executor.details["isolated"]["channel"]
        assert channel["transport"] == "shared memory" and channel["region_bytes"] >= channels.MIN_REGION
        assert channel["socket_inputs"] == channel["socket_outputs"] == 0 and channel["last_fallback"] is None
    region = channels.Region.create(channels.MIN_REGION)
    try:
        assert region.sealed()
        for size in (0, 2 * region.size):
            with pytest.raises(PermissionError):
                os.ftruncate(region.fd, size)
    finally:
        region.close()


def test_tensors_too_large_for_the_region_go_through_the_socket_visibly(tmp_path, monkeypatch, caplog):
    """A region smaller than the tensors (the bound, made small here): the socket carries them, the answers stay
    right, and it is said: a debug line and counts in executor.details."""
    from test_isolation import tile_model

    monkeypatch.setattr(channels, "MIN_REGION", 4096)
    monkeypatch.setattr(channels, "MAX_REGION", 4096)
    caplog.set_level(logging.DEBUG, logger="edgeaccel.isolation")
    small_input = MODELS / "mobilenet_v1_0.25_128_quant.tflite"  # 49 KB of input, 1001 bytes of output
    with edgeaccel.load(small_input, strict=True) as direct, \
            edgeaccel.load(small_input, strict=True, isolate=True) as isolated:
        x = [np.random.default_rng(1).integers(0, 256, direct.inputs[0].shape, dtype=np.uint8)]
        np.testing.assert_array_equal(isolated.run(x)[0], direct.run(x)[0])
        channel = isolated.executor.details["isolated"]["channel"]
        assert channel["region_bytes"] == 4096 and channel["socket_inputs"] == 1 and channel["socket_outputs"] == 0
        assert "49152 bytes of arrays from offset 0 do not fit the 4096-byte shared region" in channel["last_fallback"]
    tile = tile_model(tmp_path / "tile.tflite", 10000)  # 4 bytes in, 40 KB out
    with edgeaccel.load(tile, strict=True, isolate=True) as isolated:
        out = isolated.run(np.ones([1], np.float32))[0]
        assert out.shape == (10000,) and (out == 1).all()
        channel = isolated.executor.details["isolated"]["channel"]
        assert channel["socket_inputs"] == 0 and channel["socket_outputs"] == 1
        assert "outputs of 40000 bytes (shared region: 4096 bytes)" in channel["last_fallback"]
    said = [r.getMessage() for r in caplog.records if "socket" in r.getMessage()]
    assert any("do not fit" in m for m in said) and any("outputs of 40000 bytes" in m for m in said), said


LIES = {
    "offset past the region": "reaches past the",
    "negative offset": "refused array offset -64",
    "size past the region": "reaches past the",
    "a dimension numpy cannot hold": "malformed frame",
    "an object array": "refused array dtype object",
    "a dtype of no size": "refused array dtype |S0 (itemsize 0)",
    "a wrong sequence number": "a reply numbered",
    "a header that is not JSON": "malformed frame",
    "a garbage prefix": "byte header and",
    "two frames at once": "beyond the frame",
}


def test_every_kind_of_lie_is_tested():
    assert set(LIES) | {"shrink the region", "grow the region"} == set(BAD_REPLIES)
    with pytest.raises(ValueError, match="bad_reply must be one of 'offset past the region'"):
        SandboxProbe(bad_reply="offset past the regoin")


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_worker_that_lies_on_its_channel_is_refused_and_stopped(lie):
    limits = IsolationLimits(probe=SandboxProbe(bad_reply=lie))
    with edgeaccel.load(TINY, strict=True, isolate=limits) as model:
        pid = model.executor.details["isolated"]["pid"]
        with pytest.raises(WorkerCrashedError) as err:
            model.run(tiny_inputs(model))
        assert "malformed reply" in err.value.message and LIES[lie] in err.value.message, err.value.message
        assert "taken over" in err.value.hint and "inputs are unchanged" in err.value.hint
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # stopped, and reaped
        with pytest.raises(WorkerCrashedError, match="malformed reply"):  # the next request: a new worker (lying too)
            model.run(tiny_inputs(model))
        assert model.executor.details["isolated"]["starts"] == 2


@pytest.mark.parametrize("lie", ["shrink the region", "grow the region"])
def test_a_worker_cannot_resize_the_region_under_its_caller(lie):
    """Unsealed, a shrunk region would make this process's read of the outputs a SIGBUS (this test would die)."""
    with edgeaccel.load(TINY, strict=True) as direct, \
            edgeaccel.load(TINY, strict=True, isolate=IsolationLimits(probe=SandboxProbe(bad_reply=lie))) as model:
        pid = model.executor.details["isolated"]["pid"]
        for seed in range(2):
            x = tiny_inputs(model, seed)
            for got, want in zip(model.run(x), direct.run(x), strict=True):
                np.testing.assert_array_equal(got, want)
        assert model.executor.details["isolated"]["pid"] == pid
        assert model.executor.details["isolated"]["channel"]["region_bytes"] == channels.region_size(0)


CALLER_WITHOUT_MEMFD = textwrap.dedent("""
    import ctypes, json, struct, sys
    import numpy as np
    import edgeaccel

    # the caller runs under a seccomp filter that refuses memfd_create() (x86_64: nr 319) with EPERM
    libc = ctypes.CDLL(None, use_errno=True)
    code = [(0x20, 0, 0, 0), (0x15, 0, 1, 319), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]
    program = ctypes.create_string_buffer(b"".join(struct.pack("<HBBI", *c) for c in code))
    fprog = ctypes.create_string_buffer(struct.pack("<HxxxxxxQ", len(code), ctypes.addressof(program)))
    assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, fprog, 0, 0) == 0
    with edgeaccel.load(sys.argv[1], strict=True) as direct, \\
            edgeaccel.load(sys.argv[1], strict=True, isolate=True) as isolated:
        x = [(np.arange(np.prod(s.shape)) % 251).astype(np.uint8).reshape(s.shape) for s in direct.inputs]
        same = all((g == w).all() for g, w in zip(isolated.run(x), direct.run(x)))
        print(json.dumps({"same": same, "channel": isolated.executor.details["isolated"]["channel"]}))
""")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the caller's filter is written for x86_64")
def test_without_memfds_the_socket_carries_the_tensors_and_says_why():
    """A caller that may not make a memfd (an old kernel, a container's filter) still runs isolated models."""
    import json

    out = subprocess.run([sys.executable, "-c", CALLER_WITHOUT_MEMFD, str(TINY)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["same"] is True
    channel = result["channel"]
    assert channel["transport"] == "socket" and channel["region_bytes"] == 0
    assert "memfd_create or sealing failed" in channel["why"] and "Operation not permitted" in channel["why"]
    assert channel["socket_inputs"] == channel["socket_outputs"] == 1


def test_a_header_for_very_many_arrays_still_uses_the_region():
    """Two ends of a channel in this process (a real memfd and socket pair): 2000 arrays make a header larger than
    the channel's receive buffer, which grows; the arrays still travel through the region, in both directions."""
    import socket

    a, b = socket.socketpair()
    caller_region = channels.Region.create(4 << 20)
    caller = channels.Channel(a, caller_region, 1 << 30, copy_out=True, stats={})
    worker = channels.Channel(b, channels.Region.attach(os.dup(caller_region.fd)), 1 << 62, copy_out=False)
    try:
        arrays = [np.full((3,), i, np.int32) for i in range(2000)]
        caller.seq = 5
        assert caller.send({"op": "run"}, arrays) is None  # None: not through the socket
        _, got, end = worker.recv()
        assert len(got) == 2000 and all((g == x).all() for g, x in zip(got, arrays, strict=True))
        assert worker.send({"ok": True}, got[::-1], start=end) is None
        message, back, _ = caller.recv(5)
        assert message == {"ok": True} and all((o == x).all() for o, x in zip(back, arrays[::-1], strict=True))
    finally:
        caller.close()
        worker.close()
