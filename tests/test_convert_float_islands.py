"""convert keeps in float what int8 would break, on a YOLOv8-style detector built by the tests (yolo_like.py):
int8 class scores stay continuous and the int8 artifacts find the float model's boxes on held-out images, on
ONNX Runtime (onnx-int8) and OpenVINO (openvino-int8); the manifest and the report say what was kept and why;
--keep-float names nodes or tensors and refuses unknown ones; the source's metadata survives."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yolo_like

pytest.importorskip("onnxruntime", reason="the onnx extra is part of dev")

import edgeaccel  # noqa: E402
from edgeaccel.convert import convert  # noqa: E402
from edgeaccel.convert import float_islands  # noqa: E402
from edgeaccel.errors import ConversionError  # noqa: E402

CALIBRATION_SEEDS = range(0, 32)
HELD_OUT_SEEDS = range(5000, 5060)  # never seen by the calibration


@pytest.fixture(scope="module")
def detector(tmp_path_factory):
    return yolo_like.build(tmp_path_factory.mktemp("yolo_like") / "squares.onnx")


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    return yolo_like.write_images(tmp_path_factory.mktemp("calib"), CALIBRATION_SEEDS)


@pytest.fixture(scope="module")
def bundle(detector, calibration, tmp_path_factory):
    return convert(detector, "onnx-int8,openvino-int8", tmp_path_factory.mktemp("bundle"), calibration=calibration,
                   force=True)


def _detections(model, image) -> list[tuple[int, tuple]]:
    return [(b.class_id, b.xyxy) for b in model.predict(image).boxes]


def _agreement(path, executor: str, float_path) -> tuple[float, float, int]:
    """Precision and recall of ``path``'s boxes against the float model's (IoU >= 0.5, same class) pooled over
    the held-out images, and the number of distinct class-score values it gave."""
    hits = found = expected = 0
    scores: set[float] = set()
    with edgeaccel.load(float_path, executor="onnxruntime", task="detect") as reference, \
            edgeaccel.load(path, executor=executor, task="detect") as model:
        for seed in HELD_OUT_SEEDS:
            image, _ = yolo_like.squares(seed)
            h, f, e = yolo_like.match(_detections(model, image), _detections(reference, image))
            hits, found, expected = hits + h, found + f, expected + e
            arrays, _ = model.task.preprocess(image)
            output = np.asarray(model.run(arrays)[0])
            scores |= set(np.round(output[0, 4:].ravel(), 5).tolist())
    assert expected > 50  # the held-out images hold real squares for the float model to find
    return hits / max(found, 1), hits / expected, len(scores)


def test_float_detector_finds_the_squares(detector):
    hits = found = expected = 0
    with edgeaccel.load(detector, executor="onnxruntime", task="detect") as model:
        assert model.task.kind == "yolov8"
        for seed in HELD_OUT_SEEDS:
            image, truth = yolo_like.squares(seed)
            h, f, e = yolo_like.match(_detections(model, image), truth)
            hits, found, expected = hits + h, found + f, expected + e
    assert hits / found >= 0.95 and hits / expected >= 0.95, (hits, found, expected)


def test_whole_graph_int8_destroys_the_detector(detector, calibration, tmp_path):
    """What convert did before float islands: ONNX Runtime's quantize_static over the whole graph."""
    from onnxruntime import quantization as q

    from edgeaccel.convert import calibration as calib_mod

    info = edgeaccel.describe(detector)
    feeds = calib_mod.load(calibration, info.inputs).feeds()

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.left = iter(feeds)

        def get_next(self):
            return next(self.left, None)

    whole = tmp_path / "whole_int8.onnx"
    q.quantize_static(str(detector), str(whole), Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    from edgeaccel.vision.errors import LayoutRefused

    try:
        precision, recall, distinct = _agreement(whole, "onnxruntime", detector)
    except LayoutRefused as refused:  # its boxes are so wrong that the decoder will not call them boxes
        assert "no area or lie outside" in refused.message
    else:
        assert precision < 0.5 and distinct < 10, (precision, recall, distinct)


@pytest.mark.slow
@pytest.mark.parametrize("target,executor", [("onnx-int8", "onnxruntime"), ("openvino-int8", "openvino")])
def test_int8_scores_are_continuous_and_boxes_match_float_on_held_out_images(bundle, detector, target, executor):
    artifact = next(a for a in bundle.artifacts if a.target == target)
    precision, recall, distinct = _agreement(artifact.path, executor, detector)
    assert distinct > 50, distinct
    assert precision >= 0.95 and recall >= 0.95, (precision, recall)


def test_manifest_and_report_say_what_was_kept_float_and_why(bundle):
    from edgeaccel.schema import load_yaml

    manifest = load_yaml(bundle.manifest)
    for entry in manifest["artifacts"]:
        kept = {k["node"]: k for k in entry["kept_float"]}
        # the Concat of box pixels and class scores that feeds the output, and the Sigmoid before it
        assert kept["decode.output"]["op"] == "Concat" and kept["decode.output"]["why"].startswith("head")
        assert kept["decode.sigmoid"]["op"] == "Sigmoid"
        # the body stays int8
        assert not {"backbone.colour", "backbone.smooth", "head8.cls", "head16.cls"} & set(kept)
        # the box moments' Conv holds area (0..400) and offset sums (thousands) in one tensor: the sensitivity
        # pass finds a per-tensor uint8 scale too coarse for it
        assert any(k["why"].startswith("sensitivity") and k["op"] == "Conv" for k in kept.values())
        assert "kept float" in entry["note"] and "sensitivity pass" in entry["note"]
    report = bundle.as_dict()
    assert report["schema"] == "edgeaccel.convert/1"
    assert all(a["kept_float"] for a in report["artifacts"])


def test_every_onnx_artifact_keeps_the_source_metadata(bundle):
    import onnx

    written = sorted(bundle.out.glob("*.onnx"))
    assert len(written) == 2  # the float reference and the int8 model
    for path in written:
        props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
        for key, value in yolo_like.metadata().items():
            assert props.get(key) == value, (path.name, key)
    artifact = next(a for a in bundle.artifacts if a.target == "onnx-int8")
    with edgeaccel.load(artifact.path, executor="onnxruntime", task="detect") as model:
        assert model.predict(yolo_like.squares(5000)[0]).boxes[0].label in yolo_like.CLASSES


def test_keep_float_takes_node_and_tensor_names(detector, calibration, tmp_path):
    result = convert(detector, "onnx-int8", tmp_path / "out", calibration=calibration,
                     keep_float=["backbone.smooth", "foreground"])  # a node, and a tensor (backbone.foreground's)
    kept = {k["node"]: k["why"] for k in result.artifacts[0].kept_float}
    assert kept["backbone.smooth"] == "--keep-float"
    assert kept["backbone.foreground"].startswith("--keep-float foreground")
    import onnx

    model = onnx.load(str(result.artifacts[0].path))
    smooth = next(n for n in model.graph.node if n.name == "backbone.smooth")
    weight = next(i for i in model.graph.initializer if i.name == smooth.input[1])
    assert weight.data_type == onnx.TensorProto.FLOAT  # float weights: the node is out of int8 entirely


def test_unknown_keep_float_name_lists_close_names(detector, calibration, tmp_path):
    with pytest.raises(ConversionError) as caught:
        convert(detector, "onnx-int8", tmp_path / "out", calibration=calibration, keep_float=["backbone.smoth"])
    assert "backbone.smoth" in caught.value.message and "backbone.smooth" in caught.value.hint
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_sensitivity_pass_can_be_skipped(detector, calibration, tmp_path):
    result = convert(detector, "onnx-int8", tmp_path / "out", calibration=calibration, sensitivity_s=0)
    kept = result.artifacts[0].kept_float
    assert kept and not any(k["why"].startswith("sensitivity") for k in kept)
    assert "sensitivity pass" not in result.artifacts[0].note
    with pytest.raises(ConversionError, match="sensitivity_s"):
        convert(detector, "onnx-int8", tmp_path / "neg", calibration=calibration, sensitivity_s=-1)


def test_keep_float_needs_an_int8_onnx_target(detector, tmp_path):
    with pytest.raises(ConversionError, match="int8 ONNX targets"):
        convert(detector, "onnx-float", tmp_path / "out", keep_float=["backbone.smooth"])


def test_cli_keep_float_json_text_and_unknown_name(cli, detector, calibration, tmp_path):
    done = cli("convert", str(detector), "--to", "onnx-int8", "--out", str(tmp_path / "out"), "--calibration",
               str(calibration), "--keep-float", "backbone.smooth", "--json")
    assert done.returncode == 0, done.stderr
    kept = json.loads(done.stdout)["artifacts"][0]["kept_float"]
    assert {"node": "backbone.smooth", "op": "Conv", "why": "--keep-float"} in kept
    done = cli("convert", str(detector), "--to", "onnx-int8", "--out", str(tmp_path / "text"), "--calibration",
               str(calibration))
    assert done.returncode == 0, done.stderr
    assert "kept float:" in done.stdout and "head: decode after the last compute layers" in done.stdout
    assert "head8.box (Conv): sensitivity:" in done.stdout
    done = cli("convert", str(detector), "--to", "onnx-int8", "--out", str(tmp_path / "bad"), "--calibration",
               str(calibration), "--keep-float", "backbone.smoth")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "'backbone.smoth'" in done.stderr and "backbone.smooth" in done.stderr


def _two_range_model(path, then_conv: bool):
    """a (0..1) and 1000 * b joined by a Concat: the output directly, or through a 1x1 Conv."""
    from onnx import TensorProto, helper, numpy_helper

    import onnx

    nodes = [helper.make_node("Mul", ["b", "thousand"], ["big"], name="scale"),
             helper.make_node("Concat", ["a", "big"], ["joined"], name="join", axis=1)]
    inits = [numpy_helper.from_array(np.array(1000, np.float32), "thousand")]
    out = "joined"
    if then_conv:
        nodes.append(helper.make_node("Conv", ["joined", "w"], ["y"], name="mix"))
        inits.append(numpy_helper.from_array(np.ones((1, 2, 1, 1), np.float32), "w"))
        out = "y"
    graph = helper.make_graph(nodes, "two_ranges",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, 4, 4]) for n in "ab"],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1 if then_conv else 2, 4, 4])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.save(model, str(path))
    return model


