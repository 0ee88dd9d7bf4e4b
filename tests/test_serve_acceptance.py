"""`edgeaccel serve` checked as a reviewer checks it: a new user's models (never seen by the other serve
tests), real clients (tritonclient.http binary and JSON, tritonclient.grpc, curl), bad requests over both protocols,
a flood on a dynamically batched model ended by SIGTERM, and the token on a non-loopback address.

The models are built here: ``mixed.onnx`` (two inputs, FP32 and INT64, a dynamic batch dimension, four outputs:
FP32, INT64, BOOL, FP16), ``halfin.onnx`` (an FP16 input), an OpenVINO IR written by openvino's save_model, and the
shared LSTM (state in variable tensors, which LiteRT kept from one run to the next: one client's request changed
the next client's answer). Every answer is compared with ``edgeaccel.load(...).run(...)`` in-process. The batching
isolation tests run on the core in-process (a batch window long enough to join the requests every time)."""

from __future__ import annotations

import http.client
import ipaddress
import itertools
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import MODELS

pytestmark = pytest.mark.slow  # slow tier: servers

tritonclient_http = pytest.importorskip("tritonclient.http")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")
pytest.importorskip("uvicorn")
pytest.importorskip("onnx")

TOKEN = "acceptance-token-0123456789abcdef"


# -- models a new user brings --------------------------------------------------------------------------------
def _mixed(path):
    """a (N,4) FP32 and b (N,4) INT64 -> sum FP32, idx INT64 (N,), mask BOOL, half FP16."""
    from onnx import TensorProto, helper

    from onnx_models import save

    nodes = [helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["a", "bf"], ["sum"]),
             helper.make_node("ArgMax", ["a"], ["idx"], axis=1, keepdims=0),
             helper.make_node("Greater", ["a", "bf"], ["mask"]),
             helper.make_node("Cast", ["sum"], ["half"], to=TensorProto.FLOAT16)]
    info = helper.make_tensor_value_info
    return save(nodes, [info("a", TensorProto.FLOAT, ["N", 4]), info("b", TensorProto.INT64, ["N", 4])],
                [info("sum", TensorProto.FLOAT, ["N", 4]), info("idx", TensorProto.INT64, ["N"]),
                 info("mask", TensorProto.BOOL, ["N", 4]), info("half", TensorProto.FLOAT16, ["N", 4])], {}, path)


def _half_input(path):
    from onnx import TensorProto, helper

    from onnx_models import save

    nodes = [helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["hf", "two"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("h", TensorProto.FLOAT16, [1, 3])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], {"two": np.array([2.0], np.float32)},
                path)


def _openvino_ir(folder):
    """x (?,6) -> relu(x @ W) and x @ W, named by their tensors, written by openvino's own save_model."""
    ov = pytest.importorskip("openvino")
    ops = pytest.importorskip("openvino.opset13")
    x = ops.parameter([-1, 6], ov.Type.f32, name="x")
    lin = ops.matmul(x, ops.constant(np.arange(12, dtype=np.float32).reshape(6, 2) / 10), False, False)
    relu = ops.relu(lin)
    lin.output(0).get_tensor().set_names({"lin"})
    relu.output(0).get_tensor().set_names({"relu"})
    folder.mkdir()
    ov.save_model(ov.Model([relu.output(0), lin.output(0)], [x], "irmodel"), folder / "irmodel.xml")
    return folder


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("newuser")
    _mixed(folder / "mixed.onnx")
    _half_input(folder / "halfin.onnx")
    _openvino_ir(folder / "irmodel")
    if MODELS.is_dir():
        shutil.copy(MODELS / "keras_lstm_mnist_ptq.tflite", folder / "lstm.tflite")
    return folder


@pytest.fixture(scope="module")
def server(repo):
    from edgeaccel.serve.process import ServerProcess

    proc = ServerProcess([repo, "--port", "0", "--grpc-port", "0"])
    proc.start()
    yield proc
    proc.kill()


@pytest.fixture(scope="module")
def http_client(server):
    return tritonclient_http.InferenceServerClient(server.http, connection_timeout=10, network_timeout=30)


@pytest.fixture(scope="module")
def grpc_client(server):
    return tritonclient_grpc.InferenceServerClient(server.grpc)


def _source(repo, name):
    return {"irmodel": repo / "irmodel", "lstm": repo / "lstm.tflite"}.get(name, repo / f"{name}.onnx")


