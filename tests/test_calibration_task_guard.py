"""Calibration judges a vision model on its decoded results when its task is known (edgeaccel/agreement/guard.py):
a precision change that changes detections is refused although its raw error is a small share of an output
range set by pixel coordinates, and an accurate candidate is still admitted. Real runtimes throughout: OpenVINO
bf16 against ONNX Runtime f32 on a YOLO-layout detector built for it (tests/vision_models.py), and real
executors wrapped to perturb their scores."""

from __future__ import annotations

import numpy as np
import pytest

import edgeaccel
from edgeaccel import formats
from edgeaccel.agreement import DEFAULT_TOLERANCE
from edgeaccel.agreement.guard import Thresholds, judge
from edgeaccel.selection.calibration import CalibrationPlan, TaskRequest, calibrate
from edgeaccel.errors import ConfigError
from edgeaccel.loader import select
from conftest import run_cli
from edgeaccel.selection.selector import Ranking
from test_calibration_guard import QUICK, accel, cpu, opener
from vision_models import candidates, constant_output, detector_trap

BF16 = "openvino:CPU@bf16"


def measured(sel, name):
    found = [m for k, m in sel.measurements.items() if k.endswith("/" + name) or k.split("/")[-1] == name]
    if not found:
        pytest.skip(f"no {name} candidate on this machine (OpenVINO offers bf16 only on CPUs with bf16 support)")
    return found[0]


@pytest.mark.slow
def test_bf16_that_changes_detections_is_refused_though_its_raw_error_is_a_small_share_of_the_range(tmp_path):
    path = detector_trap(tmp_path / "trap.onnx")
    sel = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5)
    bf16 = measured(sel, BF16)
    assert not bf16.eligible
    assert bf16.accuracy["judged_on"] == "task" and bf16.accuracy["task"] == "detect"
    assert "detect precision" in bf16.reason or "detect recall" in bf16.reason
    # what the tensor verdict alone saw: the worst change is well under its 5% of a 0..640 range
    assert bf16.accuracy["max_error_fraction"] < DEFAULT_TOLERANCE / 2
    boxes = bf16.accuracy["task_metrics"]
    assert boxes["reference_boxes"] > 0 and boxes["matched"] < boxes["reference_boxes"]
    f32 = measured(sel, "openvino:CPU")  # the same runtime at f32: the same boxes, admitted
    assert f32.eligible and f32.accuracy["judged_on"] == "task"
    assert f32.accuracy["task_metrics"]["precision"] == 1.0 and f32.accuracy["task_metrics"]["recall"] == 1.0
    assert BF16 not in [c.name for c in sel.ranking.candidates]


@pytest.mark.slow
def test_bf16_that_keeps_detections_is_admitted(tmp_path):
    path = detector_trap(tmp_path / "kept.onnx", signal=0.0)
    sel = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5)
    bf16 = measured(sel, BF16)
    assert bf16.eligible and bf16.accuracy["judged_on"] == "task", bf16.reason
    assert "detect precision 1.000, recall 1.000" in bf16.reason


@pytest.mark.slow
def test_task_none_judges_raw_outputs_as_before(tmp_path):
    """The opt-out (`tune --task none`): the tensor verdict alone admits the bf16 that changes detections,
    which is exactly what the task guard is for."""
    path = detector_trap(tmp_path / "trap.onnx")
    sel = select(path, calibrate=True, cache_dir=tmp_path, calibration_budget_s=0.5, task="none")
    bf16 = measured(sel, BF16)
    assert bf16.accuracy["judged_on"] == "tensors" and bf16.eligible


def nudged(delta: float):
    """Every class score moved by ``delta``: boxes near the threshold appear or vanish; the coordinates stay."""
    def corrupt(outputs):
        out = outputs[0].copy()
        out[:, 4:] = np.clip(out[:, 4:] + np.float32(delta), 0, 1)  # still a sigmoid's 0..1
        return [out]
    return corrupt


@pytest.mark.parametrize("delta, admitted", [(0.04, False), (2e-4, True)])
def test_a_candidate_whose_scores_move_is_judged_on_its_boxes(tmp_path, delta, admitted):
    model = formats.describe(detector_trap(tmp_path / "trap.onnx"))
    moved = accel(model)
    results = calibrate(Ranking([moved, cpu(model)]), opener({moved.name: {"corrupt": nudged(delta)}}), QUICK)
    m = results[moved.key]
    assert m.accuracy["judged_on"] == "task" and m.accuracy["max_error_fraction"] < 1e-3
    assert m.eligible is admitted, m.reason
    if not admitted:
        assert "against the reference is below 0.95" in m.reason


