"""The Edge TPU path of the LiteRT executor against the real ai-edge-litert delegate loader.

A delegate library built here with gcc (tests/delegate/recording_delegate.c) implements the documented
TFLite external delegate interface, claims no nodes and records its calls, so that loading, option
passing, one interpreter per Edge TPU and teardown run for real; an actual Edge TPU is not needed (and
not here). $EDGEACCEL_EDGETPU_LIBRARY points the executor at it, as a user would at their own libedgetpu.
"""

from __future__ import annotations

import ctypes.util
import threading

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS, image_input, without
from delegate import build, records
from edgeaccel import formats
from edgeaccel.errors import DeviceUnavailableError, UnsupportedModelError
from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.executors.edgetpu import LIBRARY_ENV
from edgeaccel.executors.litert import LiteRTExecutor

pytestmark = pytest.mark.shared

PLAIN = MODELS / "mobilenet_v1_0.25_128_quant.tflite"
COMPILED = MODELS / "mobilenet_v1_0.25_128_quant_edgetpu.tflite"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    try:
        return build(tmp_path_factory.mktemp("delegate"))
    except FileNotFoundError:
        pytest.skip("gcc is not installed: the test delegate library cannot be built")


@pytest.fixture
def delegate_env(library, monkeypatch):
    monkeypatch.setenv(LIBRARY_ENV, str(library))
    return library


def open_edgetpu(model_path, where, record=None, **extra):
    """The LiteRT executor on Edge TPU device ``where``; ``extra`` are delegate options."""
    opts = dict(extra)
    if record is not None:
        opts["record"] = str(record)
    options = ExecutorOptions(runtime_options={"edgetpu_options": opts})
    return LiteRTExecutor(formats.describe(model_path), where, options)


def test_plain_tflite_through_the_delegate_equals_the_cpu(delegate_env, tmp_path, labels):
    record = tmp_path / "calls.txt"
    executor = open_edgetpu(PLAIN, "EdgeTPU:usb", record)
    cpu = LiteRTExecutor(formats.describe(PLAIN), "CPU", ExecutorOptions())
    try:
        bird = image_input("bird", executor.inputs[0])
        rng = np.random.default_rng(0)
        for x in (bird, rng.integers(0, 256, bird.shape, dtype=np.uint8)):
            np.testing.assert_array_equal(executor.run([x])[0], cpu.run([x])[0])
        assert labels[int(np.argmax(executor.run([bird])[0]))] == "chickadee"
        info = executor.info
        assert info.device == "EdgeTPU:usb" and info.details["edgetpu_library"] == str(delegate_env)
        assert info.details["edgetpu_options"] == {"record": str(record), "device": "usb"}
        assert info.details["edgetpu_runtime"].endswith("RuntimeVersion(14)")
        assert records(record) == [f"create record={record} device=usb", "prepare"]
    finally:
        executor.close()
        cpu.close()
    # close() itself released the interpreter, then its delegate (no garbage collection needed)
    assert records(record)[-1] == "destroy"


@pytest.mark.parametrize("device, option", [("EdgeTPU", None), ("EdgeTPU:usb:0", "usb:0"), ("EdgeTPU:pci", "pci"),
                                            ("EdgeTPU:pci:1", "pci:1"), ("EdgeTPU:2", ":2")])
def test_device_strings_reach_the_delegate_as_libedgetpu_device_options(delegate_env, tmp_path, device, option):
    record = tmp_path / "calls.txt"
    executor = open_edgetpu(MODELS / "split_concat.tflite", device, record, Performance="High")
    executor.close()
    created = records(record)[0].split()
    assert created[0] == "create" and "Performance=High" in created
    assert [c for c in created if c.startswith("device=")] == ([f"device={option}"] if option else [])


def test_bad_device_strings_and_options_are_refused_before_loading(delegate_env):
    with pytest.raises(ValueError, match="EdgeTPU:usb:N"):
        open_edgetpu(PLAIN, "EdgeTPU:usb:first")
    with pytest.raises(ValueError, match="must not set 'device'"):
        open_edgetpu(PLAIN, "EdgeTPU", device="usb")


