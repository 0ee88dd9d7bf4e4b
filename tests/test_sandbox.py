"""The sandbox of isolated workers: from inside a real worker that loaded a real model on each runtime,
every forbidden action is attempted (the test-only SandboxProbe) and refused, while the answers stay right.

A control run with sandbox="off" makes the same attempts succeed: the probe really reaches the app's file, the
listening socket and /bin/sh, so a refusal comes from the sandbox and not from a broken probe. A missing layer
is made real by a caller that a seccomp filter forbids unshare(), as Docker's default profile does.
"""

from __future__ import annotations

import platform
import shutil
import struct
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import edgeaccel
from conftest import MODELS, image_input
from edgeaccel import IsolationLimits
from edgeaccel.errors import WorkerCrashedError
from edgeaccel.isolation import SandboxProbe
from edgeaccel.isolation.sandbox import LAYERS, landlock_abi

pytestmark = [pytest.mark.slow, pytest.mark.shared]  # slow tier: sandboxed worker processes

CASES = {
    "litert": "mobilenet_v1_0.25_128_quant.tflite",
    "onnxruntime": "mobilenet_v2_1.0_224_quant.onnx",
    "openvino": "openvino/mobilenet_v2_1.0_224_quant.xml",
}
FORBIDDEN = ("read /etc/passwd", "read {secret}", "write beside {secret}", "write /tmp",
             "write into the model's folder", "connect to 127.0.0.1:{port}", "connect to {unix_socket}",
             "start /bin/sh", "execve /bin/sh", "ptrace its caller", "read its caller's memory", "signal its caller",
             "allocate past its address-space limit", "open more files than its limit")
full_sandbox = pytest.mark.skipif(landlock_abi() < 6 or platform.machine() not in ("x86_64", "aarch64"),
                                  reason="needs Landlock ABI >= 6 and a seccomp filter for this architecture")


@pytest.fixture
def listener(tmp_path):
    """A TCP server on 127.0.0.1 and a Unix socket server in the app's folder that accept whoever connects: what
    a worker must not reach (a local database, Docker's or D-Bus's socket)."""
    tcp = socket.create_server(("127.0.0.1", 0))
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(tmp_path / "app.sock"))
    unix.listen()
    accepted = []

    def serve(server):
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    for server in (tcp, unix):
        threading.Thread(target=serve, args=(server,), daemon=True).start()
    yield tcp.getsockname()[1], str(tmp_path / "app.sock"), accepted
    for server in (tcp, unix):
        server.close()
    for conn in accepted:
        conn.close()


def probed(model) -> dict[str, dict]:
    return {p["action"]: p for p in model.executor.details["isolated"]["sandbox"]["probe"]}


