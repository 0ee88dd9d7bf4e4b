"""IsolatedExecutor: the Executor contract, served by a real executor in a worker process.

Model and its fallback logic see an ordinary executor. A signal or a hang in the worker becomes
``WorkerCrashedError`` / ``InferenceTimeoutError`` in the caller, which keeps running; the next request
starts a new worker (one load). The caller's input arrays are only read, so a failed request can be
retried as it is.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np

from .. import errors
from ..errors import EdgeAccelError, InferenceTimeoutError, WorkerCrashedError
from ..executors.base import Availability, Executor, ExecutorInfo, ExecutorOptions
from ..modelinfo import Format, ModelInfo
from . import channel as channels
from . import memory, wire
from .limits import IsolationLimits

log = logging.getLogger("edgeaccel.isolation")

_NOISE = ("INFO: Created TensorFlow Lite XNNPACK delegate for CPU.",)
_LINE = 300  # the characters kept of each line the worker writes
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds edgeaccel/


class IsolatedExecutor(Executor):
    """Proxies ``runtime`` on ``device`` in a worker process under ``limits``."""

    runtime = "isolated"
    formats = frozenset(Format)

    def __init__(self, runtime: str, model: ModelInfo, device: str, options: ExecutorOptions,
                 limits: IsolationLimits | None = None) -> None:
        super().__init__(model, device, options)
        self.inner_runtime = runtime
        self.limits = limits or IsolationLimits()
        self._lock = threading.Lock()
        self._closed = False
        self._starts = 0
        self._worker: _Worker | None = None
        self._worker = self._start()  # load now: a model that fails or crashes fails here, as in-process
        self._info = self._worker.info

    @classmethod
    def availability(cls, device: str | None = None) -> Availability:
        return Availability(True, "runs the chosen executor in a worker process")

    def _start(self) -> _Worker:
        self._starts += 1
        worker = _Worker(self.inner_runtime, self.model, self.device, self.options, self.limits)
        self._memory = worker.memory  # the limits of the last worker, shown while none runs
        self._sandbox = worker.sandbox
        return worker

    def _current(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise errors.ModelClosedError(f"{self.model.path.name} was closed")
            if self._worker is None or not self._worker.alive:
                if self._worker is not None:
                    self._worker.close()
                log.warning("starting a new worker for %s: %s", self.model.path.name,
                            self._worker.death if self._worker else "the last one failed to start")
                self._worker = None
                self._worker = self._start()
            return self._worker

    @property
    def info(self) -> ExecutorInfo:
        base = self._info
        worker = self._worker
        details = dict(base.details)
        plan = worker.memory if worker else self._memory
        details["isolated"] = {"pid": worker.pid if worker else None, "starts": self._starts,
                               "memory_limit": plan.address_space, "memory": plan.to_dict(),
                               "load_timeout": self.limits.load_timeout, "run_timeout": self.limits.run_timeout,
                               "sandbox": worker.sandbox if worker else self._sandbox,
                               "channel": dict(worker.channel_stats) if worker else None,
                               "output": dict(worker.output_stats) if worker else None}
        return ExecutorInfo(base.runtime, base.version, base.device, base.precision, base.threads,
                            details=details)

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return self._current().call(list(inputs), self.limits.run_timeout)

    def close(self) -> None:
        stop_workers = getattr(self, "stop_workers", None)  # main's Executor.submit() keeps a thread pool
        if stop_workers is not None:
            stop_workers()
        with self._lock:
            self._closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()


class _Worker:
    """One worker process. The control socket carries the load handshake, then one end of a new socket pair and
    a shared-memory region (SCM_RIGHTS) per concurrent caller: a channel (channel.py) served by its own worker
    thread, taken from a free list by one caller at a time. A call is one send and one blocking receive on that
    channel, with no thread handoff on either side (a reader thread plus a worker pool cost twice as much per
    call, measured)."""

    def __init__(self, runtime: str, model: ModelInfo, device: str, options: ExecutorOptions,
                 limits: IsolationLimits) -> None:
        self.runtime, self.model, self.limits = runtime, model, limits
        self.name = f"{runtime}:{device} worker for {model.path.name}"
        self.death: str | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=12)
        # what the worker wrote on stdout/stderr: bytes read, lines (the last 12 kept), lines not logged
        self.output_stats = {"bytes": 0, "lines": 0, "unlogged_lines": 0, "log_limit": limits.output_log_bytes}
        self._timed_out = False
        self.memory = memory.plan(device, limits)
        self._over_memory: str | None = None  # why the memory guard killed it
        self._max_reply = limits.output_bytes or default_output_bytes(model)
        self._region_bytes = channels.region_size(sum(_nbytes(t) for t in (*model.inputs, *model.outputs)))
        # what carries the tensors, and each time the socket had to instead (executor.details["isolated"])
        self.channel_stats: dict = {"transport": None, "region_bytes": 0, "why": None, "socket_inputs": 0,
                                    "socket_outputs": 0, "last_fallback": None}
        self._violation: str | None = None  # how the worker broke the channel protocol, when it did
        self.sandbox: dict = {}
        # private: the only folder the sandboxed worker may write; removed by this process when the worker ends,
        # or by a later caller when this one died first (its pid is in the name)
        _remove_orphan_temp_folders()
        self.temp_folder = tempfile.mkdtemp(prefix=f"edgeaccel-worker-{os.getpid()}-")
        self._channels: list[channels.Channel] = []  # idle channels
        self._open_channels = 0
        self._max_channels = max(1, int(options.runtime_options.get("max_interpreters", 8)))
        self._cond = threading.Condition()
        self._control_lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = _worker_env(runtime, limits)
        # HOME too: runtimes keep ids and caches under ~ (OpenVINO's telemetry reads ~/intel at load, and fails
        # the load when it may not); user site-packages stay where they are
        env["TMPDIR"] = env["HOME"] = self.temp_folder
        try:
            self.proc = _spawn(
                [limits.python or sys.executable, "-m", "edgeaccel.isolation.worker", str(theirs.fileno()),
                 str(os.getpid()), str(self.memory.address_space),
                 json.dumps(self._sandbox_request(model, device))],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env=env, **_PROCESS_GROUP,
            )
        except OSError as exc:
            ours.close()
            if self.memory.cgroup is not None:
                memory.remove_cgroup(self.memory.cgroup)
            shutil.rmtree(self.temp_folder, ignore_errors=True)
            raise errors.ModelLoadError(f"could not start a worker process: {exc}", runtime=runtime,
                                        hint="check IsolationLimits.python, or load without isolate") from exc
        finally:
            theirs.close()
        self.pid = self.proc.pid
        self.sock = ours
        self._guard_memory()  # before the load request: the worker imports nothing heavy until it has it
        self._drainer = threading.Thread(target=self._drain_output, name="edgeaccel-worker-output", daemon=True)
        self._drainer.start()
        self.info = self._load(model, device, options)

    def _guard_memory(self) -> None:
        plan = self.memory
        if plan.guard == "cgroup":
            failed = memory.join_cgroup(plan.cgroup, self.pid)
            if failed is None:
                return
            memory.remove_cgroup(plan.cgroup)
            self.memory = plan = memory.MemoryPlan(plan.address_space, plan.resident, "watchdog",
                                                   f"{plan.reason}, but {failed}: the watchdog limits it instead")
        if plan.guard == "watchdog":
            memory.watchdog.watch(self.pid, plan.resident, self.limits.watchdog_interval, self._memory_exceeded)

    def _memory_exceeded(self, rss: int) -> None:
        """Called by the watchdog: say why, then kill (the Popen knows whether the pid is still ours)."""
        self._over_memory = (f"was killed by edgeaccel's memory watchdog: its resident memory reached "
                             f"{_mib(rss)}, over its limit of {_mib(self.memory.resident)}")
        try:
            self.proc.send_signal(signal.SIGKILL)
        except OSError:
            pass

    def _release_memory_guard(self) -> None:
        """Once the worker is gone: stop watching it, read whether its cgroup's limit killed it, remove it."""
        memory.watchdog.unwatch(self.pid)
        shutil.rmtree(self.temp_folder, ignore_errors=True)
        cgroup = self.memory.cgroup
        if cgroup is not None and cgroup.exists():
            if memory.oom_kills(cgroup) and self._over_memory is None:
                self._over_memory = (f"was killed by the kernel for going over its cgroup's memory.max of "
                                     f"{_mib(self.memory.resident)} ({cgroup})")
            memory.remove_cgroup(cgroup)

    @property
    def alive(self) -> bool:
        """False once the worker died, even while no call was in flight (checked without a thread)."""
        if self.death is None and self.proc.poll() is not None:
            self._mark_dead("idle", None)
        return self.death is None

    # -- load ---------------------------------------------------------------------------------------------------
    def _load(self, model: ModelInfo, device: str, options: ExecutorOptions) -> ExecutorInfo:
        sandboxed = self.limits.sandbox != "off"
        if sandboxed and options.cache_dir:
            # a worker that writes compiled models which trusted loads read later could poison them
            options = options.with_runtime(cache=False)
        request = {"op": "load", "runtime": self.runtime, "model": model, "device": device, "options": options,
                   "threads": options.runtime_options.get("max_interpreters", 8)}
        self.sock.settimeout(self.limits.load_timeout)
        try:
            wire.send_pickle(self.sock, request)
            reply, _ = wire.recv_json(self.sock, 1 << 20, wire.REPLY_HEADER)
        except TimeoutError:
            self._kill()
            raise InferenceTimeoutError(
                f"{self.name} did not load within {self.limits.load_timeout:g} s; it was stopped",
                runtime=self.runtime,
                hint="raise IsolationLimits(load_timeout=...) for a large model on a slow device, or check the "
                "model: a hostile file can make a runtime spin",
            ) from None
        except (wire.WireError, OSError) as exc:
            raise self._crashed("loading", exc) from None
        finally:
            if self.death is None:
                self.sock.settimeout(None)
        try:
            if not reply.get("ok"):
                self.close()
                raise _as_error(reply, self.runtime, self.memory.address_space, self.limits.open_files)
            self.sandbox = dict(reply.get("sandbox") or {})
            info = reply["info"]
            loaded = ExecutorInfo(str(info["runtime"]), str(info["version"]), str(info["device"]),
                                  str(info["precision"]), info.get("threads"), details=dict(info.get("details") or {}))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:  # a reply of the wrong form: taken over
            self._violation = f"a load reply of the wrong form ({type(exc).__name__}: {str(exc)[:100]})"
            self._kill()
            raise self._death_error("loading") from None
        if sandboxed:
            self.sandbox["cache"] = ("off: a sandboxed worker neither reads nor writes edgeaccel's compiled-model "
                                     "cache (a hostile model could poison what trusted loads read)")
        return loaded

    def _sandbox_request(self, model: ModelInfo, device: str) -> dict:
        limits = self.limits
        probe = limits.probe
        # the model's own files, not its folder: a model beside the app's files must not open the way to them
        files = [str(Path(p).resolve()) for p in (model.path, *model.extra_files)]
        return {"mode": limits.sandbox, "model_files": files, "model_folder": str(model.path.resolve().parent),
                "temp_folder": self.temp_folder, "readable": limits.readable, "open_files": limits.open_files,
                "cpu_seconds": limits.cpu_seconds, "on_cpu": memory.on_cpu(device),
                "probe": {"files": list(probe.files), "tcp_port": probe.tcp_port, "unix_socket": probe.unix_socket,
                          "bad_reply": probe.bad_reply} if probe else None}

    # -- run ------------------------------------------------------------------------------------------------------
    def call(self, arrays: list[np.ndarray], timeout: float) -> list[np.ndarray]:
        channel = self._take_channel(timeout)
        healthy = False
        try:
            if channel.seq == 0:
                self._greet(channel)
            channel.seq = (channel.seq + 1) & 0xFFFFFFFF or 1
            # the channel's timeout: set_timeout when it was made
            why = channel.send({"op": "run"}, arrays)
            if why is not None:
                self._socket_carried("socket_inputs", f"inputs: {why}")
            reply, outputs, _ = channel.recv(channel.seq)
            healthy = True
        except TimeoutError:
            self._timed_out = True
            self._kill()
            raise InferenceTimeoutError(
                f"{self.name}: run() took longer than {timeout:g} s; the worker was stopped and the next "
                "request starts a new one",
                runtime=self.runtime,
                hint="raise IsolationLimits(run_timeout=...) if the model is just slow; your inputs are "
                "unchanged and the request can be retried",
            ) from None
        except TypeError as exc:  # an input the wire cannot describe (send_json refused it before sending a byte)
            raise errors.InputDTypeError(
                f"{self.name}: {exc}", hint="pass numeric arrays, or str/bytes elements for string tensors") from None
        except wire.WireLimitError as exc:  # the worker lives on; this channel, with the reply unread, is closed
            raise errors.InferenceError(
                f"{self.name}: run() produced {exc.declared} bytes of outputs, over the limit of {exc.limit} bytes; "
                "they were refused", hint=f"raise IsolationLimits(output_bytes=...) (now {exc.limit}) if the model "
                "really produces that much; a model that declares small outputs and returns huge ones is suspect",
            ) from None
        except (wire.WireClosedError, OSError) as exc:
            raise self._crashed("running", exc) from None
        except wire.WireError as exc:  # alive and answering nonsense: taken over, as far as this process knows
            self._violation = str(exc)
            self._kill()
            raise self._death_error("running") from None
        finally:
            self._give_channel(channel, healthy)
        if not reply.get("ok"):
            raise _as_error(reply, self.runtime, self.memory.address_space, self.limits.open_files)
        return outputs

    def _greet(self, channel: channels.Channel) -> None:
        """A new channel's first frame: how much of its region the worker mapped (0: the socket carries all)."""
        hello, _, _ = channel.recv(0)
        stats, mapped = self.channel_stats, hello.get("region")
        if channel.region is not None and mapped != channel.region.size:
            channel.region.close()
            channel.region = None
            stats["why"] = str(hello.get("why") or f"the worker mapped {mapped} bytes")
        stats["transport"] = "shared memory" if channel.region is not None else "socket"
        stats["region_bytes"] = channel.region.size if channel.region is not None else 0
        if channel.region is None:
            log.debug("%s: tensors go through the socket: %s", self.name, stats["why"])
        channel.seq = 1

    def _socket_carried(self, counter: str, why: str) -> None:
        stats = self.channel_stats
        stats[counter] += 1
        stats["last_fallback"] = why
        log.debug("%s: %s; the socket carried them", self.name, why)

    def _take_channel(self, timeout: float) -> channels.Channel:
        with self._cond:
            while True:
                if self.death is not None:
                    raise self._death_error("running")
                if self._channels:
                    return self._channels.pop()
                if self._open_channels < self._max_channels:
                    self._open_channels += 1
                    break
                if not self._cond.wait(timeout):
                    raise InferenceTimeoutError(
                        f"{self.name}: waited {timeout:g} s for one of its {self._max_channels} channels",
                        runtime=self.runtime, hint="fewer concurrent callers, or raise max_interpreters")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        wire.set_timeout(ours, timeout)
        try:
            region = channels.Region.create(self._region_bytes)
        except OSError as exc:  # no memfd or sealing here (an old kernel, a caller's own seccomp filter)
            region = None
            self.channel_stats["why"] = f"no shared region: memfd_create or sealing failed ({exc})"
        fds = [theirs.fileno()] + ([region.fd] if region is not None else [])
        try:
            with self._control_lock:
                socket.send_fds(self.sock, [b"c"], fds, socket.MSG_NOSIGNAL)
        except OSError as exc:
            ours.close()
            if region is not None:
                region.close()
            self._give_channel(None, False)
            raise self._crashed("running", exc) from None
        finally:
            theirs.close()
        return channels.Channel(ours, region, self._max_reply, copy_out=True, stats=self.channel_stats,
                                max_header=wire.REPLY_HEADER)

    def _give_channel(self, channel: channels.Channel | None, healthy: bool) -> None:
        with self._cond:
            if healthy and channel is not None and self.death is None:
                self._channels.append(channel)
            else:
                self._open_channels -= 1
                if channel is not None:
                    channel.close()
            self._cond.notify()

    def _mark_dead(self, stage: str, exc: BaseException | None) -> None:
        # described outside the lock: it waits for the process, and callers must not queue behind that
        description = self._describe_death(stage, exc) if self.death is None else None
        with self._cond:
            if self.death is None:
                self.death = description
            idle, self._channels = self._channels, []
            self._open_channels -= len(idle)
            self._cond.notify_all()  # callers waiting for a channel learn of the death
        for channel in idle:
            channel.close()

    def _crashed(self, stage: str, exc: BaseException | None) -> WorkerCrashedError:
        self._mark_dead(stage, exc)
        return self._death_error(stage)

    def _death_error(self, stage: str) -> WorkerCrashedError:
        if self._over_memory is not None:
            limit = self.memory.resident
            hint = (f"the worker's resident memory is limited to {_mib(limit)} (IsolationLimits(resident_bytes="
                    f"{limit})): if the model needs more, raise it, e.g. isolate=IsolationLimits(resident_bytes="
                    f"{2 * limit}), or 0 for no limit. This process is unharmed and your inputs are unchanged"
                    + ("; unless strict=True, edgeaccel tries the next executor" if stage == "loading" else ""))
            return errors.WorkerMemoryError(self.death or f"{self.name} {self._over_memory}", runtime=self.runtime,
                                            hint=hint)
        if self._violation is not None:
            return WorkerCrashedError(
                self.death or f"{self.name} sent a malformed reply: {self._violation}", runtime=self.runtime,
                hint="a worker that breaks the channel protocol is treated as taken over by its model: it was stopped "
                "before its reply was used. This process is unharmed and your inputs are unchanged; a new worker "
                "serves the next request. If it recurs with this model, the model is likely hostile")
        if stage == "loading":
            hint = ("the model crashed its runtime while loading; this process is unharmed. Unless strict=True, "
                    "edgeaccel tries the next executor; otherwise the file is likely corrupted or hostile")
        else:
            hint = ("the model crashed its runtime; this process is unharmed. Your inputs are unchanged: retry "
                    "(a new worker starts), or fall back to another executor or model")
        if self._killed_by_signal() == signal.SIGXCPU:
            hint = (f"the worker used up its CPU time, IsolationLimits(cpu_seconds={self.limits.cpu_seconds:g}) over "
                    "its life: raise it (or 0 for none) if the model is just slow; a new worker serves the next "
                    "request and your inputs are unchanged")
        if self._killed_by_signal() in (signal.SIGKILL, signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS) \
                and self.memory.address_space:
            hint += (f". The worker's address space is limited to {self.memory.address_space / 2**30:g} GiB: if "
                     "the model is that large, raise IsolationLimits(memory_bytes=...)")
        return WorkerCrashedError(self.death or f"{self.name} stopped while {stage}", runtime=self.runtime,
                                  hint=hint)

    def _killed_by_signal(self) -> int | None:
        code = self.proc.returncode
        return -code if code is not None and code < 0 else None

    def _describe_death(self, stage: str, exc: BaseException | None) -> str:
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self.proc.returncode
        self._release_memory_guard()
        if self._over_memory is not None:
            how = self._over_memory
        elif self._timed_out:
            how = "was stopped after a run exceeded its time limit"
        elif self._violation is not None:
            how = f"sent a malformed reply ({self._violation}) and was stopped"
        elif code is not None and code < 0:
            sig = signal.Signals(-code)
            how = f"was killed by {sig.name} ({signal.strsignal(sig) or sig.name})"
            if sig == signal.SIGXCPU:
                how += f": it reached its CPU time limit of {self.limits.cpu_seconds:g} s (RLIMIT_CPU)"
        elif code is not None:
            how = f"exited with status {code}"
        else:
            how = f"stopped answering ({exc})"
        self._drainer.join(1.0)  # its last words (an abort message) arrive just after the EOF
        tail = " | ".join(list(self._stderr_tail)[-4:])
        said = f"; its last output: {tail}" if tail else ""
        return f"{self.name} (pid {self.pid}) {how} while {stage}{said}"

    # -- output and lifetime ---------------------------------------------------------------------------------------
    def _drain_output(self) -> None:
        """Keep the worker's last lines (native crash messages like 'double free or corruption'), bounded: read in
        chunks, never by line (a worker writing without newlines would grow this process without end), each line
        kept cut to _LINE bytes, the last 12 kept; logged at debug level up to ``limits.output_log_bytes``."""
        stats = self.output_stats
        fd = self.proc.stdout.fileno()
        line = bytearray()  # the current line's first _LINE bytes
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            stats["bytes"] += len(chunk)
            *ended, rest = chunk.split(b"\n")
            for piece in ended:
                line += piece[:max(_LINE - len(line), 0)]
                self._keep_line(bytes(line))
                line.clear()
            line += rest[:max(_LINE - len(line), 0)]
        if line:
            self._keep_line(bytes(line))
        self.proc.stdout.close()

    def _keep_line(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").strip()
        if line and line not in _NOISE:
            self._stderr_tail.append(line)
            stats = self.output_stats
            stats["lines"] += 1
            if stats["bytes"] <= stats["log_limit"]:
                log.debug("worker %s: %s", self.pid, line)
            else:
                stats["unlogged_lines"] += 1

    def _kill(self) -> None:
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.proc.wait()
        self._mark_dead("running", None)

    def close(self) -> None:
        if self.death is None:
            try:
                with self._control_lock:
                    self.sock.sendall(b"q")
                self.proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            self._kill()
        self.proc.wait()
        if self.death is None:
            self._mark_dead("closing", None)
        try:
            self.sock.close()
        except OSError:
            pass


# The worker gets a process group of its own (a terminal's Ctrl-C or SIGTSTP reaches the host only, which decides)
# but stays in the host's session: with the kernel's autogroup (on by default) each session is one scheduling
# group, and a worker in a session of its own was a second group competing with the host's on a busy machine.
# Python 3.10 has no process_group: there the worker starts its own session as before.
_PROCESS_GROUP: dict = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}

