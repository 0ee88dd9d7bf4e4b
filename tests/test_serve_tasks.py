"""Task endpoints of `edgeaccel serve`: encoded images in, the vision task's result out. A real server in a
subprocess on 127.0.0.1 holding the real SSD traffic detector (--task detect, its label map), deeplabv3
(segment), MobileNetV2 (classify) and a test-built ONNX model without an image input (no task); clients are raw HTTP
(urllib, a body and a multipart form), tritonclient.http and tritonclient.grpc (BYTES inputs). Every answer
is compared with the same model's in-process ``predict`` on the same decoded pixels."""

from __future__ import annotations

import base64
import io
import json
import shutil
import struct
import urllib.error
import urllib.request
import zlib

import numpy as np
import pytest

from conftest import IMAGES, MODELS
from serve_http import post_json as _post

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: servers
pytest.importorskip("uvicorn")
pytest.importorskip("PIL")
tritonclient_http = pytest.importorskip("tritonclient.http")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")

TRAFFIC_LABELS = MODELS / "traffic_label_map.pbtxt"
VOC_LABELS = MODELS / "pascal_voc_segmentation_labels.txt"
IMAGENET_LABELS = MODELS / "imagenet_labels.txt"


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from onnx_models import save

    folder = tmp_path_factory.mktemp("models")
    shutil.copy(MODELS / "traffic_model.tflite", folder / "traffic.tflite")
    shutil.copy(MODELS / "deeplabv3_mnv2_dm05_pascal_quant.tflite", folder / "deeplab.tflite")
    shutil.copy(MODELS / "mobilenet_v2_1.0_224_quant.tflite", folder / "mobilenet.tflite")
    save([helper.make_node("MatMul", ["x", "W"], ["y"])],
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], {"W": np.ones((4, 3), np.float32)},
         folder / "plain.onnx")  # no image input: no task
    return folder


@pytest.fixture(scope="module")
def server(repo):
    from edgeaccel.serve.process import ServerProcess

    proc = ServerProcess([repo, "--port", "0", "--grpc-port", "0", "--log-json",
                          "--task", "traffic=detect", "--labels", f"traffic={TRAFFIC_LABELS}",
                          "--task", "deeplab=segment", "--labels", f"deeplab={VOC_LABELS}",
                          "--labels", f"mobilenet={IMAGENET_LABELS}"])
    proc.start()
    yield proc
    proc.kill()


def _local(path, task, labels):
    import edgeaccel

    return edgeaccel.load(path, task=task, labels=labels, executor="litert")


def _rgb(name):
    from PIL import Image

    with Image.open(IMAGES / name) as image:
        return np.asarray(image.convert("RGB"))


def _encode(rgb, fmt, **options) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _same_boxes(got, want):
    assert [b["label"] for b in got] == [b.label for b in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g["xyxy"], w.xyxy, atol=0.01)
        assert abs(g["score"] - w.score) < 1e-5


def test_a_png_body_gets_the_detectors_boxes_in_original_pixels_and_the_executor(server, repo):
    rgb = _rgb("traffic_0001.png")
    status, result = _post(server, "/v2/models/traffic/predict", (IMAGES / "traffic_0001.png").read_bytes())
    assert status == 200, result
    with _local(repo / "traffic.tflite", "detect", TRAFFIC_LABELS) as model:
        want = model.predict(rgb)
    assert result["schema"] == "edgeaccel.vision/1" and result["task"] == "detect"
    assert result["image"] == {"width": rgb.shape[1], "height": rgb.shape[0]}
    assert result["executor"] == "litert:CPU"
    assert result["boxes"] and result["boxes"][0]["label"] == "pickup_suv_van"  # the shared README's top box
    _same_boxes(result["boxes"], want.boxes)
    assert set(result["timing_ms"]) == {"preprocess", "inference", "postprocess"}


def test_a_jpeg_in_a_multipart_form_is_decoded_as_the_app_would(server, repo):
    from PIL import Image

    jpeg = _encode(_rgb("traffic_0001.png"), "JPEG", quality=90)
    with Image.open(io.BytesIO(jpeg)) as image:
        decoded = np.asarray(image.convert("RGB"))
    boundary = "----edgeaccel-test"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"masks\"\r\n\r\nnone\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"frame.jpg\"\r\n"
            f"Content-Type: image/jpeg\r\n\r\n").encode() + jpeg + f"\r\n--{boundary}--\r\n".encode()
    status, result = _post(server, "/v2/models/traffic/predict", body, f"multipart/form-data; boundary={boundary}")
    assert status == 200, result
    with _local(repo / "traffic.tflite", "detect", TRAFFIC_LABELS) as model:
        _same_boxes(result["boxes"], model.predict(decoded).boxes)