def _copy_model(path: Path, folder: Path) -> Path:
    """``path`` (with an IR's weights) copied into ``folder``; the copy's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for companion in (path.with_suffix(".bin"),) if path.suffix == ".xml" else ():
        shutil.copy(companion, folder)
    return Path(shutil.copy(path, folder))


@full_sandbox
@pytest.mark.parametrize("runtime", sorted(CASES))
def test_every_forbidden_action_is_refused_while_answers_stay_right(runtime, tmp_path, listener, labels):
    port, unix_socket, accepted = listener
    secret = tmp_path / "app.key"
    secret.write_text("the app's private key\n")
    # readable: the model's own files, not its folder. The model is copied into a folder of this test's own, so
    # that the file beside it is beside it wherever the test data lives (the bundled sample's folder, inside
    # the package the worker imports, is readable on purpose)
    model_path = _copy_model(MODELS / CASES[runtime], tmp_path / "model")
    beside_model = model_path.parent / "labels.txt"
    beside_model.write_text("beside the model, not of it\n")
    limits = IsolationLimits(sandbox="require", open_files=64, probe=SandboxProbe(
        files=(str(secret), str(beside_model)), tcp_port=port, unix_socket=unix_socket))
    with edgeaccel.load(model_path, strict=True) as direct, \
            edgeaccel.load(model_path, strict=True, isolate=limits) as isolated:
        assert isolated.executor.name == f"{runtime}:CPU"
        report = isolated.executor.details["isolated"]["sandbox"]
        assert report["mode"] == "require" and report["missing"] == {} and sorted(report["active"]) == sorted(LAYERS)
        assert report["limits"]["open_files"] == 64 and "off" in report["cache"]
        outcomes = probed(isolated)
        for action in FORBIDDEN:
            action = action.format(secret=secret, port=port, unix_socket=unix_socket)
            assert outcomes[action]["outcome"] == "refused", outcomes[action]
        assert "Permission denied" in outcomes[f"read {secret}"]["detail"]
        assert outcomes[f"read {beside_model}"]["outcome"] == "refused", outcomes[f"read {beside_model}"]
        for action in ("execve /bin/sh", "ptrace its caller", "read its caller's memory"):
            assert "Operation not permitted" in outcomes[action]["detail"], outcomes[action]  # seccomp's EPERM
        assert "Too many open files" in outcomes["open more files than its limit"]["detail"]
        assert outcomes["write into its own temp folder"]["outcome"] == "allowed"  # selective, not broken
        assert not accepted and not list(tmp_path.glob("edgeaccel-probe-*"))
        image = image_input("bird", isolated.inputs[0])
        got, want = isolated.run(image), direct.run(image)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert labels[int(np.argmax(got[0]))] == "chickadee"
        # the channel's shared region works under every layer (memfd mapped by the worker, seccomp allowing it)
        channel = isolated.executor.details["isolated"]["channel"]
        assert channel["transport"] == "shared memory" and channel["socket_inputs"] == channel["socket_outputs"] == 0
        temp_folder = report["temp_folder"]
    deadline = time.time() + 10
    while (tmp := Path(temp_folder)).exists() and time.time() < deadline:
        time.sleep(0.05)
    assert not tmp.exists(), "the worker's private temp folder is removed with it"


def test_without_the_sandbox_the_same_probe_reaches_everything(tmp_path, listener):
    """The control: the probe's attempts succeed when nothing stops them, so refusals above are the sandbox's.
    Its writes succeed too, so the model is a copy in this test's own folder (not the shared models folder) and
    the marker written into /tmp is removed."""
    port, unix_socket, accepted = listener
    secret = tmp_path / "app.key"
    secret.write_text("the app's private key\n")
    model_folder = tmp_path / "model"
    model_folder.mkdir()
    model_path = Path(shutil.copy(MODELS / CASES["litert"], model_folder))
    limits = IsolationLimits(sandbox="off", open_files=0,
                             probe=SandboxProbe(files=(str(secret),), tcp_port=port, unix_socket=unix_socket))
    with edgeaccel.load(model_path, strict=True, isolate=limits) as model:
        report = model.executor.details["isolated"]["sandbox"]
        assert report["active"] == [] and set(report["missing"]) == set(LAYERS)
        outcomes = probed(model)
        written_in_tmp = outcomes["write /tmp"]["detail"].removeprefix("wrote ")
        if outcomes["write /tmp"]["outcome"] == "allowed" and Path(written_in_tmp).parent == Path("/tmp"):
            Path(written_in_tmp).unlink(missing_ok=True)
        assert outcomes["write into the model's folder"]["outcome"] == "allowed"
        assert list(model_folder.glob("edgeaccel-probe-*"))
        for action in (f"read {secret}", f"write beside {secret}", f"connect to 127.0.0.1:{port}",
                       f"connect to {unix_socket}", "start /bin/sh", "signal its caller",
                       "open more files than its limit"):
            assert outcomes[action]["outcome"] == "allowed", outcomes[action]
        assert outcomes["allocate past its address-space limit"]["outcome"] == "refused"  # the rlimit is not a layer
        assert "Argument list too long" in outcomes["execve /bin/sh"]["detail"]  # the probe never replaces the worker
        assert list(tmp_path.glob("edgeaccel-probe-*"))
    deadline = time.time() + 5
    while len(accepted) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(accepted) == 2


CALLER_WITHOUT_UNSHARE = textwrap.dedent("""
    import ctypes, struct, sys
    import numpy as np
    import edgeaccel
    from edgeaccel import IsolationLimits

    # the caller runs under a seccomp filter that refuses unshare() (nr 272), as in a default Docker container
    libc = ctypes.CDLL(None, use_errno=True)
    code = [(0x20, 0, 0, 0), (0x15, 0, 1, 272), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]
    program = ctypes.create_string_buffer(b"".join(struct.pack("<HBBI", *c) for c in code))
    fprog = ctypes.create_string_buffer(struct.pack("<HxxxxxxQ", len(code), ctypes.addressof(program)))
    assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, fprog, 0, 0) == 0
    path = sys.argv[1]
    with edgeaccel.load(path, strict=True, isolate=IsolationLimits(sandbox="auto")) as model:
        report = model.executor.details["isolated"]["sandbox"]
        print("AUTO", sorted(report["missing"]), report["missing"].get("network_namespace"))
        print("RAN", model.run(np.zeros(model.inputs[0].shape, np.uint8))[0].shape)
    try:
        edgeaccel.load(path, strict=True, isolate=IsolationLimits(sandbox="require"))
    except edgeaccel.EdgeAccelError as exc:
        print("REQUIRE", type(exc).__name__, exc.message)
        print("HINT", exc.hint)
