"""The sandbox an isolated worker enters before it reads the model: each layer where the kernel offers it.

Applied by the worker (``apply``) after it received its load request and before it imports a runtime or
opens the model, while it still has one thread (Landlock binds the calling thread and its future children;
a new user namespace needs a single-threaded process). In this order:

1. a new network namespace (``unshare(CLONE_NEWNET)``, with a new user namespace when the caller is not
   privileged): the worker sees only a loopback device that is down, so nothing on the host or the network;
   with it a mount namespace where one can be had, in which the temp folder is bound onto itself nodev;
2. resource limits: open files (RLIMIT_NOFILE), CPU seconds (RLIMIT_CPU) when asked; no real-time priority
   and no nice below the inherited one (RLIMIT_RTPRIO, RLIMIT_NICE: 0);
3. capabilities: every one dropped, from the effective, permitted, inheritable and ambient sets and, where
   the worker may (root, or inside its own user namespace), from the bounding set. A worker of a root caller
   keeps uid 0 but none of root's powers: no mknod of devices, no raising its own limits, no syslog,
   sethostname or clock setting, no real-time scheduling;
4. ``no_new_privs``: no set-uid or file-capability gain, ever (and what lets an unprivileged process seccomp);
5. Landlock (kernel >= 5.13): readable only the model's own files, what is under the interpreter's and
   runtimes' folders and a few system files; writable only the worker's private temp folder, where no device
   node may be made; with ABI >= 4
   no TCP bind or connect; with ABI >= 6 no signals to, and no abstract Unix sockets of, processes outside;
6. seccomp (a denylist written as classic BPF): no execve, no new processes (fork, vfork, clone without
   CLONE_THREAD; clone3 answers ENOSYS so that glibc falls back to clone for threads), no ptrace or reading
   other processes' memory, no socket() at all and socketpair() for AF_UNIX only, no mount, namespaces,
   kernel modules, bpf, io_uring, keyrings, perf events; nothing that acts on the system (syslog, host and
   domain names, the clocks, device nodes, terminal ioctls that inject input or take the console), and the
   calls that take a process id (limits, priority, scheduling, affinity, signals, page migration) only on the
   worker itself: a process of the same user passes the kernel's own checks, so the host would not be
   protected by dropped capabilities alone. Runtimes call none of these to load or run a model, or call them
   on themselves with pid 0 (the tests run all three under it).

``mode``: "auto" uses what exists and says what is missing, "require" refuses to load without every layer,
"off" applies none. The report says, per layer, "active" or why not.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import struct
import sys
from pathlib import Path

MODES = ("auto", "require", "off")
LAYERS = ("network_namespace", "capabilities", "no_new_privs", "landlock_files", "landlock_network", "landlock_scope",
          "seccomp")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

# -- Landlock (include/uapi/linux/landlock.h) ------------------------------------------------------------------
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64 alike
_LANDLOCK_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_MAKE_CHAR, _MAKE_BLOCK = 1 << 6, 1 << 11  # device nodes: never, not even in the worker's own temp folder
_REFER, _TRUNCATE, _IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | _TRUNCATE | _IOCTL_DEV  # the rights a rule on a file may grant
_READ = READ_FILE | READ_DIR

# -- seccomp ---------------------------------------------------------------------------------------------------
_PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS = 38, 39
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE_THREAD, _CLONE_NEWUSER, _CLONE_NEWNET, _CLONE_NEWNS = 0x00010000, 0x10000000, 0x40000000, 0x00020000
_CLONE_NEWIPC, _CLONE_NEWUTS = 0x08000000, 0x04000000
_NAMESPACES = {"user": _CLONE_NEWUSER, "net": _CLONE_NEWNET, "mnt": _CLONE_NEWNS, "ipc": _CLONE_NEWIPC,
               "uts": _CLONE_NEWUTS}
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
# statvfs's ST_* flag -> the MS_* flag a remount keeps: read-only, noexec, and the access-time ones
_KEPT_FLAGS = ((1, _MS_RDONLY), (8, _MS_NOEXEC), (1024, 1024), (2048, 2048), (4096, 1 << 21))
_AF_UNIX = 1

# Per architecture: (AUDIT_ARCH, syscall numbers refused with EPERM, numbers of the calls decided on their
# arguments). "clone", "clone3", "socket" and "socketpair" are among the first but decided apart (see the program).
_SYSCALLS = {
    "x86_64": (0xC000003E, {
        "execve": 59, "execveat": 322, "fork": 57, "vfork": 58, "clone": 56, "clone3": 435, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
        "socket": 41, "socketpair": 53, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
        "unshare": 272, "setns": 308, "fsopen": 430, "fsmount": 432, "move_mount": 429, "open_tree": 428,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_by_handle_at": 304,
        "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "iopl": 172, "ioperm": 173,
        "settimeofday": 164, "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "personality": 135,
        "syslog": 103, "sethostname": 170, "setdomainname": 171, "vhangup": 153, "quotactl": 179,
        "lookup_dcookie": 212, "fanotify_init": 300, "uselib": 134, "nfsservctl": 180,
        "tkill": 200, "migrate_pages": 256, "process_madvise": 440, "process_mrelease": 448,
        "pidfd_send_signal": 424, "fsconfig": 431, "fspick": 433, "mount_setattr": 442, "quotactl_fd": 443,
        "modify_ldt": 154,
    }, {
        "prlimit64": 302, "setpriority": 141, "sched_setparam": 142, "sched_setscheduler": 144,
        "sched_setaffinity": 203, "sched_setattr": 314, "ioprio_set": 251, "move_pages": 279, "pidfd_open": 434,
        "kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297, "mknod": 133, "mknodat": 259,
        "ioctl": 16, "fcntl": 72,
    }),
    "aarch64": (0xC00000B7, {
        "execve": 221, "execveat": 281, "clone": 220, "clone3": 435, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272,
        "socket": 198, "socketpair": 199, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "unshare": 97, "setns": 268, "fsopen": 430, "fsmount": 432, "move_mount": 429, "open_tree": 428,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_by_handle_at": 265,
        "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89,
        "settimeofday": 170, "clock_settime": 112, "adjtimex": 171, "clock_adjtime": 266, "personality": 92,
        "syslog": 116, "sethostname": 161, "setdomainname": 162, "vhangup": 58, "quotactl": 60,
        "lookup_dcookie": 18, "fanotify_init": 262,
        "tkill": 130, "migrate_pages": 238, "process_madvise": 440, "process_mrelease": 448,
        "pidfd_send_signal": 424, "fsconfig": 431, "fspick": 433, "mount_setattr": 442, "quotactl_fd": 443,
    }, {
        "prlimit64": 261, "setpriority": 140, "sched_setparam": 118, "sched_setscheduler": 119,
        "sched_setaffinity": 122, "sched_setattr": 274, "ioprio_set": 30, "move_pages": 239, "pidfd_open": 434,
        "kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240, "mknodat": 33,
        "ioctl": 29, "fcntl": 25,
    }),
}

# Calls that name a process: allowed on the worker itself only. name -> (the argument holding the pid, whether
# 0 means the caller there). Same-user processes pass the kernel's permission checks, capabilities or not.
_ON_SELF = {"prlimit64": (0, True), "sched_setparam": (0, True), "sched_setscheduler": (0, True),
            "sched_setaffinity": (0, True), "sched_setattr": (0, True), "move_pages": (0, True),
            "pidfd_open": (0, False), "kill": (0, False), "tgkill": (0, False), "rt_sigqueueinfo": (0, False),
            "rt_tgsigqueueinfo": (0, False), "setpriority": (1, True), "ioprio_set": (1, True)}
# setpriority(which, who, ...) and ioprio_set(which, who, ...): "who" is a process only when "which" says so
# (PRIO_PROCESS, IOPRIO_WHO_PROCESS); a process group or a whole user reaches the host
_WHICH_PROCESS = {"setpriority": 0, "ioprio_set": 1}
# sched_setscheduler policies refused: SCHED_FIFO, SCHED_RR, SCHED_DEADLINE, with or without SCHED_RESET_ON_FORK
# (sched_setattr's policy is in memory the filter cannot read: there RLIMIT_RTPRIO 0 and no CAP_SYS_NICE refuse)
_REALTIME = (1, 2, 6, 0x40000001, 0x40000002, 0x40000006)
# ioctls on terminals that reach beyond the worker: inject input (TIOCSTI), the console (TIOCLINUX, TIOCCONS),
# the line discipline (TIOCSETD), take a controlling terminal (TIOCSCTTY), hang it up (TIOCVHANGUP)
# and FIOSETOWN, SIOCSPGRP: like fcntl's F_SETOWN, they make the kernel signal a process of the worker's choosing
# (SIGIO, whose default action kills) whenever a file it holds, such as the socket shared with the host, is ready
_TTY_IOCTLS = (0x5412, 0x541C, 0x541D, 0x5423, 0x540E, 0x5437, 0x8901, 0x8902)
_FCNTL_OWNER = (8, 15)  # F_SETOWN, F_SETOWN_EX
_S_IFCHR_BIT = 0o020000  # set in S_IFCHR and S_IFBLK (and S_IFLNK, which mknod refuses anyway), clear in FIFOs
_MKNOD_MODE_ARG = {"mknod": 1, "mknodat": 2}
_RLIMIT_NICE, _RLIMIT_RTPRIO = 13, 14

# Read-only system files the runtimes and the dynamic loader read; the rest of /etc and /proc stays closed.
_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                "/etc/localtime", "/proc/self", "/proc/thread-self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
                "/sys/devices/system/cpu", "/sys/devices/system/node", "/sys/fs/cgroup", "/dev/urandom",
                "/dev/random", "/dev/zero")
_SYSTEM_WRITE = ("/dev/null",)
# Accelerator device nodes, read/write with ioctls, for workers off the CPU
_DEVICES = ("/dev/dri", "/dev/accel", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0", "/dev/apex_0",
            "/dev/bus/usb", "/dev/kfd")


class SandboxError(Exception):
    """sandbox='require' and a layer could not be had (the message says which and why)."""


def apply(mode: str, model_files: tuple[str, ...], temp_folder: str, readable: tuple[str, ...] = (),
          open_files: int = 0, cpu_seconds: float = 0, on_cpu: bool = True) -> dict:
    """Enter the sandbox; returns {"mode", "active": [...], "missing": {layer: why}, "limits": {...}}.
    Raises SandboxError in "require" mode when any layer is missing (after trying them all, so the message
    lists every missing one)."""
    report: dict = {"mode": mode, "active": [], "missing": {}, "temp_folder": temp_folder,
                    "limits": _limit_resources(open_files, cpu_seconds)}
    if mode == "off":
        report["missing"] = {layer: "sandbox='off'" for layer in LAYERS}
        return report

    def layer(name: str, why_not: str | None) -> None:
        if why_not is None:
            report["active"].append(name)
        else:
            report["missing"][name] = why_not

    network, namespaces = _new_network_namespace()  # needs CAP_SYS_ADMIN as root: before the drop
    layer("network_namespace", network)
    report["namespaces"] = [name for name, flag in _NAMESPACES.items() if namespaces & flag]
    report["temp_folder_mount"] = _mount_temp_folder_nodev(temp_folder) if namespaces & _CLONE_NEWNS else \
        "as the host's (no mount namespace of its own here)"
    report["limits"].update(_no_realtime())
    dropped, report["capability_bounding_set"] = _drop_capabilities()
    layer("capabilities", dropped)
    layer("no_new_privs", _no_new_privs())
    landlock = _landlock(_readable_paths(model_files, readable), (temp_folder,), on_cpu)
    for name in ("landlock_files", "landlock_network", "landlock_scope"):
        layer(name, landlock.get(name))
    layer("seccomp", _seccomp())
    if mode == "require" and report["missing"]:
        raise SandboxError("; ".join(f"{k}: {v}" for k, v in report["missing"].items()))
    return report


def _limit_resources(open_files: int, cpu_seconds: float) -> dict:
    applied = {}
    if open_files:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = open_files if hard == resource.RLIM_INFINITY else min(open_files, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        applied["open_files"] = limit
    if cpu_seconds:
        # soft: SIGXCPU (the caller names the limit); hard one second later: SIGKILL if SIGXCPU is caught
        seconds = max(1, int(round(cpu_seconds)))
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
        applied["cpu_seconds"] = seconds
    return applied


def _no_realtime() -> dict:
    """RLIMIT_RTPRIO 0: no real-time policy (SCHED_FIFO, SCHED_RR) without CAP_SYS_NICE, which is dropped next;
    RLIMIT_NICE 0: no nice value below the inherited one. Hard limits: the worker cannot raise them again."""
    applied = {}
    for name, which in (("realtime_priority", _RLIMIT_RTPRIO), ("nice", _RLIMIT_NICE)):
        try:
            resource.setrlimit(which, (0, 0))
            applied[name] = 0
        except (OSError, ValueError):
            pass
    return applied


# -- capabilities ------------------------------------------------------------------------------------------------
_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAPSET = {"x86_64": 126, "aarch64": 91}


def _drop_capabilities() -> tuple[str | None, str]:
    """Empty every capability set of this process; returns (why not, or None; what became of the bounding set).
    The bounding set needs CAP_SETPCAP to change: a root worker (or one in its own user namespace) empties it;
    another keeps it, harmlessly: with no_new_privs no execve can regain what it bounds (and execve is refused)."""
    bounding = "empty"
    for cap in range(_last_capability() + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            bounding = f"kept ({_errno_text('PR_CAPBSET_DROP')}; no_new_privs keeps it from being used)"
            break
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3: none to clear
    header = ctypes.create_string_buffer(struct.pack("<Ii", _CAPABILITY_VERSION_3, 0), 8)
    data = ctypes.create_string_buffer(24)  # two struct __user_cap_data_struct, all zero
    number = _CAPSET.get(platform.machine())
    done = _libc.syscall(number, header, data) if number else _libc.capset(header, data)
    if done != 0:
        return _errno_text("capset"), bounding
    held = {k: hex(v) for k, v in _capability_sets().items() if v and k != "CapBnd"}
    if held:
        return f"still held after capset: {held}", bounding
    return None, bounding


def _last_capability() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 40  # Linux 6.x's CAP_CHECKPOINT_RESTORE


def _capability_sets() -> dict[str, int]:
    """CapInh, CapPrm, CapEff, CapBnd, CapAmb of this process (from /proc/self/status)."""
    sets = {}
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Cap"):
                    key, value = line.decode().split(":")
                    sets[key] = int(value, 16)
    except (OSError, ValueError):
        pass
    return sets


def _errno_text(what: str) -> str:
    code = ctypes.get_errno()
    return f"{what} failed: {errno.errorcode.get(code, code)} ({os.strerror(code)})"


# -- network namespace -------------------------------------------------------------------------------------------
def _new_network_namespace() -> tuple[str | None, int]:
    """(why no network namespace, or None; the CLONE_NEW* flags of the namespaces the worker now has)."""
    failed = []
    # Unprivileged: a user namespace of our own (where the kernel allows it: unprivileged_userns_clone,
    # max_user_namespaces, AppArmor's restrict_unprivileged_userns). File access keeps the real uid.
    # with it, where they can be had: its own mounts (the temp folder nodev), its own System V IPC and POSIX message
    # queues (not the host's shared memory segments, semaphores and queues of the same user), its own host name
    more = _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWUTS
    for flags in (_CLONE_NEWNET | more, _CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET | more,
                  _CLONE_NEWUSER | _CLONE_NEWNET):
        if _libc.unshare(flags) == 0:
            return None, flags
        names = "|".join(n for n, f in _NAMESPACES.items() if flags & f)
        failed.append(_errno_text(f"unshare({names})"))
    return "; ".join(failed) + " (unprivileged user namespaces off?)", 0


def _mount_temp_folder_nodev(temp_folder: str) -> str:
    """In the worker's own mount namespace, the temp folder bound onto itself nodev and nosuid: a device node
    there opens nothing, whatever else failed. Returns how it is mounted, or why it is not."""
    if _libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:  # nothing reaches the host
        return _errno_text("mount(MS_PRIVATE)")
    path = temp_folder.encode()
    if _libc.mount(path, path, None, ctypes.c_ulong(_MS_BIND), None) != 0:
        return _errno_text("mount(MS_BIND)")
    # a remount in a user namespace must keep the flags the mount already has (the kernel locks them)
    kept = os.statvfs(temp_folder).f_flag
    flags = _MS_BIND | _MS_REMOUNT | _MS_NODEV | _MS_NOSUID
    flags |= sum(ms for st, ms in _KEPT_FLAGS if kept & st)
    if _libc.mount(None, path, None, ctypes.c_ulong(flags), None) != 0:
        return _errno_text("mount(MS_REMOUNT|MS_NODEV)")
    return "nodev,nosuid"


# -- no_new_privs ------------------------------------------------------------------------------------------------
def _no_new_privs() -> str | None:
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return _errno_text("prctl(PR_SET_NO_NEW_PRIVS)")
    return None


# -- Landlock ----------------------------------------------------------------------------------------------------
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where it has none (or it is disabled at boot)."""
    if platform.machine() not in _SYSCALLS:
        return 0
    version = _libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _readable_paths(model_files: tuple[str, ...], extra: tuple[str, ...]) -> list[str]:
    """The model's files (with its weights / external data), edgeaccel's package, the interpreter's prefixes
    and every site-packages / stdlib folder on sys.path, system library folders, and ``extra``
    (IsolationLimits.readable). Not sys.path entries in general: the app's own folder is often one."""
    package = str(Path(__file__).resolve().parents[1])
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    stdlib_like = [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p
                                                 or any(p.startswith(x) for x in prefixes))]
    return [*model_files, package, *sorted(prefixes), *stdlib_like, *_SYSTEM_READ, *extra]