def test_a_segmentation_mask_comes_back_as_png_or_rle_equal_to_in_process(server, repo):
    from PIL import Image

    rgb = _rgb("dog_segmentation.png")
    body = (IMAGES / "dog_segmentation.png").read_bytes()
    with _local(repo / "deeplab.tflite", "segment", VOC_LABELS) as model:
        want = model.predict(rgb)
    status, as_png = _post(server, "/v2/models/deeplab/predict", body)
    assert status == 200, as_png
    assert as_png["classes"][0]["label"] == "dog"
    mask = as_png["mask"]
    assert mask["format"] == "png" and (mask["height"], mask["width"]) == rgb.shape[:2]
    with Image.open(io.BytesIO(base64.b64decode(mask["data"]))) as image:
        np.testing.assert_array_equal(np.asarray(image), want.mask)
    status, as_rle = _post(server, "/v2/models/deeplab/predict?masks=rle", body)
    assert status == 200 and as_rle["mask"]["format"] == "rle"
    for item in as_rle["mask"]["rle"]:
        flat = np.repeat(np.arange(len(item["counts"])) % 2, item["counts"]).astype(bool)  # COCO: column-major
        np.testing.assert_array_equal(flat.reshape(item["size"][::-1]).T, want.mask == item["id"])
    assert {item["id"] for item in as_rle["mask"]["rle"]} == {c["class_id"] for c in as_rle["classes"]}


def test_bytes_inputs_over_tritonclient_http_and_grpc_answer_each_image(server):
    images = np.array([(IMAGES / "bird.png").read_bytes(), _encode(_rgb("cat.png"), "JPEG")], dtype=object)
    http = tritonclient_http.InferenceServerClient(server.http, network_timeout=60)
    as_base64 = np.array([base64.b64encode(b).decode() for b in images], dtype=object)
    for binary in (True, False):  # JSON carries strings: the images base64-encoded
        tensor = tritonclient_http.InferInput("image", [2], "BYTES")
        tensor.set_data_from_numpy(images if binary else as_base64, binary_data=binary)
        answer = http.infer("mobilenet", [tensor], outputs=[tritonclient_http.InferRequestedOutput("result")])
        results = [json.loads(r) for r in answer.as_numpy("result")]
        assert [r["classes"][0]["label"] for r in results] == ["chickadee", "Egyptian cat"]
    grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
    tensor = tritonclient_grpc.InferInput("image", [2], "BYTES")
    tensor.set_data_from_numpy(images)
    results = [json.loads(r) for r in grpc.infer("mobilenet", [tensor], client_timeout=60).as_numpy("result")]
    assert [r["classes"][0]["label"] for r in results] == ["chickadee", "Egyptian cat"]
    assert all(r["executor"] for r in results)


def _png_header_only(width, height) -> bytes:
    """A PNG that declares a huge image in its header and holds no pixels: refused before decoding."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IEND", b"")


@pytest.mark.parametrize("path, body, content_type, status, words", [
    ("/v2/models/traffic/predict", b"hello, not an image", "image/png", 400, "not an image the server can decode"),
    ("/v2/models/traffic/predict", b"", "image/png", 400, "empty"),
    ("/v2/models/traffic/predict", b'{"inputs": []}', "application/json", 415, "tensors in JSON go to /infer"),
    ("/v2/models/traffic/predict", _png_header_only(100_000, 100_000), "image/png", 400, "scale it down"),
    ("/v2/models/traffic/predict?masks=svg", b"x", "image/png", 400, "masks must be one of"),
    ("/v2/models/plain/predict", b"x", "image/png", 400, "--task plain=detect"),
    ("/v2/models/nothere/predict", b"x", "image/png", 404, "no model named 'nothere'"),
    ("/v2/models/traffic/predict", b"--x\r\n\r\n--x--", "multipart/form-data; boundary=x", 400, "no file part"),
], ids=["text", "empty", "json", "bomb", "mask-format", "no-task", "unknown-model", "no-file-part"])
def test_bad_image_requests_get_a_clear_4xx(server, path, body, content_type, status, words):
    got, reply = _post(server, path, body, content_type)
    assert got == status and words in reply["error"], reply


def test_bad_bytes_requests_over_grpc_are_invalid_argument(server):
    grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
    for model, payload, words in (("plain", b"x", "BYTES (string) tensors are not served"),
                                  ("mobilenet", b"not an image", "not an image the server can decode")):
        tensor = tritonclient_grpc.InferInput("image", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([payload], dtype=object))
        with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
            grpc.infer(model, [tensor], client_timeout=60)
        assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and words in err.value.message()


def test_the_browser_page_is_served_for_a_task_model(server):
    with urllib.request.urlopen(server.url + "/v2/models/traffic/predict", timeout=30) as response:
        page = response.read().decode()
    assert response.headers["content-type"].startswith("text/html") and "fetch('predict'" in page
