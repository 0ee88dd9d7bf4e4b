"""load(isolate=True): the same Model API served from a worker process; a crash or hang there becomes an
edgeaccel error in this process, the worker is replaced, the caller's inputs are untouched.

Crashes and hangs are real: the worker is sent SIGSEGV / SIGSTOP while a request is in flight (stopping it
first makes the timing deterministic), or given limits it cannot meet.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS, image_input
from edgeaccel import IsolationLimits
from edgeaccel.errors import InferenceTimeoutError, ModelClosedError, WorkerCrashedError, WorkerMemoryError
from edgeaccel.testing import FakeTree

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: worker processes

CASES = {
    "litert": ("mobilenet_v1_0.25_128_quant.tflite", {}),
    "onnxruntime": ("mobilenet_v2_1.0_224_quant.onnx", {}),
    "openvino": ("openvino/mobilenet_v2_1.0_224_quant.xml", {}),
}
SMALL = MODELS / "mobilenet_v1_0.25_128_quant.tflite"


def worker_pid(model) -> int:
    return model.executor.details["isolated"]["pid"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run_while_stopped(model, inputs, then, settle_s: float = 0.3):
    """Stop the worker, send a request, then do ``then(pid)`` to it: the request is in flight unless the calling
    thread had no CPU for ``settle_s`` (a loaded machine); callers that need it in flight retry with more."""
    pid = worker_pid(model)
    os.kill(pid, signal.SIGSTOP)
    result: dict = {}

    def call():
        try:
            result["value"] = model.run(inputs)
        except Exception as exc:  # the test inspects it
            result["error"] = exc

    t = threading.Thread(target=call)
    t.start()
    time.sleep(settle_s)
    then(pid)
    t.join(30)
    assert not t.is_alive()
    return result, pid


@pytest.mark.parametrize("case", sorted(CASES))
def test_isolated_model_has_the_same_api_and_answers(case, labels):
    name, kwargs = CASES[case]
    with edgeaccel.load(MODELS / name, **kwargs) as direct, \
            edgeaccel.load(MODELS / name, isolate=True, **kwargs) as isolated:
        assert isolated.inputs == direct.inputs and isolated.outputs == direct.outputs
        assert isolated.executor.name == direct.executor.name == f"{case}:CPU"
        assert isolated.executor.reason == direct.executor.reason
        assert isolated.fallbacks == ()
        pid = worker_pid(isolated)
        assert pid != os.getpid() and alive(pid)
        image = image_input("bird", isolated.inputs[0])
        want = direct.run(image)
        got = isolated.run(image)
        assert got.names == want.names
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert labels[int(np.argmax(got[0]))] == "chickadee"
        np.testing.assert_array_equal(isolated.run({isolated.inputs[0].name: image}, dequantize=True)[0],
                                      direct.run(image, dequantize=True)[0])
    with pytest.raises(ModelClosedError):
        isolated.run(image)
    isolated.close()  # idempotent
    deadline = time.time() + 10
    while alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "close() must end the worker"


def test_crash_during_run_is_an_error_and_the_worker_is_replaced():
    with edgeaccel.load(SMALL, isolate=True, strict=True) as model:
        x = image_input("bird", model.inputs[0])
        before = x.copy()
        want = model.run(x)[0]

        def segfault(pid):
            os.kill(pid, signal.SIGSEGV)
            os.kill(pid, signal.SIGCONT)

        for settle_s in (0.3, 1.0, 3.0):  # on a loaded machine the request may not have left before the crash
            result, pid = run_while_stopped(model, x, segfault, settle_s)
            if "error" in result:
                break
            np.testing.assert_array_equal(result["value"][0], want)  # it ran on the new worker: not lost
        error = result["error"]
        assert isinstance(error, WorkerCrashedError) and isinstance(error, edgeaccel.InferenceError)
        assert "SIGSEGV" in str(error) and "retry" in error.hint
        np.testing.assert_array_equal(x, before)  # nothing the caller handed in is lost
        np.testing.assert_array_equal(model.run(x)[0], want)  # the same request, retried, on a new worker
        assert worker_pid(model) != pid
        assert model.executor.details["isolated"]["starts"] == 2


def test_hang_is_a_timeout_and_the_worker_is_replaced():
    with edgeaccel.load(SMALL, isolate=IsolationLimits(run_timeout=1.0), strict=True) as model:
        x = image_input("bird", model.inputs[0])
        want = model.run(x)[0]
        started = time.monotonic()
        result, pid = run_while_stopped(model, x, lambda pid: None)
        error = result["error"]
        assert isinstance(error, InferenceTimeoutError) and isinstance(error, TimeoutError)
        assert "1 s" in str(error) and "retried" in error.hint
        assert time.monotonic() - started < 10
        assert not alive(pid)
        np.testing.assert_array_equal(model.run(x)[0], want)


def test_crash_without_strict_falls_back_visibly():
    with edgeaccel.load(SMALL, isolate=True) as model:
        x = image_input("bird", model.inputs[0])
        want = int(np.argmax(model.run(x)[0]))
        result, _ = run_while_stopped(model, x, lambda pid: os.kill(pid, signal.SIGKILL))
        assert "value" in result, result.get("error")
        assert int(np.argmax(result["value"][0])) == want
        (event,) = model.fallbacks
        assert event.stage == "run" and "SIGKILL" in event.error and event.replaced_by == "openvino:CPU"
        assert model.executor.runtime == "openvino" and "isolated" in model.executor.details


def test_load_timeout():
    started = time.monotonic()
    with pytest.raises(InferenceTimeoutError, match="did not load within"):
        edgeaccel.load(SMALL, isolate=IsolationLimits(load_timeout=0.05), strict=True)
    assert time.monotonic() - started < 10


def test_memory_limit_stops_a_model_too_large_for_it():
    # 300 MiB of address space is less than OpenVINO needs to compile MobileNetV2: the worker fails to
    # load, and the caller gets an edgeaccel error that names the limit or the memory it could not get.
    with pytest.raises(edgeaccel.EdgeAccelError) as err:
        edgeaccel.load(MODELS / "openvino/mobilenet_v2_1.0_224_quant.xml", strict=True,
                       isolate=IsolationLimits(memory_bytes=300 << 20))
    assert "IsolationLimits(memory_bytes=" in err.value.hint, str(err.value)


def test_concurrent_callers_share_one_worker():
    with edgeaccel.load(MODELS / "split_concat.tflite", isolate=True) as model:
        rng = np.random.default_rng(0)
        inputs = [[rng.integers(0, 256, s.shape, dtype=np.uint8) for s in model.inputs] for _ in range(6)]
        expected = [list(model.run(x)) for x in inputs]

        def call(i):
            got = model.run(inputs[i % 6])
            return sum(not np.array_equal(g, e) for g, e in zip(got, expected[i % 6], strict=True))

        with ThreadPoolExecutor(8) as pool:
            assert sum(pool.map(call, range(8 * 50))) == 0
        assert model.executor.details["isolated"]["starts"] == 1


def test_worker_dies_with_its_caller(tmp_path):
    code = (
        "import edgeaccel, os, sys\n"
        f"m = edgeaccel.load({str(SMALL)!r}, isolate=True)\n"
        "print(m.executor.details['isolated']['pid'], m.executor.details['isolated']['sandbox']['temp_folder'], "
        "flush=True)\n"
        "os._exit(0)\n"
    )
    env = dict(os.environ, TMPDIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    pid, temp_folder = out.stdout.split()
    deadline = time.time() + 10
    while alive(int(pid)) and time.time() < deadline:
        time.sleep(0.05)
    assert not alive(int(pid))
    # nobody was left to remove the worker's temp folder: the next caller's first worker does
    from pathlib import Path

    assert Path(temp_folder).is_dir() and Path(temp_folder).parent == tmp_path
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert not Path(temp_folder).exists(), out.stderr[-2000:]


def test_replies_are_never_unpickled():
    from edgeaccel.isolation import wire

    a, b = socket.socketpair()
    with a, b:
        wire.send_frame(a, b'{"arrays": [{"dtype": "|O", "shape": [1]}]}', [b"\0" * 8])
        with pytest.raises(wire.WireError, match="refused"):
            wire.recv_json(b, 1 << 20)
        wire.send_frame(a, b'{"arrays": [{"dtype": "<f4", "shape": [4]}]}', [b"\0" * 8])
        with pytest.raises(wire.WireError, match="does not match"):
            wire.recv_json(b, 1 << 20)
        wire.send_frame(a, b"{}", [b"\0" * 64])
        with pytest.raises(wire.WireError, match="limit"):
            wire.recv_json(b, 16)


def test_a_cached_reply_header_still_checks_every_buffer():
    """Headers are parsed once and cached; a later frame with the same header and a buffer of the wrong size
    (a worker lying about what it sends) is still refused, and a good one still decodes to the right values."""
    from edgeaccel.isolation import wire

    a, b = socket.socketpair()
    with a, b:
        for _ in range(2):  # the second time from the cache
            wire.send_json(a, {"ok": True}, [np.arange(6, dtype=np.int16).reshape(2, 3)])
            message, (got,) = wire.recv_json(b, 1 << 20)
            assert message["ok"] is True
            np.testing.assert_array_equal(got, np.arange(6).reshape(2, 3))
        header = b'{"ok": true, "arrays": [{"dtype": "<i2", "shape": [2, 3]}]}'
        wire.send_frame(a, header, [np.zeros(6, np.int16)])
        wire.recv_json(b, 1 << 20)
        wire.send_frame(a, header, [b"\0" * 4])
        with pytest.raises(wire.WireError, match="does not match"):
            wire.recv_json(b, 1 << 20)


def test_cli_isolate(cli):
    out = cli("run", str(SMALL), "--isolate", "--runs", "2", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    report = json.loads(out.stdout)
    assert report["executor"]["isolated"] is True and report["executor"]["runtime"] == "litert"


def test_worker_under_a_caller_with_a_lower_memory_limit(tmp_path):
    """A caller already under RLIMIT_AS (a container, ulimit -v) below IsolationLimits' default: the worker
    takes the inherited limit instead of failing to raise it."""
    code = (
        "import resource, numpy as np, edgeaccel\n"
        "resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))\n"
        f"with edgeaccel.load({str(SMALL)!r}, isolate=True, strict=True) as m:\n"
        "    print(m.run(np.zeros(m.inputs[0].shape, np.uint8))[0].shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "(1, 1001)" in out.stdout, out.stderr[-2000:]


def test_worker_started_from_a_short_lived_thread_outlives_it():
    """PR_SET_PDEATHSIG follows the forking thread: a worker forked by an app's loader thread used to be
    killed when that thread ended. Workers are forked by one long-lived thread instead."""
    box = {}
    t = threading.Thread(target=lambda: box.update(model=edgeaccel.load(SMALL, isolate=True, strict=True)))
    t.start()
    t.join()
    time.sleep(0.5)
    with box["model"] as model:
        assert alive(worker_pid(model))
        model.run(np.zeros(model.inputs[0].shape, np.uint8))
        assert model.executor.details["isolated"]["starts"] == 1


# -- memory limits that also work for GPU executors -------------------------------------------------------------------

def tile_model(path, count: int):
    """One TILE op: a float32 [1] input repeated ``count`` times. Its output is allocated at load but touched
    (made resident) only by run(): a worker that stays small while loading and grows by 4*count bytes when run."""
    from tflite_edit import one_op_model

    return one_op_model(path, "TILE", [("x", [1], "FLOAT32", None),
                                       ("multiples", [1], "INT32", np.array([count], np.int32)),
                                       ("y", [count], "FLOAT32", None)], [0, 1], [2], [0], [2])


def address_space_limit(pid: int) -> str:
    line = next(line for line in open(f"/proc/{pid}/limits") if line.startswith("Max address space"))
    return line.split()[3]  # "Max address space  <soft> <hard> bytes"


WATCHED = IsolationLimits(resident_bytes=200 << 20, resident_guard="watchdog", watchdog_interval=0.02)


def test_a_worker_over_its_resident_limit_is_killed_and_the_error_names_the_limit(tmp_path):
    x = np.ones([1], np.float32)
    with edgeaccel.load(tile_model(tmp_path / "small.tflite", 1000), isolate=WATCHED, strict=True) as model:
        assert model.run(x)[0].shape == (1000,)  # well under the limit: left alone
        assert model.executor.details["isolated"]["memory"]["guard"] == "watchdog"
    with edgeaccel.load(tile_model(tmp_path / "big.tflite", 100 << 20), isolate=WATCHED, strict=True) as model:
        pid = worker_pid(model)  # loading touches little: the 400 MB output is made resident by run()
        with pytest.raises(WorkerMemoryError) as err:
            model.run(x)
        error = err.value
        assert isinstance(error, WorkerCrashedError) and isinstance(error, MemoryError)
        assert f"(pid {pid}) was killed by edgeaccel's memory watchdog" in error.message
        assert "over its limit of 200 MiB" in error.message
        assert f"IsolationLimits(resident_bytes={200 << 20})" in error.hint and "raise it" in error.hint
        assert not alive(pid)
        with pytest.raises(WorkerMemoryError):  # a new worker, the same verdict: the limit is the limit
            model.run(x)
        assert model.executor.details["isolated"]["starts"] == 2
    with edgeaccel.load(tile_model(tmp_path / "big.tflite", 100 << 20), strict=True,
                        isolate=IsolationLimits(resident_bytes=1 << 30, resident_guard="watchdog")) as model:
        assert model.run(x)[0].shape == (100 << 20,)  # raised as the hint says, it runs


@pytest.mark.parametrize("device", ["CUDA", "CUDA:1", "TensorRT", "GPU.0", "NPU", "EdgeTPU:usb", "AUTO"])
def test_no_address_space_limit_off_the_cpu(device):
    from edgeaccel.isolation.memory import plan

    limits = IsolationLimits(memory_bytes=300 << 20, resident_guard="watchdog")
    off = plan(device, limits)
    assert off.address_space == 0 and off.resident == limits.resident_bytes and off.guard == "watchdog"
    assert f"no address-space limit on {device}" in off.reason
    assert plan("CPU", limits).address_space == 300 << 20
    assert plan(device, IsolationLimits(resident_bytes=0)).guard is None


def test_the_worker_gets_the_limits_of_its_device():
    """Real workers: on the CPU, RLIMIT_AS; on OpenVINO's AUTO (which may pick a GPU) none, and the watchdog."""
    from edgeaccel.executors.base import ExecutorOptions
    from edgeaccel.formats import describe
    from edgeaccel.isolation.executor import IsolatedExecutor

    info = describe(MODELS / "openvino/mobilenet_v2_1.0_224_quant.xml")
    limits = IsolationLimits(memory_bytes=6 << 30, resident_guard="watchdog")
    for device, want in (("CPU", str(6 << 30)), ("AUTO", "unlimited")):
        executor = IsolatedExecutor("openvino", info, device, ExecutorOptions(), limits)
        try:
            pid = executor.info.details["isolated"]["pid"]
            assert address_space_limit(pid) == want, device
            assert executor.info.details["isolated"]["memory_limit"] == (0 if want == "unlimited" else 6 << 30)
            assert executor.run([np.zeros(info.inputs[0].shape, np.uint8)])[0].shape == (1, 1001)
        finally:
            executor.close()