def test_a_yolo_layout_without_metadata_is_recognized_and_judged_on_boxes(tmp_path):
    rows = [(32, 32, 10, 10, 0, 0.9), (10, 50, 8, 8, 1, 0.8)]  # in the 64 x 64 input
    model = formats.describe(constant_output(tmp_path / "plain.onnx", candidates(rows, 3).T[None].copy(),
                                             dynamic=False))
    other = accel(model)
    results = calibrate(Ranking([other, cpu(model)]), opener({other.name: {}}), QUICK)
    assert results[other.key].accuracy["judged_on"] == "task"


def test_a_task_recognized_only_from_a_score_vector_is_judged_on_raw_outputs(tmp_path):
    from onnx_models import small_conv

    model = formats.describe(small_conv(tmp_path / "conv.onnx"))  # [1, 8] from an image: classify? unsure
    other = accel(model)
    results = calibrate(Ranking([other, cpu(model)]), opener({other.name: {}}), QUICK)
    m = results[other.key]
    assert m.eligible and m.accuracy["judged_on"] == "tensors"
    assert "only from output shapes" in m.accuracy["task_note"]


def test_a_named_task_judges_even_a_plain_score_vector(tmp_path):
    from onnx_models import small_conv

    model = formats.describe(small_conv(tmp_path / "conv.onnx"))
    other = accel(model)
    plan = CalibrationPlan(**{**QUICK.__dict__, "task": TaskRequest("classify")})
    results = calibrate(Ranking([other, cpu(model)]), opener({other.name: {}}), plan)
    m = results[other.key]
    assert m.eligible and m.accuracy["judged_on"] == "task" and m.accuracy["task"] == "classify"
    assert m.accuracy["task_metrics"]["top1_clear_cut"] == 1.0 and "classify top-1 1.000" in m.reason


def test_a_tolerance_that_is_no_share_is_a_config_error(tmp_path):
    path = detector_trap(tmp_path / "trap.onnx")
    # said where the option is built (edgeaccel.options), before the model is read
    with pytest.raises(ConfigError, match=r"accuracy_tolerance=-0.1\): accuracy_tolerance must be a positive"):
        edgeaccel.load(path, selection=edgeaccel.SelectionOptions(accuracy_tolerance=-0.1, calibrate=False),
                       runtime=edgeaccel.RuntimeOptions(cache=False))
    with pytest.raises(ConfigError, match="min_precision"):
        Thresholds(min_precision=1.5)


# -- judge() on its own ------------------------------------------------------------------------------------
@pytest.fixture
def detector(tmp_path):
    model = edgeaccel.load(detector_trap(tmp_path / "trap.onnx"), executor="onnxruntime", calibrate=False,
                           cache=False, task="detect")
    yield model
    model.close()


def photos(model, count=3):
    from edgeaccel.selection.calibration import task_inputs

    return task_inputs(model.task, count)


def test_nan_is_refused_even_when_the_boxes_agree(detector):
    samples = photos(detector)
    ref = [detector.run(x) for x in samples]
    bad = [[o.copy() for o in outs] for outs in ref]
    bad[1][0][0, 5, 0] = np.nan  # a background score: no box changes
    verdict = judge(ref, bad, detector.outputs, detector.outputs, detector.task)
    assert not verdict.ok and "NaN" in verdict.why


def test_no_box_on_either_side_is_judged_on_raw_outputs_and_says_so(detector):
    samples = photos(detector)
    ref = [[np.concatenate([o[:, :4], np.zeros_like(o[:, 4:])], axis=1) for o in detector.run(x)] for x in samples]
    verdict = judge(ref, ref, detector.outputs, detector.outputs, detector.task)
    assert verdict.ok and verdict.metrics["judged_on"] == "tensors"
    assert "no box on either side of any of the 3 samples" in verdict.why
    assert verdict.metrics["task_metrics"]["measured"] is False


def test_every_label_wrong_is_refused(detector):
    samples = photos(detector)
    ref = [detector.run(x) for x in samples]
    swapped = [[np.concatenate([o[:, :4], o[:, 5:6], o[:, 4:5]], axis=1) for o in outs] for outs in ref]
    verdict = judge(ref, swapped, detector.outputs, detector.outputs, detector.task)
    assert not verdict.ok and "detect precision 0 " in verdict.why