_spawn_lock = threading.Lock()
_spawn_queue: queue.SimpleQueue | None = None


def _spawn(*args, **kwargs) -> subprocess.Popen:
    """Popen on one long-lived thread. The worker's PR_SET_PDEATHSIG fires when the *thread* that forked it
    ends, not the process: a worker started from an application's short-lived loader thread was killed with
    that thread (measured). The spawner thread lives as long as the process."""
    global _spawn_queue
    with _spawn_lock:
        if _spawn_queue is None:
            _spawn_queue = queue.SimpleQueue()
            threading.Thread(target=_spawn_loop, args=(_spawn_queue,), name="edgeaccel-spawner", daemon=True).start()
    future: Future = Future()
    _spawn_queue.put((args, kwargs, future))
    return future.result()


def _spawn_loop(requests: queue.SimpleQueue) -> None:
    while True:
        args, kwargs, future = requests.get()
        try:
            future.set_result(subprocess.Popen(*args, **kwargs))
        except BaseException as exc:  # handed to the caller waiting on the future
            future.set_exception(exc)


def _worker_env(runtime: str, limits: IsolationLimits) -> dict[str, str]:
    """What the worker may see of the caller's environment (environment.py: never the app's secrets), plus
    the runtime's own variables and ``limits.environment``; plus edgeaccel's own folder on PYTHONPATH when the
    caller found edgeaccel somewhere a fresh interpreter would not (a sys.path entry added at run time). Never a
    site-packages folder: ahead of the standard library it could shadow stdlib modules in the worker."""
    import site

    from ..executors import registry
    from .environment import worker_environment

    try:
        own = registry.get(runtime).worker_environment
    except KeyError:  # an unknown runtime: the worker says so in its load reply
        own = ()
    env = worker_environment(os.environ, (*own, *limits.environment))
    env.setdefault("PYTHONUSERBASE", site.getuserbase())
    installed = {os.path.realpath(p) for p in (*site.getsitepackages(), site.getusersitepackages())}
    if os.path.realpath(_PACKAGE_ROOT) not in installed:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    return env


