"""Tracked streams over `edgeaccel serve`'s task endpoints: a real server in a subprocess on 127.0.0.1 holding a
test-built YOLOv8-style detector that really finds coloured squares (yolo_like.py) and a classifier; a short
video of two squares moving apart is sent frame by frame with ``stream=`` and ``timestamp=`` through raw HTTP
(one at a time, and several in flight) and tritonclient gRPC. Each square must keep one id, and the ids and
boxes must equal what the same tracker gives in-process on ``predict``'s results of the same frames."""

from __future__ import annotations

import io
import json
import shutil
import urllib.error
import urllib.request

import numpy as np
import pytest

from conftest import MODELS, VIDEO
from serve_http import post_json as _post

pytestmark = [pytest.mark.slow]  # a server
pytest.importorskip("uvicorn")
pytest.importorskip("PIL")
pytest.importorskip("onnx")
pytest.importorskip("scipy")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")

FRAMES = 12


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    import yolo_like

    folder = tmp_path_factory.mktemp("models")
    yolo_like.build(folder / "squares.onnx")
    _counter(folder / "counter.onnx")
    for shared, name in (("mobilenet_v1_0.25_128_quant.tflite", "classifier"), ("traffic_model.tflite", "traffic")):
        if (MODELS / shared).exists():
            shutil.copy(MODELS / shared, folder / f"{name}.tflite")
    return folder


def _counter(path):
    """A classifier with recurrent state, as traffic_model's LSTM: state_out = state_in + 1 (in its first value),
    logits = [state_out[0], 1.5, 0, 0] (+ 0 x the image's mean). Fed back, frame k's top class is 1 on the first
    frame and 0 from the second on; run from zeros every time, it is 1 on every frame."""
    from onnx import TensorProto, helper

    from onnx_models import save

    one = np.zeros((1, 2, 2, 2), np.float32)
    one[0, 0, 0, 0] = 1
    nodes = [helper.make_node("Add", ["state_in", "one"], ["state_out"]),
             helper.make_node("Reshape", ["state_out", "flat_shape"], ["flat"]),
             helper.make_node("Slice", ["flat", "starts", "ends", "axes"], ["first"]),
             helper.make_node("Mul", ["first", "pick"], ["picked"]),
             helper.make_node("ReduceMean", ["images"], ["mean"], keepdims=0),
             helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
             helper.make_node("Add", ["picked", "bias"], ["biased"]),
             helper.make_node("Add", ["biased", "nothing"], ["logits"])]
    save(nodes, [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 32, 32]),
                 helper.make_tensor_value_info("state_in", TensorProto.FLOAT, [1, 2, 2, 2])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4]),
          helper.make_tensor_value_info("state_out", TensorProto.FLOAT, [1, 2, 2, 2])],
         {"one": one, "flat_shape": np.array([1, 8], np.int64), "starts": np.array([0], np.int64),
          "ends": np.array([4], np.int64), "axes": np.array([1], np.int64),
          "pick": np.array([1, 0, 0, 0], np.float32), "bias": np.array([0, 1.5, 0, 0], np.float32),
          "zero": np.zeros((), np.float32)}, path)


@pytest.fixture(scope="module")
def server(repo):
    from edgeaccel.serve.process import ServerProcess

    args = [repo, "--port", "0", "--grpc-port", "0", "--log-json", "--task", "counter=classify"]
    if (repo / "traffic.tflite").exists():
        args += ["--task", "traffic=detect", "--labels", f"traffic={MODELS / 'traffic_label_map.pbtxt'}"]
    proc = ServerProcess(args)
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def video():
    import yolo_like
    from PIL import Image

    frames = []
    for image, truth in yolo_like.moving_squares(FRAMES):
        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="PNG")
        frames.append((image, truth, buffer.getvalue()))
    return frames


@pytest.fixture(scope="module")
def in_process(repo, video):
    """The boxes and ids of every frame as an app tracking in-process would get them (same executor)."""
    import edgeaccel
    from edgeaccel.tracking import Tracker

    tracker = Tracker()
    out = []
    with edgeaccel.load(repo / "squares.onnx", task="detect", executor="onnxruntime") as model:
        for i, (image, _, _) in enumerate(video):
            result = model.predict(image)
            tracker.update(result.boxes, i / 10)
            out.append([(b.label, b.track_id, list(b.xyxy), b.score) for b in result.boxes])
    return out


def _frame(server, video, i, stream):
    status, result = _post(server, f"/v2/models/squares/predict?stream={stream}&timestamp={i / 10}", video[i][2])
    assert status == 200, result
    return result


