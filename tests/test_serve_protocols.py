"""`edgeaccel serve` as a client sees it: a real server in a subprocess on 127.0.0.1 (free ports), talked to
with tritonclient.http, tritonclient.grpc and curl, on the shared models. Answers are checked against the
shared README (bird -> chickadee) and against an in-process edgeaccel.load of the same file.

One server for the module (started once, killed in the fixture's finalizer); every client call has a timeout."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

from conftest import IMAGES, MODELS

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: servers
tritonclient_http = pytest.importorskip("tritonclient.http")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("uvicorn")

MOBILENET = "mobilenet_v2_1.0_224_quant.tflite"
SOFTMAX = "MobilenetV2/Predictions/Softmax"
MAX_MB = 2


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    shutil.copy(MODELS / MOBILENET, folder / "mobilenet.tflite")
    shutil.copy(MODELS / "split_concat.tflite", folder / "split_concat.tflite")
    shutil.copy(MODELS / "model_invoking_error.tflite", folder / "broken.tflite")
    (folder / "escape.tflite").symlink_to(MODELS / "split_concat.tflite")  # leads outside: refused
    (folder / "labels.txt").write_text("not a model\n")
    return folder


@pytest.fixture(scope="module")
def server(repo):
    from edgeaccel.serve.process import ServerProcess

    proc = ServerProcess([repo, "--port", "0", "--grpc-port", "0", "--log-json", "--max-request-mb", str(MAX_MB)])
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def bird():
    import edgeaccel

    return edgeaccel.image_input(IMAGES / "bird.png", edgeaccel.describe(MODELS / MOBILENET))


@pytest.fixture(scope="module")
def reference(bird):
    """The same model run in-process: what the server must answer, byte for byte."""
    import edgeaccel

    with edgeaccel.load(MODELS / MOBILENET, executor="litert") as model:
        return model.run(bird)[0]


@pytest.fixture(scope="module")
def http(server):
    return tritonclient_http.InferenceServerClient(server.http, connection_timeout=10, network_timeout=30)


@pytest.fixture(scope="module")
def grpc_client(server):
    return tritonclient_grpc.InferenceServerClient(server.grpc)


def _top1(scores, labels) -> str:
    return labels[int(np.asarray(scores).reshape(-1).argmax())]


def _curl(url: str, *args: str) -> tuple[int, dict | str, str]:
    """(status, JSON body or text, headers) of one curl call."""
    done = subprocess.run(["curl", "-sS", "-D", "-", "--max-time", "30", *args, url], capture_output=True,
                          text=True, timeout=60, check=True)
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    while head.split()[1] == "100":  # curl's 'Expect: 100-continue' for a big body: the answer follows
        head, _, body = body.partition("\n\n")
    status = int(head.split()[1])
    try:
        return status, json.loads(body), head
    except json.JSONDecodeError:
        return status, body, head


def _http_input(array, binary=True):
    tensor = tritonclient_http.InferInput("input", list(array.shape), "UINT8")
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


# -- health, metadata, repository ------------------------------------------------------------------------
def test_health_and_server_metadata(server, http):
    assert http.is_server_live() and http.is_server_ready()
    meta = http.get_server_metadata()
    assert meta["name"] == "edgeaccel" and "binary_tensor_data" in meta["extensions"]
    assert "model_repository" in meta["extensions"]


def test_model_metadata_says_shapes_and_why_no_batching(http, grpc_client):
    meta = http.get_model_metadata("mobilenet")
    assert meta["inputs"] == [{"name": "input", "datatype": "UINT8", "shape": [1, 224, 224, 3]}]
    assert meta["outputs"] == [{"name": SOFTMAX, "datatype": "UINT8", "shape": [1, 1001]}]
    assert "fixed batch of 1" in meta["parameters"]["batching"] and meta["parameters"]["isolated"] is False
    assert meta["parameters"]["performance_hint"] == "adaptive"  # the server's default: see executors/adaptive.py
    assert http.get_model_metadata("mobilenet", model_version="1")["name"] == "mobilenet"
    grpc_meta = grpc_client.get_model_metadata("mobilenet", client_timeout=10)
    assert [list(t.shape) for t in grpc_meta.inputs] == [[1, 224, 224, 3]] and grpc_meta.inputs[0].datatype == "UINT8"


def test_model_config_as_tritonclient_reads_it(http, grpc_client):
    config = http.get_model_config("mobilenet")
    assert config["max_batch_size"] == 0  # not batched: the dims are the model's own, batch dimension included
    assert config["input"] == [{"name": "input", "data_type": "TYPE_UINT8", "dims": [1, 224, 224, 3]}]
    grpc_config = grpc_client.get_model_config("mobilenet", client_timeout=10).config
    assert grpc_config.name == "mobilenet" and grpc_config.max_batch_size == 0
    assert list(grpc_config.input[0].dims) == [1, 224, 224, 3]
    assert grpc_config.output[0].name == SOFTMAX and grpc_config.output[0].data_type == 2  # TYPE_UINT8


def test_repository_index_says_why_a_model_is_missing(http, grpc_client):
    index = {row["name"]: row for row in http.get_model_repository_index()}
    assert set(index) == {"mobilenet", "split_concat", "broken", "escape"}  # labels.txt is not a model
    assert index["mobilenet"]["state"] == "READY"
    assert index["broken"]["state"] == "UNAVAILABLE" and "fake-op-double" in index["broken"]["reason"]
    assert index["escape"]["state"] == "UNAVAILABLE" and "outside the model repository" in index["escape"]["reason"]
    ready = grpc_client.get_model_repository_index(client_timeout=10).models
    assert {m.name for m in ready} == set(index)


def test_load_refuses_a_symlink_out_and_unload_load_round_trip(server, http, grpc_client):
    status, body, _ = _curl(f"{server.url}/v2/repository/models/escape/load", "-X", "POST")
    assert status == 400 and "outside the model repository" in body["error"]
    status, body, _ = _curl(f"{server.url}/v2/repository/models/..%2F..%2Fetc%2Fpasswd/load", "-X", "POST")
    assert status in (400, 404) and "error" in body
    http.unload_model("split_concat")
    assert not http.is_model_ready("split_concat")
    assert not grpc_client.is_model_ready("split_concat", client_timeout=10)
    grpc_client.load_model("split_concat", client_timeout=60)
    assert http.is_model_ready("split_concat")


# -- inference -------------------------------------------------------------------------------------------
def test_http_binary_infer_matches_in_process(http, bird, reference, labels):
    result = http.infer("mobilenet", [_http_input(bird)],
                        outputs=[tritonclient_http.InferRequestedOutput(SOFTMAX, binary_data=True)], timeout=30_000_000)
    scores = result.as_numpy(SOFTMAX)
    assert _top1(scores, labels) == "chickadee"
    np.testing.assert_array_equal(scores, reference)
    # which executor answered: one the model holds (each passed the accuracy guard)
    executor = result.get_response()["parameters"]["executor"]
    assert executor in http.get_model_metadata("mobilenet")["parameters"]["executors"].split(", ")


def test_http_json_tensors_match_binary(http, bird, reference):
    result = http.infer("mobilenet", [_http_input(bird, binary=False)],
                        outputs=[tritonclient_http.InferRequestedOutput(SOFTMAX, binary_data=False)])
    np.testing.assert_array_equal(result.as_numpy(SOFTMAX), reference)
    assert result.get_response()["outputs"][0]["datatype"] == "UINT8"


def test_curl_json_request_as_in_the_issue(server, bird, labels, tmp_path):
    body = {"inputs": [{"name": "input", "shape": [1, 224, 224, 3], "datatype": "UINT8",
                        "data": bird.reshape(-1).tolist()}]}
    (tmp_path / "req.json").write_text(json.dumps(body))
    status, reply, _ = _curl(f"{server.url}/v2/models/mobilenet/infer", "-d", f"@{tmp_path / 'req.json'}")
    assert status == 200, reply
    (out,) = reply["outputs"]
    assert out["name"] == SOFTMAX and out["shape"] == [1, 1001] and out["datatype"] == "UINT8"
    assert _top1(out["data"], labels) == "chickadee"
    # the same request indented past 1 MB: parsed off the event loop (rest.PARSE_INLINE_BYTES), same answer
    (tmp_path / "req.json").write_text(json.dumps(body, indent=2))
    assert (1 << 20) < (tmp_path / "req.json").stat().st_size < (MAX_MB << 20)
    status, again, _ = _curl(f"{server.url}/v2/models/mobilenet/infer", "-d", f"@{tmp_path / 'req.json'}")
    assert status == 200 and again["outputs"][0]["data"] == out["data"]


def test_curl_health_and_metadata(server):
    assert _curl(f"{server.url}/v2/health/live")[0] == 200
    assert _curl(f"{server.url}/v2/health/ready")[0] == 200
    assert _curl(f"{server.url}/v2/models/mobilenet/ready")[0] == 200
    status, body, _ = _curl(f"{server.url}/v2/models/mobilenet/versions/1")
    assert status == 200 and body["platform"] == "edgeaccel_tflite"


def test_grpc_infer_raw_matches_in_process(grpc_client, http, bird, reference, labels):
    tensor = tritonclient_grpc.InferInput("input", list(bird.shape), "UINT8")
    tensor.set_data_from_numpy(bird)
    result = grpc_client.infer("mobilenet", [tensor], client_timeout=30)
    scores = result.as_numpy(SOFTMAX)
    assert _top1(scores, labels) == "chickadee"
    np.testing.assert_array_equal(scores, reference)
    executor = result.get_response().parameters["executor"].string_param
    assert executor in http.get_model_metadata("mobilenet")["parameters"]["executors"].split(", ")


def test_identical_requests_get_identical_answers_labelled_with_their_executor(http, grpc_client, bird, reference):
    """Over both protocols, the same request 40 times: one answer (the in-process one) from one executor (the
    model holds only executors that passed the guard; a re-measure never answers a client)."""
    answers, executors = set(), set()
    tensor = tritonclient_grpc.InferInput("input", list(bird.shape), "UINT8")
    tensor.set_data_from_numpy(bird)
    for _ in range(20):
        result = http.infer("mobilenet", [_http_input(bird)], timeout=30_000_000)
        answers.add(result.as_numpy(SOFTMAX).tobytes())
        executors.add(result.get_response()["parameters"]["executor"])
        result = grpc_client.infer("mobilenet", [tensor], client_timeout=30)
        answers.add(result.as_numpy(SOFTMAX).tobytes())
        executors.add(result.get_response().parameters["executor"].string_param)
    assert answers == {reference.tobytes()}
    assert len(executors) == 1 and executors <= set(
        http.get_model_metadata("mobilenet")["parameters"]["executors"].split(", "))


def test_multi_input_multi_output_model_and_requested_outputs(http, grpc_client):
    import edgeaccel

    rng = np.random.default_rng(0)
    with edgeaccel.load(MODELS / "split_concat.tflite", executor="litert") as model:
        arrays = {t.name: rng.integers(0, 255, t.shape, dtype=np.uint8) for t in model.inputs}
        want = model.run(arrays).as_dict()
    first = next(iter(want))
    inputs = []
    for name, array in arrays.items():
        tensor = tritonclient_http.InferInput(name, list(array.shape), "UINT8")
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = http.infer("split_concat", inputs, outputs=[tritonclient_http.InferRequestedOutput(first)])
    assert [o["name"] for o in result.get_response()["outputs"]] == [first]
    assert np.abs(result.as_numpy(first).astype(int) - want[first].astype(int)).max() <= 1  # LiteRT or OpenVINO
    grpc_inputs = []
    for name, array in arrays.items():
        tensor = tritonclient_grpc.InferInput(name, list(array.shape), "UINT8")
        tensor.set_data_from_numpy(array)
        grpc_inputs.append(tensor)
    result = grpc_client.infer("split_concat", grpc_inputs, client_timeout=30)
    for name, array in want.items():
        assert np.abs(result.as_numpy(name).astype(int) - array.astype(int)).max() <= 1


# -- bad input: an error with a message, the server alive, the next request answered ----------------------
@pytest.mark.parametrize("body,status,words", [
    ("{not json", 400, "not valid JSON"),
    ('{"inputs": [{"name": "input", "shape": [1, 224, 224, 3], "datatype": "FP32", "data": [0]}]}', 400,
     "holds 1 values"),
    ('{"inputs": [{"name": "input", "shape": [1, 2], "datatype": "FP32", "data": [0.5, 1.5]}]}', 400,
     "is UINT8, the request sent FP32"),
    ('{"inputs": [{"name": "input", "shape": [1, 2], "datatype": "UINT8", "data": [1, 2]}]}', 400,
     "expects shape 1x224x224x3"),
    ('{"inputs": [{"name": "image", "shape": [1], "datatype": "UINT8", "data": [1]}]}', 400, "has no input 'image'"),
    ('{"inputs": [{"name": "input", "shape": [1], "datatype": "STRING", "data": [1]}]}', 400, "not one of"),
    ('[1, 2]', 400, "must be a JSON object"),
])
def test_bad_requests_get_an_error_and_the_server_lives(server, http, bird, reference, tmp_path, body, status, words):
    (tmp_path / "bad.json").write_text(body)
    got, reply, _ = _curl(f"{server.url}/v2/models/mobilenet/infer", "-d", f"@{tmp_path / 'bad.json'}")
    assert got == status and words in reply["error"], reply
    result = http.infer("mobilenet", [_http_input(bird)])
    np.testing.assert_array_equal(result.as_numpy(SOFTMAX), reference)


def test_unknown_model_and_version_are_404(server, http, grpc_client, bird):
    status, reply, _ = _curl(f"{server.url}/v2/models/nope/infer", "-d", "{}")
    assert status == 404 and "no model named 'nope'" in reply["error"]
    status, reply, _ = _curl(f"{server.url}/v2/models/mobilenet/versions/7")
    assert status == 404 and "only version 1" in reply["error"]
    status, reply, _ = _curl(f"{server.url}/v2/models/mobilenet/infer")  # GET
    assert status == 405 and "use POST" in reply["error"]
    status, reply, _ = _curl(f"{server.url}/v3/anything")
    assert status == 404 and "no route" in reply["error"]
    tensor = tritonclient_grpc.InferInput("input", list(bird.shape), "UINT8")
    tensor.set_data_from_numpy(bird)
    with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
        grpc_client.infer("nope", [tensor], client_timeout=30)
    assert err.value.status() == "StatusCode.NOT_FOUND"


def test_grpc_wrong_datatype_and_shape_are_invalid_argument(grpc_client, bird):
    for array, datatype, words in ((bird.astype(np.float32), "FP32", "is UINT8"),
                                   (bird[:, :100], "UINT8", "expects shape")):
        tensor = tritonclient_grpc.InferInput("input", list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
            grpc_client.infer("mobilenet", [tensor], client_timeout=30)
        assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and words in err.value.message()


def test_oversized_body_is_413_and_binary_sizes_are_checked(server, http, bird, reference, tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(b"0" * ((MAX_MB << 20) + 1))
    status, reply, _ = _curl(f"{server.url}/v2/models/mobilenet/infer", "--data-binary", f"@{big}")
    assert status == 413 and "limit" in reply["error"]
    header = json.dumps({"inputs": [{"name": "input", "shape": [1, 224, 224, 3], "datatype": "UINT8",
                                     "parameters": {"binary_data_size": bird.size}}]}).encode()
    short = tmp_path / "short.bin"
    short.write_bytes(header + bird.tobytes()[:1000])
    status, reply, _ = _curl(f"{server.url}/v2/models/mobilenet/infer", "--data-binary", f"@{short}",
                             "-H", f"Inference-Header-Content-Length: {len(header)}")
    assert status == 400 and "binary_data_size" in reply["error"]
    np.testing.assert_array_equal(http.infer("mobilenet", [_http_input(bird)]).as_numpy(SOFTMAX), reference)


def test_client_disconnect_mid_request_harms_no_one(server, http, bird, reference):
    host, port = server.http.rsplit(":", 1)
    header = json.dumps({"inputs": [{"name": "input", "shape": [1, 224, 224, 3], "datatype": "UINT8",
                                     "parameters": {"binary_data_size": bird.size}}]}).encode()
    body = header + bird.tobytes()
    request = (f"POST /v2/models/mobilenet/infer HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n"
               f"Inference-Header-Content-Length: {len(header)}\r\n\r\n").encode()
    for cut in (len(body) // 2, len(body)):  # mid-body; and whole, gone before the answer
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(request + body[:cut])
    np.testing.assert_array_equal(http.infer("mobilenet", [_http_input(bird)]).as_numpy(SOFTMAX), reference)
    assert http.is_server_live()


def test_metrics_and_json_log(server, http, bird):
    http.infer("mobilenet", [_http_input(bird)])
    deadline = time.monotonic() + 30
    while True:  # a request an earlier test's client walked away from may still be running beside this one
        status, text, _ = _curl(f"{server.url}/metrics")
        if "edgeaccel_serve_queue_depth 0.0" in text or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status == 200
    assert 'edgeaccel_serve_requests_total{model="mobilenet",protocol="http",status="200"}' in text
    assert 'edgeaccel_serve_request_seconds_bucket{le="+Inf",model="mobilenet",protocol="http"}' in text
    assert "edgeaccel_serve_queue_depth 0.0" in text
    assert 'edgeaccel_serve_device_limit{device="cpu"}' in text
    assert 'edgeaccel_serve_fallbacks_total{model="mobilenet"}' in text
    runs = re.findall(r'edgeaccel_serve_executor_runs_total\{device="cpu",executor="([^"]+)",model="mobilenet"\} (\S+)',
                      text)
    assert runs and sum(float(n) for _, n in runs) >= 1  # where the policy sent the requests, per executor
    assert 'model="nope"' not in text  # names of no model share one label: clients cannot grow the series
    lines = [json.loads(line) for line in server.stdout_lines if line.startswith("{")]
    assert any(row["model"] == "mobilenet" and row["status"] == 200 and row["protocol"] == "http" for row in lines)
    assert any(row["status"] == 404 for row in lines)