def test_join_of_very_different_ranges_is_kept_float_or_left_to_the_sensitivity_pass(tmp_path):
    rng = np.random.default_rng(0)
    feeds = [{"a": rng.random((1, 1, 4, 4), np.float32), "b": rng.random((1, 1, 4, 4), np.float32)}
             for _ in range(4)]
    plan = float_islands.plan(_two_range_model(tmp_path / "out.onnx", then_conv=False), feeds)
    assert plan.nodes == ["join"]
    ratio = float(re.search(r"differ (\d+)x", plan.kept[0].why).group(1))
    assert 500 < ratio < 2000
    plan = float_islands.plan(_two_range_model(tmp_path / "conv.onnx", then_conv=True), feeds)
    assert "join" not in plan.nodes  # a Conv reads it: one scale is needed there anyway
    assert [name for name, _ in plan.candidates] == ["join"]
    similar = [{"a": f["a"], "b": f["b"] / 1000} for f in feeds]  # same ranges now: nothing to keep
    assert float_islands.plan(_two_range_model(tmp_path / "same.onnx", then_conv=False), similar).nodes == []


def test_dfl_style_conv_after_softmax_is_decode_not_a_last_layer(tmp_path):
    """YOLOv8's DFL: Softmax over 16 bins, then a fixed 1x1 Conv (weights 0..15) takes the expectation."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Conv", ["x", "w"], ["logits"], name="box_conv"),
             helper.make_node("Softmax", ["logits"], ["bins"], name="dfl.softmax", axis=1),
             helper.make_node("Conv", ["bins", "proj"], ["dist"], name="dfl.conv")]
    inits = [numpy_helper.from_array(np.ones((16, 3, 1, 1), np.float32), "w"),
             numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "proj")]
    graph = helper.make_graph(nodes, "dfl", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("dist", TensorProto.FLOAT, [1, 1, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model)
    assert float_islands.plan(model, []).nodes == ["dfl.softmax", "dfl.conv"]


def test_metadata_copy_fills_what_a_quantizer_dropped_and_keeps_what_it_wrote():
    """ONNX Runtime 1.31's quantize_static keeps metadata_props (and adds its own); convert does not rely on it."""
    from onnx import helper

    from edgeaccel.convert.onnx_quantize import copy_metadata

    source, written = helper.make_model(helper.make_graph([], "s", [], [])), helper.make_model(
        helper.make_graph([], "w", [], []))
    for key, value in yolo_like.metadata().items():
        source.metadata_props.add(key=key, value=value)
    written.metadata_props.add(key="task", value="segment")  # whatever the writer set is not overwritten
    assert copy_metadata(source, written) == len(yolo_like.metadata()) - 1
    props = {p.key: p.value for p in written.metadata_props}
    assert props["task"] == "segment" and props["names"] == yolo_like.metadata()["names"]


