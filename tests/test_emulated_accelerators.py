"""Accelerators end to end, on emulated ones (edgeaccel.testing.emulated) installed as real plug-ins: answers by
LiteRT on the CPU, device behaviour (latency, numerics, power, faults) simulated and labelled so.

load -> select -> calibrate -> run -> fallback -> schedule for every shipped profile, and the selection checks:
with calibrate=True a fast but wrong accelerator is refused, a correct fast one chosen, a correct and far more
efficient one chosen for goal="efficiency", and one unplugged after some calls abandoned with no error reaching
the caller, whatever order the rules put them in. No test asserts a speed: the emulated latencies are
10-20x apart from the CPU's so that the ranking they cause is not noise.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="these emulated accelerators wrap LiteRT (in dev; a GPU "
                    "machine's check may lack it)")

import edgeaccel
from edgeaccel.selection.calibration import CalibrationPlan
from edgeaccel.selection.timing import MAX_BLOCK_CALLS
from conftest import ROOT, SAMPLES, image_input, run_cli
from edgeaccel.errors import DeviceUnavailableError
from edgeaccel.loader import open_ranked, select
from edgeaccel.profiles import get_profile, load_profiles
from edgeaccel.testing.emulated import Faults, emulated_accelerator
from edgeaccel.testing.plugins import installed_plugins

MODEL = SAMPLES / "mobilenet_v1_0.25_128_quant.tflite"  # LiteRT on the CPU: about 0.5 ms here
PROFILES = sorted(load_profiles())
# calibration's calls to one candidate at most (edgeaccel/timing.py): its samples, the warm-up, max_rounds blocks
# and the leaders' head-to-head pairs, each block at most MAX_BLOCK_CALLS plus one untimed call; an executor
# failing after more calls than this fails after calibration
CALIBRATION_CALLS = (lambda plan: plan.samples + MAX_BLOCK_CALLS + (plan.max_rounds + 40) * (MAX_BLOCK_CALLS + 1))(
    CalibrationPlan())



@pytest.fixture(scope="module")
def bird():
    spec = edgeaccel.describe(MODEL).inputs[0]
    return image_input("bird", spec)


@pytest.fixture(scope="module")
def cpu_answer(bird):
    """LiteRT's answer on the CPU: what an exact emulated accelerator (it wraps LiteRT) answers too."""
    with edgeaccel.load(MODEL, executor="litert", device="CPU") as model:
        return model.run(bird)[0]


def assert_guarded(answer, cpu_answer) -> None:
    """What calibration admits: a CPU runtime it measured faster (OpenVINO, at bf16 where the CPU has it) answers
    within the guard's tolerance of the reference (5% of the output range) with the same top-1; not to the bit."""
    gap = np.abs(answer.astype(np.int32) - cpu_answer.astype(np.int32)).max()
    assert np.argmax(answer) == np.argmax(cpu_answer) and gap <= 0.05 * 255, gap


@pytest.fixture(scope="module")
def cpu_answers(bird, cpu_answer):
    """Every CPU runtime's answer: a scheduler may send a request to any of them (OpenVINO rounds a few
    quantized outputs one step otherwise). Without OpenVINO (a GPU machine's check) LiteRT's is the only one."""
    import importlib.util

    if importlib.util.find_spec("openvino") is None:
        return [cpu_answer]
    with edgeaccel.load(MODEL, executor="openvino", device="CPU") as model:
        return [cpu_answer, model.run(bird)[0]]


def expected_device_order(profile, devices: list[str], goal: str = "latency") -> list[str]:
    """The profile's order for ``goal`` over ``devices`` and the CPU; an accelerator it does not list goes just
    before the CPU (selector: an unknown accelerator is not a reason to starve it)."""
    order = list(profile.preference.get(goal) or ())
    cpu_at = order.index("CPU") if "CPU" in order else len(order)

    def place(device: str) -> float:
        listed = [d for d in order if d == device or d in (profile.accelerator(device).devices
                                                          if profile.accelerator(device) else ())]
        return order.index(listed[0]) if listed else cpu_at - 0.5

    return sorted([*devices, "CPU"], key=place)


def accelerator_devices(profile) -> list[tuple[str, str]]:
    """(device, kind) of the profile's accelerators, its own names, so its order and figures apply; a CPU-only
    profile gets one accelerator it does not list."""
    found = [(a.device, a.kind) for a in profile.accelerators if a.kind != "cpu"]
    return found or [("FastNPU", "npu")]


