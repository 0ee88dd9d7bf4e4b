"""`edgeaccel val` and edgeaccel.evaluation.evaluate end to end: a YOLO-layout model whose boxes the test sets
(tests/vision_models.py) on images the test draws and labels, as YOLO txt labels and as COCO JSON; a bundle whose
artifacts keep or lose accuracy, side by side with the drop in points; the `check --max-map-drop` gate; and the
real SSD detector on real traffic frames labelled by hand (tests/data/traffic_val)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import MODELS, ROOT
from vision_models import INPUT, candidates, constant_output

import edgeaccel
from edgeaccel.errors import InputError
from edgeaccel.evaluation import evaluate, read_dataset
from edgeaccel.evaluation.progress import Progress

SHIPPED = Path(__file__).parent / "data" / "traffic_val"
A, B = (10.0, 10.0, 20.0, 20.0), (40.0, 40.0, 10.0, 10.0)  # x, y, w, h in the 64 x 64 images
# model rows (cx, cy, w, h, class, score): A at 0.9 and B at 0.8, both the model's class 0, "cat"
ROWS = [(20, 20, 20, 20, 0, 0.9), (45, 45, 10, 10, 0, 0.8)]
# image -> labelled boxes: B alone, A and B, nothing. Ranked A1 fp, A2 tp, A3 fp, B1 tp, B2 tp, B3 fp: the
# precision envelope is 0.6 at every recall, so AP = mAP = 0.6 at every IoU threshold (the boxes are exact)
LABELS = {"i1": [B], "i2": [A, B], "i3": []}
EXPECTED_MAP = 0.6


def yolo_model(path: Path, rows=ROWS) -> Path:
    values = candidates(rows, classes=2).T[None]
    return constant_output(path, values, dynamic=False, metadata={"names": "{0: 'cat', 1: 'dog'}"})


def draw_dataset(root: Path) -> Path:
    """YOLO layout, the dataset's classes in another order than the model's (matched by name)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for d in ("images", "labels"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for stem, boxes in LABELS.items():
        Image.fromarray(rng.integers(0, 255, (INPUT, INPUT, 3), dtype=np.uint8)).save(root / "images" / f"{stem}.png")
        lines = [f"1 {(x + w / 2) / INPUT} {(y + h / 2) / INPUT} {w / INPUT} {h / INPUT}" for x, y, w, h in boxes]
        (root / "labels" / f"{stem}.txt").write_text("".join(line + "\n" for line in lines))
    (root / "data.yaml").write_text("path: .\nval: images\nnames: {0: dog, 1: cat}\n")
    return root


def coco_json(root: Path) -> Path:
    """The same labels as COCO JSON, with COCO's sparse category ids."""
    images = [{"id": n, "file_name": f"{stem}.png", "width": INPUT, "height": INPUT}
              for n, stem in enumerate(LABELS, 1)]
    annotations = [{"id": len(images) * 10 + k, "image_id": n, "category_id": 17, "bbox": list(box), "iscrowd": 0,
                    "area": box[2] * box[3]}
                   for n, boxes in enumerate(LABELS.values(), 1) for k, box in enumerate(boxes)]
    path = root / "coco.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations,
                                "categories": [{"id": 17, "name": "cat"}, {"id": 18, "name": "dog"}]}))
    return path


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    root = tmp_path_factory.mktemp("val")
    dataset = draw_dataset(root / "dataset")
    model = yolo_model(root / "detector.onnx")
    (root / "bundle").mkdir()
    wrong = yolo_model(root / "bundle" / "wrong_labels.onnx", [r[:4] + (1,) + r[5:] for r in ROWS])  # "dog"
    shutil.copy(model, root / "bundle" / "float.onnx")
    shutil.copy(model, root / "bundle" / "same.onnx")
    (root / "bundle" / "edgeaccel-bundle.yaml").write_text(
        "schema: edgeaccel.bundle/1\nname: detector\nreference: float.onnx\n"
        "artifacts:\n  - path: same.onnx\n  - path: wrong_labels.onnx\n")
    return {"dataset": dataset, "coco": coco_json(dataset / "images"), "model": model, "bundle": root / "bundle",
            "wrong": wrong}