def _landlock(readable: list[str], writable: tuple[str, ...], on_cpu: bool) -> dict:
    """Restrict this thread (and threads it starts later) to the given paths; returns {layer: why not} for
    the three Landlock layers that could not be had, nothing for those that are active."""
    abi = landlock_abi()
    names = ("landlock_files", "landlock_network", "landlock_scope")
    if abi < 1:
        why = (f"no Landlock on {platform.machine()} or on this kernel ({platform.release()}; needs Linux "
               ">= 5.13 with landlock in the lsm= boot list)")
        return dict.fromkeys(names, why)
    threads = _thread_count()
    if threads != 1:  # Landlock binds the calling thread only: others would stay unrestricted
        return dict.fromkeys(names, f"the worker already runs {threads} threads")
    fs = _FS_ABI1 | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0) | (_IOCTL_DEV if abi >= 5 else 0)
    net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("<QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_LANDLOCK_CREATE_RULESET, buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        return dict.fromkeys(names, _errno_text("landlock_create_ruleset"))
    try:
        for path in readable:
            _allow(ruleset, path, (_READ | EXECUTE) & fs)
        for path in _SYSTEM_WRITE:
            _allow(ruleset, path, (_READ | WRITE_FILE | _TRUNCATE) & fs)
        for path in writable:
            _allow(ruleset, path, fs & ~(_MAKE_CHAR | _MAKE_BLOCK))
        if not on_cpu:
            for path in _DEVICES:
                _allow(ruleset, path, (_READ | WRITE_FILE | _IOCTL_DEV) & fs)
        if _libc.syscall(_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return dict.fromkeys(names, _errno_text("landlock_restrict_self"))
    finally:
        os.close(ruleset)
    missing = {}
    if not net:
        missing["landlock_network"] = f"Landlock ABI {abi} < 4 has no TCP rules (the seccomp filter still " \
                                      "refuses non-Unix sockets)"
    if not scoped:
        missing["landlock_scope"] = f"Landlock ABI {abi} < 6 cannot scope signals and abstract Unix sockets"
    return missing


def _allow(ruleset: int, path: str, rights: int) -> None:
    """One path_beneath rule; a path that does not exist here is skipped (a system without /lib64)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY
        rule = struct.pack("<Qi", rights, fd)  # struct landlock_path_beneath_attr is packed: 12 bytes
        buf = ctypes.create_string_buffer(rule, len(rule))
        if _libc.syscall(_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), buf,
                         ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _thread_count() -> int:
    try:
        with open("/proc/self/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


# -- seccomp -----------------------------------------------------------------------------------------------------
_ARCH, _NR = 4, 0  # offsets in struct seccomp_data


def _arg(i: int) -> int:
    """Offset of the low 32 bits of argument ``i`` (little-endian on x86_64 and aarch64). pids, flags, modes and
    ioctl numbers are 32-bit in the kernel's own signatures: the high half is never read there."""
    return 16 + 8 * i


def seccomp_program(machine: str, pid: int | None = None) -> bytes:
    """The filter as struct sock_filter[] bytes: arch check, then each refused call, then the calls decided on
    their arguments, then allow. ``pid``: the worker's (default this process's), the one process that the calls
    naming a process may act on."""
    pid = os.getpid() if pid is None else pid
    arch, numbers, decided = _SYSCALLS[machine]
    eperm, enosys, eafnosupport = (_RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS,
                                   _RET_ERRNO | errno.EAFNOSUPPORT)
    # (op, k, jump if true, jump if false): a jump is a label, or 0 for the next instruction; ("label", name)
    code: list = [(_LD_W_ABS, _ARCH), (_JEQ, arch, 0, "kill_process"),  # another ABI (int 0x80) never gets past this
                  (_LD_W_ABS, _NR)]
    if machine == "x86_64":
        code.append((_JGE, 0x40000000, "eperm", 0))  # the x32 ABI's numbers
    special = {"clone", "clone3", "socket", "socketpair"}
    code += [(_JEQ, nr, "eperm", 0) for name, nr in numbers.items() if name not in special]
    code.append((_JEQ, numbers["clone3"], "enosys", 0))  # glibc then makes threads with clone(CLONE_THREAD)
    code += [(_JEQ, numbers["clone"], "clone", 0), (_JEQ, numbers["socket"], "socket", 0),
             (_JEQ, numbers["socketpair"], "socketpair", 0)]
    code += [(_JEQ, nr, name, 0) for name, nr in decided.items()]
    code.append((_RET, _RET_ALLOW))
    # clone: a thread (CLONE_THREAD in flags, the first argument) or nothing
    code += [("label", "clone"), (_LD_W_ABS, _arg(0)), (_JSET, _CLONE_THREAD, "allow", "eperm")]
    # socket(): none at all. The worker's channels arrive made (SCM_RIGHTS). AF_UNIX is refused too: Landlock
    # does not govern connect() to a named Unix socket (/run/docker.sock, a D-Bus bus), nor a datagram sent
    # to one, so the only safe Unix socket is one the worker cannot point anywhere. Other families: "no network
    # here" (EAFNOSUPPORT), which runtimes take in their stride.
    code += [("label", "socket"), (_LD_W_ABS, _arg(0)), (_JEQ, _AF_UNIX, "eperm", "eafnosupport")]
    # socketpair(): AF_UNIX only (a pair connected to itself reaches nothing)
    code += [("label", "socketpair"), (_LD_W_ABS, _arg(0)), (_JEQ, _AF_UNIX, "allow", "eafnosupport")]
    for name in decided:
        code.append(("label", name))
        if name in _MKNOD_MODE_ARG:  # a FIFO or a file, never a device node
            code += [(_LD_W_ABS, _arg(_MKNOD_MODE_ARG[name])), (_JSET, _S_IFCHR_BIT, "eperm", "allow")]
            continue
        if name == "fcntl":  # never an owner to signal: that could be the host (its own SIGIO is of no use here)
            code.append((_LD_W_ABS, _arg(1)))
            code += [(_JEQ, command, "eperm", 0) for command in _FCNTL_OWNER]
            code.append((_RET, _RET_ALLOW))
            continue
        if name == "ioctl":
            code.append((_LD_W_ABS, _arg(1)))
            code += [(_JEQ, request, "eperm", 0) for request in _TTY_IOCTLS]
            code.append((_RET, _RET_ALLOW))
            continue
        pid_arg, zero_is_self = _ON_SELF[name]
        if name in _WHICH_PROCESS:
            code += [(_LD_W_ABS, _arg(0)), (_JEQ, _WHICH_PROCESS[name], 0, "eperm")]
        then = "policy" if name == "sched_setscheduler" else "allow"
        code += [(_LD_W_ABS, _arg(pid_arg)), (_JEQ, pid, then, 0)]
        if zero_is_self:
            code.append((_JEQ, 0, then, 0))
        code.append((_RET, eperm))
    code += [("label", "policy"), (_LD_W_ABS, _arg(1))]
    code += [(_JEQ, policy, "eperm", 0) for policy in _REALTIME]
    code += [("label", "allow"), (_RET, _RET_ALLOW), ("label", "eperm"), (_RET, eperm),
             ("label", "enosys"), (_RET, enosys), ("label", "eafnosupport"), (_RET, eafnosupport),
             ("label", "kill_process"), (_RET, _RET_KILL_PROCESS)]
    return _assemble(code)


def _assemble(code: list) -> bytes:
    """Labels to relative jumps (classic BPF jumps forward only, by at most 255 instructions)."""
    at, pc = {}, 0
    for item in code:
        if item[0] == "label":
            if item[1] in at:
                raise ValueError(f"seccomp label {item[1]!r} defined twice")
            at[item[1]] = pc
        else:
            pc += 1
    out, pc = [], 0
    for item in code:
        if item[0] == "label":
            continue
        op, k, jt, jf = (*item, 0, 0)[:4]

        def offset(target, pc=pc):  # called in this iteration: bind its pc
            if target == 0:
                return 0
            distance = at[target] - pc - 1
            if not 0 <= distance <= 255:
                raise ValueError(f"seccomp jump to {target!r} out of range ({distance})")
            return distance

        out.append(struct.pack("<HBBI", op, offset(jt), offset(jf), k))
        pc += 1
    return b"".join(out)


def _seccomp() -> str | None:
    machine = platform.machine()
    if machine not in _SYSCALLS:
        return f"no seccomp filter written for {machine} (x86_64 and aarch64 only)"
    program = seccomp_program(machine)
    filters = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("<HxxxxxxQ", len(program) // 8, ctypes.addressof(filters))  # struct sock_fprog
    fprog_buf = ctypes.create_string_buffer(fprog, len(fprog))
    seccomp_nr = 317 if machine == "x86_64" else 277
    # TSYNC: every thread of the worker gets the filter, should a runtime have started one already
    if _libc.syscall(seccomp_nr, ctypes.c_uint(_SECCOMP_SET_MODE_FILTER), ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC),
                     fprog_buf) != 0:
        return _errno_text("seccomp(SECCOMP_SET_MODE_FILTER)")
    return None
