"""No unguarded executor answers (edgeaccel/guard.py), on real runtimes: a scheduled model holds only executors
that agreed with the reference on the model's sample inputs, identical requests get identical answers unless the
executor changed (each result names its executor), a failover target is checked before it serves, and a pinned
executor keeps its precision.

Measured fact these tests stand on: on mobilenet_v2_1.0_224_quant.tflite, OpenVINO (f32 math) lands 13
quantization steps (5.1% of the softmax range) from LiteRT on one of the bundled samples: over the default
tolerance (5%), within a loose one.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

import edgeaccel
from edgeaccel.selection.calibration import sample_inputs
from edgeaccel.errors import AccuracyGuardError
from edgeaccel.executors.adaptive import AdaptiveExecutor
from edgeaccel.selection.guard import judge, twins
from edgeaccel.loader import open_candidate, select
from edgeaccel.ranked_model import RankedModel
from edgeaccel.selection.selector import Ranking

from conftest import MODELS
from test_failover import Unplugged

pytestmark = pytest.mark.slow  # slow tier: calibrations over emulated accelerators (~20 s each)

MOBILENET = MODELS / "mobilenet_v2_1.0_224_quant.tflite"
LOOSE = 0.5  # both LiteRT and OpenVINO pass


def _policy_model(tolerance=None, **options):
    return edgeaccel.load(MOBILENET, policy="latency", calibrate=False, cache=False,
                          accuracy_tolerance=tolerance, **options)


def test_an_executor_that_disagrees_with_the_reference_is_not_scheduled_and_says_why():
    with _policy_model() as model:
        assert list(model.executors) == ["litert:CPU"]
        assert "passed the accuracy guard" in model.executors["litert:CPU"].reason
        (event,) = [f for f in model.fallbacks if f.stage == "guard"]
        assert event.failed == "openvino:CPU" and event.replaced_by is None
        assert "failed the accuracy guard" in event.error and "against litert:CPU" in event.error
        assert "quantization steps" in event.error and "tolerance 5%" in event.error


def test_identical_requests_get_one_answer_per_executor_each_labelled():
    """Both executors pass a loose guard; stale ones are re-measured every 50 ms (probes on the model's own
    samples, never a caller's request). Every answer names its executor; one executor always gives the same
    answer, and two executors' answers are within the guard's tolerance of each other."""
    x = sample_inputs(edgeaccel.describe(MOBILENET).inputs, 1, 0)[0]
    with _policy_model(LOOSE) as model:
        assert set(model.executors) == {"litert:CPU", "openvino:CPU"}
        for info in model.executors.values():
            assert "passed the accuracy guard" in info.reason
        model._scheduler.remeasure_s = 0.05
        answers: dict[str, set] = {}
        labels = Counter()
        for i in range(300):
            out = model.submit(x).result(30) if i % 3 else model.run(x)
            labels[out.executor] += 1
            answers.setdefault(out.executor, set()).add(out[0].tobytes())
            if i % 60 == 0:
                import time
                time.sleep(0.2)  # an idle device: the stale executor is probed now
        stats = model.stats
    assert set(labels) <= {"litert:CPU", "openvino:CPU"} and sum(labels.values()) == 300
    assert all(len(a) == 1 for a in answers.values()), {k: len(v) for k, v in answers.items()}
    assert sum(s.completed for s in stats.executors.values()) == 300  # probes answer no caller
    assert sum(s.probes for s in stats.executors.values()) >= 1
    if len(answers) == 2:
        a, b = (np.frombuffer(next(iter(v)), np.uint8).reshape(1, 1001) for v in answers.values())
        specs = edgeaccel.describe(MOBILENET).outputs
        assert judge([[a]], [[b]], specs, specs, LOOSE).ok


def test_at_the_default_tolerance_every_identical_request_gets_the_same_answer():
    x = sample_inputs(edgeaccel.describe(MOBILENET).inputs, 3, 0)[2]
    with _policy_model() as model:
        model._scheduler.remeasure_s = 0.05
        futures = [model.submit(x) for _ in range(200)]
        results = [f.result(60) for f in futures]
    assert {r.executor for r in results} == {"litert:CPU"}
    assert len({r[0].tobytes() for r in results}) == 1


def test_a_pinned_executor_that_disagrees_serves_alone_saying_so():
    """OpenVINO pinned (edgeaccel serve --executor openvino): the reference is not among the candidates and
    OpenVINO misses it; the caller's choice serves alone, as a load without policy= would, the difference in
    its reason, and no other executor is added."""
    with edgeaccel.load(MOBILENET, executor="openvino", policy="latency", calibrate=False, cache=False) as model:
        assert list(model.executors) == ["openvino:CPU"]
        reason = model.executors["openvino:CPU"].reason
        assert "pinned by the caller and served alone although it failed the accuracy guard" in reason
        assert "quantization steps" in reason and model.run(sample_inputs(model.inputs, 1, 0)[0]).executor == \
            "openvino:CPU"


def test_no_executor_agreeing_unpinned_is_an_error_naming_each():
    """Unpinned, none agreeing is an AccuracyGuardError naming each executor and its figures. Through load()
    the reference is a candidate and agrees with itself, so the scheduler's helper is given OpenVINO alone."""
    from edgeaccel.scheduling.open import _guarded

    selection = select(MOBILENET, executor="openvino", cache=False)
    candidate = selection.ranking.candidates[0]
    executor = open_candidate(candidate, selection.options)
    fallbacks: list = []
    with pytest.raises(AccuracyGuardError) as caught:
        try:
            _guarded(selection.guard(), [candidate], [executor], {}, fallbacks, pinned=False)
        finally:
            executor.close()
    assert "openvino:CPU" in caught.value.message and "quantization steps" in caught.value.message
    assert "accuracy_tolerance" in caught.value.hint and fallbacks[0].stage == "guard"


def test_each_twin_of_an_adaptive_executor_is_checked():
    selection = select(MOBILENET, executor="openvino", performance_hint="adaptive", cache=False,
                       accuracy_tolerance=LOOSE)
    candidate = selection.ranking.candidates[0]
    executor = open_candidate(candidate, selection.options)
    try:
        if not isinstance(executor, AdaptiveExecutor):
            pytest.skip("one stream on this machine: no twins")
        assert [name for name, _ in twins(executor)] == ["latency twin", "throughput twin"]
        verdict = selection.guard().verdict(candidate, executor)
        assert verdict.ok and "against litert:CPU" in verdict.why
    finally:
        executor.close()


def test_a_plain_adaptive_load_keeps_both_configurations_only_when_they_agree():
    """Without policy=, an adaptive executor's throughput configuration answers concurrent requests and its
    latency one lone requests: the load compares them on the sample inputs first (same runtime, same answers
    here: both kept, no guard event)."""
    from edgeaccel.selection.guard import agreeing_twins

    selection = select(MOBILENET, executor="openvino", performance_hint="adaptive", cache=False)
    candidate = selection.ranking.candidates[0]
    executor = open_candidate(candidate, selection.options)
    try:
        if not isinstance(executor, AdaptiveExecutor):
            pytest.skip("one stream on this machine: no twins")
        kept, refused = agreeing_twins(executor, candidate.name, 1e-6)  # 2 quantization steps still agree
        assert kept is executor and refused is None
    finally:
        executor.close()
    with edgeaccel.load(MOBILENET, executor="openvino", performance_hint="adaptive", calibrate=False,
                        cache=False) as model:
        assert model.executor.details.get("adaptive") and not [f for f in model.fallbacks if f.stage == "guard"]
        x = sample_inputs(model.inputs, 1, 0)[0]
        futures = [model.submit(x) for _ in range(32)]  # in flight together: the throughput configuration
        answers = {f.result(30)[0].tobytes() for f in futures} | {model.run(x)[0].tobytes()}
        assert len(answers) == 1 and model.executor.details["runs"]["throughput"] > 0


def test_a_failover_target_that_disagrees_is_passed_over():
    """The accelerator goes; OpenVINO is next in the ranking but fails the guard (recorded, never serving);
    LiteRT, the reference, takes over and every answer is LiteRT's."""
    Unplugged.plugged = True
    selection = select(MOBILENET, cache=False)
    by_runtime = {c.runtime: c for c in selection.ranking.candidates}
    litert, openvino = by_runtime["litert"], by_runtime["openvino"]
    accel = dataclasses.replace(litert, runtime="unplugged", device="FakeNPU", kind="npu", reason="goes away")
    guard = selection.guard()

    def open_one(candidate):
        if candidate is accel:
            return Unplugged(open_candidate(litert, selection.options), after=3)
        return open_candidate(candidate, selection.options)

    inputs = sample_inputs(edgeaccel.describe(MOBILENET).inputs, 8, 0)
    with edgeaccel.load(MOBILENET, executor="litert", calibrate=False, cache=False) as cpu:
        expected = [cpu.run(x)[0] for x in inputs]
    try:
        with RankedModel(open_one(accel), accel, Ranking([accel, openvino, litert]), [],
                   open_next=guard.opener(open_one)) as model:
            for x, want in zip(inputs, expected, strict=True):
                out = model.run(x)
                np.testing.assert_array_equal(out[0], want)
            assert out.executor == litert.name
            refused = [f for f in model.fallbacks if f.failed == openvino.name]
            assert refused and "failed the accuracy guard" in refused[0].error
            assert any(f.stage == "run" and f.replaced_by == litert.name for f in model.fallbacks)
    finally:
        Unplugged.plugged = True


def test_a_pinned_executor_keeps_its_precision_unless_auto():
    """Calibration (now, in the background or from tune's cache) may only admit bf16 for an unpinned load or
    with precision="auto": a pin is a pin."""
    def bf16(selection):
        return [c for c in (*selection.ranking.candidates, *selection.ranking.untested) if c.precision == "bf16"]

    unpinned = select(MOBILENET, cache=False)
    if not bf16(unpinned):
        pytest.skip("OpenVINO offers no bf16 on this CPU")
    assert not bf16(select(MOBILENET, executor="openvino", cache=False))
    assert not bf16(select(MOBILENET, device="CPU", cache=False))
    assert bf16(select(MOBILENET, executor="openvino", precision="auto", cache=False))


def test_a_pinned_executor_is_not_switched_to_bf16_by_tune_or_background(tmp_path):
    """tune (calibrate=True with precision="auto") measured bf16 into the cache; a later load pinned to
    OpenVINO without "auto" stays at f32 and starts no background measurement of another precision."""
    measured = select(MOBILENET, executor="openvino", precision="auto", calibrate=True, cache_dir=tmp_path,
                      accuracy_tolerance=LOOSE)
    if not any("bf16" in key for key in measured.measurements):
        pytest.skip("OpenVINO offers no bf16 on this CPU")
    with edgeaccel.load(MOBILENET, executor="openvino", cache_dir=tmp_path, calibrate="background",
                        accuracy_tolerance=LOOSE) as model:
        assert model.executor.precision.startswith(("f32", "int8 weights, f32")), model.executor
        assert model.calibration is None  # nothing else it could switch to
        assert not [c for c in model.ranking.candidates if c.precision == "bf16"]
    # the same cache with "auto": the measured bf16 candidate is there to be chosen
    auto = select(MOBILENET, executor="openvino", precision="auto", cache_dir=tmp_path, accuracy_tolerance=LOOSE)
    assert [c for c in auto.ranking.candidates if c.precision == "bf16"], auto.ranking.rejected


def test_what_calibration_compared_counts_and_is_not_run_again(tmp_path):
    """tune measured every candidate against the reference: a policy= load from that cache takes calibration's
    verdicts (each executor's reason says so) and runs no sample of its own."""
    select(MOBILENET, calibrate=True, cache_dir=tmp_path, accuracy_tolerance=LOOSE)
    with edgeaccel.load(MOBILENET, policy="latency", calibrate=False, cache_dir=tmp_path,
                        accuracy_tolerance=LOOSE) as model:
        reasons = {name: info.reason for name, info in model.executors.items()}
        probe_inputs = model._probe_inputs  # the reference's samples, had the guard run any
    assert len(reasons) >= 2 and all("passed the accuracy guard" in r for r in reasons.values()), reasons
    assert any("passed the accuracy guard: calibration: accurate" in r for r in reasons.values()), reasons
    assert any("the reference" in r for r in reasons.values()) and probe_inputs is None


def test_bf16_asked_for_a_model_it_breaks_serves_alone_saying_how_far_it_is(tmp_path):
    """A float model whose answers bf16 destroys (tests/onnx_models.py): precision="bf16" asked with policy= is
    a pin (OpenVINO at bf16 serves, alone, its reason saying what it misses the f32 reference by); without it the
    model holds only f32 executors, which agree."""
    from onnx_models import bf16_trap

    path = bf16_trap(tmp_path / "trap.onnx")
    with edgeaccel.load(path, policy="latency", precision="bf16", calibrate=False, cache=False) as model:
        (info,) = model.executors.values()
        assert info.precision.endswith("bf16") and "served alone although it failed the accuracy guard" in info.reason
        assert "against onnxruntime:CPU" in info.reason
    with edgeaccel.load(path, policy="latency", calibrate=False, cache=False) as model:
        assert len(model.executors) >= 2 and not [f for f in model.fallbacks if f.stage == "guard"]
        assert not [i for i in model.executors.values() if "bf16" in i.precision]
