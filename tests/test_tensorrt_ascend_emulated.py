"""A TensorRT-shaped and a CANN-shaped accelerator, emulated (edgeaccel.testing.emulated: answers by LiteRT on the
CPU, device behaviour simulated and labelled so), go through what every accelerator goes through: ranked by the
profile that names them (x86-nvidia-gpu's TensorRT first; atlas-310's CANN first), guarded by calibration (f16
numerics within tolerance are admitted, wrong answers refused), abandoned for the CPU when unplugged, and
scheduled beside the CPU. The same device names as the real executors, so the profiles' orders apply to them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="these emulated accelerators wrap LiteRT (in dev; a GPU "
                    "machine's check may lack it)")

import edgeaccel
from conftest import SAMPLES, image_input
from edgeaccel.loader import open_ranked, select
from edgeaccel.testing.emulated import Faults, emulated_accelerator
from edgeaccel.testing.plugins import installed_plugins
from test_emulated_accelerators import assert_guarded

MODEL = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"
SHAPES = [pytest.param("TensorRT", "gpu", "x86-nvidia-gpu", id="tensorrt"),
          pytest.param("CANN", "npu", "atlas-310", id="cann")]


@pytest.fixture(scope="module")
def bird():
    return image_input("bird", edgeaccel.describe(MODEL).inputs[0])


@pytest.fixture(scope="module")
def cpu_answer(bird):
    with edgeaccel.load(MODEL, executor="litert", device="CPU") as model:
        return model.run(bird)[0]


@pytest.mark.slow
@pytest.mark.parametrize("device, kind, profile", SHAPES)
def test_ranked_by_its_profile_and_admitted_by_calibration(device, kind, profile, tmp_path, bird, cpu_answer):
    shaped = emulated_accelerator(f"emu-{device.lower()}", device, kind, speedup=20, numerics="f16")
    with installed_plugins(tmp_path, shaped, distribution=f"emulated-{device.lower()}"):
        ranked = select(MODEL, profile=profile, cache=False).ranking
        first = ranked.candidates[0]
        assert (first.runtime, first.device, first.precision) == (shaped.runtime, device, "f16"), ranked.candidates
        assert profile in first.reason and "rules" in first.reason
        chosen = select(MODEL, profile=profile, calibrate=True, calibration_budget_s=1.0, cache=False)
        with open_ranked(chosen.ranking, chosen.options) as model:
            assert model.executor.runtime == shaped.runtime, model.ranking.candidates
            assert "against" in model.executor.reason  # its answers were checked against the CPU reference
            assert_guarded(model.run(bird)[0], cpu_answer)


@pytest.mark.slow
@pytest.mark.parametrize("device, kind, profile", SHAPES)
def test_wrong_answers_are_refused_by_calibration(device, kind, profile, tmp_path, bird, cpu_answer):
    wrong = emulated_accelerator(f"wrong-{device.lower()}", device, kind, speedup=20, numerics="corrupt")
    with installed_plugins(tmp_path, wrong, distribution=f"emulated-wrong-{device.lower()}"):
        chosen = select(MODEL, profile=profile, calibrate=True, calibration_budget_s=1.0, cache=False)
        with open_ranked(chosen.ranking, chosen.options) as model:
            refused = {r.runtime: r.reason for r in model.ranking.rejected}
            assert model.executor.device == "CPU"
            np.testing.assert_array_equal(model.run(bird)[0], cpu_answer)
    assert "calibration" in refused[wrong.runtime], refused


@pytest.mark.parametrize("device, kind, profile", SHAPES)
def test_unplugged_it_falls_back_to_the_cpu_visibly(device, kind, profile, tmp_path, bird, cpu_answer):
    flaky = emulated_accelerator(f"flaky-{device.lower()}", device, kind, speedup=20, faults=Faults(fail_after=3))
    with installed_plugins(tmp_path, flaky, distribution=f"emulated-flaky-{device.lower()}"):
        with edgeaccel.load(MODEL, profile=profile) as model:
            assert model.executor.runtime == flaky.runtime
            outs = [model.run(bird)[0] for _ in range(8)]
            assert model.executor.device == "CPU"
            (event,) = [f for f in model.fallbacks if f.stage == "run"]
            assert event.failed.startswith(f"{flaky.runtime}:{device}") and event.replaced_by.endswith(":CPU")
    for out in outs:
        np.testing.assert_array_equal(out, cpu_answer)


@pytest.mark.parametrize("device, kind, profile", SHAPES)
def test_scheduled_beside_the_cpu_in_its_device_kind(device, kind, profile, tmp_path, bird):
    shaped = emulated_accelerator(f"sched-{device.lower()}", device, kind, speedup=20)
    with installed_plugins(tmp_path, shaped, distribution=f"emulated-sched-{device.lower()}"):
        with edgeaccel.load(MODEL, profile=profile, policy="latency") as model:
            names = list(model.executors)
            outs = [f.result(timeout=60)[0] for f in [model.submit(bird) for _ in range(10)]]
            domains = set(model.stats.devices)
    assert any(n.startswith(shaped.runtime) for n in names) and any(n.endswith(":CPU") for n in names), names
    assert kind in domains and "cpu" in domains, domains  # TensorRT's GPU domain, the Ascend NPU's npu domain
    assert len(outs) == 10
