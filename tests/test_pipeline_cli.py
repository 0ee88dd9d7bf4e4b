"""A dynamic-shape YOLO-layout ONNX ([1, 3, ?, ?]) with Ultralytics metadata (imgsz, names, task, stride)
through every command of the README's table that takes an image, from a real subprocess on real runtimes:
each feeds it at the declared size, letterboxed, instead of refusing "dynamic image size". Also: a label file
beside a model is used without --task, and --labels reaches a video's results without --task."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from vision_models import candidates, constant_output

import edgeaccel
from edgeaccel.vision.plausible import grid_cells

SAMPLE = Path(edgeaccel.__path__[0]) / "samples"
BIRD = str(SAMPLE / "bird.png")  # 512 x 343: letterboxed into 48 x 80 with bars top and bottom
ROWS = [(40, 24, 20, 20, 0, 0.9), (10, 40, 8, 8, 2, 0.6)]
META = {"names": "{0: 'person', 1: 'car', 2: 'dog'}", "imgsz": "[48, 80]", "task": "detect", "stride": "32"}


@pytest.fixture(scope="module")
def yolo(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dyn")
    return constant_output(folder / "yolo.onnx", candidates(ROWS, classes=3, n=grid_cells(48, 80, (8, 16, 32))).T[None],
                           metadata=META)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("images")
    shutil.copy(BIRD, folder / "bird.png")
    from PIL import Image

    Image.fromarray(np.full((90, 40, 3), 200, np.uint8)).save(folder / "tall.png")  # another aspect ratio
    return folder


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dynamic image size" not in done.stderr
    return done


def test_plain_run_feeds_the_image_at_the_declared_size_letterboxed(cli, yolo):
    report = json.loads(ok(cli("run", str(yolo), "--input", BIRD, "--runs", "1", "--json")).stdout)
    assert report["inputs"][0]["source"].startswith("bird.png: 512x343 -> NCHW 48x80x3")
    assert "letterboxed" in report["inputs"][0]["source"]
    random = json.loads(ok(cli("run", str(yolo), "--runs", "1", "--json")).stdout)
    assert "1x3x48x80" in random["inputs"][0]["source"]
    override = json.loads(ok(cli("run", str(yolo), "--input", BIRD, "--imgsz", "64", "--no-letterbox", "--runs",
                                 "1", "--json")).stdout)
    assert "NCHW 64x64x3" in override["inputs"][0]["source"] and "letterboxed" not in override["inputs"][0]["source"]


def test_run_task_detect_uses_names_and_maps_boxes_to_the_image(cli, yolo):
    report = json.loads(ok(cli("run", str(yolo), "--input", BIRD, "--task", "detect", "--runs", "1",
                               "--json")).stdout)
    boxes = report["vision"]["boxes"]
    assert [b["label"] for b in boxes] == ["person", "dog"]
    # input box (30, 14, 50, 34) of a 48 x 80 letterbox: scale 80/512, bars (48 - 54) ... mapped into the photo
    scale = min(80 / 512, 48 / 343)
    pad_y = (48 - round(343 * scale)) // 2
    pad_x = (80 - round(512 * scale)) // 2
    x1 = (30 - pad_x) / (round(512 * scale) / 512)
    assert boxes[0]["xyxy"][0] == pytest.approx(x1, abs=0.5) and pad_y >= 0


def test_bench_with_an_image_and_bench_all(cli, yolo):
    report = json.loads(ok(cli("bench", str(yolo), "--task", "detect", "--input", BIRD, "--mode", "latency",
                               "--runs", "3", "--warmup", "1", "--json")).stdout)
    assert any(r["mode"] == "stages" for r in report["results"])
    every = json.loads(ok(cli("bench", str(yolo), "--all", "--runs", "3", "--requests", "3", "--warmup", "1",
                              "--json")).stdout)
    assert {r["mode"] for r in every["results"]} == {"latency", "throughput"}


def test_profile_with_an_image(cli, yolo):
    report = json.loads(ok(cli("profile", str(yolo), "--input", BIRD, "--runs", "2", "--warmup", "1",
                               "--json")).stdout)
    assert report["executors"]


def test_tune_and_explain(cli, yolo, tmp_path):
    ok(cli("tune", str(yolo), "--input", BIRD, "--cache-dir", tmp_path))
    ok(cli("tune", str(yolo), "--cache-dir", tmp_path / "declared"))  # measured at the declared size, on a sample photo
    explained = json.loads(ok(cli("explain", str(yolo), "--json", "--cache-dir", tmp_path)).stdout)["pipeline"]
    assert explained["imgsz"] == [48, 80] and explained["sources"]["imgsz"] == "metadata_props (Ultralytics)"


def test_tune_measures_at_the_declared_size(yolo):
    from types import SimpleNamespace

    from edgeaccel.cli.explain_cmd import declared_samples

    samples = declared_samples(str(yolo), SimpleNamespace(imgsz=None, letterbox=None, normalize=None))
    assert samples[0][0].shape == (1, 3, 48, 80)
    given = declared_samples(str(yolo), SimpleNamespace(imgsz=(32, 32), letterbox=None, normalize=None))
    assert given[0][0].shape == (1, 3, 32, 32)


def test_convert_with_calibration_images_then_check_with_data(cli, yolo, images, tmp_path):
    out = tmp_path / "bundle"
    ok(cli("convert", str(yolo), "--to", "onnx-int8", "--calibration", str(images), "--out", str(out)))
    # two images: one calibrates, the last is held back for the check
    assert np.load(out / "calibration.npy").shape == np.load(out / "holdout.npy").shape == (1, 3, 48, 80)
    ok(cli("check", str(out), "--runs", "2"))
    ok(cli("check", str(out), "--data", str(images), "--runs", "2", "--task", "detect"))
    ok(cli("check", str(yolo), "--reference", str(yolo), "--data", str(images), "--runs", "2"))
    # the bundle alone (without the source's metadata beside it) runs with its size and names
    report = json.loads(ok(cli("run", str(out), "--input", BIRD, "--task", "detect", "--runs", "1",
                               "--json")).stdout)
    assert [b["label"] for b in report["vision"]["boxes"]][:1] == ["person"]


@pytest.mark.slow
def test_serve_answers_a_tensor_of_the_declared_size_and_says_the_pipeline(yolo, tmp_path):
    from edgeaccel.serve.process import ServerProcess

    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(yolo, repo / "yolo.onnx")
    fed = edgeaccel.image_input(BIRD, edgeaccel.describe(repo / "yolo.onnx"))
    server = ServerProcess([repo, "--port", "0", "--grpc-port", "0"]).start()
    try:
        with urllib.request.urlopen(f"http://{server.http}/v2/models/yolo/config", timeout=30) as answer:
            config = json.load(answer)
        described = json.loads(config["parameters"]["edgeaccel.pipeline"]["string_value"])
        assert described["imgsz"] == [48, 80] and described["letterbox"] is True
        body = json.dumps({"inputs": [{"name": "images", "shape": list(fed.shape), "datatype": "FP32",
                                       "data": fed.ravel().tolist()}]}).encode()
        request = urllib.request.Request(f"http://{server.http}/v2/models/yolo/infer", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            outputs = json.load(answer)["outputs"]
        assert outputs[0]["shape"] == [1, 7, grid_cells(48, 80, (8, 16, 32))]
    finally:
        server.kill()


def test_a_dynamic_model_declaring_nothing_says_how_to_declare_it(cli, tmp_path, images):
    bare = constant_output(tmp_path / "bare.onnx", candidates(ROWS, classes=3).T[None])
    done = cli("run", str(bare), "--input", BIRD, "--runs", "1")
    assert done.returncode != 0 and "--imgsz" in done.stderr and "letterbox" in done.stderr
    assert "Traceback" not in done.stderr
    embedder = tmp_path / "embedder.onnx"  # no vision task: a folder of frames is refused once, before any frame
    from vision_models import constant_outputs

    constant_outputs(embedder, {"emb": np.ones((1, 3, 7, 7), np.float32)})
    done = cli("run", str(embedder), "--input", str(images))
    assert done.returncode != 0 and "--imgsz" in done.stderr and "failed" not in done.stdout
    live = ok(cli("run", str(embedder), "--input", str(images), "--imgsz", "32", "--json"))
    assert json.loads(live.stdout)["frames_out"] == 2
    report = json.loads(ok(cli("run", str(bare), "--input", BIRD, "--imgsz", "32x48", "--runs", "1",
                               "--json")).stdout)
    assert "NCHW 32x48x3" in report["inputs"][0]["source"]


def test_a_label_file_beside_a_classifier_names_plain_run_top_k(cli, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    # a 4-class "classifier": softmax over fixed logits, whatever the image
    logits = onnx.numpy_helper.from_array(np.array([[0.1, 3.0, 0.2, 0.3]], np.float32), "logits")
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Mul", ["s", "zero"], ["z"]),
         helper.make_node("Add", ["logits", "z"], ["l"]), helper.make_node("Softmax", ["l"], ["probs"])],
        "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 32, 3])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 4])],
        [logits, onnx.numpy_helper.from_array(np.zeros((), np.float32), "zero")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), tmp_path / "c.onnx")
    (tmp_path / "labels.txt").write_text("apple\nbanana\ncherry\ndate\n")
    report = json.loads(ok(cli("run", str(tmp_path / "c.onnx"), "--input", BIRD, "--runs", "1", "--json")).stdout)
    assert report["top_k"][0]["label"] == "banana"


@pytest.mark.shared
def test_labels_reach_a_video_without_task(cli, tmp_path):
    from conftest import MODELS, SHARED

    video = SHARED / "video" / "traffic_frames.mp4"
    out = tmp_path / "frames.jsonl"
    ok(cli("run", str(MODELS / "traffic_model.tflite"), "--input", str(video), "--labels",
           str(MODELS / "traffic_label_map.pbtxt"), "--jsonl", str(out)))
    labels = {b["label"] for line in out.read_text().splitlines() for b in json.loads(line)["result"]["boxes"]}
    assert labels and labels <= {"sedan", "pickup_suv_van", "large_veh_bus"}