@pytest.mark.slow
def test_yolov8_export_topology_keeps_exactly_the_detect_decode_float(tmp_path):
    """Ultralytics' graph shape (C2f, SPPF, PAN neck, Detect with DFL): the last convolutions are the six
    cv2.i.2 / cv3.i.2; everything after them, the DFL Softmax and Conv included, is decode; no body node is."""
    import onnx
    import onnxruntime as ort
    import yolov8_topology

    path = yolov8_topology.build(tmp_path / "v8.onnx", size=64)
    model = onnx.load(str(path))
    head = {n.name for n in model.graph.node if n.name.startswith("/model.22/")
            and not n.name.startswith(("/model.22/cv2", "/model.22/cv3"))}
    assert float_islands.plan(model, []).nodes and set(float_islands.plan(model, []).nodes) == head
    rng = np.random.default_rng(0)
    np.save(tmp_path / "calib.npy", rng.random((8, 3, 64, 64), dtype=np.float32))
    result = convert(path, "onnx-int8", tmp_path / "out", calibration=tmp_path / "calib.npy")
    assert head <= {k["node"] for k in result.artifacts[0].kept_float}
    image = {"images": rng.random((1, 3, 64, 64), dtype=np.float32)}
    want = ort.InferenceSession(str(path)).run(None, image)[0]
    got = ort.InferenceSession(str(result.artifacts[0].path)).run(None, image)[0]
    assert len(np.unique(got[0, 4:])) > 50  # continuous scores
    assert np.abs(got[0, 4:] - want[0, 4:]).max() < 0.02
    from onnxruntime import quantization as q

    feeds = iter({"images": a[None]} for a in np.load(tmp_path / "calib.npy"))

    class Reader(q.CalibrationDataReader):
        def get_next(self):
            return next(feeds, None)

    q.quantize_static(str(path), str(tmp_path / "whole.onnx"), Reader(), quant_format=q.QuantFormat.QDQ,
                      per_channel=True)
    whole = ort.InferenceSession(str(tmp_path / "whole.onnx")).run(None, image)[0]
    assert len(np.unique(whole[0, 4:])) < 5  # the control: whole-graph int8 of the same graph