def _random_inputs(model, seed: int, rows: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for t in model.inputs:
        shape = [rows if d is None else d for d in t.shape]
        dtype = np.dtype(t.dtype)
        out[t.name] = (rng.standard_normal(shape) * 3).astype(dtype) if dtype.kind == "f" else \
            rng.integers(0, 100, shape).astype(dtype)
    return out


def _curl(url: str, *args: str) -> tuple[int, dict]:
    done = subprocess.run(["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "30", *args, url],
                          capture_output=True, text=True, timeout=60, check=True)
    body, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(body)


def _metrics(address: str, headers: dict | None = None) -> str:
    conn = http.client.HTTPConnection(*address.rsplit(":", 1), timeout=30)
    try:
        conn.request("GET", "/metrics", headers=headers or {})
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def _read_answer(sock: socket.socket) -> tuple[str, dict]:
    """(head, JSON body) of one HTTP answer read off a raw socket (head and body may come in separate segments)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {body!r}"
        body += chunk
    return head.decode(), json.loads(body)


def _assert_same(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":  # ONNX Runtime or OpenVINO may answer: the same float arithmetic, not the same bits
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-6,
                                   err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


# -- 1. right answers over every client ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mixed", "halfin", "irmodel", pytest.param("lstm", marks=pytest.mark.shared)])
def test_every_client_gets_the_in_process_answer(repo, server, http_client, grpc_client, tmp_path, name):
    import edgeaccel

    with edgeaccel.load(_source(repo, name)) as model:
        arrays = _random_inputs(model, seed=len(name))
        want = model.run(arrays).as_dict()
        other = _random_inputs(model, seed=99)
    wanted = list(want)
    for binary in (True, False):
        tensors = []
        for key, array in arrays.items():
            tensor = tritonclient_http.InferInput(key, list(array.shape), tritonclient_http.np_to_triton_dtype(
                array.dtype))
            tensor.set_data_from_numpy(array, binary_data=binary)
            tensors.append(tensor)
        # another app's request in between: the answer to this one must not depend on it (the LSTM's state did)
        http_client.infer(name, [_http_tensor(k, v) for k, v in other.items()])
        result = http_client.infer(name, tensors, outputs=[tritonclient_http.InferRequestedOutput(k, binary_data=binary)
                                                           for k in wanted])
        for key in wanted:
            _assert_same(result.as_numpy(key), want[key], f"http {'binary' if binary else 'JSON'} {key}")
    tensors = []
    for key, array in arrays.items():
        tensor = tritonclient_grpc.InferInput(key, list(array.shape), tritonclient_grpc.np_to_triton_dtype(array.dtype))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    result = grpc_client.infer(name, tensors, client_timeout=30)
    for key in wanted:
        _assert_same(result.as_numpy(key), want[key], f"grpc {key}")
    body = {"inputs": [{"name": k, "shape": list(v.shape), "datatype": tritonclient_http.np_to_triton_dtype(v.dtype),
                        "data": v.ravel().tolist()} for k, v in arrays.items()]}
    (tmp_path / "req.json").write_text(json.dumps(body))
    status, reply = _curl(f"{server.url}/v2/models/{name}/infer", "-d", f"@{tmp_path / 'req.json'}")
    assert status == 200, reply
    assert [o["name"] for o in reply["outputs"]] == wanted
    for out in reply["outputs"]:
        array = np.array(out["data"], dtype=tritonclient_http.triton_to_np_dtype(out["datatype"])).reshape(out["shape"])
        _assert_same(array, want[out["name"]], f"curl {out['name']}")


def _http_tensor(name, array, binary=True):
    tensor = tritonclient_http.InferInput(name, list(array.shape), tritonclient_http.np_to_triton_dtype(array.dtype))
    tensor.set_data_from_numpy(array, binary_data=binary)
    return tensor


def test_a_large_json_answer_is_right(http_client):
    """Past rest.RESPOND_INLINE_VALUES output values, the JSON answer is encoded off the event loop."""
    rows = 20_000
    a = np.random.default_rng(3).standard_normal((rows, 4)).astype(np.float32)
    b = np.arange(rows * 4, dtype=np.int64).reshape(rows, 4) % 7
    result = http_client.infer("mixed", [_http_tensor("a", a), _http_tensor("b", b)],
                               outputs=[tritonclient_http.InferRequestedOutput(k, binary_data=False)
                                        for k in ("sum", "idx", "mask")])
    np.testing.assert_allclose(result.as_numpy("sum"), a + b, rtol=1e-6)
    np.testing.assert_array_equal(result.as_numpy("idx"), a.argmax(axis=1))
    np.testing.assert_array_equal(result.as_numpy("mask"), a > b)


def test_metadata_config_and_index_as_tritonclient_reads_them(server, http_client, grpc_client):
    meta = http_client.get_model_metadata("mixed")
    assert meta["inputs"] == [{"name": "a", "datatype": "FP32", "shape": [-1, 4]},
                              {"name": "b", "datatype": "INT64", "shape": [-1, 4]}]
    assert [(t["name"], t["datatype"], t["shape"]) for t in meta["outputs"]] == [
        ("sum", "FP32", [-1, 4]), ("idx", "INT64", [-1]), ("mask", "BOOL", [-1, 4]), ("half", "FP16", [-1, 4])]
    config = http_client.get_model_config("mixed")  # batched: Triton's form leaves the batch dimension out
    assert config["max_batch_size"] > 0 and config["input"][1] == {"name": "b", "data_type": "TYPE_INT64", "dims": [4]}
    assert config["output"][2] == {"name": "mask", "data_type": "TYPE_BOOL", "dims": [4]}
    grpc_config = grpc_client.get_model_config("mixed", client_timeout=10).config
    assert [o.name for o in grpc_config.output] == ["sum", "idx", "mask", "half"]
    assert list(grpc_config.output[1].dims) == [] and list(grpc_config.input[0].dims) == [4]
    grpc_meta = grpc_client.get_model_metadata("halfin", client_timeout=10)
    assert grpc_meta.inputs[0].datatype == "FP16" and list(grpc_meta.inputs[0].shape) == [1, 3]
    ir = http_client.get_model_metadata("irmodel")
    assert ir["platform"] == "edgeaccel_openvino-ir" and [t["name"] for t in ir["outputs"]] == ["relu", "lin"]
    ready = {m.name for m in grpc_client.get_model_repository_index(client_timeout=10).models}
    assert {"mixed", "halfin", "irmodel"} <= ready == {row["name"] for row in http_client.get_model_repository_index()}
    status, reply = _curl(f"{server.url}/v2/repository/index", "-d", '{"ready": "false"}')
    assert status == 400 and "'ready' is true or false" in reply["error"]
    http_client.unload_model("halfin")
    assert not grpc_client.is_model_ready("halfin", client_timeout=10)
    grpc_client.load_model("halfin", client_timeout=60)
    assert http_client.is_model_ready("halfin")


def test_load_with_a_config_override_or_uploaded_files_is_refused_not_ignored(http_client, grpc_client):
    """tritonclient's load_model(config=, files=) asks to load something other than the folder's files: ignored,
    the client would believe its upload is what runs."""
    for kwargs in ({"config": json.dumps({"max_batch_size": 4})},
                   {"config": "{}", "files": {"file:1/model.onnx": b"not the repository's file"}}):
        with pytest.raises(tritonclient_http.InferenceServerException) as err:
            http_client.load_model("halfin", **kwargs)
        assert err.value.status() == "400" and "only from its files in the repository" in err.value.message()
    with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
        grpc_client.load_model("halfin", config="{}", client_timeout=30)
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and "no configuration override" in err.value.message()
    assert http_client.is_model_ready("halfin")


def test_a_folder_that_reaches_out_through_a_link_to_another_folder_is_refused(tmp_path):
    """m/sub -> ../other stays inside, but other/x.onnx leads out: loading m reads it through sub. Only links
    out of m's own files were refused; now every real folder m reaches is walked (a loop once)."""
    from edgeaccel.serve.repository import ModelRepository

    outside, root = tmp_path / "outside", tmp_path / "models"
    outside.mkdir()
    _half_input(outside / "x.onnx")
    (root / "m").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "other" / "x.onnx").symlink_to(outside / "x.onnx")
    (root / "m" / "sub").symlink_to("../other")
    (root / "m" / "loop").symlink_to("..")  # the repository itself: inside, walked once
    (root / "alias").symlink_to("other")  # a top-level link to a folder inside: walked as well
    entries = ModelRepository(root).entries()
    assert entries["m"].problem.startswith("m/") and "x.onnx is a symlink to" in entries["m"].problem
    assert entries["alias"].problem.startswith("alias/x.onnx is a symlink to")
    assert "outside the model repository" in entries["other"].problem


def test_a_triton_layout_is_named_in_the_reason_it_did_not_load(tmp_path):
    """A Triton user's repository (NAME/1/model.onnx beside config.pbtxt) is not read: the reason says how to fix it."""
    from edgeaccel.serve.errors import ServeError

    (tmp_path / "m" / "triton" / "1").mkdir(parents=True)
    _half_input(tmp_path / "m" / "triton" / "1" / "model.onnx")
    (tmp_path / "m" / "triton" / "config.pbtxt").write_text('name: "triton"\n')
    core = _core(tmp_path / "m")
    try:
        with pytest.raises(ServeError) as err:
            core.load("triton")
        assert err.value.status == 409 and "Triton's layout, triton/1/" in err.value.message
        assert "move the files up a level" in core.index()[0]["reason"]
    finally:
        core.close()


# -- 2. bad requests: a protocol error that says what is wrong, the server up, the next answer right --------
LINE = {"name": "a", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}
INT_LINE = {"name": "b", "shape": [1, 4], "datatype": "INT64", "data": [1, 2, 3, 4]}


@pytest.mark.parametrize("body,words", [
    (json.dumps({"inputs": []}), "no 'inputs' list"),
    (json.dumps({"inputs": [{**LINE, "shape": [1, 99999999999]}, INT_LINE]}), "needs 99999999999"),
    (json.dumps({"inputs": [{**LINE, "shape": [99999999999] * 3, "data": [1]}, INT_LINE]}), "holds 1 values"),
    (json.dumps({"inputs": [{**LINE, "shape": [-1, 4]}, INT_LINE]}), "non-negative integers"),
    (json.dumps({"inputs": [{**LINE, "shape": "1,4"}, INT_LINE]}), "shape must be a list"),
    (json.dumps({"inputs": [{**LINE, "parameters": [1]}, INT_LINE]}), "'parameters' must be a JSON object"),
    (json.dumps({"inputs": [LINE, INT_LINE], "parameters": 7}), "'parameters' must be a JSON object"),
    (json.dumps({"inputs": [LINE, INT_LINE], "outputs": [{"name": "sum", "parameters": [1]}]}),
     "'parameters' must be a JSON object"),
    (json.dumps({"inputs": [LINE, INT_LINE], "outputs": [{"name": "sum", "parameters": {"classification": 2}}]}),
     "classification extension is not served"),
    (json.dumps({"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32",
                             "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 16}}, INT_LINE]}),
     "shared-memory extension is not served"),
    (json.dumps({"inputs": [{**LINE, "datatype": "BYTES", "data": ["x", "y", "z", "w"]}, INT_LINE]}),
     "BYTES (string) tensors are not served"),
    (json.dumps({"inputs": [{**INT_LINE, "data": [1, 2, 3, 10 ** 30]}, LINE]}), "does not hold INT64 values"),
    (json.dumps({"inputs": [LINE, {**INT_LINE, "data": [0.2, 0.5, 1, 2]}]}), "holds fractions such as 0.2"),
    ('{"inputs": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
])
def test_bad_http_requests_are_400_with_the_reason(server, http_client, tmp_path, body, words):
    (tmp_path / "bad.json").write_text(body)
    status, reply = _curl(f"{server.url}/v2/models/mixed/infer", "-d", f"@{tmp_path / 'bad.json'}")
    assert status == 400 and words in reply["error"], reply
    result = http_client.infer("mixed", [_http_tensor("a", np.ones((1, 4), np.float32)),
                                         _http_tensor("b", np.full((1, 4), 2, np.int64))])
    np.testing.assert_array_equal(result.as_numpy("sum"), np.full((1, 4), 3, np.float32))


def test_binary_sizes_that_are_not_byte_counts_say_so(server, http_client):
    host, port = server.http.rsplit(":", 1)
    for size, words in (("16.0", "whole number of bytes, not 16.0"), ('"16"', "whole number of bytes, not '16'"),
                        ("true", "whole number of bytes, not True"), ("17", "goes past the 16 bytes")):
        header = ('{"inputs": [{"name": "a", "shape": [1, 4], "datatype": "FP32", "parameters": {"binary_data_size": '
                  + size + "}}]}").encode()
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("POST", "/v2/models/mixed/infer", body=header + bytes(16),
                     headers={"Inference-Header-Content-Length": str(len(header))})
        response = conn.getresponse()
        reply = json.loads(response.read())
        conn.close()
        assert response.status == 400 and words in reply["error"], reply


def test_tritonclient_class_count_is_refused_not_ignored(http_client, grpc_client):
    a, b = np.ones((1, 4), np.float32), np.ones((1, 4), np.int64)
    with pytest.raises(tritonclient_http.InferenceServerException) as err:
        http_client.infer("mixed", [_http_tensor("a", a), _http_tensor("b", b)],
                          outputs=[tritonclient_http.InferRequestedOutput("sum", class_count=2)])
    assert err.value.status() == "400" and "classification" in err.value.message()
    tensors = []
    for name, array, datatype in (("a", a, "FP32"), ("b", b, "INT64")):
        tensor = tritonclient_grpc.InferInput(name, [1, 4], datatype)
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
        grpc_client.infer("mixed", tensors, outputs=[tritonclient_grpc.InferRequestedOutput("sum", class_count=2)],
                          client_timeout=30)
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT" and "classification" in err.value.message()


def test_bad_grpc_requests_are_invalid_argument_with_the_reason(server):
    import grpc

    from edgeaccel.serve.proto import grpc_service_pb2 as pb
    from edgeaccel.serve.proto import grpc_service_pb2_grpc as pb_grpc

    tensor, param = pb.ModelInferRequest.InferInputTensor, pb.InferParameter
    good = [tensor(name="a", datatype="FP32", shape=[1, 4]), tensor(name="b", datatype="INT64", shape=[1, 4])]
    raw = [np.ones((1, 4), np.float32).tobytes(), np.full((1, 4), 2, np.int64).tobytes()]
    cases = [
        (pb.ModelInferRequest(model_name="mixed"), "no inputs"),
        (pb.ModelInferRequest(model_name="mixed", inputs=[tensor(name="a", datatype="FP32", shape=[1, 99999999999])],
                              raw_input_contents=[b"\0" * 16]), "needs 399999999996"),
        (pb.ModelInferRequest(model_name="mixed", inputs=[tensor(name="a", datatype="FP32", shape=[-1, 4])],
                              raw_input_contents=[b"\0" * 16]), "non-negative"),
        (pb.ModelInferRequest(model_name="halfin", inputs=[tensor(name="h", datatype="FP16", shape=[1, 3])]),
         "send them as raw little-endian bytes"),
        (pb.ModelInferRequest(model_name="mixed", inputs=[tensor(name="a", datatype="BYTES", shape=[1])],
                              raw_input_contents=[b"\0" * 8]), "BYTES"),
        (pb.ModelInferRequest(model_name="mixed", inputs=good, raw_input_contents=raw[:1]), "1 raw_input_contents"),
        (pb.ModelInferRequest(model_name="mixed", inputs=good, raw_input_contents=raw,
                              parameters={"timeout": param(string_param="soon")}), "string_param 'soon'"),
        (pb.ModelInferRequest(model_name="../mixed", inputs=good, raw_input_contents=raw), "never a path"),
    ]
    with grpc.insecure_channel(server.grpc) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        for request, words in cases:
            with pytest.raises(grpc.RpcError) as err:
                stub.ModelInfer(request, timeout=30)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and words in err.value.details(), words
        fp16 = pb.ModelInferRequest(model_name="halfin", inputs=[tensor(name="h", datatype="FP16", shape=[1, 3])],
                                    raw_input_contents=[np.array([[1, 2, 3]], np.float16).tobytes()])
        reply = stub.ModelInfer(fp16, timeout=30)
        np.testing.assert_array_equal(np.frombuffer(reply.raw_output_contents[0], np.float32), [2, 4, 6])


def test_requests_every_runtime_refuses_do_not_take_the_model_away_from_other_clients(server, tmp_path):
    """Rows that disagree between inputs fail in ONNX Runtime and OpenVINO alike. Each such failure used to count
    against the executor: three requests took both out of rotation, and every client's next request waited for
    its deadline (504) on a model with no executor left. Now the server's own shape check (ONNX shape inference
    with the request's shapes) refuses them as the caller's 400 before any executor runs."""
    bad = {"inputs": [{"name": "a", "shape": [2, 4], "datatype": "FP32", "data": [1] * 8},
                      {"name": "b", "shape": [3, 4], "datatype": "INT64", "data": [1] * 12}],
           "parameters": {"timeout": 10_000_000}}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    for _ in range(4):
        status, reply = _curl(f"{server.url}/v2/models/mixed/infer", "-d", f"@{tmp_path / 'bad.json'}")
        assert status == 400 and "cannot take inputs of these shapes (a 2x4, b 3x4)" in reply["error"], reply
    good = {"inputs": [LINE, INT_LINE], "parameters": {"timeout": 10_000_000}, "outputs": [{"name": "sum"}]}
    (tmp_path / "good.json").write_text(json.dumps(good))
    status, reply = _curl(f"{server.url}/v2/models/mixed/infer", "-d", f"@{tmp_path / 'good.json'}")
    assert status == 200 and reply["outputs"][0]["data"] == [2, 4, 6, 8], reply


# -- one client's request never fails or changes another's (dynamic batching) -------------------------------
def _core(folder, **options):
    from edgeaccel.serve.core import ServeCore, ServeOptions
    from edgeaccel.serve.repository import ModelRepository

    return ServeCore(ModelRepository(folder), ServeOptions(policy="latency", max_batch=8, batch_window_ms=300,
                                                           **options))


def test_a_request_the_model_refuses_fails_alone_in_a_batch(tmp_path, caplog):
    """Rows that disagree between inputs, or an index out of range in one request: before, the batch they
    were joined to failed for every client in it (500)."""
    from onnx import TensorProto, helper

    from edgeaccel.serve.errors import ServeError
    from onnx_models import save

    (tmp_path / "m").mkdir()
    _mixed(tmp_path / "m" / "mixed.onnx")
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    info = helper.make_tensor_value_info
    save([helper.make_node("Gather", ["T", "i"], ["y"])], [info("i", TensorProto.INT64, ["N"])],
         [info("y", TensorProto.FLOAT, ["N", 4])], {"T": table}, tmp_path / "m" / "lookup.onnx")
    core = _core(tmp_path / "m", executor="onnxruntime")  # ONNX Runtime refuses an index out of range
    try:
        core.load("mixed")
        core.load("lookup")
        a = [np.full((1, 4), k, np.float32) for k in range(3)]
        b = np.ones((1, 4), np.int64)
        futures = [core.infer("mixed", {"a": a[0], "b": b})]
        with pytest.raises(ServeError) as err:  # the server's own shape check: refused before it can join a batch
            core.infer("mixed", {"a": np.zeros((2, 4), np.float32), "b": np.ones((3, 4), np.int64)})
        assert err.value.status == 400
        futures += [core.infer("mixed", {"a": a[1], "b": b}), core.infer("mixed", {"a": a[2], "b": b})]
        for k, future in enumerate(futures):
            np.testing.assert_array_equal(future.result(timeout=30)["sum"], a[k] + 1)
        # rows that disagree but broadcast (1 row of a, 2 of b): run alone, and answered
        alone = core.infer("mixed", {"a": a[2], "b": np.ones((2, 4), np.int64)}).result(timeout=30)
        np.testing.assert_array_equal(alone["sum"], np.full((2, 4), 3, np.float32))
        futures = [core.infer("lookup", {"i": np.array(ids, np.int64)}) for ids in ([1, 2], [99], [3])]
        np.testing.assert_array_equal(futures[0].result(timeout=30)["y"], table[[1, 2]])
        np.testing.assert_array_equal(futures[2].result(timeout=30)["y"], table[[3]])
        with pytest.raises(ServeError):
            futures[1].result(timeout=30)
    finally:
        core.close()
    assert "Traceback" not in caplog.text and "exception calling callback" not in caplog.text


def test_outputs_that_are_not_rows_of_the_batch_are_never_split_across_clients(tmp_path):
    """A model whose first dimensions are dynamic but no batch (y = x stacked on itself, 2N rows): splitting a
    joined run by rows handed each client rows of the others' answers."""
    from onnx import TensorProto, helper

    from onnx_models import save

    (tmp_path / "m").mkdir()
    info = helper.make_tensor_value_info
    save([helper.make_node("Concat", ["x", "x"], ["y"], axis=0)], [info("x", TensorProto.FLOAT, ["N", 2])],
         [info("y", TensorProto.FLOAT, ["M", 2])], {}, tmp_path / "m" / "twice.onnx")
    core = _core(tmp_path / "m")
    try:
        assert "batched" in core.load("twice").batching
        requests = [np.full((rows, 2), k, np.float32) for k, rows in enumerate((1, 2, 1))]
        futures = [core.infer("twice", {"x": x}) for x in requests]
        for x, future in zip(requests, futures, strict=True):
            np.testing.assert_array_equal(future.result(timeout=30)["y"], np.concatenate([x, x]))
        later = [core.infer("twice", {"x": x}) for x in requests]  # and the model is not joined again
        for x, future in zip(requests, later, strict=True):
            np.testing.assert_array_equal(future.result(timeout=30)["y"], np.concatenate([x, x]))
    finally:
        core.close()


def test_a_request_whose_client_went_away_is_answered_without_a_traceback(tmp_path, caplog):
    """A gRPC client that cancels (its deadline passed) cancels the future the server awaits; the model's answer
    then found it cancelled and concurrent.futures logged a traceback for every such request."""
    (tmp_path / "m").mkdir()
    _mixed(tmp_path / "m" / "mixed.onnx")
    core = _core(tmp_path / "m")
    try:
        core.load("mixed")
        future = core.infer("mixed", {"a": np.ones((1, 4), np.float32), "b": np.ones((1, 4), np.int64)})
        assert future.cancel()  # what asyncio.wrap_future does when the awaiting RPC is cancelled
        assert core.drain(timeout_s=30) and core.answered == core.accepted == 1
    finally:
        core.close()
    assert "exception calling callback" not in caplog.text


# -- 3. a flood on a batched model, then SIGTERM --------------------------------------------------------------
def test_flood_on_a_batched_model_then_sigterm_loses_no_accepted_request(repo):
    from edgeaccel.serve.process import ServerProcess

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "0", "--models", "mixed", "--max-queue", "3",
                            "--log-json"]).start()
    host, port = server.http.rsplit(":", 1)
    answers: list[tuple[str, int, bool]] = []  # protocol, status, whether a 200 was this client's own answer
    retry_after: list[str | None] = []
    stop = threading.Event()

    def http_app(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            rows = int(rng.integers(1, 4))
            a = rng.standard_normal((rows, 4)).astype(np.float32)
            body = json.dumps({"inputs": [
                {"name": "a", "shape": [rows, 4], "datatype": "FP32", "data": a.ravel().tolist()},
                {"name": "b", "shape": [rows, 4], "datatype": "INT64", "data": [seed] * 4 * rows}],
                "outputs": [{"name": "sum"}]})
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                conn.request("POST", "/v2/models/mixed/infer", body=body)
                response = conn.getresponse()
                data = response.read()
            except OSError:  # refused once the server stopped listening
                return
            finally:
                conn.close()
            own = response.status == 200 and np.allclose(json.loads(data)["outputs"][0]["data"], (a + seed).ravel())
            answers.append(("http", response.status, own))
            if response.status == 503:
                retry_after.append(response.getheader("retry-after"))

    def grpc_app(seed: int) -> None:
        client = tritonclient_grpc.InferenceServerClient(server.grpc)
        a, b = np.full((1, 4), seed, np.float32), np.ones((1, 4), np.int64)
        while not stop.is_set():
            tensors = []
            for name, array, datatype in (("a", a, "FP32"), ("b", b, "INT64")):
                tensors.append(tritonclient_grpc.InferInput(name, [1, 4], datatype))
                tensors[-1].set_data_from_numpy(array)
            try:
                result = client.infer("mixed", tensors, client_timeout=30)
            except tritonclient_grpc.InferenceServerException as exc:
                if exc.status() != "StatusCode.UNAVAILABLE" or "retry" not in (exc.message() or ""):
                    return  # the server is gone (its own UNAVAILABLE says to retry; a closed channel does not)
                answers.append(("grpc", 503, False))
                continue
            answers.append(("grpc", 200, bool((result.as_numpy("sum") == seed + 1).all())))

    threads = [threading.Thread(target=http_app, args=(k,)) for k in range(8)] + \
        [threading.Thread(target=grpc_app, args=(100 + k,)) for k in range(3)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while (sum(1 for _, s, _ in answers if s == 503) < 5 or len(answers) < 60) and time.monotonic() < deadline:
            time.sleep(0.02)
        code = server.terminate(timeout_s=60)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        server.kill()
    assert code == 0, "".join(server.stderr_lines[-20:])
    assert {s for _, s, _ in answers} == {200, 503}  # the queue filled; nothing else went wrong
    assert all(own for _, s, own in answers if s == 200)  # every answer was that client's own
    # 1: the queue was full; 5: the shutdown's refusals, answered while the port still listens
    assert "1" in retry_after and set(retry_after) <= {"1", "5"}
    stopped = [line for line in server.stderr_lines if "stopped: answered" in line]
    answered, accepted = map(int, re.search(r"answered (\d+) of the (\d+)", stopped[0]).groups())
    assert answered == accepted
    logged = [json.loads(line) for line in server.stdout_lines if line.startswith("{")]
    for protocol in ("http", "grpc"):  # every 200 the server logged reached its client
        assert sum(1 for row in logged if row["protocol"] == protocol and row["status"] == 200) == \
            sum(1 for p, s, _ in answers if p == protocol and s == 200)


def test_sigterm_with_an_upload_that_never_ends_answers_it_503_and_exits_0(repo):
    """A client that sent half a body holds no accepted request; after the grace period (--timeout + 5 s, + 1 s)
    uvicorn cancels it: that was a traceback in the log and a text/plain 500 to the client."""
    from edgeaccel.serve.process import ServerProcess

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "off", "--models", "mixed", "--timeout", "0.1"]).start()
    try:
        host, port = server.http.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as stalled:
            stalled.sendall(b"POST /v2/models/mixed/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
            time.sleep(0.3)  # the server has read the head
            assert server.terminate(timeout_s=60) == 0
            head, reply = _read_answer(stalled)
    finally:
        server.kill()
    assert head.startswith("HTTP/1.1 503") and "retry-after: 5" in head.lower()
    assert "shut down before this request arrived" in reply["error"]
    assert "Traceback" not in "".join(server.stderr_lines)


def _held_mixed_call(server):
    """One gRPC request to 'mixed', left waiting (in the tests' 10 s batch window): the client (kept alive: its
    channel going away would cancel the call) and the call."""
    client = tritonclient_grpc.InferenceServerClient(server.grpc)
    tensors = [tritonclient_grpc.InferInput("a", [1, 4], "FP32"), tritonclient_grpc.InferInput("b", [1, 4], "INT64")]
    tensors[0].set_data_from_numpy(np.ones((1, 4), np.float32))
    tensors[1].set_data_from_numpy(np.ones((1, 4), np.int64))
    return client, client.async_infer("mixed", tensors, callback=lambda result, error: None)


def test_a_full_queue_refuses_a_large_body_before_reading_it(repo):
    """--max-queue 1, held by a request waiting in a 10 s batch window: the next request, announcing 50 MB, gets
    its 503 after its head, without the server buffering (or the client sending) the 50 MB first."""
    from edgeaccel.serve.process import ServerProcess

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "0", "--models", "mixed", "--max-queue", "1",
                            "--batch-window-ms", "10000"]).start()
    try:
        _client, _call = _held_mixed_call(server)  # holds the one place
        host, port = server.http.rsplit(":", 1)
        deadline = time.monotonic() + 20
        while "edgeaccel_serve_queue_depth 1.0" not in _metrics(server.http):
            assert time.monotonic() < deadline, "the first request never reached the queue"
            time.sleep(0.05)
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"POST /v2/models/mixed/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 52428800\r\n\r\n{")
            head, reply = _read_answer(sock)
    finally:
        server.kill()
    assert head.startswith("HTTP/1.1 503") and "retry-after: 1" in head.lower()
    assert "--max-queue 1" in reply["error"]


