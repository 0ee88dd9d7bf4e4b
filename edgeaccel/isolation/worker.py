"""The worker process: loads one model on one executor and serves run requests from its caller.

Started by ``IsolatedExecutor`` as ``python -m edgeaccel.isolation.worker FD PARENT_PID MEMORY_BYTES SANDBOX``,
with the socket's end as FD and SANDBOX the sandbox's settings in JSON. The worker dies with its caller
(PR_SET_PDEATHSIG), and exits when the socket closes. It enters its sandbox (sandbox.py) and limits first, while
it has one thread: before it imports numpy (whose BLAS starts threads) or a runtime, and before it reads the
load request or the model.

The control socket carries one pickled {"op": "load", runtime, model, device, options} and its JSON reply, then
channels (see _serve). On a channel (channel.py): the worker's {"region": bytes mapped} first, then
{"op": "run"} and the input arrays, answered in JSON {"ok": true} + the output arrays, or
{"ok": false, "error": class name, message, hint}; arrays in the channel's shared region where they fit.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import sys
import threading


def _die_with_parent(parent_pid: int) -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a hung worker must not outlive its caller
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the caller died before prctl took effect
        os._exit(0)


def _limit_memory(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    if limit > 0:
        # never above what this process inherited: a caller already running under a lower hard limit would
        # otherwise make setrlimit fail and every worker die at start
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _enter_sandbox(config: dict) -> dict:
    from . import sandbox

    try:
        return sandbox.apply(config["mode"], tuple(config["model_files"]), config["temp_folder"],
                             tuple(config["readable"]), config["open_files"], config["cpu_seconds"], config["on_cpu"])
    except sandbox.SandboxError as exc:
        from ..errors import ModelLoadError

        raise ModelLoadError(
            f"IsolationLimits(sandbox='require'), but the worker cannot have every sandbox layer here: {exc}",
            hint="run on a kernel that offers them (Landlock: Linux >= 5.13 with landlock in lsm=; a network "
            "namespace: root, or unprivileged user namespaces enabled), or accept the layers this kernel has "
            "with sandbox='auto' (executor.details['isolated']['sandbox'] then lists what is missing)") from None


def _error_reply(exc: BaseException, default: str) -> dict:
    from ..errors import EdgeAccelError, runtime_message

    if isinstance(exc, EdgeAccelError):
        return {"ok": False, "error": type(exc).__name__, "message": exc.message, "hint": exc.hint,
                "runtime": getattr(exc, "runtime", None)}
    # Not converted by the executor: keep the runtime's words and type, the caller makes it an edgeaccel error
    return {"ok": False, "error": default, "message": f"{type(exc).__name__}: {runtime_message(exc)}",
            "hint": None, "runtime": None}


def main(argv: list[str]) -> int:
    import json

    fd, parent_pid, memory, config = int(argv[0]), int(argv[1]), int(argv[2]), json.loads(argv[3])
    _die_with_parent(parent_pid)
    _limit_memory(memory)
    sock = socket.socket(fileno=fd)
    try:
        confined, refused = _enter_sandbox(config), None
    except BaseException as exc:  # sandbox='require' and a layer is missing: said in the reply to the request
        confined, refused = {}, exc
    from . import wire

    try:
        request = wire.recv_pickle(sock)
    except wire.WireError:
        return 0
    executor = None
    try:
        if refused is not None:
            raise refused
        from ..executors.registry import runtimes

        cls = runtimes()[request["runtime"]]
        executor = cls(request["model"], request["device"], request["options"])
        info = executor.info
        if config.get("probe") and not config["probe"]["bad_reply"]:  # the test hook: only when a test asked
            from . import probe

            confined["probe"] = probe.run(config["probe"]["files"], config["probe"]["tcp_port"],
                                          config["probe"]["unix_socket"], config["model_folder"],
                                          config["temp_folder"], memory,
                                          config["open_files"])
        reply = {"ok": True, "pid": os.getpid(), "sandbox": confined,
                 "info": {"runtime": info.runtime, "version": info.version, "device": info.device,
                          "precision": info.precision, "threads": info.threads,
                          "details": _jsonable(info.details)}}
    except BaseException as exc:  # MemoryError under the limit included: the caller must hear about it
        reply = _error_reply(exc, "ModelLoadError")
    wire.send_json(sock, reply)
    if executor is None:
        return 0
    _serve(sock, executor, (config.get("probe") or {}).get("bad_reply", ""))
    return 0


def _serve(control: socket.socket, executor, bad_reply: str = "") -> None:
    """Each byte b"c" on the control socket brings one end of a new channel and, where the caller could make one,
    its shared region (channel.py); a thread serves it until the caller closes it. b"q", or the control socket
    closing, ends the worker. ``bad_reply``: the test hook that makes every reply malformed (probe.py)."""
    from . import channel as channels
    from . import wire

    def serve(sock: socket.socket, region_fd: int | None) -> None:
        region, why = None, None
        if region_fd is not None:
            try:
                region = channels.Region.attach(region_fd)
            except (OSError, ValueError) as exc:  # mmap under the address-space limit: the socket carries all
                why = f"the worker could not map it: {exc}"
        channel = channels.Channel(sock, region, 1 << 62, copy_out=False)
        try:
            try:
                channel.send({"region": region.size if region else 0, "why": why})
            except OSError:
                return
            while True:
                try:
                    # {"op": "run"}: the only request on a channel; inputs are views of the region
                    _, inputs, end = channel.recv()
                except (wire.WireError, OSError):
                    return
                try:
                    outputs = executor.run(inputs)
                    reply, arrays = {"ok": True}, outputs
                except BaseException as exc:
                    reply, arrays = _error_reply(exc, "InferenceError"), []
                if bad_reply:
                    from . import probe

                    probe.send_bad_reply(bad_reply, channel, arrays, end)
                    continue
                try:
                    channel.send(reply, arrays, start=end)
                except OSError:
                    return
                except Exception as exc:  # an output the wire cannot carry: say so, never leave the caller waiting
                    try:
                        channel.send(_error_reply(exc, "InferenceError"))
                    except OSError:
                        return
        finally:
            channel.close()

    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1, 2)
        except OSError:
            break
        if message != b"c" or not fds:
            for fd in fds:
                os.close(fd)
            break
        threading.Thread(target=serve, args=(socket.socket(fileno=fds[0]), fds[1] if len(fds) > 1 else None),
                         daemon=True, name="edgeaccel-worker-channel").start()
    executor.close()


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
