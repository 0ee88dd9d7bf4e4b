"""Task endpoints of `edgeaccel serve` as an outside checker drives them: every kind of image a client sends
(16-bit, grey, alpha, palette, CMYK, EXIF-rotated, animated, 1x1), each request's decoding options (conf, iou,
max_det, top_k over the query, form fields and KServe parameters), a YOLOv8-style ONNX detector and MoveNet
besides the Coral models, and requests that must be refused with a 400 / INVALID_ARGUMENT that says what to send.

A real server in a subprocess; every answer is compared with the same model's in-process ``predict`` on the same
file: identical images must give identical answers (test_serve_tasks.py covers the protocols themselves)."""

from __future__ import annotations

import io
import json
import shutil

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
IMAGENET_LABELS = MODELS / "imagenet_labels.txt"
MOVENET = MODELS / "movenet_single_pose_lightning_ptq.tflite"  # the full set only


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    pytest.importorskip("onnx")
    import yolo_like

    folder = tmp_path_factory.mktemp("models")
    shutil.copy(MODELS / "traffic_model.tflite", folder / "traffic.tflite")
    shutil.copy(MODELS / "mobilenet_v2_1.0_224_quant.tflite", folder / "mobilenet.tflite")
    yolo_like.build(folder / "squares.onnx")  # task, names and imgsz from its Ultralytics metadata
    from vision_models import candidates, constant_output

    logits = candidates([(32, 32, 20, 20, 0, 0.9)], classes=3).T[None]
    logits[0, 4, 0] = 1649.0  # a "score" no YOLO head's sigmoid gives: the shapes fit, the values do not decode
    constant_output(folder / "logits.onnx", logits, dynamic=False, metadata={"names": "{0: 'a', 1: 'b', 2: 'c'}"})
    if MOVENET.exists():
        shutil.copy(MOVENET, folder / "movenet.tflite")
    return folder


@pytest.fixture(scope="module")
def server(repo):
    from edgeaccel.serve.process import ServerProcess

    args = [repo, "--port", "0", "--grpc-port", "0", "--task", "traffic=detect", "--labels",
            f"traffic={TRAFFIC_LABELS}", "--labels", f"mobilenet={IMAGENET_LABELS}"]
    if MOVENET.exists():
        args += ["--task", "movenet=pose"]
    proc = ServerProcess(args)
    proc.start()
    yield proc
    proc.kill()


def _load(path, executor, **options):
    import edgeaccel
    from edgeaccel.options import TaskOptions

    task = {"traffic": "detect", "mobilenet": "classify", "movenet": "pose"}.get(path.stem)
    labels = {"traffic": TRAFFIC_LABELS, "mobilenet": IMAGENET_LABELS}.get(path.stem)
    return edgeaccel.load(path, task=task, executor=executor.split(":")[0],
                          task_options=TaskOptions(labels=labels, **options))


def _answer(result: dict) -> dict:
    """What must be equal between the server and in-process: all but the timings and the executor's name."""
    return {k: v for k, v in result.items() if k not in ("timing_ms", "executor")}


def _as_in_process(server, repo, tmp_path, model, body, query="", **options):
    """The server's /predict answer for ``body`` and the in-process one for the same bytes as a file."""
    status, got = _post(server, f"/v2/models/{model}/predict{query}", body)
    assert status == 200, got
    path = tmp_path / "upload"
    path.write_bytes(body)
    with _load(next(repo.glob(f"{model}.*")), got["executor"], **options) as local:
        want = local.predict(path).to_dict()
    return got, want


def _bird():
    from PIL import Image

    with Image.open(IMAGES / "bird.png") as image:
        return image.convert("RGB")