def test_a_grpc_call_the_client_cancels_is_counted_as_cancelled_not_200(repo):
    """The request waits in a 10 s batch window; the client cancels it. /metrics and the log counted it a 200."""
    from edgeaccel.serve.process import ServerProcess

    server = ServerProcess([repo, "--port", "0", "--grpc-port", "0", "--models", "mixed", "--batch-window-ms", "10000",
                            "--log-json"]).start()
    try:
        client, call = _held_mixed_call(server)
        time.sleep(0.5)  # the server holds it, waiting for others to join its batch
        call.cancel()
        deadline = time.monotonic() + 20
        while not any(line.startswith("{") for line in server.stdout_lines) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        server.kill()
    (row,) = [json.loads(line) for line in server.stdout_lines if line.startswith("{")]
    assert row["protocol"] == "grpc" and row["status"] == 499 and "cancelled" in row["error"]


# -- a taken port --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("option", ["--port", "--grpc-port"])
def test_a_taken_port_is_refused_before_any_model_loads(cli, repo, option):

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = str(held.getsockname()[1])
        ports = {"--port": "0", "--grpc-port": "0", option: taken}
        done = cli("serve", str(repo), *itertools.chain(*ports.items()), timeout=60)
    assert done.returncode == 7 and f"127.0.0.1:{taken} ({option}): Address already in use" in done.stderr
    assert f"hint: choose another {option}" in done.stderr and "loaded" not in done.stderr, done.stderr