""")


@full_sandbox
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the caller's filter is written for x86_64")
def test_a_missing_layer_is_named_and_require_refuses_to_run():
    out = subprocess.run([sys.executable, "-c", CALLER_WITHOUT_UNSHARE, str(MODELS / CASES["litert"])],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["AUTO"].startswith("['network_namespace']") and "EPERM" in lines["AUTO"], out.stdout
    assert lines["RAN"] == "(1, 1001)"
    assert lines["REQUIRE"].startswith("ModelLoadError") and "network_namespace" in lines["REQUIRE"], out.stdout
    assert "sandbox='auto'" in lines["HINT"]


def test_cpu_time_limit_is_named_when_hit():
    """RLIMIT_CPU counts the worker's whole life (import and load included), so the limit is met either while
    loading or within a few hundred runs; either way the error names it."""
    limits = IsolationLimits(cpu_seconds=1)
    with pytest.raises(WorkerCrashedError) as err:
        with edgeaccel.load(MODELS / CASES["onnxruntime"], strict=True, isolate=limits) as model:
            x = np.zeros(model.inputs[0].shape, np.uint8)
            deadline = time.time() + 120
            while time.time() < deadline:
                model.run(x)
    assert "SIGXCPU" in err.value.message and "CPU time limit of 1 s" in err.value.message, err.value
    assert "IsolationLimits(cpu_seconds=1)" in err.value.hint


def test_outputs_over_the_limit_are_refused_and_the_worker_lives_on(tmp_path):
    from test_isolation import tile_model

    x = np.ones([1], np.float32)
    with edgeaccel.load(tile_model(tmp_path / "tile.tflite", 1000), strict=True,
                        isolate=IsolationLimits(output_bytes=1000)) as model:
        pid = model.executor.details["isolated"]["pid"]
        with pytest.raises(edgeaccel.InferenceError) as err:
            model.run(x)
        assert "4000 bytes of outputs, over the limit of 1000 bytes" in err.value.message
        assert "IsolationLimits(output_bytes=...)" in err.value.hint
        with pytest.raises(edgeaccel.InferenceError, match="over the limit"):
            model.run(x)
        assert model.executor.details["isolated"]["pid"] == pid  # refused, not crashed
    with edgeaccel.load(tile_model(tmp_path / "tile.tflite", 1000), strict=True,
                        isolate=IsolationLimits(output_bytes=4000)) as model:
        assert model.run(x)[0].shape == (1000,)


def test_resident_memory_defaults_to_a_share_of_this_machines_ram():
    total_kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    ram = IsolationLimits().resident_bytes
    assert abs(ram - total_kib * 1024 // 2) < 8 << 20  # MemTotal leaves out what the kernel reserves
    assert IsolationLimits(memory_share=0.25).resident_bytes == pytest.approx(ram / 2, rel=0.01)
    assert IsolationLimits(resident_bytes=123 << 20).resident_bytes == 123 << 20
    with pytest.raises(ValueError, match="memory_share"):
        IsolationLimits(memory_share=1.5)
    with pytest.raises(ValueError, match="sandbox must be one of auto, require, off"):
        IsolationLimits(sandbox="strict")


def run_filter(program: bytes, arch: int, nr: int, *args: int) -> int:
    """Classic BPF as the kernel runs a seccomp filter, for the few instructions the filter uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = [struct.unpack_from("<HBBI", program, 8 * i) for i in range(len(program) // 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == 0x06:  # ret k
            return k
        elif op in (0x15, 0x35, 0x45):  # jeq, jge, jset
            hit = acc == k if op == 0x15 else acc >= k if op == 0x35 else bool(acc & k)
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unexpected instruction {op:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_seccomp_filter_decides_as_documented(machine):
    """The filter of each architecture, run by a BPF interpreter: the x86_64 one also runs in the kernel above;
    the aarch64 one cannot run here, so its decisions are checked this way."""
    import errno

    from edgeaccel.isolation.sandbox import _SYSCALLS, seccomp_program

    arch, numbers, _ = _SYSCALLS[machine]
    program = seccomp_program(machine)
    allow, kill = 0x7FFF0000, 0x80000000
    eperm, enosys, eafnosupport = 0x50000 | errno.EPERM, 0x50000 | errno.ENOSYS, 0x50000 | errno.EAFNOSUPPORT
    threads, process = 0x3D0F00, 0x11  # glibc's pthread_create flags; fork's SIGCHLD
    assert run_filter(program, arch, numbers["clone"], threads) == allow
    assert run_filter(program, arch, numbers["clone"], process) == eperm
    assert run_filter(program, arch, numbers["clone3"]) == enosys
    assert run_filter(program, arch, numbers["socket"], 2) == eafnosupport  # AF_INET
    assert run_filter(program, arch, numbers["socket"], 1) == eperm  # AF_UNIX: no named sockets either
    assert run_filter(program, arch, numbers["socketpair"], 1) == allow
    assert run_filter(program, arch, numbers["socketpair"], 16) == eafnosupport  # AF_NETLINK
    for name in ("execve", "execveat", "ptrace", "mount", "unshare", "bpf", "io_uring_setup", "process_vm_readv"):
        assert run_filter(program, arch, numbers[name]) == eperm, name
    for nr in (0, 1, 63, 98, 202, 222, 226, 233, 334):  # read/write/futex/mmap/... of one table or the other
        if nr not in numbers.values():
            assert run_filter(program, arch, nr) == allow, nr
    # what the run channel does in the worker: map the region it was handed (fstat, mmap, munmap), one sendto and
    # one recvfrom per call, recvmsg for a new channel's fds; futex for the GIL
    channel_calls = {"x86_64": {"fstat": 5, "newfstatat": 262, "mmap": 9, "munmap": 11, "sendto": 44, "recvfrom": 45,
                                "recvmsg": 47, "futex": 202, "close": 3},
                     "aarch64": {"fstat": 80, "newfstatat": 79, "mmap": 222, "munmap": 215, "sendto": 206,
                                 "recvfrom": 207, "recvmsg": 212, "futex": 98, "close": 57}}[machine]
    for name, nr in channel_calls.items():
        assert run_filter(program, arch, nr) == allow, name
    assert run_filter(program, 0x40000003, 11) == kill  # i386's execve through int 0x80: another ABI



@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_what_acts_on_the_system_or_on_other_processes(machine):
    """Calls that name a process act on the worker only; what acts on the system is refused."""
    import errno

    from edgeaccel.isolation.sandbox import _SYSCALLS, seccomp_program

    arch, refused, decided = _SYSCALLS[machine]
    me, host = 4242, 4241
    program = seccomp_program(machine, pid=me)
    allow, eperm = 0x7FFF0000, 0x50000 | errno.EPERM

    def decide(name, *args):
        return run_filter(program, arch, {**refused, **decided}[name], *args)

    for name in ("syslog", "sethostname", "setdomainname", "clock_adjtime", "clock_settime", "settimeofday",
                 "adjtimex", "kexec_load", "bpf", "perf_event_open", "keyctl", "mount", "tkill", "migrate_pages",
                 "pidfd_send_signal"):
        assert decide(name) == eperm, name
    for name in ("prlimit64", "sched_setaffinity", "sched_setparam", "sched_setattr", "move_pages"):
        assert decide(name, 0) == allow and decide(name, me) == allow, name  # itself: pid 0 or its own
        assert decide(name, host) == eperm and decide(name, 1) == eperm, name
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "pidfd_open"):
        assert decide(name, me) == allow and decide(name, host) == eperm, name
        assert decide(name, 0) == eperm and decide(name, 0xFFFFFFFF) == eperm, name  # its group, everyone
    prio_process, prio_pgrp, prio_user = 0, 1, 2
    assert decide("setpriority", prio_process, 0, 10) == decide("setpriority", prio_process, me, 10) == allow
    assert decide("setpriority", prio_process, host, 19) == eperm
    assert decide("setpriority", prio_pgrp, 0, 19) == decide("setpriority", prio_user, 0, 19) == eperm
    assert decide("ioprio_set", 1, 0) == allow and decide("ioprio_set", 1, host) == eperm
    assert decide("ioprio_set", 3, 0) == eperm  # IOPRIO_WHO_USER
    sched_other, sched_fifo, sched_rr, sched_idle, sched_deadline = 0, 1, 2, 5, 6
    for policy in (sched_other, sched_idle):
        assert decide("sched_setscheduler", 0, policy) == allow
    for policy in (sched_fifo, sched_rr, sched_deadline, sched_fifo | 0x40000000):
        assert decide("sched_setscheduler", 0, policy) == eperm, policy
    assert decide("sched_setscheduler", host, sched_idle) == eperm
    s_ifchr, s_ifblk, s_ififo, s_ifreg = 0o020000, 0o060000, 0o010000, 0o100000
    mknod = "mknod" if machine == "x86_64" else "mknodat"
    mode_at = 1 if mknod == "mknod" else 2
    for mode, verdict in ((s_ifchr | 0o600, eperm), (s_ifblk | 0o600, eperm), (s_ififo | 0o600, allow),
                          (s_ifreg | 0o600, allow)):
        args = [0, 0, 0]
        args[mode_at] = mode
        assert decide(mknod, *args) == verdict, oct(mode)
    tiocsti, tioclinux, fionbio, tcgets, fionread = 0x5412, 0x541C, 0x5421, 0x5401, 0x541B
    for request in (tiocsti, tioclinux):
        assert decide("ioctl", 1, request) == eperm
    for request in (fionbio, tcgets, fionread, 0xC0186441):  # CPython's setblocking; isatty; a DRM ioctl
        assert decide("ioctl", 1, request) == allow
    f_setown, f_setown_ex, f_getfl, f_setfl, f_add_seals = 8, 15, 3, 4, 1033
    for command in (f_setown, f_setown_ex):  # a process to signal (SIGIO) when a file is ready: maybe the host
        assert decide("fcntl", 1, command, host) == eperm
    for command in (f_getfl, f_setfl, f_add_seals):
        assert decide("fcntl", 1, command) == allow
    assert decide("ioctl", 3, 0x8901) == decide("ioctl", 3, 0x8902) == eperm  # FIOSETOWN, SIOCSPGRP
