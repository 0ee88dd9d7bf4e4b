"""The selector is a pure function: table-driven tests on described models, with no runtime involved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgeaccel.executors.base import ExecutorOptions
from edgeaccel.modelinfo import Format, ModelInfo, TensorSpec
from edgeaccel.profiles.types import AcceleratorSpec, Profile
from edgeaccel.selection.selector import MachineFacts, Measurement, rank
from table_executors import table

SPEC = (TensorSpec("x", (1, 8, 8, 3), np.dtype(np.uint8)),)


def artifact(name: str, fmt: Format, dynamic: bool = False) -> ModelInfo:
    shape = (1, None, None, 3) if dynamic else (1, 8, 8, 3)
    return ModelInfo(Path(name), fmt, (TensorSpec("x", shape, np.dtype(np.uint8)),), SPEC, digest=name * 4)


RUNTIMES = table(
    {"name": "litert", "formats": ["tflite"], "devices": [{"name": "CPU", "kind": "cpu"}], "preference": 10},
    {"name": "edgetpu", "formats": ["edgetpu-tflite"], "devices": [{"name": "EdgeTPU", "kind": "edgetpu"}],
     "preference": 5},
    {"name": "onnxruntime", "formats": ["onnx"], "extra": "onnx",
     "devices": [{"name": "CPU", "kind": "cpu"}, {"name": "CUDA", "kind": "gpu", "precisions": ("f16",)}],
     "preference": 10},
    {"name": "openvino", "formats": ["openvino-ir", "onnx", "tflite"], "native_formats": frozenset({Format.OPENVINO_IR}),
     "devices": [{"name": "CPU", "kind": "cpu", "precisions": ("bf16",),
                  "needs_cpu_flags": {"bf16": ("avx512_bf16", "amx_bf16")}},
                 {"name": "NPU", "kind": "npu", "default_precision": "f16", "precisions": ("f16",)},
                 {"name": "AUTO", "kind": "auto"}],
     "preference": 20},
)
ALL_INSTALLED = {"litert": "2.3", "edgetpu": "2.3", "onnxruntime": "1.31", "openvino": "2026.4"}


def no_reject(runtime, model, device, options):
    return "NPU needs static shapes" if device == "NPU" and model.is_dynamic else None


def names(ranking):
    return [f"{c.name}|{c.artifact.path.name}" for c in ranking.candidates]


CASES = [
    # (id, artifacts, devices present, cpu flags, expected ranked names)
    ("tflite on a plain CPU", [artifact("m.tflite", Format.TFLITE)], {"CPU"}, set(),
     ["litert:CPU|m.tflite", "openvino:CPU|m.tflite"]),
    ("onnx prefers the native runtime", [artifact("m.onnx", Format.ONNX)], {"CPU"}, set(),
     ["onnxruntime:CPU|m.onnx", "openvino:CPU|m.onnx"]),
    ("edgetpu twin set without an Edge TPU: the CPU twin", [artifact("m_edgetpu.tflite", Format.EDGETPU_TFLITE),
                                                            artifact("m.tflite", Format.TFLITE)], {"CPU"}, set(),
     ["litert:CPU|m.tflite", "openvino:CPU|m.tflite"]),
    ("edgetpu twin set with an Edge TPU: the Edge TPU first", [artifact("m_edgetpu.tflite", Format.EDGETPU_TFLITE),
                                                               artifact("m.tflite", Format.TFLITE)],
     {"CPU", "EdgeTPU"}, set(), ["edgetpu:EdgeTPU|m_edgetpu.tflite", "litert:CPU|m.tflite", "openvino:CPU|m.tflite"]),
    ("a CUDA GPU before the CPU", [artifact("m.onnx", Format.ONNX)], {"CPU", "CUDA"}, set(),
     ["onnxruntime:CUDA|m.onnx", "onnxruntime:CPU|m.onnx", "openvino:CPU|m.onnx"]),
    ("NPU refuses a dynamic model", [artifact("m.xml", Format.OPENVINO_IR, dynamic=True)], {"CPU", "NPU"}, set(),
     ["openvino:CPU|m.xml"]),
    ("NPU takes a static model", [artifact("m.xml", Format.OPENVINO_IR)], {"CPU", "NPU"}, set(),
     ["openvino:NPU@f16|m.xml", "openvino:CPU|m.xml"]),  # the NPU computes in f16: its name says so
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_rules_ranking(case):
    _, artifacts, devices, flags, expected = case
    facts = MachineFacts(ALL_INSTALLED, frozenset(devices), frozenset(flags))
    ranking = rank(artifacts, RUNTIMES, facts, no_reject, ExecutorOptions())
    assert names(ranking) == expected
    for c in ranking.candidates:
        assert c.reason


def test_every_rejection_keeps_its_reason():
    facts = MachineFacts({**ALL_INSTALLED, "onnxruntime": None}, frozenset({"CPU"}))
    ranking = rank([artifact("m_edgetpu.tflite", Format.EDGETPU_TFLITE), artifact("m.onnx", Format.ONNX)],
                   RUNTIMES, facts, no_reject, ExecutorOptions())
    reasons = {(r.name, r.artifact.path.name): (r.reason, r.fix) for r in ranking.rejected}
    assert "no EdgeTPU device" in reasons[("edgetpu:EdgeTPU", "m_edgetpu.tflite")][0]
    assert "edgetpu-custom-op" in reasons[("litert:CPU", "m_edgetpu.tflite")][0]
    assert reasons[("onnxruntime:CPU", "m.onnx")] == ("onnxruntime is not installed", "pip install 'edgeaccel[onnx]'")
    assert "meta-device" in reasons[("openvino:AUTO", "m.onnx")][0]
    assert names(ranking) == ["openvino:CPU|m.onnx"]


def test_bf16_needs_calibration_and_a_cpu_that_has_it():
    m = artifact("m.tflite", Format.TFLITE)
    without = rank([m], RUNTIMES, MachineFacts(ALL_INSTALLED), no_reject, ExecutorOptions())
    assert not any("bf16" in r.name for r in without.rejected)
    facts = MachineFacts(ALL_INSTALLED, cpu_flags=frozenset({"avx512_bf16"}))
    ranking = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions())
    assert [c.name for c in ranking.untested] == ["openvino:CPU@bf16"]
    assert any(r.name == "openvino:CPU@bf16" and "calibration" in r.reason for r in ranking.rejected)
    assert "openvino:CPU@bf16" not in [c.name for c in ranking.candidates]
    asked = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions(precision="bf16"))
    assert [c.name for c in asked.candidates] == ["litert:CPU@bf16", "openvino:CPU@bf16"]


def test_measurements_override_rules_and_refuse_inaccurate_candidates():
    m = artifact("m.tflite", Format.TFLITE)
    facts = MachineFacts(ALL_INSTALLED, cpu_flags=frozenset({"avx512_bf16"}))
    key = lambda name: f"{m.digest[:16]}/{name}"  # noqa: E731
    measured = {
        key("litert:CPU"): Measurement(key("litert:CPU"), 4.0, runs=50, reason="the reference"),
        key("openvino:CPU"): Measurement(key("openvino:CPU"), 3.0, runs=50),
        key("openvino:CPU@bf16"): Measurement(key("openvino:CPU@bf16"), 1.0, runs=50, eligible=False,
                                              reason="top-1 changed"),
    }
    ranking = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions(), measurements=measured)
    assert [c.name for c in ranking.candidates] == ["openvino:CPU", "litert:CPU"]
    assert "measured p50 3.000 ms" in ranking.candidates[0].reason
    assert any(r.name == "openvino:CPU@bf16" and "top-1 changed" in r.reason for r in ranking.rejected)


def test_profile_preference_and_efficiency_goal():
    profile = Profile("box", "a box", (AcceleratorSpec("CPU", "cpu", "cpu", typical_power_w=10.0),
                                       AcceleratorSpec("NPU", "npu", "npu", typical_power_w=1.0)),
                      preference={"latency": ("CPU", "NPU"), "efficiency": ("NPU", "CPU")},
                      runtimes={"CPU": ("openvino", "litert")})
    m = artifact("m.tflite", Format.TFLITE)
    facts = MachineFacts(ALL_INSTALLED, frozenset({"CPU", "NPU"}))
    latency = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions(), profile=profile)
    # native format beats the profile's runtime order; the profile orders devices
    assert names(latency) == ["litert:CPU|m.tflite", "openvino:CPU|m.tflite", "openvino:NPU@f16|m.tflite"]
    eff = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions(), profile=profile, goal="efficiency")
    assert names(eff)[0] == "openvino:NPU@f16|m.tflite"
    key = lambda name: f"{m.digest[:16]}/{name}"  # noqa: E731
    measured = {key("litert:CPU"): Measurement(key("litert:CPU"), 2.0, runs=9),
                key("openvino:NPU@f16"): Measurement(key("openvino:NPU@f16"), 5.0, runs=9)}
    eff_measured = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions(), profile=profile, goal="efficiency",
                        measurements=measured)
    assert names(eff_measured)[0] == "openvino:NPU@f16|m.tflite"  # 5 mJ against 20 mJ
    assert "estimated" in eff_measured.candidates[0].reason
    lat_measured = rank([m], RUNTIMES, facts, no_reject, ExecutorOptions(), profile=profile, measurements=measured)
    assert names(lat_measured)[0] == "litert:CPU|m.tflite"


def test_pinning_keeps_only_the_pinned_candidate():
    facts = MachineFacts(ALL_INSTALLED, frozenset({"CPU"}))
    ranking = rank([artifact("m.onnx", Format.ONNX)], RUNTIMES, facts, no_reject, ExecutorOptions(),
                   executor="openvino", device="AUTO")
    assert names(ranking) == ["openvino:AUTO|m.onnx"]
    assert "pinned" in ranking.candidates[0].reason


def test_unknown_goal_is_refused():
    with pytest.raises(ValueError, match="goal"):
        rank([], RUNTIMES, MachineFacts(ALL_INSTALLED), no_reject, ExecutorOptions(), goal="speed")


def test_efficiency_compares_energy_with_energy():
    """The CPU at 5 ms must not outrank an Edge TPU at 3 ms x 2 W = 6 mJ by comparing ms with mJ: the CPU's
    energy is estimated (busy cores x CPU_CORE_W) and said so; a device with no energy figure ranks after."""
    from edgeaccel.selection.selector import CPU_CORE_W

    profile = Profile("pi", "a pi", (AcceleratorSpec("EdgeTPU", "edgetpu", "tpu", typical_power_w=2.0),
                                     AcceleratorSpec("CPU", "cpu", "cpu")),
                      preference={"latency": ("EdgeTPU", "CPU"), "efficiency": ("EdgeTPU", "CPU")})
    tpu, cpu = artifact("m_edgetpu.tflite", Format.EDGETPU_TFLITE), artifact("m.tflite", Format.TFLITE)
    facts = MachineFacts(ALL_INSTALLED, frozenset({"CPU", "EdgeTPU"}))
    measured = {f"{tpu.digest[:16]}/edgetpu:EdgeTPU": Measurement(f"{tpu.digest[:16]}/edgetpu:EdgeTPU", 3.0, runs=9),
                f"{cpu.digest[:16]}/litert:CPU": Measurement(f"{cpu.digest[:16]}/litert:CPU", 5.0, runs=9)}
    eff = rank([tpu, cpu], RUNTIMES, facts, no_reject, ExecutorOptions(threads=4), profile=profile,
               goal="efficiency", measurements=measured)
    assert names(eff)[0] == "edgetpu:EdgeTPU|m_edgetpu.tflite"
    cpu_reason = next(c.reason for c in eff.candidates if c.name == "litert:CPU")
    assert f"{5.0 * 4 * CPU_CORE_W:.2f} mJ" in cpu_reason and "estimate" in cpu_reason
    # without the profile's power the Edge TPU's energy is unknown: it cannot be compared, and says so
    eff = rank([tpu, cpu], RUNTIMES, facts, no_reject, ExecutorOptions(threads=4), goal="efficiency",
               measurements=measured)
    assert names(eff)[0] == "litert:CPU|m.tflite"
    assert "cannot compare" in next(c.reason for c in eff.candidates if c.name == "edgetpu:EdgeTPU")
    # a measured energy (telemetry) wins over estimates
    measured[f"{cpu.digest[:16]}/litert:CPU"] = Measurement(f"{cpu.digest[:16]}/litert:CPU", 5.0, runs=9,
                                                            energy_mj=1.0, energy_source="RAPL package")
    eff = rank([tpu, cpu], RUNTIMES, facts, no_reject, ExecutorOptions(threads=4), profile=profile,
               goal="efficiency", measurements=measured)
    assert names(eff)[0] == "litert:CPU|m.tflite" and "RAPL" in eff.candidates[0].reason


def test_candidates_are_checked_at_their_own_precision():
    """CUDA@f16 must be asked about f16 (the bug: rejects() saw the caller's precision, so fp32 ran as "f16")."""
    asked = []

    def rejects(runtime, model, device, options):
        asked.append((runtime, device, options.precision))
        return "no f16 on CUDA" if device == "CUDA" and options.precision == "f16" else None

    facts = MachineFacts(ALL_INSTALLED, frozenset({"CPU", "CUDA"}))
    ranking = rank([artifact("m.onnx", Format.ONNX)], RUNTIMES, facts, rejects, ExecutorOptions())
    assert ("onnxruntime", "CUDA", "f16") in asked
    assert any(r.name == "onnxruntime:CUDA@f16" and r.reason == "no f16 on CUDA" for r in ranking.rejected)


def test_an_unlisted_plugin_accelerator_ranks_before_the_cpu():
    """A plug-in's device that the matched profile does not name is an accelerator all the same."""
    runtimes = {**RUNTIMES, **table({"name": "hailo", "formats": ["onnx"], "presence": "availability",
                                     "devices": [{"name": "Hailo8", "kind": "npu"}]})}
    profile = Profile("box", "a box", (AcceleratorSpec("CPU", "cpu", "cpu"),),
                      preference={"latency": ("CPU",), "efficiency": ("CPU",)})
    facts = MachineFacts({**ALL_INSTALLED, "hailo": "1.0"}, frozenset({"CPU"}),
                         plugin_devices={"hailo": frozenset({"Hailo8"})})
    ranking = rank([artifact("m.onnx", Format.ONNX)], runtimes, facts, no_reject, ExecutorOptions(), profile=profile)
    assert names(ranking)[0] == "hailo:Hailo8|m.onnx"
    absent = MachineFacts({**ALL_INSTALLED, "hailo": "1.0"}, frozenset({"CPU"}),
                          absent_reasons={"hailo:Hailo8": "Hailo8 is not available: no /dev/hailo0"})
    ranking = rank([artifact("m.onnx", Format.ONNX)], runtimes, absent, no_reject, ExecutorOptions())
    assert "hailo:Hailo8" not in [c.name for c in ranking.candidates]
    assert any("no /dev/hailo0" in r.reason for r in ranking.rejected if r.runtime == "hailo")
