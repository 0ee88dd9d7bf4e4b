"""The sandbox's former holes (calls that act on other processes or on the system), attacked from native code
inside a real isolated worker, each with its control.

The attacker is an executor plug-in installed for real (edgeaccel.testing.plugins): its ``run`` calls libc's
``syscall()`` through ctypes, as a runtime taken over by its model would, after the sandbox was entered. Each
payload is judged from outside the worker where it can be: the host process reads its own limits, priority
and scheduling policy after the run. The host is a subprocess of the test (a successful control lowers its
limits and priority), run as root and, where the tests run as root, again as the unprivileged user nobody.

Controls: the same payloads succeed in a worker with ``sandbox="off"`` (the environment, which no worker gets
any more, in the host's own process), so a refusal below is the sandbox's and not a broken payload.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import MODELS
from unprivileged import NOBODY, world_traversable

pytestmark = [pytest.mark.slow,  # slow tier: sandboxed worker processes
              pytest.mark.shared,
              pytest.mark.skipif(platform.machine() != "x86_64" or sys.platform != "linux",
                                 reason="the payloads call x86_64 Linux system calls by number")]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = MODELS / "split_concat.tflite"  # any model the attacker's plug-in says it reads
SECRET = ("EDGEACCEL_TEST_APP_API_KEY", "sk-the-apps-own-secret")

ATTACKER = textwrap.dedent('''
    """An executor whose run() attacks its host from native code (libc's syscall(), x86_64 numbers)."""
    import ctypes, errno, json, os
    import numpy as np
    from edgeaccel.executors import Availability, DeviceSpec, Executor, ExecutorInfo, Format

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.getenv.restype = ctypes.c_char_p
    RLIM_INFINITY = 2**64 - 1
    SHM_KEY = 0x0EA30  # the segment the host makes


    def call(nr, *args):
        result = libc.syscall(ctypes.c_long(nr), *args)
        return result if result >= 0 else -ctypes.get_errno()


    def outcome(result):
        return {"result": result, "error": errno.errorcode.get(-result) if result < 0 else None}


    def prlimit(pid, resource, soft, hard):
        limit = (ctypes.c_uint64 * 2)(soft, hard)
        return call(302, ctypes.c_int(pid), ctypes.c_int(resource), limit, None)


    def sched_setscheduler(pid, policy, priority):
        return call(144, ctypes.c_int(pid), ctypes.c_int(policy), ctypes.byref(ctypes.c_int(priority)))


    def realtime_self():
        result = sched_setscheduler(0, 1, 1)  # SCHED_FIFO
        sched_setscheduler(0, 0, 0)  # back to SCHED_OTHER at once: a control must not starve the machine
        return result


    def read_kernel_log():
        buffer = ctypes.create_string_buffer(4096)
        return call(103, ctypes.c_int(3), buffer, ctypes.c_int(4096))  # SYSLOG_ACTION_READ_ALL


    def sethostname():
        name = os.uname().nodename.encode()  # its own name again: a control that succeeds changes nothing
        return call(170, ctypes.c_char_p(name), ctypes.c_size_t(len(name)))


    def clock_adjtime():
        timex = ctypes.create_string_buffer(208)  # modes 0
        return call(305, ctypes.c_int(0), timex)


    def device_node(folder):
        path = os.path.join(folder, "kmsg")
        made = call(133, ctypes.c_char_p(path.encode()), ctypes.c_uint(0o020600), ctypes.c_uint((1 << 8) | 11))
        if made < 0:
            return made
        try:
            with open(path, "rb", buffering=0) as node:  # /dev/kmsg's major and minor: the kernel log
                return len(node.read(512))
        except OSError as exc:
            return -exc.errno


    def capabilities():
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
        return {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")}


    def owner(host):
        result = call(72, ctypes.c_int(1), ctypes.c_int(8), ctypes.c_long(host))  # F_SETOWN on its stdout pipe
        call(72, ctypes.c_int(1), ctypes.c_int(8), ctypes.c_long(0))  # no owner again (O_ASYNC was never set)
        return result


    def flood(count):
        chunk = b"x" * (1 << 20)  # no newline, ever
        written = 0
        while written < count:
            done = libc.write(1, chunk, len(chunk))
            if done <= 0:
                return -ctypes.get_errno()
            written += done
        return written


    def attack(name, host, folder):
        return {
            "prlimit64 on the host": lambda: prlimit(host, 0, 10**6, RLIM_INFINITY),  # RLIMIT_CPU, harmless value
            "setpriority on the host": lambda: call(141, ctypes.c_int(0), ctypes.c_int(host), ctypes.c_int(19)),
            "SCHED_IDLE for the host": lambda: sched_setscheduler(host, 5, 0),
            "sched_setaffinity of the host": lambda: call(203, ctypes.c_int(host), ctypes.c_size_t(8),
                                                          ctypes.byref(ctypes.c_uint64(1))),
            "signal 0 to the host": lambda: call(62, ctypes.c_int(host), ctypes.c_int(0)),
            "F_SETOWN the host (SIGIO kills it)": lambda: owner(host),
            "the host's System V shared memory": lambda: call(29, ctypes.c_int(SHM_KEY), ctypes.c_size_t(0),
                                                              ctypes.c_int(0)),
            "SCHED_FIFO for itself": realtime_self,
            "raise its own address-space limit": lambda: prlimit(0, 9, RLIM_INFINITY, RLIM_INFINITY),
            "read the kernel log with syslog": read_kernel_log,
            "sethostname": sethostname,
            "clock_adjtime": clock_adjtime,
            "mknod the kernel log in its temp folder": lambda: device_node(folder),
        }[name]()


    class AttackExecutor(Executor):
        runtime = "attacker"
        formats = frozenset({Format.TFLITE})
        device_specs = (DeviceSpec("CPU", "cpu"),)

        @classmethod
        def availability(cls, device=None):
            return Availability(True, "the test's attacker")

        def __init__(self, model, device, options):
            super().__init__(model, device, options)
            self.orders = options.runtime_options

        @property
        def info(self):
            return ExecutorInfo(self.runtime, "0", self.device, "f32")

        def run(self, inputs):
            orders, results = self.orders, {}
            if orders.get("reply"):  # far more than the model declares
                return [np.ones(orders["reply"], np.uint8)]
            host, folder = orders["host"], os.environ.get("TMPDIR", "/tmp")
            for name in orders.get("payloads", ()):
                results[name] = outcome(attack(name, host, folder))
            if orders.get("environment"):
                found = libc.getenv(orders["environment"].encode())
                results["read the app's secret"] = found.decode() if found else None
                results["environment"] = sorted(os.environ)
            if orders.get("flood"):
                results["flood"] = flood(orders["flood"])
            results["capabilities"] = capabilities()
            return [np.frombuffer(json.dumps(results).encode(), np.uint8).copy()]

        def close(self):
            pass
''')

HOST = textwrap.dedent('''
    import json, os, resource, sys, time
    import numpy as np
    import edgeaccel
    from edgeaccel import IsolationLimits

    orders = json.loads(sys.argv[1])
    host = os.getpid()
    orders["host"] = host
    isolate = IsolationLimits(sandbox=orders.pop("sandbox"), readable=(orders.pop("plugin"),)) \\
        if orders.pop("isolate") else False

    libc = __import__("ctypes").CDLL(None, use_errno=True)
    segment = libc.shmget(0x0EA30, 4096, 0o1600)  # IPC_CREAT | 0600: the host's own shared memory
    assert segment >= 0, "the host could not make its System V segment"

    def state():
        return {"cpu_limit": resource.getrlimit(resource.RLIMIT_CPU)[0], "nice": os.getpriority(os.PRIO_PROCESS, 0),
                "policy": os.sched_getscheduler(0), "affinity": sorted(os.sched_getaffinity(0)),
                "hwm_kib": int([l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1])}

    with edgeaccel.load(orders.pop("model"), executor="attacker", strict=True, calibrate=False, cache=False,
                        isolate=isolate, runtime_options=orders) as model:
        before = state()
        out = model._executor.run([np.zeros(1, np.uint8)])  # the raw executor: no check of the outputs
        after = state()
        details = model.executor.details.get("isolated") or {}
        output = details.get("output")
        deadline = time.time() + 20
        while orders.get("flood") and details["output"]["bytes"] < orders["flood"] and time.time() < deadline:
            time.sleep(0.05)  # the drain thread reads what the worker wrote before it answered
            details = model.executor.details["isolated"]
        after["hwm_kib"] = state()["hwm_kib"]
        libc.shmctl(segment, 0, None)  # IPC_RMID
        print("RESULT " + json.dumps({"worker": json.loads(bytes(out[0])), "before": before, "after": after,
                                      "sandbox": details.get("sandbox"), "output": details.get("output")}))
''')

ACTS_ON_HOST = ("prlimit64 on the host", "setpriority on the host", "SCHED_IDLE for the host",
                "sched_setaffinity of the host", "signal 0 to the host", "F_SETOWN the host (SIGIO kills it)")
IPC = "the host's System V shared memory"
# each with the capability its control needs (a container's root may lack some: CAP_SYS_RESOURCE here)
ROOT_ONLY = {"SCHED_FIFO for itself": 23, "raise its own address-space limit": 24,
             "read the kernel log with syslog": 34, "sethostname": 21, "clock_adjtime": None,
             "mknod the kernel log in its temp folder": 27}
ALL = ACTS_ON_HOST + tuple(ROOT_ONLY) + (IPC,)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    from edgeaccel.testing.plugins import install, uninstall

    folder = tmp_path_factory.mktemp("attacker")
    installed = install(folder, source=ATTACKER, distribution="edgeaccel-test-attacker", module="edgeaccel_attacker",
                        entry_points={"attacker": "edgeaccel_attacker:AttackExecutor"})
    world_traversable(folder)
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield folder
    uninstall(installed)


def attack(plugin, sandbox: str | None, as_nobody: bool = False, **orders) -> dict:
    """Run the host script (in a subprocess, as nobody when asked); its worker (or, sandbox None, the host itself)
    carries out ``orders``. Returns what the host printed."""
    orders = {"model": str(MODEL), "plugin": str(plugin), "isolate": sandbox is not None, "sandbox": sandbox or "off",
              "payloads": list(ALL), "environment": SECRET[0], **orders}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), ROOT]), SECRET[0]: SECRET[1],
           "HOME": "/tmp", "EDGEACCEL_CALIBRATE": "off"}
    extra = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if as_nobody else {}
    done = subprocess.run([sys.executable, "-c", HOST, json.dumps(orders)], capture_output=True, text=True,
                          timeout=240, env=env, cwd="/tmp", **extra)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def sandboxed(plugin):
    return attack(plugin, "auto")


@pytest.fixture(scope="module")
def unsandboxed(plugin):
    return attack(plugin, "off")


def why_nobody_cannot_run_python() -> str | None:
    """Where the tests run as root, the host runs again as nobody, if nobody may run this interpreter."""
    if os.geteuid() != 0:
        return "the tests run unprivileged already"
    for path in (os.path.realpath(sys.executable), os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)):
        current = path
        while current != "/":
            if not os.stat(current).st_mode & 0o001:
                return f"nobody cannot run {sys.executable}: {current} is closed to other users"
            current = os.path.dirname(current)
    return None


@pytest.fixture(scope="module")
def sandboxed_nobody(plugin):
    """The host as the unprivileged user nobody, or None where nobody cannot run this interpreter."""
    if why_nobody_cannot_run_python():
        return None
    world_traversable(MODEL)
    return attack(plugin, "auto", as_nobody=True)


def test_the_attacks_run_as_an_unprivileged_user_too(sandboxed_nobody):
    if sandboxed_nobody is None:
        pytest.skip(why_nobody_cannot_run_python())
    assert sandboxed_nobody["worker"]["capabilities"]["CapEff"] == 0


def held(capability: int) -> bool:
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    return bool(int(status["CapEff"], 16) >> capability & 1)


def refused(result: dict) -> bool:
    return result["result"] < 0 and result["error"] in ("EPERM", "EACCES")


@pytest.mark.parametrize("payload", ACTS_ON_HOST)
def test_the_worker_cannot_act_on_its_host(payload, sandboxed, unsandboxed, sandboxed_nobody):
    """prlimit64 killed the host (RLIMIT_CPU lowered: SIGXCPU), setpriority and sched_* starved it: refused, as
    root and as a user, while a worker without the sandbox does each to the host."""
    assert unsandboxed["worker"][payload]["result"] == 0, unsandboxed["worker"][payload]  # the control
    for run in filter(None, (sandboxed, sandboxed_nobody)):
        assert refused(run["worker"][payload]), (payload, run["worker"][payload])
        assert run["after"] == {**run["before"], "hwm_kib": run["after"]["hwm_kib"]}  # the host is untouched


def test_the_worker_cannot_reach_the_hosts_system_v_ipc(sandboxed, unsandboxed, sandboxed_nobody):
    """Shared memory, semaphores and queues of the same user were the worker's to attach, read or remove: it has
    an IPC namespace of its own (root, or inside its own user namespace)."""
    assert unsandboxed["worker"][IPC]["result"] >= 0, unsandboxed["worker"][IPC]  # the control finds the segment
    for run in filter(None, (sandboxed, sandboxed_nobody)):
        if "ipc" not in run["sandbox"]["namespaces"]:
            pytest.skip(f"no IPC namespace for the worker here: {run['sandbox']['missing']}")
        assert run["worker"][IPC]["error"] == "ENOENT", run["worker"][IPC]


def test_the_controls_changed_the_host(unsandboxed):
    """Judged from outside the worker: the host's own limit, priority, policy and affinity changed."""
    before, after = unsandboxed["before"], unsandboxed["after"]
    assert after["cpu_limit"] == 10**6 != before["cpu_limit"]
    assert after["nice"] == 19 != before["nice"]
    assert after["policy"] == os.SCHED_IDLE != before["policy"]
    assert after["affinity"] == [0] or os.cpu_count() == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="root's powers: a user's worker has none to drop")
@pytest.mark.parametrize("payload", ROOT_ONLY)
def test_a_root_worker_has_none_of_roots_powers(payload, sandboxed, unsandboxed):
    """As root: real-time scheduling, its own limits raised, the kernel log through syslog(2) or a device node
    made in its temp folder, the host's name, the clock. Every capability is dropped and the filter refuses."""
    control = unsandboxed["worker"][payload]
    if ROOT_ONLY[payload] is not None and not held(ROOT_ONLY[payload]):
        assert refused(control), control
        pytest.skip(f"this root lacks capability {ROOT_ONLY[payload]}: the control cannot succeed here")
    assert control["result"] >= 0, control
    assert refused(sandboxed["worker"][payload]), (payload, sandboxed["worker"][payload])


@pytest.mark.skipif(os.geteuid() != 0, reason="as a user the worker holds no capability either way")
def test_a_root_worker_holds_no_capability(sandboxed, unsandboxed):
    assert unsandboxed["worker"]["capabilities"]["CapEff"] != 0  # the control: a root worker without the sandbox
    assert sandboxed["worker"]["capabilities"] == {"CapEff": 0, "CapPrm": 0, "CapBnd": 0, "CapAmb": 0}
    assert "capabilities" in sandboxed["sandbox"]["active"] and sandboxed["sandbox"]["capability_bounding_set"] == \
        "empty"
    assert sandboxed["sandbox"]["temp_folder_mount"] == "nodev,nosuid"  # a device node there would open nothing


def test_the_worker_never_sees_the_apps_environment(plugin, sandboxed, unsandboxed, sandboxed_nobody):
    """The worker inherited every variable (API keys, database URLs) and could return them in its outputs."""
    in_process = attack(plugin, None, payloads=[])
    assert in_process["worker"]["read the app's secret"] == SECRET[1]  # the control: the payload reads it
    from edgeaccel.isolation.environment import worker_environment

    for run in filter(None, (sandboxed, unsandboxed, sandboxed_nobody)):  # not even a worker without the sandbox
        assert run["worker"]["read the app's secret"] is None
        seen = set(run["worker"]["environment"])
        assert seen <= set(worker_environment(dict.fromkeys(seen, ""))) | {"TMPDIR", "HOME"}, seen
        assert "PYTHONPATH" in seen


def test_an_executor_and_the_caller_may_pass_more_names():
    from edgeaccel import IsolationLimits
    from edgeaccel.executors.registry import get
    from edgeaccel.isolation.environment import worker_environment

    app = {"CUDA_VISIBLE_DEVICES": "1", "DATABASE_URL": "postgres://secret", "MY_SETTING": "x", "LC_ALL": "C"}
    assert worker_environment(app) == {"LC_ALL": "C"}
    assert worker_environment(app, get("onnxruntime").worker_environment) == {"LC_ALL": "C",
                                                                             "CUDA_VISIBLE_DEVICES": "1"}
    assert worker_environment(app, IsolationLimits(environment=("MY_*",)).environment) == {"LC_ALL": "C",
                                                                                           "MY_SETTING": "x"}
    with pytest.raises(ValueError, match="tuple of names"):
        IsolationLimits(environment="MY_SETTING")


def test_a_worker_writing_without_newlines_cannot_grow_its_host(plugin):
    """512 MiB on stdout without a newline grew the host by 1.2-1.5 GiB (read line by line). Now every byte is
    read (the control: the host counted them all) and the host's peak memory barely moves."""
    flood = 256 << 20
    run = attack(plugin, "auto", payloads=[], environment="", flood=flood)
    assert run["worker"]["flood"] >= flood
    assert run["output"]["bytes"] >= flood  # all of it reached the host
    grown_mib = (run["after"]["hwm_kib"] - run["before"]["hwm_kib"]) / 1024
    assert grown_mib < 48, f"the host's peak memory grew by {grown_mib:.0f} MiB"


def test_a_reply_far_larger_than_the_declared_outputs_is_refused_before_it_is_read(plugin, monkeypatch):
    """The caller allocates a reply's declared size before reading it: by default that is bounded by 4x the model's
    fixed outputs (at least 64 MiB), not 1 GiB per channel. The worker lives on."""
    import edgeaccel
    from edgeaccel import IsolationLimits
    from edgeaccel.isolation.executor import default_output_bytes

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(plugin), ROOT]))
    with edgeaccel.load(MODEL, executor="attacker", strict=True, calibrate=False, cache=False,
                        isolate=IsolationLimits(readable=(str(plugin),)),
                        runtime_options={"host": os.getpid(), "reply": 100 << 20}) as model:
        assert default_output_bytes(edgeaccel.describe(MODEL)) == 64 << 20
        with pytest.raises(edgeaccel.InferenceError, match="over the limit of 67108864 bytes"):
            model._executor.run([np.zeros(1, np.uint8)])
        assert model.executor.details["isolated"]["pid"] is not None
    with edgeaccel.load(MODEL, executor="attacker", strict=True, calibrate=False, cache=False,
                        isolate=IsolationLimits(readable=(str(plugin),), output_bytes=200 << 20),
                        runtime_options={"host": os.getpid(), "reply": 100 << 20}) as model:
        assert model._executor.run([np.zeros(1, np.uint8)])[0].nbytes == 100 << 20  # the control: it comes back


# -- as an unprivileged user, in this process's own interpreter (nobody may not run it from its folder) -----------
def _attack_a_neighbour(victim: int, temp_folder: str, sandboxed: bool) -> dict:
    """In a child of this process that became nobody: enter the sandbox (or not), then act on ``victim``, another
    process of nobody's. Returns the sandbox's report and each outcome (0, or -errno)."""
    import ctypes

    from edgeaccel.isolation import sandbox

    report = sandbox.apply("auto" if sandboxed else "off", (), temp_folder)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def call(nr, *args):
        return 0 if libc.syscall(ctypes.c_long(nr), *args) >= 0 else -ctypes.get_errno()

    limit = (ctypes.c_uint64 * 2)(10**6, 2**64 - 1)
    return {"report": report,
            "prlimit64": call(302, ctypes.c_int(victim), ctypes.c_int(0), limit, None),
            "setpriority": call(141, ctypes.c_int(0), ctypes.c_int(victim), ctypes.c_int(19)),
            "kill": call(62, ctypes.c_int(victim), ctypes.c_int(0))}


@pytest.mark.skipif(os.geteuid() != 0, reason="becomes nobody: needs root")
def test_a_users_worker_cannot_act_on_a_process_of_the_same_user(tmp_path):
    """The kernel lets a user's process renice and re-limit any other of that user's: the filter does not. The
    control (no sandbox) does both to the same victim."""
    import ctypes  # noqa: F401  everything the child uses is imported before it becomes nobody
    import errno

    from edgeaccel.isolation import sandbox  # noqa: F401
    from unprivileged import call_unprivileged

    def cpu_limit(pid: int) -> str:  # read from /proc: prlimit() on another process needs CAP_SYS_RESOURCE
        line = next(row for row in open(f"/proc/{pid}/limits") if row.startswith("Max cpu time"))
        return line.split()[3]

    temp = tmp_path / "worker-temp"
    temp.mkdir()
    temp.chmod(0o777)
    world_traversable(temp)
    victims = [subprocess.Popen(["sleep", "60"], user=NOBODY, group=NOBODY, extra_groups=[]) for _ in range(2)]
    try:
        confined = call_unprivileged(_attack_a_neighbour, victims[0].pid, str(temp), True)
        control = call_unprivileged(_attack_a_neighbour, victims[1].pid, str(temp), False)
        assert (control["prlimit64"], control["setpriority"], control["kill"]) == (0, 0, 0)
        assert os.getpriority(os.PRIO_PROCESS, victims[1].pid) == 19
        assert cpu_limit(victims[1].pid) == str(10**6)
        for action in ("prlimit64", "setpriority", "kill"):
            assert confined[action] == -errno.EPERM, (action, confined)
        assert os.getpriority(os.PRIO_PROCESS, victims[0].pid) == 0
        assert cpu_limit(victims[0].pid) == "unlimited"
        report = confined["report"]
        assert "seccomp" in report["active"] and "capabilities" in report["active"], report
        if "user" in report["namespaces"]:  # unprivileged user namespaces allowed here
            assert {"net", "ipc", "mnt"} <= set(report["namespaces"]) and report["temp_folder_mount"] == \
                "nodev,nosuid", report
    finally:
        for victim in victims:
            victim.kill()
            victim.wait()