def test_val_cli_yolo_labels_json(cli, drawn):
    done = cli("val", drawn["model"], "--data", drawn["dataset"], "--executor", "onnxruntime", "--json",
               "--evaluator", "pycocotools")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "edgeaccel.val/1" and doc["dataset"]["format"] == "yolo"
    assert doc["dataset"]["images"] == 3 and doc["dataset"]["objects"] == 3
    [row] = doc["rows"]
    assert row["executor"] == "onnxruntime" and row["images"] == 3
    assert row["map50_95"] == pytest.approx(EXPECTED_MAP) and row["map50"] == pytest.approx(EXPECTED_MAP)
    assert row["pycocotools"] == {"map50_95": row["map50_95"], "map50": row["map50"]}
    assert row["classes"].startswith("by name: 2 of 2")  # "dog" has no object: no AP, not a zero
    assert row["per_class"]["cat"]["instances"] == 3 and row["per_class"]["dog"]["ap50_95"] is None
    assert row["ms_per_image"] > 0 and "drop_points" not in row  # a single model has no reference


def test_val_cli_coco_json_table(cli, drawn):
    done = cli("val", drawn["model"], "--data", drawn["coco"], "--executor", "onnxruntime", "--per-class")
    assert done.returncode == 0, done.stderr
    assert "(coco): 3 images, 3 objects" in done.stdout and "by name" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("detector.onnx"))
    assert row.split()[1:5] == ["onnxruntime", "60.0", "60.0", "3"]
    assert "\x1b" not in done.stderr and "[####" not in done.stderr  # no progress bar off a terminal


