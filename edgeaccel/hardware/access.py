"""Can this user open a device node (or read a counter file), and if not, what grants it?

For the running process the answer is ``os.access``. A survey may also be made for another account
(``Identity``), for example to check a service user or, in tests, an unprivileged user on a fake tree
while the tests run as root (where chmod denies nothing): then the answer comes from the file's mode
bits, owner and group, the way the kernel decides it without ACLs.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, Tree, as_tree


@dataclass(frozen=True)
class Identity:
    """A user id and the group ids it holds."""

    uid: int
    gids: frozenset[int]

    @classmethod
    def current(cls) -> Identity:
        try:
            gids = frozenset({os.getegid(), *os.getgroups()})
            return cls(os.geteuid(), gids)
        except (AttributeError, OSError):  # not POSIX
            return cls(-1, frozenset())


@dataclass(frozen=True)
class DeviceNode:
    """A device file an accelerator is used through."""

    path: str  # as on the device, e.g. "/dev/apex_0"
    exists: bool
    readable: bool = False
    writable: bool = False
    group: str | None = None  # owning group, by name where /etc/group names it
    mode: str | None = None  # permission bits, e.g. "0660"

    @property
    def usable(self) -> bool:
        return self.exists and self.readable and self.writable

    def to_dict(self) -> dict:
        return {"path": self.path, "exists": self.exists, "readable": self.readable, "writable": self.writable,
                "group": self.group, "mode": self.mode}


def group_names(tree: Tree) -> dict[int, str]:
    """gid -> name from the tree's /etc/group (pure parsing of ``name:x:gid:members`` lines)."""
    read = tree.read("/etc/group")
    return parse_group_file(read.text or "")


def parse_group_file(text: str) -> dict[int, str]:
    names: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) >= 3 and parts[0] and not parts[0].startswith("#") and parts[2].isdigit():
            names.setdefault(int(parts[2]), parts[0])
    return names


def allowed(mode: int, uid: int, gid: int, identity: Identity, want: int) -> bool:
    """Whether ``identity`` gets ``want`` (os.R_OK / os.W_OK) on a file with these owner bits."""
    if identity.uid == 0:
        return True
    if uid == identity.uid:
        bits = {os.R_OK: stat.S_IRUSR, os.W_OK: stat.S_IWUSR}[want]
    elif gid in identity.gids:
        bits = {os.R_OK: stat.S_IRGRP, os.W_OK: stat.S_IWGRP}[want]
    else:
        bits = {os.R_OK: stat.S_IROTH, os.W_OK: stat.S_IWOTH}[want]
    return bool(mode & bits)


class Access:
    """Answers access questions for one identity on one tree (None: the running process)."""

    def __init__(self, root: Root = Path("/"), identity: Identity | None = None) -> None:
        self.tree = as_tree(root)
        self.identity = identity
        self._groups: dict[int, str] | None = None

    def _group(self, gid: int) -> str:
        if self._groups is None:
            self._groups = group_names(self.tree)
        if gid not in self._groups and self.tree.is_real:  # groups from NSS (LDAP, systemd-userdb)
            try:
                import grp

                self._groups[gid] = grp.getgrgid(gid).gr_name
            except Exception:
                self._groups[gid] = str(gid)
        return self._groups.get(gid, str(gid))

    def can(self, target: str, want: int) -> bool:
        local = self.tree.path(target)
        try:
            if self.identity is None:
                if os.access in os.supports_effective_ids:
                    return os.access(local, want, effective_ids=True)
                return os.access(local, want)
            st = os.stat(local)
            return allowed(st.st_mode, st.st_uid, st.st_gid, self.identity, want)
        except Exception:
            return False

    def node(self, target: str) -> DeviceNode:
        local = self.tree.path(target)
        try:
            st = os.stat(local)
        except Exception:
            return DeviceNode(target, exists=False)
        return DeviceNode(
            target,
            exists=True,
            readable=self.can(target, os.R_OK),
            writable=self.can(target, os.W_OK),
            group=self._group(st.st_gid),
            mode=f"{stat.S_IMODE(st.st_mode):04o}",
        )


def permission_fix(node: DeviceNode, documented: str) -> str:
    """What grants access to ``node``: joining the group that owns it when that group may read and write
    it, else the documented udev rule (or group) for that kind of device."""
    mode = int(node.mode, 8) if node.mode else 0
    group_rw = mode & (stat.S_IRGRP | stat.S_IWGRP) == (stat.S_IRGRP | stat.S_IWGRP)
    if node.group and node.group not in ("root", "0") and group_rw:
        return f"add the user to group '{node.group}': sudo usermod -aG {node.group} $USER, then log in again"
    return documented
