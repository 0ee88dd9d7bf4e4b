"""edgeaccel on Ray, for real: one local Ray (2 CPUs) shared by this module, real models and images, every answer
compared with the same model loaded in this process. The node declares the resources that node_resources derives
from a fake Raspberry Pi 5 + Coral USB tree ({"EdgeTPU": 1}), so actors asking for an Edge TPU do land; this
machine has none, so loading on it fails, and says so."""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import edgeaccel
from edgeaccel.errors import ConfigError
from edgeaccel.testing import BOARDS, rpi5_with_coral_usb

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'edgeaccel[ray]')")
pytest.importorskip("ray.data", reason="Ray without its data extra (pip install 'edgeaccel[ray]')")

from conftest import IMAGES, MODELS, needs  # noqa: E402

MOBILENET = MODELS / "mobilenet_v2_1.0_224_quant.tflite"
LABELS = MODELS / "imagenet_labels.txt"
ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow,  # slow tier: Ray clusters
              pytest.mark.shared, needs("models/mobilenet_v2_1.0_224_quant.tflite"),
              # Ray's own deprecations (Serve's Pydantic models on import, DataContext's old fields when Ray Data
              # copies the context): not ours to fix
              pytest.mark.filterwarnings("ignore:Using extra keyword arguments on `Field`"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One Ray for the module; its node declares what a Pi 5 with a Coral USB stick would."""
    from edgeaccel.ray import node_resources

    board = tmp_path_factory.mktemp("rpi5")
    rpi5_with_coral_usb(board)
    resources = node_resources(edgeaccel.probe(board, runtimes=False, telemetry=False))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, resources=resources)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield resources
    from ray import serve

    serve.shutdown()
    ray.shutdown()


@pytest.fixture(autouse=True)
def _actors_released():
    """A dataset's actors live as long as the dataset and what holds it (its rows, a traceback): collect the
    previous test's before this one starts, so that this one does not wait for their CPUs."""
    if ray.is_initialized():
        gc.collect()
        deadline = time.monotonic() + 15
        total = ray.cluster_resources().get("CPU")
        while ray.available_resources().get("CPU") != total and time.monotonic() < deadline:
            time.sleep(0.1)
    yield


def in_process(model, **options):
    return edgeaccel.load(model, threads=1, **options)


# -- without a cluster ------------------------------------------------------------------------------------------
def test_importing_edgeaccel_ray_imports_no_ray_and_a_missing_ray_says_how_to_install_it():
    code = ("import sys; import edgeaccel.ray; assert 'ray' not in sys.modules, 'ray imported'; "
            "sys.modules['ray'] = None\n"  # what Python does for a package that is not installed
            "try:\n    edgeaccel.ray.map_batches(None, 'm.tflite')\n"
            "except edgeaccel.RuntimeNotInstalledError as e:\n    print(e.hint)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "pip install 'edgeaccel[ray]'" in out.stdout


EXPECTED_RESOURCES = {
    "rpi5-coral-usb": {"EdgeTPU": 1}, "coral-dev-board": {"EdgeTPU": 1}, "x86-coral-m2": {"EdgeTPU": 1},
    "intel-npu-laptop": {"IntelNPU": 1, "IntelGPU": 1}, "jetson-agx-orin": {"GPU": 1}, "x86-cuda": {"GPU": 1},
    "rk3588": {"RKNPU": 1}, "cloud-tpu-vm": {"TPU": 4}, "atlas-200-dk": {"NPU": 1},
}
# `ray start` takes NVIDIA GPUs as --num-gpus; the rest as one JSON word (no spaces: $(...) keeps it whole)
EXPECTED_ARGS = {
    "rpi5-coral-usb": '--resources={"EdgeTPU":1}', "coral-dev-board": '--resources={"EdgeTPU":1}',
    "x86-coral-m2": '--resources={"EdgeTPU":1}', "intel-npu-laptop": '--resources={"IntelGPU":1,"IntelNPU":1}',
    "jetson-agx-orin": "--num-gpus=1", "x86-cuda": "--num-gpus=1", "rk3588": '--resources={"RKNPU":1}',
    "cloud-tpu-vm": '--resources={"TPU":4}', "atlas-200-dk": '--resources={"NPU":1}',
}


@pytest.mark.parametrize("board", sorted(BOARDS))
def test_node_resources_come_from_the_probe_of_each_board(tmp_path, board):
    from edgeaccel.ray import node_resources, ray_start_args

    BOARDS[board](tmp_path)
    resources = node_resources(edgeaccel.probe(tmp_path, runtimes=False, telemetry=False))
    assert resources == EXPECTED_RESOURCES[board]
    assert " ".join(ray_start_args(resources)) == EXPECTED_ARGS[board]


def test_a_device_this_user_cannot_open_is_not_declared(tmp_path):
    from edgeaccel.ray import node_resources

    from test_probe_boards import STRANGER

    rpi5_with_coral_usb(tmp_path)
    assert node_resources(edgeaccel.probe(tmp_path, runtimes=False, telemetry=False, identity=STRANGER)) == {}


def test_probe_ray_resources_prints_ray_start_arguments_for_a_fake_board(cli, tmp_path):
    rpi5_with_coral_usb(tmp_path)
    out = cli("probe", "--ray-resources", "--root", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ['--resources={"EdgeTPU":1}']


def test_probe_ray_without_a_cluster_is_an_error_with_a_hint_and_starts_none(cli):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = cli("probe", "--ray", f"127.0.0.1:{port}")
    assert out.returncode == 7, out.stderr  # EXIT_CONFIG
    assert "no Ray cluster answers at 127.0.0.1" in out.stderr and "ray start --head" in out.stderr
    assert "Traceback" not in out.stderr


def test_cluster_table_says_which_node_to_fix_and_how():
    from edgeaccel.ray.cluster import render

    pi = {"node_id": "a" * 56, "ip": "10.0.0.7", "declared": {"CPU": 4.0}, "devices": ["CPU", "EdgeTPU"],
          "present_not_usable": [], "runtimes": ["litert 2.3.0"], "executors": ["litert:CPU", "litert:EdgeTPU"],
          "resources": {"EdgeTPU": 1}, "undeclared": {"EdgeTPU": 1}}
    lost = {"node_id": "b" * 56, "ip": "10.0.0.8", "declared": {"CPU": 2.0},
            "error": "ModuleNotFoundError: No module named 'edgeaccel'"}
    lines = render([pi, lost]).splitlines()
    assert lines[0].split() == ["node", "ip", "devices", "runtimes", "executors", "resources"]
    assert lines[1].split()[:2] == ["aaaaaaaa", "10.0.0.7"] and "EdgeTPU=1" in lines[1]
    assert lines[3] == "2 nodes"
    assert 'aaaaaaaa: has EdgeTPU but did not declare it to Ray; restart it with `ray start ... ' \
           '--resources={"EdgeTPU":1}`' in lines
    assert "bbbbbbbb: ModuleNotFoundError: No module named 'edgeaccel'" in lines


def test_model_files_ship_as_bytes_and_unpack_once_per_node(tmp_path):
    from edgeaccel.ray.shipping import pack, unpack

    payload = pack(MODELS / "openvino", labels=LABELS)  # an IR folder: the .xml and its .bin weights
    assert sorted(payload.files) == ["_labels/imagenet_labels.txt", "mobilenet_v2_1.0_224_quant.bin",
                                     "mobilenet_v2_1.0_224_quant.xml"]
    source, labels = unpack(payload, tmp_path)
    again = unpack(payload, tmp_path)
    assert (source, labels) == again and Path(source).is_dir()
    assert (Path(source) / "mobilenet_v2_1.0_224_quant.bin").read_bytes() == \
        (MODELS / "openvino" / "mobilenet_v2_1.0_224_quant.bin").read_bytes()
    assert Path(labels).read_text() == LABELS.read_text()


def test_labels_given_in_task_options_travel_like_the_older_keyword(tmp_path):
    """A label file given as task_options=TaskOptions(labels=...) (the current spelling) ships with the model,
    as labels= did: a node without the caller's path still reads it."""
    from edgeaccel.ray.shipping import labels_given, pack, unpack

    for i, options in enumerate(({"task_options": edgeaccel.TaskOptions(labels=str(LABELS))},
                                 {"task_options": {"labels": str(LABELS)}}, {"labels": str(LABELS)})):
        assert labels_given(options) == str(LABELS)
        _, labels = unpack(pack(MODELS / "mobilenet_v2_1.0_224_quant.tflite", labels=labels_given(options)),
                           tmp_path / str(i))
        assert Path(labels).read_text() == LABELS.read_text()
    assert labels_given({"task_options": edgeaccel.TaskOptions()}) is None


def test_a_folder_of_symlinks_ships_as_the_folder_its_names_make(tmp_path):
    """A Hugging Face snapshot names its files by symlinks into blobs/: the payload keeps the names (the .bin
    beside the .xml it belongs to), not the blobs' hashes."""
    from edgeaccel.ray.shipping import pack, unpack

    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshot"
    blobs.mkdir()
    snapshot.mkdir()
    for suffix, blob in ((".xml", "3f1a"), (".bin", "9c2e")):
        (blobs / blob).write_bytes((MODELS / "openvino" / f"mobilenet_v2_1.0_224_quant{suffix}").read_bytes())
        (snapshot / f"model{suffix}").symlink_to(blobs / blob)
    payload = pack(snapshot)
    assert sorted(payload.files) == ["model.bin", "model.xml"]
    source, _ = unpack(payload, tmp_path / "node")
    with edgeaccel.load(Path(source), executor="openvino", calibrate=False) as model:
        assert model.executor.runtime == "openvino"


def test_ship_path_on_a_node_without_the_file_says_what_to_do(tmp_path):
    from edgeaccel.ray.shipping import ModelPayload, unpack

    with pytest.raises(edgeaccel.InputError, match="does not exist on this node") as err:
        unpack(ModelPayload(str(tmp_path / "elsewhere.tflite"), "path"))
    assert "ship='bytes'" in err.value.hint


# -- on the local Ray ---------------------------------------------------------------------------------------------
def read_images(names, **options):
    return ray.data.read_images([str(IMAGES / f"{n}.png") for n in names], mode="RGB", **options)


def test_map_batches_classifies_images_as_the_model_does_in_process(local_ray):
    from edgeaccel.ray import map_batches

    names = ["bird", "cat", "grace_hopper"]
    ds = map_batches(read_images(names, include_paths=True), MOBILENET, task="classify", labels=LABELS, actors=1,
                     batch_size=2)
    rows = sorted(ds.take_all(), key=lambda r: r["path"])
    with in_process(MOBILENET, task="classify", labels=LABELS) as model:
        want = [model.predict(IMAGES / f"{n}.png").top for n in sorted(names)]
    assert [(r["class_id"], r["label"]) for r in rows] == [(w.class_id, w.label) for w in want]
    assert [r["label"] for r in rows] == ["chickadee", "Egyptian cat", "military uniform"]
    assert np.allclose([r["score"] for r in rows], [w.score for w in want])
    assert {r["executor"] for r in rows} == {"litert:CPU"} and "image" not in rows[0]


def test_map_batches_decodes_encoded_images_in_the_actors(local_ray):
    """read_binary_files: the readers only read, each actor decodes its rows (column='bytes')."""
    from edgeaccel.ray import map_batches

    paths = [str(IMAGES / "cat.png"), str(MODELS / "imagenet_labels.txt")]  # the second is no image
    rows = map_batches(ray.data.read_binary_files(paths[:1]), MOBILENET, task="classify", labels=LABELS,
                       column="bytes", actors=1).take_all()
    assert [(r["label"], "bytes" in r) for r in rows] == [("Egyptian cat", False)]
    bad = map_batches(ray.data.read_binary_files(paths[1:]), MOBILENET, task="classify", column="bytes", actors=1)
    with pytest.raises(Exception, match="cannot decode image an image of the batch"):
        bad.take_all()


def test_map_batches_detects_boxes_as_the_model_does_in_process(local_ray):
    from edgeaccel.ray import map_batches

    model_path = MODELS / "traffic_model.tflite"
    rows = map_batches(read_images(["traffic_0001"]), model_path, task="detect", actors=1, ship="path").take_all()
    with in_process(model_path, task="detect") as model:
        want = model.predict(IMAGES / "traffic_0001.png").boxes
    assert len(rows) == 1 and len(want) > 0
    got = rows[0]
    assert np.allclose(got["boxes"], [b.xyxy for b in want], atol=1e-3)
    assert list(got["class_ids"]) == [b.class_id for b in want]
    assert np.allclose(got["scores"], [b.score for b in want])


def test_map_batches_runs_raw_tensors_of_a_multi_file_model(local_ray):
    """The OpenVINO IR folder (an .xml and its .bin) shipped as bytes; rows from ray.data.from_numpy ('data')."""
    from edgeaccel.ray import map_batches

    rng = np.random.default_rng(0)
    samples = rng.integers(0, 256, (3, 224, 224, 3), dtype=np.uint8)
    blocks = ray.data.from_numpy([samples[:2], samples[2:]])  # two blocks: work for both actors
    rows = map_batches(blocks, MODELS / "openvino", actors=2, batch_size=2).take_all()
    with in_process(MODELS / "openvino") as model:
        name = model.outputs[0].name
        want = [model.run(s[None])[0][0] for s in samples]
    assert len(rows) == 3 and rows[0]["executor"].startswith("openvino:")
    got = {tuple(r[name]) for r in rows}
    assert got == {tuple(w) for w in want}


def test_map_batches_feeds_several_inputs_by_column_name(local_ray):
    from edgeaccel.ray import map_batches

    path = MODELS / "split_concat.tflite"
    with in_process(path) as model:
        rng = np.random.default_rng(1)
        items = [{s.name: rng.integers(0, 256, s.shape[1:], dtype=np.uint8) for s in model.inputs} | {"id": i}
                 for i in range(4)]
        want = {i["id"]: model.run([i[s.name][None] for s in model.inputs]) for i in items}
        outputs = [s.name for s in model.outputs]
    rows = map_batches(ray.data.from_items(items), path, actors=1, batch_size=4).take_all()
    assert sorted(r["id"] for r in rows) == [0, 1, 2, 3]
    for row in rows:
        for k, name in enumerate(outputs):
            assert np.array_equal(row[name], want[row["id"]][k][0]), name


def test_map_batches_refuses_mistakes_before_any_actor_starts(local_ray):
    from edgeaccel.ray import map_batches

    ds = read_images(["bird"])
    with pytest.raises(edgeaccel.InputError, match="ds is a list, not a Ray Dataset"):
        map_batches([IMAGES / "bird.png"], MOBILENET, task="classify", actors=1)
    with pytest.raises(ConfigError, match="would hold all 2 CPUs") as err:
        map_batches(ds, MOBILENET, task="classify", actors=2)
    assert "num_cpus=0.5" in err.value.hint
    with pytest.raises(ConfigError, match="threads= is not a load option"):
        map_batches(ds, MOBILENET, threads=2)
    with pytest.raises(ConfigError, match="takes no option colour"):
        map_batches(ds, MOBILENET, colour="red")
    with pytest.raises(edgeaccel.InputError, match="--task segment does not fit"):
        map_batches(ds, MOBILENET, task="segment", actors=1)
    with pytest.raises(ConfigError, match="offers the resource 'IntelNPU'") as err:
        map_batches(ds, MOBILENET, task="classify", actors=1, device="NPU")
    assert "--ray-resources" in err.value.hint
    from edgeaccel.ray import deployment

    with pytest.raises(ConfigError, match="num_replicas=0 must be a whole number"):
        deployment(MOBILENET, num_replicas=0)
    with pytest.raises(edgeaccel.InputError, match="--task detect does not fit"):
        deployment(MOBILENET, task="detect")


def test_device_edgetpu_lands_on_the_node_that_declared_it_and_fails_to_load_there_with_the_reason(local_ray):
    """The node offers EdgeTPU (from the fake board), so the actor is placed; this machine has no Edge TPU."""
    from edgeaccel.ray import map_batches

    assert local_ray == {"EdgeTPU": 1}
    ds = map_batches(read_images(["bird"]), MOBILENET, task="classify", actors=1, device="EdgeTPU")
    with pytest.raises(ray.exceptions.RayActorError) as err:
        ds.take_all()
    text = str(err.value)
    assert "on Ray node" in text and "EdgeTPU" in text and "NoExecutorError" in text


def test_serve_deployment_answers_images_and_json_tensors_over_http(local_ray):
    from ray import serve

    from edgeaccel.ray import deployment

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(deployment(MOBILENET, task="classify", labels=LABELS), name="mobilenet", route_prefix="/mobilenet")
    url = f"http://127.0.0.1:{port}/mobilenet"
    try:
        status, answer = post(url, (IMAGES / "bird.png").read_bytes(), "image/png")
        with in_process(MOBILENET, task="classify", labels=LABELS) as model:
            want = model.predict(IMAGES / "bird.png").top
            zeros = np.zeros((1, 224, 224, 3), np.uint8)
            raw = model.run(zeros)[0]
        assert status == 200 and answer["classes"][0]["label"] == want.label == "chickadee"
        assert answer["classes"][0]["score"] == pytest.approx(want.score, abs=1e-6)
        status, answer = post(url, json.dumps({"inputs": {"input": zeros.tolist()}}).encode(), "application/json")
        assert status == 200
        (out,) = answer["outputs"].values()
        assert out["shape"] == list(raw.shape) and np.array_equal(np.array(out["data"]).reshape(raw.shape), raw)
        status, answer = post(url, b"not an image", "image/png")
        assert status == 400 and "cannot decode image" in answer["error"] and "PNG or JPEG" in answer["hint"]
        status, answer = post(url, json.dumps({"inputs": {"input": [[300]]}}).encode(), "application/json")
        assert status == 400 and "uint8" in answer["error"]
        status, answer = post(url, b"{", "application/json")
        assert status == 400 and "not valid JSON" in answer["error"]
        with urllib.request.urlopen(url, timeout=60) as r:
            assert json.loads(r.read())["executor"].startswith("litert")
    finally:
        serve.delete("mobilenet")


def post(url: str, body: bytes, content_type: str) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_probe_ray_surveys_every_node_of_the_running_cluster(cli, local_ray):
    from edgeaccel.ray import survey_cluster
    from edgeaccel.ray.cluster import render

    rows = survey_cluster()
    here = ray.get_runtime_context().get_node_id()
    assert [r["node_id"] for r in rows] == [here] and rows[0]["ray_node_id"] == here
    row = rows[0]
    assert row["declared"]["EdgeTPU"] == 1 and row["declared"]["CPU"] == 2
    with in_process(MOBILENET) as model:
        assert model.executor.name in row["executors"]
    assert "CPU" in row["devices"] and any(r.startswith("litert ") for r in row["runtimes"])
    assert here[:8] in render(rows)
    # the command, in another process, joins the same cluster by its address
    out = cli("probe", "--ray", ray.get_runtime_context().gcs_address, "--json")
    assert out.returncode == 0, out.stderr
    assert [r["node_id"] for r in json.loads(out.stdout)] == [here]


# -- the warm Pool ------------------------------------------------------------------------------------------------
def test_pool_stays_warm_across_calls_and_answers_as_the_model_does_in_process(local_ray):
    from PIL import Image

    from edgeaccel.imageio import read_image
    from edgeaccel.ray import Pool

    names = ["bird", "cat", "grace_hopper", "bird", "cat"]
    with in_process(MOBILENET, task="classify", labels=LABELS) as model:
        want = [model.predict(IMAGES / f"{n}.png").top for n in names]
    array = read_image(IMAGES / "cat.png")
    # every kind of input a caller has: a path, a str path, encoded bytes, an RGB array, a PIL image
    inputs = [IMAGES / "bird.png", str(IMAGES / "cat.png"), (IMAGES / "grace_hopper.png").read_bytes(),
              read_image(IMAGES / "bird.png"), Image.fromarray(array)]
    with Pool(MOBILENET, task="classify", labels=LABELS, actors=2, batch_size=2) as pool:
        assert pool.executors == ["litert:CPU", "litert:CPU"] and len({a["pid"] for a in pool.actors}) == 2
        assert ray.available_resources().get("CPU", 0) == 0  # both actors hold their CPU between calls
        for _ in range(2):  # the second call reuses the loaded actors
            got = pool.predict_batch(inputs)
            assert [(g.top.class_id, g.top.label) for g in got] == [(w.class_id, w.label) for w in want]
            assert np.allclose([g.top.score for g in got], [w.score for w in want])
        assert got[0].image is None and got[3].image is inputs[3]  # the caller's own array comes back attached
        streamed = pool.map(IMAGES / f"{n}.png" for n in names * 4)  # a generator, in order, lazily
        assert [r.top.label for r in streamed] == [w.label for w in want] * 4
    assert "closed" in repr(pool)
    with pytest.raises(edgeaccel.ModelClosedError, match="Pool is closed"):
        pool.predict_batch([IMAGES / "bird.png"])


def test_pool_refuses_a_bad_input_naming_it_and_lives_on(local_ray, tmp_path):
    from edgeaccel.ray import Pool

    good = IMAGES / "bird.png"
    with Pool(MOBILENET, task="classify", labels=LABELS, actors=1, batch_size=2) as pool:
        with pytest.raises(edgeaccel.InputError, match="cannot decode image input 2") as err:
            pool.predict_batch([good, good, b"not an image"])  # refused in the actor, raised here as edgeaccel's
        assert "ray" not in type(err.value).__module__
        with pytest.raises(edgeaccel.InputError, match=r"input 1: cannot read .*missing\.png"):
            pool.predict_batch([good, tmp_path / "missing.png"])
        with pytest.raises(edgeaccel.InputError, match="input 0 is a dict, not an image"):
            pool.predict_batch([{"image": 1}])
        with pytest.raises(ConfigError, match="no task, so it runs tensors|takes images"):
            pool.run_batch([np.zeros((1, 224, 224, 3), np.uint8)])
        assert pool.predict_batch([good])[0].top.label == "chickadee"


def test_pool_runs_raw_tensors_of_a_multi_file_model(local_ray):
    from edgeaccel.ray import Pool

    samples = np.random.default_rng(2).integers(0, 256, (3, 1, 224, 224, 3), dtype=np.uint8)
    with in_process(MODELS / "openvino") as model:
        want = [model.run(s)[0] for s in samples]
    with Pool(MODELS / "openvino", actors=2, batch_size=1) as pool:
        got = pool.run_batch(list(samples))
        with pytest.raises(ConfigError, match="no task") as err:
            pool.predict_batch([IMAGES / "bird.png"])
        assert "run_batch" in err.value.hint
    assert pool.executors[0].startswith("openvino:")
    assert all(np.array_equal(g[0], w) for g, w in zip(got, want, strict=True))


def test_pool_refuses_mistakes_before_any_actor_starts_and_a_failed_load_frees_its_cpus(local_ray):
    from edgeaccel.ray import Pool

    with pytest.raises(ConfigError, match="3 actors x 1 CPUs ask for more than the 2 CPUs") as err:
        Pool(MOBILENET, task="classify", actors=3)
    assert "num_cpus=0.5" in err.value.hint
    with pytest.raises(ConfigError, match="in_flight=0 must be a whole number"):
        Pool(MOBILENET, in_flight=0)
    with pytest.raises(edgeaccel.InputError, match="--task detect does not fit"):
        Pool(MOBILENET, task="detect")
    with pytest.raises(ConfigError, match="offers the resource 'IntelNPU'"):
        Pool(MOBILENET, task="classify", device="NPU")
    # the node offers an Edge TPU (the fake board) but has none: edgeaccel's error, naming the node
    with pytest.raises(edgeaccel.NoExecutorError, match="on Ray node"):
        Pool(MOBILENET, task="classify", actors=1, device="EdgeTPU")
    deadline = time.monotonic() + 15
    while ray.available_resources().get("CPU") != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU") == 2 and ray.available_resources().get("EdgeTPU") == 1


def test_a_pool_whose_actor_dies_says_so_and_closes(local_ray):
    import signal

    from edgeaccel.ray import Pool

    pool = Pool(MOBILENET, task="classify", actors=1)
    assert pool.predict_batch([IMAGES / "bird.png"])[0].top.class_id >= 0
    os.kill(pool.actors[0]["pid"], signal.SIGKILL)  # the actor's process crashes (as under the OOM killer)
    with pytest.raises(edgeaccel.WorkerCrashedError, match="an actor of the pool died") as err:
        pool.predict_batch([IMAGES / "bird.png"] * 3)
    assert "make a new edgeaccel.ray.Pool" in err.value.hint
    with pytest.raises(edgeaccel.ModelClosedError):
        pool.predict_batch([IMAGES / "bird.png"])