def test_val_cli_bundle_side_by_side_with_drop(cli, drawn):
    from edgeaccel.loader import executor_class

    executors = ["--executor", "onnxruntime"] + (["--executor", "openvino"]
                                                 if executor_class("openvino").installed() else [])
    done = cli("val", drawn["bundle"], "--data", drawn["dataset"], *executors, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert rows[0]["artifact"].endswith("float.onnx") and rows[0]["reference"]
    by = {(Path(r["artifact"]).name, r["executor"]): r for r in rows}
    for executor in executors[1::2]:
        assert by["float.onnx", executor]["map50_95"] == pytest.approx(EXPECTED_MAP)
        assert by["same.onnx", executor]["drop_points"]["map50_95"] == pytest.approx(0.0)
        wrong = by["wrong_labels.onnx", executor]
        assert wrong["map50_95"] == 0.0 and wrong["drop_points"]["map50_95"] == pytest.approx(60.0)
        assert wrong["drop_points"]["against"] == f"float.onnx on {executor}"
        assert wrong["dropped_predictions"] == 0 and wrong["per_class"]["dog"]["detections"] > 0


def test_check_max_map_drop_gate(cli, drawn, tmp_path):
    done = cli("check", drawn["bundle"], "--data", drawn["dataset"], "--max-map-drop", "5", "--executor",
               "onnxruntime", "--runs", "1")
    assert done.returncode == 1
    assert "wrong_labels.onnx on onnxruntime: mAP50-95 0.0 is 60.0 points below the reference's" in done.stderr
    assert "same.onnx on onnxruntime: mAP" not in done.stderr
    good = tmp_path / "good"
    good.mkdir()
    for name in ("float.onnx", "same.onnx"):
        shutil.copy(drawn["bundle"] / name, good / name)
    (good / "edgeaccel-bundle.yaml").write_text("schema: edgeaccel.bundle/1\nreference: float.onnx\n"
                                                "artifacts:\n  - path: same.onnx\n")
    passed = cli("check", good, "--data", drawn["coco"], "--max-map-drop", "0.5", "--executor", "onnxruntime",
                 "--runs", "1")
    assert passed.returncode == 0, passed.stderr
    plain = tmp_path / "plain"  # images without labels
    plain.mkdir()
    shutil.copy(drawn["dataset"] / "images" / "i1.png", plain)
    unlabelled = cli("check", good, "--data", plain, "--max-map-drop", "1")
    assert unlabelled.returncode == 4 and "needs --data to be a labelled dataset" in unlabelled.stderr


def test_evaluate_api_path_and_loaded_model(drawn):
    result = evaluate(drawn["model"], drawn["dataset"], executor="onnxruntime", evaluator="pycocotools")
    assert result.map50_95 == pytest.approx(EXPECTED_MAP) and result.library.map50_95 == result.map50_95
    assert result.per_class["cat"].ap50_95 == pytest.approx(EXPECTED_MAP)
    assert result.classes.startswith("by name")
    with edgeaccel.load(drawn["model"], executor="onnxruntime") as model:  # its own task options stay as they are
        again = evaluate(model, read_dataset(drawn["coco"]))
        assert model.task.conf == 0.25
    assert again.map50_95 == pytest.approx(EXPECTED_MAP) and again.executor.startswith("onnxruntime")
    by_id = evaluate(drawn["model"], drawn["dataset"], executor="onnxruntime", class_map={"cat": 0, "dog": 1})
    assert by_id.map50_95 == pytest.approx(EXPECTED_MAP) and by_id.classes.startswith("as given")
    first_two = evaluate(drawn["model"], drawn["coco"], executor="onnxruntime", max_images=2)
    assert first_two.images == 2 and first_two.map50_95 == pytest.approx(0.75)  # without the empty image
    crossed = evaluate(drawn["model"], drawn["dataset"], executor="onnxruntime", class_map={"cat": "dog"})
    assert crossed.map50_95 == 0.0 and crossed.dropped > 0  # the model's cats stand for no dataset class now


def test_val_refuses_what_it_cannot_measure(cli, drawn, tmp_path):
    not_a_dataset = cli("val", drawn["model"], "--data", tmp_path)
    assert not_a_dataset.returncode == 4 and "is not a labelled dataset" in not_a_dataset.stderr
    assert "Traceback" not in not_a_dataset.stderr
    classifier = cli("val", MODELS / "mobilenet_v2_1.0_224_quant.tflite", "--data", drawn["dataset"],
                     "--executor", "litert")
    assert classifier.returncode == 1 and "error: mobilenet_v2_1.0_224_quant.tflite on litert" in classifier.stderr
    assert "Traceback" not in classifier.stderr
    with pytest.raises(InputError, match="conf must lie in 0..1"):
        evaluate(drawn["model"], drawn["dataset"], conf=5)


def test_progress_bar_only_on_a_terminal():
    shown = io.StringIO()
    bar = Progress(3, "model on litert", shown, enabled=True)
    for _ in range(3):
        bar.step()
    bar.close()
    assert "3/3" in shown.getvalue() and "[########################]" in shown.getvalue()
    quiet = io.StringIO()  # not a terminal: nothing
    bar = Progress(3, "x", quiet)
    bar.step()
    bar.close()
    assert quiet.getvalue() == ""


@pytest.mark.shared
def test_real_ssd_detector_on_hand_labelled_traffic_frames(cli):
    """traffic_model.tflite (LiteRT) on four frames of the shared video labelled by hand: its sedans and pickups
    found where they are (mAP50 0.49, mAP50-95 0.22 when measured), the same figure as pycocotools', and the same
    from the YOLO labels and the COCO JSON of those boxes."""
    common = ["--labels", MODELS / "traffic_label_map.pbtxt", "--executor", "litert", "--json",
              "--evaluator", "pycocotools"]
    yolo = cli("val", MODELS / "traffic_model.tflite", "--data", SHIPPED, *common)
    coco = cli("val", MODELS / "traffic_model.tflite", "--data", SHIPPED / "annotations.json", *common)
    assert yolo.returncode == 0 and coco.returncode == 0, yolo.stderr + coco.stderr
    [row] = json.loads(yolo.stdout)["rows"]
    [same] = json.loads(coco.stdout)["rows"]
    assert row["pycocotools"]["map50_95"] == row["map50_95"] and same["pycocotools"]["map50"] == same["map50"]
    assert row["map50_95"] == pytest.approx(same["map50_95"], abs=1e-3)
    assert row["map50"] >= 0.35 and row["map50_95"] >= 0.15
    assert row["per_class"]["sedan"]["ap50"] > 0.2 and row["per_class"]["pickup_suv_van"]["ap50"] > 0.2
    assert row["classes"].startswith("by name: 3 of 3")


def test_missing_pycocotools_is_said_once_before_any_model_runs(cli, drawn, tmp_path):
    blocker = tmp_path / "blocked" / "pycocotools"  # shadows the installed package, as on a machine without it
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named pycocotools')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'blocked'}{os.pathsep}{ROOT}"}
    done = cli("val", str(drawn["model"]), "--data", str(drawn["dataset"]), "--evaluator", "pycocotools", timeout=300,
               env=env)
    assert done.returncode == 8 and done.stderr.count("pycocotools evaluator is not installed") == 1
    assert "edgeaccel[val]" in done.stderr and done.stdout == ""