def _saved(image, fmt, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _kinds() -> dict:
    from PIL import Image

    bird = _bird()
    rgb = np.asarray(bird)
    tagged = bird.getexif()
    tagged[0x0112] = 6  # stored sideways, shown turned 90 degrees clockwise
    return {
        "16-bit-grey-png": lambda: _saved(Image.fromarray(rgb[..., 1].astype(np.uint16) * 257), "PNG"),
        "grey-png": lambda: _saved(bird.convert("L"), "PNG"),
        "rgba-png": lambda: _saved(bird.convert("RGBA"), "PNG"),
        "la-png": lambda: _saved(bird.convert("LA"), "PNG"),
        "palette-png": lambda: _saved(bird.convert("P"), "PNG"),
        "cmyk-jpeg": lambda: _saved(bird.convert("CMYK"), "JPEG"),
        "exif-rotated-jpeg": lambda: _saved(bird, "JPEG", exif=tagged),
        "animated-gif": lambda: _saved(bird, "GIF", save_all=True, append_images=[Image.fromarray(255 - rgb)]),
        "webp": lambda: _saved(bird, "WEBP"),
        "1x1-png": lambda: _saved(Image.new("RGB", (1, 1), (200, 30, 30)), "PNG"),
    }


@pytest.mark.parametrize("kind", list(_kinds()))
def test_every_kind_of_image_is_answered_as_in_process(server, repo, tmp_path, kind):
    """16-bit samples were clipped white by the server (the bird became an ant) while predict(path) scaled
    them; the decoding is now the same code on both sides."""
    got, want = _as_in_process(server, repo, tmp_path, "mobilenet", _kinds()[kind]())
    assert _answer(got) == _answer(want)
    if kind == "exif-rotated-jpeg":  # upright: the stored 512x343 photo is answered as 343x512
        assert got["image"] == {"width": 343, "height": 512}
    if kind not in ("1x1-png", "exif-rotated-jpeg"):
        assert got["classes"][0]["label"] == "chickadee"


def test_a_yolov8_style_onnx_detector_finds_its_squares_as_in_process(server, repo, tmp_path):
    import yolo_like

    image, truth = yolo_like.squares(1234)  # a held-out seed
    from PIL import Image

    got, want = _as_in_process(server, repo, tmp_path, "squares", _saved(Image.fromarray(image), "PNG"))
    assert _answer(got) == _answer(want)
    found = [(yolo_like.CLASSES.index(b["label"]), b["xyxy"]) for b in got["boxes"]]
    assert yolo_like.match(found, truth)[0] == len(truth)  # every square, in the image's pixels


def test_movenet_keypoints_are_answered_as_in_process(server, repo, tmp_path):
    if not MOVENET.exists():
        pytest.skip(f"{MOVENET.name} is in the full set only (../shared)")
    got, want = _as_in_process(server, repo, tmp_path, "movenet", (IMAGES / "squat.png").read_bytes())
    assert _answer(got) == _answer(want)
    assert got["task"] == "pose" and len(got["poses"][0]["keypoints"]) == 17


def test_a_requests_options_decode_as_task_options_do_in_process(server, repo, tmp_path):
    frame = (IMAGES / "traffic_0001.png").read_bytes()
    default, _ = _as_in_process(server, repo, tmp_path, "traffic", frame)
    got, want = _as_in_process(server, repo, tmp_path, "traffic", frame, "?confidence=0.35&max_det=2",
                               conf=0.35, max_det=2)
    assert _answer(got) == _answer(want)
    assert len(got["boxes"]) < len(default["boxes"]) and all(b["score"] >= 0.35 for b in got["boxes"])
    bird = (IMAGES / "bird.png").read_bytes()
    got, want = _as_in_process(server, repo, tmp_path, "mobilenet", bird, "?top_k=3", top_k=3)
    assert _answer(got) == _answer(want) and len(got["classes"]) == 3
    http = tritonclient_http.InferenceServerClient(server.http, network_timeout=60)
    tensor = tritonclient_http.InferInput("image", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([bird], dtype=object))
    answer = http.infer("mobilenet", [tensor], parameters={"top_k": 3})
    assert _answer(json.loads(answer.as_numpy("result")[0])) == _answer(got)
    grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
    tensor = tritonclient_grpc.InferInput("image", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([bird], dtype=object))
    answer = grpc.infer("mobilenet", [tensor], parameters={"top_k": 3}, client_timeout=60)
    assert _answer(json.loads(answer.as_numpy("result")[0])) == _answer(got)


@pytest.mark.parametrize("model, query, words", [
    ("mobilenet", "?conf=0.9", "conf changes nothing for mobilenet.tflite (classify, top-k): a classifier keeps"),
    ("traffic", "?iou=0.3", "iou changes nothing for traffic.tflite (detect, ssd-postprocess): its NMS runs inside "
                            "the model; it takes conf, max_det"),
    ("squares", "?top_k=2", "top_k changes nothing for squares.onnx (detect, yolov8)"),
    ("traffic", "?masks=rle", "masks=rle changes nothing for traffic.tflite (detect, ssd-postprocess): its results "
                              "carry no masks"),
])
def test_an_option_the_models_decoder_does_not_read_is_refused(server, model, query, words):
    status, reply = _post(server, f"/v2/models/{model}/predict{query}", (IMAGES / "bird.png").read_bytes())
    assert status == 400 and words in reply["error"], reply


def _png_header(width, height) -> bytes:
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + \
        chunk(b"IEND", b"")


def _truncated_jpeg() -> bytes:
    whole = _saved(_bird(), "JPEG")
    return whole[:len(whole) // 2]


@pytest.mark.parametrize("query, body, content_type, status, words", [
    ("?conf=2", None, "image/png", 400, "conf is a share above 0 and up to 1, not '2'"),
    ("?conf=0", None, "image/png", 400, "conf is a share above 0 and up to 1, not '0'"),
    ("?threshold=0.5", None, "image/png", 400, "unknown option 'threshold'"),
    ("?top_k=-1", None, "image/png", 400, "top_k is a whole number from 1"),
    ("?max_det=1.5", None, "image/png", 400, "max_det is a whole number from 1"),
    ("?conf=", None, "image/png", 400, "conf is a number, not ''"),
    ("?iou=nan", None, "image/png", 400, "iou is a number"),
    ("?treshold=0.5", None, "image/png", 400, "unknown option 'treshold': /predict takes masks, timeout, conf"),
    ("?%%zz&=x", None, "image/png", 400, "unknown option"),
    ("?conf=0.3&confidence=0.6", None, "image/png", 400, "give one of conf, confidence"),
    ("", None, "text/plain", 415, "POST /predict takes an image, not text/plain"),
    ("", "truncated", "image/jpeg", 400, "starts like JPEG"),
    ("", _png_header(0, 0), "image/png", 400, "not an image the server can decode"),
    ("", _png_header(60_000, 60_000), "image/png", 400, "scale it down first"),
    ("", bytes(range(256)) * 8, "image/png", 400, "no image format recognized"),
], ids=["conf-2", "conf-0", "threshold-is-not-ours", "top_k-negative", "max_det-fraction", "conf-blank", "iou-nan", "misspelt", "garbage-query",
        "conf-twice", "text-plain", "truncated-jpeg", "zero-size", "bomb", "random-bytes"])
def test_bad_image_requests_are_refused_with_what_to_send(server, query, body, content_type, status, words):
    if body is None:
        body = (IMAGES / "bird.png").read_bytes()
    elif body == "truncated":
        body = _truncated_jpeg()
    got, reply = _post(server, f"/v2/models/mobilenet/predict{query}", body, content_type)
    assert got == status and words in reply["error"], reply
    assert "0x" not in reply["error"].split("starting")[0]  # no Python object reprs ("<_io.BytesIO at 0x...>")


def test_bad_bytes_requests_over_both_protocols_say_what_to_send(server):
    http = tritonclient_http.InferenceServerClient(server.http, network_timeout=60)
    empty = tritonclient_http.InferInput("image", [0], "BYTES")  # tritonclient sends no data for it
    with pytest.raises(tritonclient_http.InferenceServerException) as err:
        http.infer("mobilenet", [empty])
    assert err.value.status() == "400" and "holds no image" in err.value.message()
    grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
    bird = np.array([(IMAGES / "bird.png").read_bytes()], dtype=object)
    for parameters, words in (({"top_k": -1}, "top_k is a whole number from 1"),
                              ({"conf": "high"}, "conf is a number, not 'high'"),
                              ({"masks": "svg"}, "masks must be one of png, rle, none")):
        tensor = tritonclient_grpc.InferInput("image", [1], "BYTES")
        tensor.set_data_from_numpy(bird)
        with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
            grpc.infer("mobilenet", [tensor], parameters=parameters, client_timeout=60)
        assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and words in err.value.message(), parameters
    tensor = tritonclient_grpc.InferInput("image", [2], "BYTES")
    tensor.set_data_from_numpy(np.array([bird[0], _truncated_jpeg()], dtype=object))
    with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
        grpc.infer("mobilenet", [tensor], client_timeout=60)
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and "image 1 of the request" in err.value.message()


@pytest.mark.parametrize("outputs, words", [
    (7, "'outputs' must be a list"),
    (["result"], "answers one output, 'result', not 'result'"),
    ([{"name": "result", "parameters": "x"}], "'parameters' must be a JSON object"),
    ([{"name": "scores"}], "not 'scores'"),
], ids=["a-number", "a-bare-name", "parameters-a-string", "another-output"])
def test_an_image_infer_with_malformed_outputs_is_a_400_before_anything_runs(server, outputs, words):
    import base64

    image = base64.b64encode((IMAGES / "bird.png").read_bytes()).decode()
    body = json.dumps({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": [image]}],
                       "outputs": outputs}).encode()
    status, answer = _post(server, "/v2/models/mobilenet/infer", body, "application/json")
    assert status == 400 and words in answer["error"], answer


def test_outputs_that_do_not_decode_are_the_models_fault_not_the_requests(server):
    """A 400 sent the client to fix an image that was fine: the model's outputs failed its task's checks."""
    status, reply = _post(server, "/v2/models/logits/predict", (IMAGES / "bird.png").read_bytes())
    assert status == 409 and "the request is not at fault" in reply["error"] and "range 0.01..1649" in reply["error"]
    grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
    tensor = tritonclient_grpc.InferInput("image", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([(IMAGES / "bird.png").read_bytes()], dtype=object))
    with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
        grpc.infer("logits", [tensor], client_timeout=60)
    assert err.value.status() == "StatusCode.FAILED_PRECONDITION"


def test_the_metadata_names_the_task_and_how_to_send_images(server):
    http = tritonclient_http.InferenceServerClient(server.http, network_timeout=60)
    parameters = http.get_model_metadata("squares")["parameters"]
    assert parameters["task"] == "detect (yolov8)" and "BYTES output 'result'" in parameters["images"]
    assert http.get_model_metadata("mobilenet")["parameters"]["task"].startswith("classify")


def test_a_refused_bomb_leaves_no_warning_in_the_servers_log(server):
    """Pillow warned on stderr, once a request, about a 100 MP header the server had answered 400 already."""
    import time

    status, reply = _post(server, "/v2/models/mobilenet/predict", _png_header(20_000, 5_000), "image/png")
    assert status == 400 and "20000x5000 pixels" in reply["error"]
    time.sleep(0.5)  # the server's stderr is read by a thread: give a warning written with the answer time to arrive
    assert not [line for line in server.stderr_lines if "DecompressionBomb" in line]