def test_one_interpreter_per_edge_tpu_serves_concurrent_callers(delegate_env, tmp_path):
    record = tmp_path / "calls.txt"
    executor = open_edgetpu(PLAIN, "EdgeTPU", record)
    cpu = LiteRTExecutor(formats.describe(PLAIN), "CPU", ExecutorOptions())
    rng = np.random.default_rng(1)
    inputs = [rng.integers(0, 256, (1, 128, 128, 3), dtype=np.uint8) for _ in range(8)]
    expected = [cpu.run([x])[0] for x in inputs]
    results: dict[int, np.ndarray] = {}

    def work(k: int) -> None:
        results[k] = executor.run([inputs[k]])[0]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        for k, want in enumerate(expected):
            np.testing.assert_array_equal(results[k], want)
        assert len(executor._pool) == 1 and executor.concurrency == 1
        assert [r for r in records(record) if r.startswith("create")] == [f"create record={record}"]
    finally:
        executor.close()
        cpu.close()


def test_a_delegate_that_refuses_with_a_message_passes_it_on(delegate_env):
    with pytest.raises(DeviceUnavailableError) as err:
        open_edgetpu(PLAIN, "EdgeTPU:usb", fail="message")
    first = str(err.value).splitlines()[0]
    assert "could not open USB Edge TPU (EdgeTPU:usb): recording delegate refused: fail=message" in first


@without("EdgeTPU")
def test_a_silent_refusal_is_diagnosed_instead_of_a_bare_failed_to_load(delegate_env):
    """libedgetpu returns NULL with no message when it opens no device (LiteRT then says only "Failed to
    load delegate from libedgetpu.so.1"); the error says what was checked and what is missing here."""
    with pytest.raises(DeviceUnavailableError) as err:
        open_edgetpu(PLAIN, "EdgeTPU:pci:0", fail="silent")
    text = str(err.value)
    assert text.splitlines()[0].endswith("could not open PCIe Edge TPU #0 (EdgeTPU:pci:0) and gave no reason")
    assert "[x] no PCIe/M.2 Edge TPU" in text and "Failed to load delegate" not in text
    assert "Edge TPU runtime version 14" in text  # read from the library's edgetpu_version()
    assert err.value.hint and "Edge TPU" in err.value.hint


def test_a_missing_library_is_named_with_where_it_was_looked_for(monkeypatch):
    monkeypatch.setenv(LIBRARY_ENV, "libedgetpu-not-here.so.1")
    with pytest.raises(DeviceUnavailableError) as err:
        open_edgetpu(PLAIN, "EdgeTPU")
    text = str(err.value)
    assert "libedgetpu-not-here.so.1 does not load: libedgetpu-not-here.so.1: cannot open shared object" in text
    assert "[x] libedgetpu-not-here.so.1 (the Edge TPU delegate) is not on the loader path (searched" in text


def test_a_library_that_is_no_delegate_is_named_as_such(monkeypatch):
    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to stand for a library that is not a delegate")
    monkeypatch.setenv(LIBRARY_ENV, libm)
    with pytest.raises(DeviceUnavailableError, match="is not a TFLite delegate plugin: it does not export "
                                                      "tflite_plugin_create_delegate"):
        open_edgetpu(PLAIN, "EdgeTPU")


def test_a_delegate_that_does_not_take_the_edgetpu_op_is_not_taken_for_libedgetpu(delegate_env):
    with pytest.raises(DeviceUnavailableError) as err:
        open_edgetpu(COMPILED, "EdgeTPU")
    assert "loaded but did not take the edgetpu-custom-op" in str(err.value)
    assert LIBRARY_ENV in err.value.hint


def test_the_compiled_model_on_the_cpu_keeps_its_clear_error():
    with pytest.raises(UnsupportedModelError) as err:
        LiteRTExecutor(formats.describe(COMPILED), "CPU", ExecutorOptions())
    assert "edgetpu-custom-op" in str(err.value) and "CPU twin" in err.value.hint