def lab_profile(folder, **power_w: float) -> str:
    """A profile naming the emulated devices with their (simulated) typical power: where goal="efficiency"
    gets an accelerator's energy (p50 x typical power); the CPU's is edgeaccel's own estimate."""
    lines = ["schema: edgeaccel.profile/1", "name: emulated-lab", "title: emulated accelerators (simulated figures)",
             "match: {board: [emulated lab], priority: 0}", "accelerators:",
             "  - {device: CPU, kind: cpu, name: this machine's CPU}"]
    # the schema asks every figure for a URL; a simulated one has no vendor page: a reserved .invalid address
    lines += [f"  - {{device: {d}, kind: npu, name: emulated {d} (simulated), typical_power_w: {w}, "
              f"source: 'simulated figure, no vendor page: https://emulated.invalid/{d}'}}" for d, w in power_w.items()]
    lines += ["preference: {latency: [CPU], efficiency: [CPU]}"]
    path = folder / "emulated-lab.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def fast(name="fastnpu", device="FastNPU", **kw):
    return emulated_accelerator(name, device, "npu", speedup=20, **kw)


def hammer(model, x, threads: int, calls: int) -> tuple[list, list]:
    """``threads`` x ``calls`` runs at once: (answers, errors)."""
    answers, errors, start = [], [], threading.Barrier(threads)

    def work():
        start.wait()
        for _ in range(calls):
            try:
                answers.append(model.run(x)[0])
            except Exception as exc:
                errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return answers, errors


# -- every profile ---------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_selects_calibrates_and_runs_its_accelerators(name, tmp_path, bird, cpu_answer, labels):
    profile = get_profile(name)
    emulated = [emulated_accelerator(f"emu-{d.lower()}", d, k, speedup=20) for d, k in accelerator_devices(profile)]
    with installed_plugins(tmp_path, *emulated) as plugin:
        ranked = select(MODEL, profile=name, cache=False).ranking  # rules: no measurement from another test
        ours = [c for c in ranked.candidates if c.runtime in plugin.classes]
        assert {c.runtime for c in ours} == set(plugin.classes), ranked.rejection_reasons()
        assert all(name in c.reason and "rules" in c.reason for c in ours), [c.reason for c in ours]
        devices = list(dict.fromkeys(c.device for c in ranked.candidates))
        assert devices == expected_device_order(profile, [c.device for c in ours]), [c.reason for c in ranked.candidates]

        chosen = select(MODEL, profile=name, calibrate=True, calibration_budget_s=1.0, cache=False)
        assert chosen.ranking.measured and chosen.measured_now
        for cand in chosen.ranking.candidates:
            m = chosen.measurements[cand.key]
            assert m.p50_ms is not None and m.runs > 0 and "measured p50" in cand.reason
        assert chosen.ranking.candidates[0].runtime in plugin.classes, [c.reason for c in chosen.ranking.candidates]

        with open_ranked(chosen.ranking, chosen.options) as model:
            assert model.executor.runtime in plugin.classes
            assert model.executor.details["simulated"]["source"].startswith("simulated")
            out = model.run(bird)[0]
        np.testing.assert_array_equal(out, cpu_answer)  # exact numerics: the CPU's answer
        assert labels[int(np.argmax(out))] == "chickadee"


@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_fails_over_when_its_accelerator_is_unplugged(name, tmp_path, bird, cpu_answer):
    profile = get_profile(name)
    emulated = [emulated_accelerator(f"emu-{d.lower()}", d, k, speedup=20, faults=Faults(fail_after=5))
                for d, k in accelerator_devices(profile)]
    with installed_plugins(tmp_path, *emulated) as plugin:
        with edgeaccel.load(MODEL, profile=name) as model:
            first = model.executor.runtime
            assert first in plugin.classes
            outs = [model.run(bird)[0] for _ in range(40)]  # every accelerator unplugs after 5 calls
            assert model.executor.device == "CPU"
            assert any(f.failed.startswith(first) and f.stage == "run" for f in model.fallbacks), model.fallbacks
    for out in outs:
        np.testing.assert_array_equal(out, cpu_answer)