@pytest.mark.slow
def test_tune_judges_the_declared_task_and_task_none_judges_raw_outputs(tmp_path):
    import json

    path = detector_trap(tmp_path / "trap.onnx", signal=0.0)

    def tune(*extra: str) -> dict:
        out = run_cli("tune", path, "--cache-dir", tmp_path, "--json", *extra)
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        entries = [e for e in (*report["ranked"], *report["rejected"]) if e["candidate"] == "openvino:CPU"]
        return entries[0]["measurement"]["accuracy"]

    declared = tune()  # the model's metadata says task=detect
    assert declared["judged_on"] == "task" and declared["task_metrics"]["recall"] == 1.0
    assert tune("--task", "none")["judged_on"] == "tensors"  # tune measures again whatever the cache holds
    with edgeaccel.load(path, cache_dir=tmp_path, calibrate=False) as model:  # a plain load finds tune's
        assert model.executor.reason.startswith("measured")


@pytest.mark.slow
def test_a_plan_made_elsewhere_judges_with_the_loads_task_and_tolerance(tmp_path):
    """Background calibration builds its own plan (budget, pauses) and measures through selection.measure:
    the load's task and accuracy_tolerance still apply (before, its plan fell back to the default tolerance)."""
    path = detector_trap(tmp_path / "trap.onnx")
    quick = CalibrationPlan(budget_s=0.3, min_runs=3, max_rounds=3, warmup_s=0.01, head_to_head_s=0.1)
    sel = select(path, calibrate=False, cache=False, accuracy_tolerance=0.2)
    m = sel.measure(quick)
    judged = [x.accuracy for x in m.values() if "judged_on" in x.accuracy]
    assert judged and all(a["judged_on"] == "task" and a["tolerance"] == 0.2 for a in judged)
    plain = select(path, calibrate=False, cache=False, task="none").measure(quick)
    plain_judged = [x.accuracy for x in plain.values() if "judged_on" in x.accuracy]
    assert plain_judged and all(a["judged_on"] == "tensors" for a in plain_judged)


def test_a_changed_shape_is_refused_whatever_the_task(detector):
    samples = photos(detector)
    ref = [detector.run(x) for x in samples]
    cut = [[o[:, :, :20] for o in outs] for outs in ref]
    verdict = judge(ref, cut, detector.outputs, detector.outputs, detector.task)
    assert not verdict.ok and "shape" in verdict.why


def test_an_int8_twin_whose_one_scale_joins_pixels_and_scores_is_refused(detector):
    """The int8 head of the issue: coordinates 0..640 and scores 0..1 under one uint8 scale (2.5), so every
    score becomes 0 or 2.5. The tensor verdict sees at most one quantization step and admits it; the boxes
    say otherwise. The twin's outputs are dequantized with its own specs before decoding."""
    from dataclasses import replace

    from edgeaccel.agreement import agreement
    from edgeaccel.modelinfo import Quantization

    samples = photos(detector)
    ref = [detector.run(x) for x in samples]
    scale = 640 / 256
    spec = replace(detector.outputs[0], dtype=np.dtype(np.uint8), quantization=Quantization((scale,), (0,)))
    twin = [[np.clip(np.round(o / scale), 0, 255).astype(np.uint8) for o in outs] for outs in ref]
    raw = agreement(ref, twin, detector.outputs, [spec])
    assert raw.ok and raw.metrics["max_error_fraction"] < 0.01  # half a step of a 0..640 range: "agrees"
    verdict = judge(ref, twin, detector.outputs, [spec], detector.task)
    assert not verdict.ok and verdict.metrics["judged_on"] == "task", verdict.why


@pytest.mark.parametrize("metadata, judged_on", [({"task": "classify"}, "task"), ({}, "tensors")])
def test_a_score_vector_is_judged_as_classes_only_when_the_metadata_declares_it(tmp_path, metadata, judged_on):
    scores = np.array([[0.05, 0.7, 0.1, 0.15]], np.float32)
    model = formats.describe(constant_output(tmp_path / "scores.onnx", scores, dynamic=False, metadata=metadata))
    other = accel(model)
    m = calibrate(Ranking([other, cpu(model)]), opener({other.name: {}}), QUICK)[other.key]
    assert m.eligible and m.accuracy["judged_on"] == judged_on