def test_the_executor_rejects_what_the_edge_tpu_cannot_use():
    opts = ExecutorOptions()
    assert "only the Edge TPU delegate" in LiteRTExecutor.rejects(formats.describe(COMPILED), "CPU", opts)
    assert "edgetpu_compiler" in LiteRTExecutor.rejects(formats.describe(PLAIN), "EdgeTPU", opts)
    assert LiteRTExecutor.rejects(formats.describe(COMPILED), "EdgeTPU:usb", opts) is None


# --- the CPU twin takes over, end to end through edgeaccel.load -------------------------------------

@pytest.fixture
def coral_here(tmp_path, monkeypatch):
    """The selector and the executor's availability see a Raspberry Pi 5 with a Coral USB Accelerator
    (a fake tree read by the real probe); the delegate library is whatever $EDGEACCEL_EDGETPU_LIBRARY says."""
    from edgeaccel import machine
    from edgeaccel import probe
    from edgeaccel.testing import rpi5_with_coral_usb

    rpi5_with_coral_usb(tmp_path)
    monkeypatch.setattr(machine, "_probe_here", lambda: probe(tmp_path, runtimes=False))
    real = LiteRTExecutor.availability.__func__
    monkeypatch.setattr(LiteRTExecutor, "availability",
                        classmethod(lambda cls, device=None, **kw: real(cls, device, root=tmp_path, **kw)))
    return tmp_path


def test_the_cpu_twin_takes_over_when_the_delegate_does_not_run_the_compiled_model(delegate_env, coral_here):
    with edgeaccel.load([COMPILED, PLAIN]) as model:
        assert model.executor.device == "CPU" and model.info.path == PLAIN
        (event,) = model.fallbacks
        assert event.failed == "litert:EdgeTPU" and event.replaced_by == "litert:CPU"
        assert "did not take the edgetpu-custom-op" in event.error
        assert model.run(image_input("bird", model.inputs[0]))[0].shape == (1, 1001)


def test_the_cpu_twin_takes_over_when_libedgetpu_is_missing(coral_here, monkeypatch):
    monkeypatch.setenv(LIBRARY_ENV, "libedgetpu-not-here.so.1")
    with edgeaccel.load([COMPILED, PLAIN]) as model:
        assert model.executor.device == "CPU" and model.info.path == PLAIN
        (event,) = model.fallbacks
        assert event.failed == "litert:EdgeTPU" and "libedgetpu-not-here.so.1" in event.error
        assert "not on the loader path" in event.error


def test_without_a_twin_the_compiled_model_says_why_the_edge_tpu_failed(coral_here, monkeypatch):
    monkeypatch.setenv(LIBRARY_ENV, "libedgetpu-not-here.so.1")
    with pytest.raises(DeviceUnavailableError, match="not on the loader path"):
        edgeaccel.load(COMPILED)


def test_explain_shows_why_the_ranked_edge_tpu_will_not_load(coral_here, monkeypatch, capsys):
    import argparse
    import json

    from edgeaccel.cli import explain_cmd

    monkeypatch.setenv(LIBRARY_ENV, "libedgetpu-not-here.so.1")
    args = argparse.Namespace(model=[str(COMPILED), str(PLAIN)], goal="latency", profile=None, executor=None,
                              device=None, precision=None, threads=None, calibrate=False, cache_dir=None, json=True)
    assert explain_cmd.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    first = report["ranked"][0]
    assert first["candidate"] == "litert:EdgeTPU" and first["artifact"].endswith("_edgetpu.tflite")
    assert not first["availability"]["ok"] and "not on the loader path" in first["availability"]["reason"]
    assert "libedgetpu1-std" in first["availability"]["fix"]
    assert all("availability" not in e for e in report["ranked"] if e["candidate"].endswith(":CPU"))
    args.json = False
    explain_cmd.main(args)
    assert "NOT usable: libedgetpu-not-here.so.1 (the Edge TPU delegate) is not on the loader path" in \
        capsys.readouterr().out