@pytest.mark.slow
@pytest.mark.parametrize("name", PROFILES)
def test_every_profile_schedules_over_its_accelerator_and_the_cpu(name, tmp_path, bird, cpu_answers):
    profile = get_profile(name)
    (device, kind), *_ = accelerator_devices(profile)
    flaky = emulated_accelerator(f"emu-{device.lower()}", device, kind, speedup=20, faults=Faults(fail_after=10))
    with installed_plugins(tmp_path, flaky) as plugin:
        with edgeaccel.load(MODEL, profile=name, policy="latency") as model:
            names = list(model.executors)
            assert any(n.startswith(flaky.runtime) for n in names) and any(n.endswith(":CPU") for n in names), names
            # the accelerator unplugs after its 10th call; how many of a burst the scheduler gives it depends on
            # the machine's load, so bursts go on (up to 300 requests) until it has had them
            outs: list = []
            while len(outs) < 300 and not any(f.failed.startswith(flaky.runtime) for f in model.fallbacks):
                outs += [f.result(timeout=60)[0] for f in [model.submit(bird) for _ in range(30)]]
            # the scheduler retried elsewhere and says so
            assert any(f.failed.startswith(flaky.runtime) for f in model.fallbacks), model.fallbacks
            assert plugin.classes[flaky.runtime].availability(device).ok is False
    for out in outs:
        assert any(np.array_equal(out, answer) for answer in cpu_answers)


# -- chosen, refused or abandoned as a user expects ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("goal", ["latency", "efficiency"])
def test_a_correct_fast_accelerator_is_chosen(goal, tmp_path, bird, cpu_answer):
    with installed_plugins(tmp_path, fast(), distribution="emulated-fast"):
        profile = lab_profile(tmp_path, FastNPU=2.0)
        with edgeaccel.load(MODEL, calibrate=True, goal=goal, profile=profile) as model:
            assert model.executor.runtime == "fastnpu", model.ranking.candidates
            assert ("measured p50" if goal == "latency" else "mJ/inference") in model.executor.reason
            assert_guarded(model.run(bird)[0], cpu_answer)


@pytest.mark.slow
def test_every_accelerator_is_checked_against_the_cpu_reference(tmp_path):
    with installed_plugins(tmp_path, fast(), distribution="emulated-fast"):
        with edgeaccel.load(MODEL, calibrate=True) as model:
            reason = model.executor.reason
    assert "not checked" not in reason and "against" in reason, reason


@pytest.mark.slow
def test_a_correct_far_more_efficient_accelerator_is_chosen_for_efficiency(tmp_path, bird, cpu_answer):
    """8 ms at 0.05 W (0.4 mJ) against the CPU's ~0.5 ms at 2.5 W a core: slower, far cheaper."""
    efficient = emulated_accelerator("effnpu", "EffNPU", "npu", fixed_latency_ms=8, power_w=0.05)
    with installed_plugins(tmp_path, efficient, distribution="emulated-efficient"):
        profile = lab_profile(tmp_path, EffNPU=0.05)
        with edgeaccel.load(MODEL, calibrate=True, goal="efficiency", profile=profile) as model:
            assert model.executor.runtime == "effnpu", model.ranking.candidates
            assert "mJ/inference" in model.executor.reason and "0.05 W typical" in model.executor.reason
            assert_guarded(model.run(bird)[0], cpu_answer)
        with edgeaccel.load(MODEL, calibrate=True, goal="latency", profile=profile) as model:
            assert model.executor.runtime != "effnpu" and model.executor.device == "CPU", model.ranking.candidates


def lab(order: str):
    """Four accelerators (wrong, fast, efficient, unplugged), installed in ``order`` (the rules rank plug-ins
    the profile does not list in the order they are installed)."""
    wrong = emulated_accelerator("wrongnpu", "WrongNPU", "npu", speedup=20, numerics="corrupt")
    quick = emulated_accelerator("fastnpu", "FastNPU", "npu", speedup=20)
    efficient = emulated_accelerator("effnpu", "EffNPU", "npu", fixed_latency_ms=8)
    every = [wrong, quick, efficient]
    # power: the wrong one is tempting on both goals; the fast one draws much, the efficient one little
    power = {"WrongNPU": 0.01, "FastNPU": 40.0, "EffNPU": 0.05}
    return (every if order == "wrong first" else every[::-1]), power


@pytest.mark.slow
@pytest.mark.parametrize("order", ["wrong first", "wrong last"])
@pytest.mark.parametrize("goal, expected", [("latency", "fastnpu"), ("efficiency", "effnpu")])
def test_fast_and_wrong_is_refused_whatever_the_order(order, goal, expected, tmp_path, bird, cpu_answer):
    accelerators, power = lab(order)
    with installed_plugins(tmp_path, *accelerators, distribution="emulated-lab"):
        with edgeaccel.load(MODEL, calibrate=True, goal=goal, profile=lab_profile(tmp_path, **power)) as model:
            refused = {r.runtime: r.reason for r in model.ranking.rejected}
            chosen = model.executor.runtime
            answer = model.run(bird)[0]
    assert "wrongnpu" in refused and "calibration" in refused["wrongnpu"], refused
    assert chosen == expected
    np.testing.assert_array_equal(answer, cpu_answer)