_swept = False


def _remove_orphan_temp_folders() -> None:
    """Once per process: remove the temp folders of workers whose caller died without removing them (killed,
    or os._exit). A folder whose pid lives (ours, or reused) is left alone."""
    global _swept
    if _swept:
        return
    _swept = True
    for folder in Path(tempfile.gettempdir()).glob("edgeaccel-worker-*-*"):
        pid = folder.name.split("-")[2]
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        shutil.rmtree(folder, ignore_errors=True)  # never follows a link the worker may have left inside


def default_output_bytes(model: ModelInfo) -> int:
    """What one run may send back when IsolationLimits.output_bytes is 0. The caller allocates a reply's declared
    size before reading it, so this bounds what a worker can make this process take per channel: 4x the declared
    outputs (at least 64 MiB) when every output has a fixed shape and a numeric type; else (dynamic dimensions,
    strings, nothing declared) 1 GiB, or 4x the declared outputs if more."""
    declared = 4 * sum(_nbytes(t) for t in model.outputs)
    fixed = model.outputs and all(not t.is_dynamic and t.dtype.kind in "biufc" for t in model.outputs)
    return max(64 << 20, declared) if fixed else max(1 << 30, declared)


def _nbytes(spec) -> int:
    count = 1
    for d in spec.shape:
        count *= d if d else 1
    return count * max(spec.dtype.itemsize, 1)


