"""Every accelerator device of every installed runtime answers, on this machine (which has none), with
the precise reason it cannot run here: a device added later without one fails this test."""

from __future__ import annotations

import pytest

from edgeaccel.executors.registry import runtimes
from edgeaccel.loader import executor_class
from edgeaccel import probe

ACCELERATOR_KINDS = ("gpu", "npu", "tpu", "edgetpu")


def accelerator_devices():
    for cls in runtimes().values():
        for target in cls.targets:
            if target.kind in ACCELERATOR_KINDS:
                yield pytest.param(cls.runtime, target.name, id=f"{cls.runtime}:{target.name}")


@pytest.mark.parametrize("runtime, device", list(accelerator_devices()))
def test_each_accelerator_says_why_it_cannot_run_here(runtime, device):
    cls = executor_class(runtime)
    if cls.installed() is None:
        pytest.skip(f"{runtime} is not installed")
    present = probe(runtimes=False).present_devices()
    if device in present or (device == "TensorRT" and "CUDA" in present):
        pytest.skip(f"this machine has {device}: it may run here")
    available = cls.availability(device)
    assert not available
    reason = available.reason
    assert len(reason) > 40 and "not installed" not in reason
    # the reason is about this device on this machine, not a generic refusal
    assert any(word in reason for word in ("no ", "not ", "does not load", "planned")), reason