def test_grpc_bind_failure_is_said_once_without_grpc_native_log(capfd):
    from types import SimpleNamespace

    from edgeaccel.errors import ConfigError
    from edgeaccel.serve.core import ServeOptions
    from edgeaccel.serve.server import Listen, _start_grpc

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(ConfigError, match="cannot listen for gRPC"):
            _start_grpc(SimpleNamespace(options=ServeOptions()), None, Listen(grpc_port=held.getsockname()[1]))
    assert "add_port.cc" not in capfd.readouterr().err


# -- 4. the token on an address other machines reach ---------------------------------------------------------
def test_a_token_beyond_ascii_is_accepted_from_http_and_grpc():
    from edgeaccel.serve.security import authorized

    token = "clé-du-serveur-für-alle-0123"
    assert authorized(f"Bearer {token}".encode(), token)  # HTTP: the header's raw (UTF-8) bytes
    assert authorized(f"Bearer {token}", token)  # gRPC metadata: text
    assert not authorized(f"Bearer {token}x".encode(), token) and not authorized(f"Basic {token}", token)


def _routable_address() -> str | None:
    """This machine's address on its default route (a UDP connect sends nothing), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if ipaddress.ip_address(address).is_loopback or address == "0.0.0.0" else address


def test_non_loopback_bind_needs_the_token_for_every_route(repo):
    from edgeaccel.serve.process import ServerProcess

    address = _routable_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    env = {k: v for k, v in os.environ.items() if k != "EDGEACCEL_SERVE_TOKEN"}
    server = ServerProcess([repo, "--host", address, "--port", "0", "--grpc-port", "0", "--models", "mixed",
                            "--token", TOKEN], env=env).start()
    try:
        assert server.http.startswith(address)
        client = tritonclient_http.InferenceServerClient(server.http, connection_timeout=10, network_timeout=30)
        tensors = [_http_tensor("a", np.ones((1, 4), np.float32)), _http_tensor("b", np.ones((1, 4), np.int64))]
        for call in (lambda: client.infer("mixed", tensors), lambda: client.get_model_metadata("mixed"),
                     lambda: client.load_model("halfin"), lambda: client.unload_model("mixed"),
                     lambda: client.get_model_repository_index()):
            with pytest.raises(tritonclient_http.InferenceServerException) as err:
                call()
            assert err.value.status() == "401" and "token" in err.value.message()
        grpc = tritonclient_grpc.InferenceServerClient(server.grpc)
        for call in (lambda: grpc.load_model("halfin", client_timeout=30), lambda: grpc.unload_model("mixed"),
                     lambda: grpc.get_model_metadata("mixed", client_timeout=30), lambda: grpc.is_server_live()):
            with pytest.raises(tritonclient_grpc.InferenceServerException) as err:
                call()
            assert err.value.status() == "StatusCode.UNAUTHENTICATED"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        index = {row["name"]: row for row in client.get_model_repository_index(headers=auth)}
        assert index["mixed"]["state"] == "READY" and "state" not in index["halfin"]  # neither loaded nor unloaded
        result = client.infer("mixed", tensors, headers=auth)
        np.testing.assert_array_equal(result.as_numpy("sum"), np.full((1, 4), 2, np.float32))
        text = _metrics(server.http, auth)
        # only the one request with the token reached a model
        assert re.findall(r'edgeaccel_serve_requests_total\{model="mixed",protocol="(\w+)",status="(\d+)"\} (\S+)',
                          text) == [("http", "200", "1.0")]
    finally:
        server.kill()
