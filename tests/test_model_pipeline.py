"""edgeaccel.modelfiles.pipeline: one description per model, read from the user, a YAML beside the model, the
bundle manifest, ONNX metadata_props (edgeaccel's key and Ultralytics'), TFLite metadata and a label file beside
the model, in that order; validated in one place; used by image_input so that a dynamic-size model is fed at
its declared size the same way the vision task feeds it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from vision_models import candidates, constant_output

import edgeaccel
from edgeaccel.vision.plausible import grid_cells
from edgeaccel.errors import ConfigError, ConversionError, InputError
from edgeaccel.modelfiles.describe import describe_pipeline, label_file_beside
from edgeaccel.modelfiles.pipeline import PIPELINE_KEY, declared_shape, parse_imgsz, validate

NAMES = "{0: 'person', 1: 'car', 2: 'dog'}"
ULTRALYTICS = {"names": NAMES, "imgsz": "[48, 80]", "task": "detect", "stride": "32"}
ROWS = [(40, 24, 20, 20, 0, 0.9), (10, 40, 8, 8, 2, 0.6)]


def _yolo(path, metadata=ULTRALYTICS):
    # as many candidates as a YOLO head has on the declared 48x80 input (edgeaccel refuses other counts)
    n = grid_cells(48, 80, (8, 16, 32))
    return constant_output(path, candidates(ROWS, classes=3, n=n).T[None], metadata=metadata)


@pytest.fixture
def yolo(tmp_path):
    return _yolo(tmp_path / "yolo.onnx")


def test_ultralytics_metadata_gives_size_task_labels_and_letterbox(yolo):
    pipe = edgeaccel.describe_pipeline(yolo)  # no runtime loaded
    assert pipe.imgsz == (48, 80) and pipe.task == "detect" and pipe.letterbox is True
    assert pipe.labels == {0: "person", 1: "car", 2: "dog"}
    assert pipe.decoder_options == {"stride": 32, "classes": 3}
    assert set(pipe.sources.values()) == {"metadata_props (Ultralytics)"}


def test_user_beats_sidecar_beats_metadata_and_each_field_says_where_it_came_from(yolo):
    (yolo.parent / "yolo.edgeaccel.yaml").write_text("imgsz: 96\nletterbox: false\ncolor: BGR\n")
    pipe = describe_pipeline(yolo, user={"letterbox": True})
    assert pipe.imgsz == (96, 96) and pipe.sources["imgsz"] == "yolo.edgeaccel.yaml"
    assert pipe.letterbox is True and pipe.sources["letterbox"] == "user"
    assert pipe.color == "BGR" and pipe.task == "detect"
    assert pipe.sources["task"] == "metadata_props (Ultralytics)"


def test_a_wrong_field_is_named_wherever_it_is_written(yolo):
    (yolo.parent / "yolo.edgeaccel.yaml").write_text("imgsz: [480, big]\n")
    with pytest.raises(ConfigError) as err:
        describe_pipeline(yolo)
    assert err.value.key == "imgsz" and "yolo.edgeaccel.yaml" in str(err.value)
    for data, key in (({"task": "track"}, "task"), ({"layout": "CHWN"}, "layout"), ({"letterbox": "yes"}, "letterbox"),
                      ({"normalize": {"mean": [0], "std": [0]}}, "normalize"), ({"colour": "RGB"}, "colour")):
        with pytest.raises(ConfigError) as err:
            validate(data, "here")
        assert err.value.key == key and key in str(err.value)
    assert parse_imgsz("480x640") == (480, 640) == parse_imgsz([480, 640]) and parse_imgsz(320) == (320, 320)


def test_label_file_beside_the_model_by_a_documented_rule(tmp_path):
    model = tmp_path / "net.onnx"
    constant_output(model, candidates(ROWS, classes=3).T[None], metadata={"imgsz": "64"})
    (tmp_path / "imagenet_labels.txt").write_text("a\nb\n")  # another model's: never taken
    assert label_file_beside(model) is None and describe_pipeline(model).labels is None
    (tmp_path / "labels.txt").write_text("cat\ndog\nbird\n")
    assert describe_pipeline(model).labels == {0: "cat", 1: "dog", 2: "bird"}
    (tmp_path / "net.labels").write_text("x\ny\nz\n")  # named after the model: it wins over the folder's
    pipe = describe_pipeline(model)
    assert pipe.labels == {0: "x", 1: "y", 2: "z"} and pipe.sources["labels"] == "net.labels"


def test_a_pbtxt_map_beside_the_model_keeps_its_offset(tmp_path):
    model = tmp_path / "det.onnx"
    constant_output(model, candidates(ROWS, classes=3).T[None], metadata={"imgsz": "64"})
    (tmp_path / "det_label_map.pbtxt").write_text('item { id: 1 name: "sedan" }\nitem { id: 2 name: "van" }\n')
    pipe = describe_pipeline(model)
    assert pipe.label_set().name(0) == "sedan" and pipe.label_list() == ["sedan", "van"]


def test_image_input_feeds_a_dynamic_model_exactly_as_its_detect_task_does(yolo):
    image = (np.arange(60 * 120 * 3) % 251).astype(np.uint8).reshape(60, 120, 3)
    from PIL import Image

    path = yolo.parent / "photo.png"
    Image.fromarray(image).save(path)
    with edgeaccel.load(yolo, executor="onnxruntime") as model:
        fed = edgeaccel.image_input(path, model)
        assert fed.shape == (1, 3, 48, 80)
        want, frame = model.task.preprocess(image)
        assert frame.pad_y > 0  # letterboxed, as the metadata says
        np.testing.assert_array_equal(fed, want[0])
        stretched = edgeaccel.image_input(path, model, letterbox=False, imgsz=64)
        assert stretched.shape == (1, 3, 64, 64)


def test_a_dynamic_model_that_declares_nothing_is_refused_with_the_way_out(tmp_path):
    bare = constant_output(tmp_path / "bare.onnx", candidates(ROWS, classes=3).T[None])
    info = edgeaccel.describe(bare)
    with pytest.raises(InputError) as err:
        edgeaccel.image_input(edgeaccel.__path__[0] + "/samples/bird.png", info)
    assert "--imgsz" in err.value.hint and "letterbox" in err.value.hint
    assert edgeaccel.image_input(edgeaccel.__path__[0] + "/samples/bird.png", info, imgsz=32).shape == (1, 3, 32, 32)
    assert declared_shape(info.inputs[0], describe_pipeline(bare)) is None
    assert declared_shape(info.inputs[0], describe_pipeline(bare, user={"imgsz": "16x24"})) == [1, 3, 16, 24]


def test_manifest_pipeline_is_read_and_a_wrong_field_fails_the_load(tmp_path):
    rows = [(40, 16, 20, 20, 0, 0.9), (10, 20, 8, 8, 2, 0.6)]  # in the 32x64 input the manifest declares
    constant_output(tmp_path / "m.onnx", candidates(rows, classes=3, n=grid_cells(32, 64, (8, 16, 32))).T[None])
    manifest = tmp_path / "edgeaccel-bundle.yaml"
    manifest.write_text("schema: edgeaccel.bundle/1\nartifacts:\n  - path: m.onnx\n"
                        "pipeline:\n  imgsz: [32, 64]\n  task: detect\n  labels: [a, b, c]\n")
    pipe = describe_pipeline(tmp_path)
    assert pipe.imgsz == (32, 64) and pipe.sources["imgsz"] == "the bundle manifest"
    assert pipe.label_list() == ["a", "b", "c"]
    with edgeaccel.load(tmp_path, executor="onnxruntime") as model:
        assert model.pipeline.imgsz == (32, 64)
        result = model.predict(np.zeros((32, 64, 3), np.uint8))
        assert {b.label for b in result.boxes} <= {"a", "b", "c"} and result.boxes
    manifest.write_text("schema: edgeaccel.bundle/1\nartifacts:\n  - path: m.onnx\npipeline:\n  imgsz: huge\n")
    with pytest.raises(ConfigError) as err:
        edgeaccel.load(tmp_path)
    assert err.value.key == "imgsz" and "pipeline" in str(err.value)


def test_labels_given_to_load_lay_over_the_metadata(yolo, tmp_path):
    with edgeaccel.load(yolo, executor="onnxruntime", labels=["p", "q", "r"]) as model:
        assert model.pipeline.labels == {0: "p", 1: "q", 2: "r"} and model.pipeline.sources["labels"] == "user"
        assert {b.label for b in model.predict(np.zeros((48, 80, 3), np.uint8)).boxes} == {"p", "r"}


def test_convert_writes_the_pipeline_into_the_manifest_and_every_onnx_artifact(yolo, tmp_path):
    from edgeaccel.convert.pipeline import convert
    from edgeaccel.modelfiles.labels import onnx_metadata

    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(edgeaccel.__path__[0] + "/samples/bird.png", images / "bird.png")
    result = convert(yolo, "onnx-int8", tmp_path / "out", calibration=images)
    assert result.calibration_samples == 1
    assert np.load(result.calibration).shape == (1, 3, 48, 80)  # calibrated at the declared size
    import yaml

    manifest = yaml.safe_load(result.manifest.read_text())
    assert manifest["pipeline"]["imgsz"] == [48, 80] and manifest["pipeline"]["letterbox"] is True
    assert (tmp_path / "out" / manifest["labels"]).read_text().split() == ["person", "car", "dog"]
    for artifact in [a.path for a in result.artifacts] + [result.reference]:
        stamped = json.loads(onnx_metadata(artifact)[PIPELINE_KEY])
        assert stamped["imgsz"] == [48, 80] and stamped["labels"] == {"0": "person", "1": "car", "2": "dog"}
        alone = tmp_path / "alone" / artifact.name  # copied out of its bundle, it still says how to feed it
        alone.parent.mkdir(exist_ok=True)
        shutil.copy(artifact, alone)
        pipe = describe_pipeline(alone)
        assert pipe.imgsz == (48, 80) and pipe.label_list() == ["person", "car", "dog"]
        assert pipe.sources["imgsz"] == f"metadata_props ({PIPELINE_KEY})"


def test_input_shape_declares_the_size_of_a_dynamic_onnx_input(tmp_path):
    from edgeaccel.convert.pipeline import convert

    bare = constant_output(tmp_path / "bare.onnx", candidates(ROWS, classes=3).T[None])
    images = tmp_path / "images"
    images.mkdir()
    shutil.copy(edgeaccel.__path__[0] + "/samples/bird.png", images / "bird.png")
    with pytest.raises(ConversionError) as err:
        convert(bare, "onnx-int8", tmp_path / "o1", calibration=images)
    assert "--imgsz" in err.value.hint
    with pytest.raises(ConversionError, match="inputs are"):
        convert(bare, "onnx-int8", tmp_path / "o2", calibration=images, input_shapes={"x": (1, 3, 32, 32)})
    with pytest.raises(ConversionError, match="does not fit"):
        convert(bare, "onnx-int8", tmp_path / "o3", calibration=images, input_shapes={"images": (1, 4, 32, 32)})
    result = convert(bare, "onnx-int8", tmp_path / "o4", calibration=images, input_shapes={"images": (1, 3, 32, 48)})
    assert np.load(result.calibration).shape == (1, 3, 32, 48)
    assert describe_pipeline(result.artifacts[0].path).imgsz == (32, 48)
    assert edgeaccel.describe(result.artifacts[0].path).inputs[0].shape[2:] == (None, None)  # still dynamic


def test_an_ultralytics_export_folder_metadata_yaml_describes_an_openvino_model(tmp_path):
    ov = pytest.importorskip("openvino")
    source = _yolo(tmp_path / "src.onnx", metadata={})
    folder = tmp_path / "yolo_openvino_model"
    folder.mkdir()
    ov.save_model(ov.Core().read_model(str(source)), str(folder / "yolo.xml"))
    (folder / "metadata.yaml").write_text("task: detect\nstride: 32\nimgsz:\n- 48\n- 80\n"
                                          "names:\n  0: person\n  1: car\n  2: dog\n")
    pipe = describe_pipeline(folder / "yolo.xml")
    assert pipe.imgsz == (48, 80) and pipe.letterbox and pipe.label_list() == ["person", "car", "dog"]
    assert pipe.sources["imgsz"] == "metadata.yaml (Ultralytics)"


def test_colour_order_and_normalization_declared_beside_the_model_shape_the_input(tmp_path):
    model = constant_output(tmp_path / "m.onnx", candidates(ROWS, classes=3).T[None], dynamic=False)
    photo = tmp_path / "red.png"
    from PIL import Image

    Image.fromarray(np.tile(np.array([200, 100, 0], np.uint8), (64, 64, 1))).save(photo)
    info = edgeaccel.describe(model)
    plain = edgeaccel.image_input(photo, info)
    assert plain[0, :, 0, 0] == pytest.approx([200 / 255, 100 / 255, 0])
    (tmp_path / "m.edgeaccel.yaml").write_text("color: BGR\nnormalize: {mean: [100, 100, 100], std: [50, 50, 50]}\n")
    fed = edgeaccel.image_input(photo, info)
    assert fed[0, :, 0, 0] == pytest.approx([-2.0, 0.0, 2.0])  # B, G, R, each (pixel - 100) / 50
    with edgeaccel.load(model, executor="onnxruntime", task="detect") as loaded:
        arrays, _ = loaded.task.preprocess(np.asarray(Image.open(photo)))
    np.testing.assert_allclose(arrays[0], fed)  # the vision task feeds it the same way


def test_a_size_given_for_a_fixed_input_is_refused_not_ignored(tmp_path):
    model = constant_output(tmp_path / "fixed.onnx", candidates(ROWS, classes=3).T[None], dynamic=False)
    with pytest.raises(InputError, match="fixed at 64x64"):
        edgeaccel.image_input(edgeaccel.__path__[0] + "/samples/bird.png", edgeaccel.describe(model), imgsz=32)
    assert edgeaccel.image_input(edgeaccel.__path__[0] + "/samples/bird.png", edgeaccel.describe(model),
                                 imgsz=64).shape == (1, 3, 64, 64)


def test_ultralytics_json_before_a_tensorrt_engine_describes_it(tmp_path):
    engine = tmp_path / "yolo.engine"
    meta = json.dumps({"task": "pose", "imgsz": [320, 320], "names": {"0": "person"}, "stride": 32,
                       "kpt_shape": [17, 3]}).encode()
    engine.write_bytes(len(meta).to_bytes(4, "little") + meta + b"ftrt" + bytes(64))
    pipe = describe_pipeline(edgeaccel.describe(engine))
    assert pipe.imgsz == (320, 320) and pipe.task == "pose" and pipe.label_list() == ["person"]
    assert pipe.decoder_options["kpt_shape"] == [17, 3] and pipe.letterbox