def _same(result, want):
    got = [(b["label"], b.get("track_id"), b["xyxy"], b["score"]) for b in result["boxes"]]
    assert [(label, track) for label, track, _, _ in got] == [(label, track) for label, track, _, _ in want]
    for (_, _, xyxy, score), (_, _, want_xyxy, want_score) in zip(got, want, strict=True):
        np.testing.assert_allclose(xyxy, want_xyxy, atol=0.01)
        assert abs(score - want_score) < 1e-5


def test_frames_sent_one_at_a_time_keep_each_square_on_one_id(server, video, in_process):
    ids = {}
    for i in range(FRAMES):
        result = _frame(server, video, i, "one-by-one")
        _same(result, in_process[i])
        assert result["stream"]["id"] == "one-by-one" and result["stream"]["frame"] == i + 1
        assert result["stream"]["new"] == (i == 0)
        for box in result["boxes"]:
            if "track_id" in box:
                ids.setdefault(box["label"], set()).add(box["track_id"])
    assert ids == {"red": {1}, "blue": {2}}, "each square one id, confirmed on its second frame"
    assert result["stream"]["tracks"] == 2


def test_frames_in_flight_together_get_the_ids_of_frames_sent_one_at_a_time(server, video, in_process):
    """A pipelined client: each frame written whole, in order, on the next of 4 connections, its answer read only
    when that connection is needed again, so that up to 4 frames are in the server at once."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(server.url)
    connections = [http.client.HTTPConnection(where.hostname, where.port, timeout=60) for _ in range(4)]
    results: list = [None] * FRAMES

    def answer(i):
        response = connections[i % 4].getresponse()
        assert response.status == 200
        results[i] = json.loads(response.read())

    for i in range(FRAMES):
        if i >= 4:
            answer(i - 4)
        connections[i % 4].request("POST", f"/v2/models/squares/predict?stream=in-flight&timestamp={i / 10}",
                                   video[i][2], {"Content-Type": "image/png"})
    for i in range(FRAMES - 4, FRAMES):
        answer(i)
    for i, result in enumerate(results):
        if result["stream"].get("late"):  # overtaken on the way in: answered, untracked
            assert all("track_id" not in b for b in result["boxes"])
            result = {**result, "boxes": [{**b, "track_id": w[1]} for b, w in zip(result["boxes"], in_process[i],
                                                                                   strict=True)]}
        _same(result, in_process[i])


def test_two_streams_of_one_model_are_tracked_apart(server, video):
    for i in range(4):
        a, b = _frame(server, video, i, "left"), _frame(server, video, i, "right")
        assert [x.get("track_id") for x in a["boxes"]] == [x.get("track_id") for x in b["boxes"]]
    assert [x["track_id"] for x in a["boxes"]] == [1, 2], "each stream gives its own ids from 1"


def test_grpc_frames_are_tracked_as_http_ones(server, video, in_process):
    client = tritonclient_grpc.InferenceServerClient(server.grpc)
    for i in range(FRAMES):
        tensor = tritonclient_grpc.InferInput("image", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([video[i][2]], dtype=object))
        answer = client.infer("squares", [tensor], parameters={"stream": "grpc-cam", "timestamp": i / 10},
                              client_timeout=60)
        result = json.loads(answer.as_numpy("result")[0])
        _same(result, in_process[i])
        assert result["stream"]["frame"] == i + 1


def test_a_camera_that_restarts_its_clock_ends_its_tracks_and_ids_go_on(server, video):
    for i in range(3):
        status, result = _post(server, f"/v2/models/squares/predict?stream=restart&timestamp={60 + i / 10}",
                               video[i][2])
        assert status == 200, result
    status, result = _post(server, "/v2/models/squares/predict?stream=restart&timestamp=0", video[0][2])
    assert status == 200 and [e["type"] for e in result["stream"]["events"]] == ["ended", "ended"]
    status, result = _post(server, "/v2/models/squares/predict?stream=restart&timestamp=0.1", video[1][2])
    assert [b["track_id"] for b in result["boxes"]] == [3, 4], "no id is given twice in one stream"


@pytest.mark.parametrize("path, body_of, status, words", [
    ("/v2/models/classifier/predict?stream=cam", "frame", 400, "has neither"),
    ("/v2/models/squares/predict?timestamp=1", "frame", 400, "give stream=NAME beside it"),
    ("/v2/models/squares/predict?stream=a%20b", "frame", 400, "stream is a name"),
    ("/v2/models/squares/predict?stream=cam&timestamp=later", "frame", 400, "timestamp is a number"),
    ("/v2/models/squares/predict?stream=bad-image", "junk", 400, "image"),
])
def test_bad_tracking_requests_get_a_clear_400(server, video, repo, path, body_of, status, words):
    if "classifier" in path and not (repo / "classifier.tflite").exists():
        pytest.skip("the shared models are not here")
    body = video[0][2] if body_of == "frame" else b"not an image at all"
    got, result = _post(server, path, body)
    assert got == status and words in result["error"], result


def test_a_frame_that_failed_does_not_hold_its_stream(server, video):
    _post(server, "/v2/models/squares/predict?stream=gap&timestamp=0", b"not an image")
    result = _frame(server, video, 1, "gap")
    assert result["stream"]["frame"] == 1, "the failed frame took no place in the stream's count"


def test_a_model_with_recurrent_state_runs_each_frame_on_the_state_the_one_before_left(server, video):
    def top(query):
        status, result = _post(server, "/v2/models/counter/predict" + query, video[0][2])
        assert status == 200, result
        return result["classes"][0]["class_id"], result.get("stream")

    assert [top("")[0] for _ in range(3)] == [1, 1, 1], "without a stream every request starts from zeros"
    answers = [top(f"?stream=counted&timestamp={i}") for i in range(3)]
    assert [class_id for class_id, _ in answers] == [1, 0, 0]
    assert answers[2][1] == {"id": "counted", "new": False, "frame": 3}, "no tracker for a classifier"
    assert top("?stream=counted&timestamp=0")[0] == 1, "a camera that restarted starts from zeros again"


def test_the_metrics_count_the_tracked_streams(server, video):
    _frame(server, video, 0, "counted")
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    count = [float(line.split()[-1]) for line in text.splitlines() if line.startswith("edgeaccel_serve_tracked_streams ")]
    assert count and count[0] >= 1


def test_a_detectors_metadata_says_how_to_track(server, repo):
    with urllib.request.urlopen(server.url + "/v2/models/squares", timeout=30) as response:
        assert "stream=NAME" in json.loads(response.read())["parameters"]["images"]
    with urllib.request.urlopen(server.url + "/v2/models/counter", timeout=30) as response:
        assert "runs on the state the one before left" in json.loads(response.read())["parameters"]["images"]
    if (repo / "classifier.tflite").exists():
        with urllib.request.urlopen(server.url + "/v2/models/classifier", timeout=30) as response:
            assert "stream=" not in json.loads(response.read())["parameters"]["images"]


def test_several_images_of_one_stream_in_one_request_are_refused(server, video):
    client = tritonclient_grpc.InferenceServerClient(server.grpc)
    tensor = tritonclient_grpc.InferInput("image", [2], "BYTES")
    tensor.set_data_from_numpy(np.array([video[0][2], video[1][2]], dtype=object))
    with pytest.raises(Exception) as caught:
        client.infer("squares", [tensor], parameters={"stream": "cam"}, client_timeout=60)
    assert "INVALID_ARGUMENT" in str(caught.value) and "one frame a request" in str(caught.value)


@pytest.mark.shared
def test_the_shared_videos_frames_as_a_stream_are_tracked_as_watch_tracks_the_file(server, repo):
    """The real video detector (recurrent state, SSD post-processing) on the real video: each frame posted with
    its presentation time answers the boxes and ids of in-process ``watch(track=True)`` on the file."""
    av = pytest.importorskip("av")
    if not (repo / "traffic.tflite").exists():
        pytest.skip("the shared models are not here")
    import edgeaccel
    from PIL import Image

    from edgeaccel.options import TaskOptions

    video = VIDEO / "traffic_frames.mp4"
    labels = TaskOptions(labels=MODELS / "traffic_label_map.pbtxt")
    with edgeaccel.load(repo / "traffic.tflite", task="detect", executor="litert", task_options=labels) as model:
        local = [[(b.track_id, b.label, b.xyxy) for b in frame.result.boxes]
                 for frame in model.watch(video, track=True)]
    with av.open(str(video)) as container:
        frames = [(float(f.pts * f.time_base), f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
    assert len(frames) == len(local) == 20
    ids = set()
    for (when, rgb), want in zip(frames, local, strict=True):
        buffer = io.BytesIO()
        Image.fromarray(rgb).save(buffer, format="PNG")
        status, result = _post(server, f"/v2/models/traffic/predict?stream=video&timestamp={when}", buffer.getvalue())
        assert status == 200, result
        got = [(b.get("track_id"), b["label"], b["xyxy"]) for b in result["boxes"]]
        assert [g[:2] for g in got] == [w[:2] for w in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g[2], w[2], atol=0.01)
        ids |= {g[0] for g in got if g[0] is not None}
    assert len(ids) >= 3, "the video's cars get ids"