def fake_cgroup_v2(tmp_path, monkeypatch, delegated: bool = True):
    """A cgroup v2 tree as the kernel lays it out (folders of plain files here), with this process in
    /app; the memory code is pointed at it."""
    from edgeaccel.isolation import memory

    tree = FakeTree(tmp_path)
    tree.file("/proc/self/cgroup", "0::/app\n")
    tree.file("/sys/fs/cgroup/app/cgroup.subtree_control", "cpu memory pids\n" if delegated else "cpu pids\n")
    monkeypatch.setattr(memory, "CGROUP_ROOT", tree.local("/sys/fs/cgroup"))
    monkeypatch.setattr(memory, "PROC_SELF_CGROUP", tree.local("/proc/self/cgroup"))
    return tree.local("/sys/fs/cgroup/app")


def test_a_cgroup_where_one_may_be_made(tmp_path, monkeypatch):
    from edgeaccel.isolation import memory

    parent = fake_cgroup_v2(tmp_path, monkeypatch)
    made = memory.plan("CUDA", IsolationLimits(resident_bytes=256 << 20))
    assert made.guard == "cgroup" and made.cgroup.parent == parent and made.address_space == 0
    assert (made.cgroup / "memory.max").read_text() == str(256 << 20)
    assert memory.join_cgroup(made.cgroup, 1234) is None and (made.cgroup / "cgroup.procs").read_text() == "1234"
    assert memory.oom_kills(made.cgroup) == 0
    (made.cgroup / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert memory.oom_kills(made.cgroup) == 1
    memory.remove_cgroup(made.cgroup)
    assert not made.cgroup.exists()
    watched = memory.plan("CUDA", IsolationLimits(resident_guard="watchdog"))
    assert watched.guard == "watchdog" and not list(parent.glob("edgeaccel-worker-*"))


@pytest.mark.parametrize("proc_self_cgroup, delegated, why", [
    ("4:memory:/docker/abc\n0::/\n", True, "the memory controller is on a cgroup v1 hierarchy"),
    ("3:cpu,cpuacct:/\n2:memory:/\n", True, "this system has no cgroup v2 hierarchy"),
    ("0::/app\n", False, "the memory controller is not enabled for children of"),
])
def test_no_cgroup_falls_back_to_the_watchdog_and_says_why(tmp_path, monkeypatch, proc_self_cgroup, delegated, why):
    from edgeaccel.isolation import memory

    fake_cgroup_v2(tmp_path, monkeypatch, delegated)
    (tmp_path / "proc/self/cgroup").write_text(proc_self_cgroup)
    for guard in ("auto", "cgroup"):
        got = memory.plan("TensorRT", IsolationLimits(resident_guard=guard))
        assert got.guard == "watchdog" and got.cgroup is None and why in got.reason, got.reason


def test_a_kill_by_the_cgroup_limit_is_reported_as_such(tmp_path, monkeypatch):
    """The worker really joins the (fake) cgroup; the kernel's OOM kill is played by the test: it counts the
    kill in memory.events and sends SIGKILL, as the kernel does."""
    parent = fake_cgroup_v2(tmp_path, monkeypatch)
    with edgeaccel.load(SMALL, isolate=IsolationLimits(resident_bytes=512 << 20), strict=True) as model:
        memory_plan = model.executor.details["isolated"]["memory"]
        assert memory_plan["guard"] == "cgroup"
        cgroup = parent / memory_plan["cgroup"].rsplit("/", 1)[-1]
        pid = worker_pid(model)
        assert (cgroup / "cgroup.procs").read_text() == str(pid)
        x = np.zeros(model.inputs[0].shape, np.uint8)
        model.run(x)

        def oom_kill(pid):
            (cgroup / "memory.events").write_text("oom 1\noom_kill 1\n")
            os.kill(pid, signal.SIGKILL)

        result, _ = run_while_stopped(model, x, oom_kill)  # the request is in flight when the kill comes
        error = result["error"]
        assert isinstance(error, WorkerMemoryError), error
        assert "killed by the kernel for going over its cgroup's memory.max of 512 MiB" in error.message
        assert "IsolationLimits(resident_bytes=" in error.hint
        assert not cgroup.exists()  # removed with its worker
        model.run(x)  # a new worker, in a new cgroup
    assert not list(parent.glob("edgeaccel-worker-*"))


def test_bad_memory_limits_are_refused():
    with pytest.raises(ValueError, match="resident_guard must be one of auto, cgroup, watchdog"):
        IsolationLimits(resident_guard="rlimit")
    with pytest.raises(ValueError, match="resident_bytes >= 0"):
        IsolationLimits(resident_bytes=-1)