@pytest.mark.slow
@pytest.mark.parametrize("goal", ["latency", "efficiency"])
def test_an_accelerator_unplugged_after_some_calls_is_abandoned_without_an_error(goal, tmp_path, bird, cpu_answer):
    """It survives calibration (more calls than calibration makes), is chosen, then unplugs under 8 threads."""
    flaky = emulated_accelerator("flakynpu", "FlakyNPU", "npu", fixed_latency_ms=0.05,
                                 faults=Faults(fail_after=CALIBRATION_CALLS))
    with installed_plugins(tmp_path, flaky, distribution="emulated-flaky"):
        profile = lab_profile(tmp_path, FlakyNPU=1.0)
        with edgeaccel.load(MODEL, calibrate=True, goal=goal, profile=profile) as model:
            assert model.executor.runtime == "flakynpu", model.ranking.candidates
            answers, errors = hammer(model, bird, threads=8, calls=CALIBRATION_CALLS // 8 + 40)
            if errors:
                raise errors[0]
            assert model.executor.runtime != "flakynpu"
            assert [f for f in model.fallbacks if f.stage == "run" and f.failed.startswith("flakynpu")]
    for answer in answers:
        assert_guarded(answer, cpu_answer)


@pytest.mark.slow
def test_an_accelerator_unplugged_during_calibration_is_rejected_not_fatal(tmp_path, bird, cpu_answer):
    flaky = emulated_accelerator("earlynpu", "EarlyNPU", "npu", speedup=20, faults=Faults(fail_after=10))
    with installed_plugins(tmp_path, flaky, distribution="emulated-early"):
        with edgeaccel.load(MODEL, calibrate=True) as model:
            assert model.executor.device == "CPU"
            refused = {r.runtime: r.reason for r in model.ranking.rejected}
            assert "unplugged" in refused.get("earlynpu", ""), refused
            assert_guarded(model.run(bird)[0], cpu_answer)


def test_a_missing_delegate_falls_back_at_load_with_its_reason(tmp_path, bird, cpu_answer):
    broken = fast("nodelegate", "NoDelegateNPU", faults=Faults(load_error="libnodelegate.so: cannot open shared "
                                                                          "object file"))
    with installed_plugins(tmp_path, broken, distribution="emulated-broken") as plugin:
        assert plugin.classes["nodelegate"].availability("NoDelegateNPU")  # the device is there
        with edgeaccel.load(MODEL) as model:
            assert model.executor.device == "CPU"
            (event,) = model.fallbacks
            assert event.stage == "load" and event.failed == "nodelegate:NoDelegateNPU"
            assert "libnodelegate.so" in event.error and event.replaced_by == f"{model.executor.runtime}:CPU"
            np.testing.assert_array_equal(model.run(bird)[0], cpu_answer)


def test_a_hung_accelerator_is_abandoned_for_the_cpu(tmp_path, bird, cpu_answer):
    hung = fast("hungnpu", "HungNPU", faults=Faults(hang_after=2, hang_s=0.2))
    with installed_plugins(tmp_path, hung, distribution="emulated-hung"):
        with edgeaccel.load(MODEL) as model:
            outs = [model.run(bird)[0] for _ in range(4)]
            assert model.executor.device == "CPU"
            (event,) = [f for f in model.fallbacks if f.stage == "run"]
            assert "hung for 0.2 s" in event.error
    for out in outs:
        np.testing.assert_array_equal(out, cpu_answer)


def test_partial_offload_is_reported(tmp_path):
    partial = fast("halfnpu", "HalfNPU", faults=Faults(offload_share=0.4))
    with installed_plugins(tmp_path, partial, distribution="emulated-partial"):
        with edgeaccel.load(MODEL) as model:
            details = model.executor.details
    assert details["accelerated_share"] == 0.4 and "40%" in details["placement"]
    assert details["simulated"]["latency_model"] == "real x 0.60 + real / 20 x 0.40"


# -- the plug-in in the CLI --------------------------------------------------------------------------------------
def cli(plugin, *args: str) -> str:
    done = run_cli(*args, env={"PYTHONPATH": plugin.pythonpath(ROOT)}, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_the_plugin_shows_in_probe_and_explain(tmp_path):
    with installed_plugins(tmp_path, fast(power_w=2.0), distribution="emulated-fast") as plugin:
        probe = cli(plugin, "probe")
        assert "fastnpu" in probe and "FastNPU" in probe and "emulated-fast" in probe, probe
        explain = cli(plugin, "explain", str(MODEL))
        assert "fastnpu:FastNPU" in explain, explain
        first = next(line for line in explain.splitlines() if "fastnpu" in line or ":CPU" in line)
        assert "fastnpu:FastNPU" in first, explain  # ranked first: an accelerator before the CPU


@pytest.mark.slow
def test_unplugged_accelerator_is_said_absent_in_explain(tmp_path):
    absent = fast("gonenpu", "GoneNPU", available="the emulated board has no GoneNPU fitted")
    with installed_plugins(tmp_path, absent, distribution="emulated-absent") as plugin:
        explain = cli(plugin, "explain", str(MODEL))
        assert "gonenpu:GoneNPU" in explain and "no GoneNPU fitted" in explain, explain


# -- the heat hook -----------------------------------------------------------------------------------------------
def test_runs_heat_the_simulated_device_the_scheduler_reads(tmp_path, bird):
    import time

    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.scheduling.model import ScheduledModel
    from edgeaccel.sim.heat import DeviceParams
    from edgeaccel.sim.world import SimWorld

    params = DeviceParams("emu-npu", layout="hwmon", busy_w=4.0, idle_w=0.2, service_s=0.001, c_j_per_c=0.5)
    hot = emulated_accelerator("hotnpu", "HotNPU", "npu", speedup=20, power_w=4.0, heat=params)
    world = SimWorld([params], tmp_path / "sys", t0=time.monotonic())
    hot.attach_heat(world.models["emu-npu"])
    executor = hot(edgeaccel.describe(MODEL), "HotNPU", ExecutorOptions())
    with ScheduledModel([executor], "latency", sensors=world.specs(), root=world.root,
                        before_sample=world.sync, sample_interval_s=0.05) as model:
        for _ in range(200):
            model.run(bird)
        time.sleep(0.1)  # one more telemetry sample after the last run
        model.run(bird)
        world.sync(time.monotonic())
        stats = model.stats
    heat = world.models["emu-npu"]
    assert heat.busy_s > 0 and heat.temp_c > params.ambient_c and heat.energy_j > 0
    # the scheduler names the device by its heat model and reads the temperature the runs made (simulated)
    assert list(stats.devices) == ["emu-npu"]
    assert stats.devices["emu-npu"].max_temp_c is not None and stats.devices["emu-npu"].max_temp_c > params.ambient_c


def test_a_profile_may_order_a_plugin_device_and_a_plugin_without_distributions_is_installed(tmp_path, bird):
    """The profile's preference may name a plug-in's device (not only the probe's names), and a plug-in class
    that names no ``distributions`` is installed all the same: the distribution that registered it says so."""
    npu = fast("orderednpu", "OrderedNPU")
    npu.distributions = ()
    with installed_plugins(tmp_path, npu, distribution="emulated-ordered"):
        path = tmp_path / "ordered.yaml"
        path.write_text(Path(lab_profile(tmp_path, OrderedNPU=1.0)).read_text().replace(
            "preference: {latency: [CPU], efficiency: [CPU]}",
            "preference: {latency: [OrderedNPU, CPU], efficiency: [OrderedNPU, CPU]}").replace(
            "name: emulated-lab", "name: ordered-lab"))
        with edgeaccel.load(MODEL, profile=str(path), calibrate=False) as model:
            assert model.executor.runtime == "orderednpu"
            assert "#1" in model.executor.reason and "ordered-lab" in model.executor.reason


def test_strict_refuses_an_accelerator_that_runs_part_of_the_model(tmp_path, bird, cpu_answer):
    partial = fast("halfnpu", "HalfNPU", faults=Faults(offload_share=0.5))
    with installed_plugins(tmp_path, partial, distribution="emulated-half"):
        with edgeaccel.load(MODEL, calibrate=False) as model:  # reported, accepted
            assert model.executor.runtime == "halfnpu" and model.executor.details["accelerated_share"] == 0.5
        with pytest.raises(DeviceUnavailableError, match="runs only 50% of the model"):
            edgeaccel.load(MODEL, calibrate=False, strict=True)
        with edgeaccel.load(MODEL, calibrate=False, executor="litert", strict=True) as model:  # the CPU: whole
            np.testing.assert_array_equal(model.run(bird)[0], cpu_answer)