_ERROR_CLASSES = {name: cls for name, cls in vars(errors).items()
                  if isinstance(cls, type) and issubclass(cls, EdgeAccelError)}


_TEXT = 4000  # the characters of a worker's error message or hint passed on: its words, not its megabytes


def _mib(count: int) -> str:
    return f"{count / 2**20:.0f} MiB"


def _as_error(reply: dict, runtime: str, address_space: int, open_files: int = 0) -> EdgeAccelError:
    """The worker's error as the same edgeaccel class; only names of that tree are honoured."""
    cls = _ERROR_CLASSES.get(str(reply.get("error")), errors.InferenceError)
    message = str(reply.get("message") or f"{cls.__name__} in the worker, with no message")[:_TEXT]
    hint = reply.get("hint")
    hint = str(hint)[:_TEXT] if hint else None
    if address_space and (errors.looks_out_of_memory(message) or "no message" in message):
        hint = (f"the worker's address space is limited to {address_space / 2**30:g} GiB and the runtime "
                "could not get memory (or a thread) under it: raise IsolationLimits(memory_bytes=...) if the "
                "model is that large" + (f"; otherwise: {hint}" if hint else ""))
    if open_files and ("Too many open files" in message or "EMFILE" in message):
        hint = (f"the worker may keep {open_files} files open (IsolationLimits(open_files={open_files})): raise it "
                "if the runtime needs more" + (f"; otherwise: {hint}" if hint else ""))
    if issubclass(cls, errors.ExecutorError):
        return cls(message, runtime=str(reply.get("runtime") or runtime), hint=hint)
    if issubclass(cls, (errors.NoExecutorError, errors.ConfigError)):
        return errors.ModelLoadError(message, runtime=runtime, hint=hint)
    return cls(message, hint=hint)
