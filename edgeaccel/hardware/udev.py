"""Which udev rules give a device to a group (or open it to everyone) before the device is there.

A device node's permissions are set by udev when the device appears; with no device plugged in, the rules are
the only way to tell whether this user will be able to open it. Rules live in /etc/udev/rules.d (the admin's,
which override a file of the same name elsewhere), /run/udev/rules.d, /usr/lib/udev/rules.d and
/lib/udev/rules.d (packages', e.g. libedgetpu's for the Coral USB Accelerator). Only GROUP= and MODE=
assignments on the matching line are read: enough for the rules device vendors ship.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..devfs import Tree

RULE_DIRS = ("/etc/udev/rules.d", "/run/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d")


@dataclass(frozen=True)
class UdevGrant:
    """One rule line that matches the device: the group it gives the node to and the mode it sets."""

    rule_file: str
    group: str | None
    mode: str | None  # "0660"

    @property
    def open_to_all(self) -> bool:
        """MODE gives read and write to everyone (0666)."""
        return self.mode is not None and self.mode[-1:] in ("6", "7")


def rule_files(tree: Tree) -> list[str]:
    """The rule files udev reads, one per name, the earlier directory of RULE_DIRS winning."""
    chosen: dict[str, str] = {}
    for directory in RULE_DIRS:
        names, _ = tree.listdir(directory)
        for name in names:
            if name.endswith(".rules"):
                chosen.setdefault(name, f"{directory}/{name}")
    return [chosen[name] for name in sorted(chosen)]


def grants(tree: Tree, matches: re.Pattern) -> list[UdevGrant]:
    """Every rule line that ``matches`` (a device's match keys) and assigns GROUP or MODE."""
    found = []
    for path in rule_files(tree):
        for line in (tree.read(path).text or "").splitlines():
            line = line.strip()
            if not line or line.startswith("#") or not matches.search(line):
                continue
            group = re.search(r'\bGROUP\s*:?=\s*"([^"]+)"', line)
            mode = re.search(r'\bMODE\s*:?=\s*"(0?[0-7]{3})"', line)
            if group or mode:
                found.append(UdevGrant(path, group.group(1) if group else None,
                                       mode.group(1).zfill(4) if mode else None))
    return found
