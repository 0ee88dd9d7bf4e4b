"""Is a shared library (the Edge TPU delegate) findable by the dynamic loader of the probed root?

Searched without loading anything: the loader cache /etc/ld.so.cache, the directories of
/etc/ld.so.conf (and its includes), the standard and multiarch library directories, and, on the real
root only, LD_LIBRARY_PATH. macOS and Windows (real root only) use their usual directories and PATH.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..devfs import Root, Tree, as_tree

# The delegate's file name per platform (LiteRT's load_delegate("libedgetpu.so.1") and the Coral docs).
EDGETPU_LIBRARY = {"linux": "libedgetpu.so.1", "darwin": "libedgetpu.1.dylib", "win32": "edgetpu.dll"}

MULTIARCH = ("x86_64-linux-gnu", "aarch64-linux-gnu", "arm-linux-gnueabihf")
LINUX_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib",
              *(f"{base}/{arch}" for arch in MULTIARCH for base in ("/lib", "/usr/lib", "/usr/local/lib")))
DARWIN_DIRS = ("/usr/local/lib", "/opt/homebrew/lib", "/usr/lib")


@dataclass(frozen=True)
class LibraryLookup:
    purpose: str
    filename: str
    path: str | None  # where it is, as on the device
    found_by: str | None  # "/etc/ld.so.cache", "directory /usr/lib", "LD_LIBRARY_PATH", "PATH"
    searched: tuple[str, ...]
    reason: str | None = None

    @property
    def found(self) -> bool:
        return self.path is not None

    def to_dict(self) -> dict:
        return {"purpose": self.purpose, "filename": self.filename, "found": self.found, "path": self.path,
                "found_by": self.found_by, "searched": list(self.searched), "reason": self.reason}


def parse_ld_so_conf(text: str) -> tuple[list[str], list[str]]:
    """(directories, include patterns) of an ld.so.conf file."""
    dirs, includes = [], []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include "):
            includes.extend(line.split()[1:])
        elif line.startswith("/"):
            dirs.append(line)
    return dirs, includes


def parse_ld_so_cache(text: str) -> dict[str, str]:
    """basename -> full path for every path string in a glibc ld.so.cache (its string table holds each
    library's soname and its full path, NUL-terminated)."""
    found: dict[str, str] = {}
    for item in text.split("\x00"):
        if item.startswith("/") and item.isprintable() and "/lib" in item:
            found.setdefault(item.rsplit("/", 1)[-1], item)
    return found


def _conf_dirs(tree: Tree) -> list[str]:
    dirs: list[str] = []
    pending = ["/etc/ld.so.conf"]
    seen = set()
    while pending and len(seen) < 64:  # includes may include; bound it
        conf = pending.pop(0)
        if conf in seen:
            continue
        seen.add(conf)
        found, includes = parse_ld_so_conf(tree.read(conf).text or "")
        dirs.extend(found)
        for pattern in includes:
            pattern = pattern if pattern.startswith("/") else f"/etc/{pattern}"
            local = sorted(glob.glob(str(tree.path(pattern))))
            pending.extend("/" + os.path.relpath(p, tree.root).replace(os.sep, "/") for p in local)
    return dirs


def find_library(tree: Tree, filename: str, purpose: str) -> LibraryLookup:
    platform = sys.platform if tree.is_real else "linux"
    searched: list[str] = []
    if platform.startswith("linux"):
        cache = parse_ld_so_cache(tree.read("/etc/ld.so.cache", limit=16 << 20).text or "")
        searched.append("/etc/ld.so.cache")
        if filename in cache and tree.exists(cache[filename]):
            return LibraryLookup(purpose, filename, cache[filename], "/etc/ld.so.cache", tuple(searched))
        env = os.environ.get("LD_LIBRARY_PATH", "") if tree.is_real else ""
        candidates = [("LD_LIBRARY_PATH", d) for d in env.split(":") if d]
        candidates += [("/etc/ld.so.conf", d) for d in _conf_dirs(tree)]
        candidates += [("standard directories", d) for d in LINUX_DIRS]
    elif platform == "darwin":
        env = os.environ.get("DYLD_LIBRARY_PATH", "")
        candidates = [("DYLD_LIBRARY_PATH", d) for d in env.split(":") if d]
        candidates += [("standard directories", d) for d in DARWIN_DIRS]
    else:
        candidates = [("PATH", d) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    for how, directory in candidates:
        if directory in searched:
            continue
        searched.append(directory)
        target = f"{directory.rstrip('/')}/{filename}"
        if tree.exists(target) and not tree.is_dir(target):
            return LibraryLookup(purpose, filename, target, f"{how} ({directory})", tuple(searched))
    if tree.is_real and not platform.startswith("linux"):
        # dyld and the Windows loader have their own rules; ctypes knows them (on Linux it would spawn
        # ldconfig, which the cache lookup above already covers).
        import ctypes.util

        found = ctypes.util.find_library(filename.split(".")[0].removeprefix("lib"))
        if found:
            return LibraryLookup(purpose, filename, found, "ctypes.util.find_library", tuple(searched))
    return LibraryLookup(purpose, filename, None, None, tuple(searched),
                         f"{filename} is not in the loader cache nor in any library directory")


def find_edgetpu_library(root: Root = Path("/")) -> LibraryLookup:
    tree = as_tree(root)
    platform = sys.platform if tree.is_real else "linux"
    name = EDGETPU_LIBRARY.get("linux" if platform.startswith("linux") else platform, EDGETPU_LIBRARY["linux"])
    return find_library(tree, name, "Edge TPU delegate (libedgetpu)")
