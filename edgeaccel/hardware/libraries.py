"""Is a shared library (the Edge TPU delegate) findable by the dynamic loader of the probed root? And which
libraries does a shared library need (an ONNX Runtime GPU provider), and would the loader find them?

Searched without loading anything: the loader cache /etc/ld.so.cache, the directories of
/etc/ld.so.conf (and its includes), the standard and multiarch library directories, and, on the real
root only, LD_LIBRARY_PATH as the process started with it. macOS and Windows (real root only) use their usual
directories and PATH. A library's needs are read from its ELF dynamic section (DT_NEEDED, RUNPATH/RPATH).
"""

from __future__ import annotations

import glob
import os
import struct
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


def _start_environment() -> dict[str, str]:
    """The environment this process started with (Linux): the loader read LD_LIBRARY_PATH then, and a change to
    os.environ afterwards does not reach dlopen. Elsewhere, or unreadable: os.environ."""
    try:
        with open("/proc/self/environ", "rb") as f:
            items = f.read().split(b"\x00")
    except OSError:
        return dict(os.environ)
    return dict(item.decode("utf-8", "replace").split("=", 1) for item in items if b"=" in item)


def find_library(tree: Tree, filename: str, purpose: str) -> LibraryLookup:
    platform = sys.platform if tree.is_real else "linux"
    searched: list[str] = []
    if platform.startswith("linux"):
        cache = parse_ld_so_cache(tree.read("/etc/ld.so.cache", limit=16 << 20).text or "")
        searched.append("/etc/ld.so.cache")
        if filename in cache and tree.exists(cache[filename]):
            return LibraryLookup(purpose, filename, cache[filename], "/etc/ld.so.cache", tuple(searched))
        env = _start_environment().get("LD_LIBRARY_PATH", "") if tree.is_real else ""
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


@dataclass(frozen=True)
class DynamicSection:
    """What the dynamic loader reads from a shared library before it maps it: the sonames it needs
    (DT_NEEDED) and the folders it searches first (DT_RPATH / DT_RUNPATH, ``$ORIGIN`` expanded)."""
    needed: tuple[str, ...]
    search: tuple[str, ...]


def dynamic_section(path: str | Path) -> DynamicSection:
    """Reads an ELF file's dynamic section (32 or 64 bits, either byte order) without loading it.
    ValueError: not an ELF shared object, or a malformed (truncated) one."""
    try:
        return _dynamic_section(path)
    except struct.error as exc:
        raise ValueError(f"{path}: a truncated or malformed ELF file ({exc})") from None


def _dynamic_section(path: str | Path) -> DynamicSection:
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
            raise ValueError(f"{path} is not an ELF file")
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        word = "Q" if wide else "I"
        phoff, = struct.unpack_from(order + word, head, 0x20 if wide else 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 0x36 if wide else 0x2A)
        if phentsize < (56 if wide else 32):
            raise ValueError(f"{path}: program headers of {phentsize} bytes are too small for this ELF class")
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        loads, dynamic = [], None
        for i in range(phnum):
            if wide:
                kind, _, offset, vaddr, _, filesz = struct.unpack_from(order + "IIQQQQ", table, i * phentsize)
            else:
                kind, offset, vaddr, _, filesz = struct.unpack_from(order + "IIIII", table, i * phentsize)
            if kind == 1:  # PT_LOAD: where a virtual address lies in the file
                loads.append((vaddr, offset, filesz))
            elif kind == 2:  # PT_DYNAMIC
                dynamic = (offset, filesz)
        if dynamic is None:
            return DynamicSection((), ())
        f.seek(dynamic[0])
        raw = f.read(min(dynamic[1], 1 << 20))
        entry = struct.Struct(order + word * 2)
        tags: list[tuple[int, int]] = []
        for tag, value in entry.iter_unpack(raw[:len(raw) - len(raw) % entry.size]):
            if tag == 0:  # DT_NULL ends the table
                break
            tags.append((tag, value))
        strtab = next((v for t, v in tags if t == 5), None)  # DT_STRTAB, a virtual address
        base = next((off + strtab - va for va, off, size in loads if strtab is not None and va <= strtab < va + size),
                    None)
        if base is None:
            raise ValueError(f"{path}: its dynamic string table lies outside every loaded segment")

        def string(at: int) -> str:
            f.seek(base + at)
            return f.read(4096).split(b"\x00", 1)[0].decode("utf-8", "replace")

        # glibc expands $ORIGIN from the path the library was opened by, symlinks not followed; the resolved
        # folder is searched too (erring towards "found": a wrong "missing" would refuse a working device)
        origins = dict.fromkeys((os.path.dirname(os.path.abspath(path)), str(Path(path).resolve().parent)))
        needed = tuple(string(v) for t, v in tags if t == 1)  # DT_NEEDED
        runpath = [v for t, v in tags if t == 29]  # DT_RUNPATH; without it, DT_RPATH (glibc ignores RPATH beside it)
        search = tuple(d.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
                       for v in (runpath or [v for t, v in tags if t == 15])
                       for d in string(v).split(":") if d for origin in origins)
        return DynamicSection(needed, tuple(dict.fromkeys(search)))


def loaded_libraries() -> set[str]:
    """File names of the shared libraries mapped into this process now (Linux): the loader reuses a loaded
    library for a soname without searching (``libcudart.so.13`` matches a mapped ``libcudart.so.13.0.96``)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return {line.rsplit("/", 1)[-1].strip() for line in maps if ".so" in line}
    except OSError:
        return set()


def unresolved_needs(library: str | Path, tree: Tree | None = None) -> list[str]:
    """The sonames ``library`` needs that the dynamic loader would not find here: not in its RUNPATH (or RPATH),
    not already loaded, not on the loader path of ``tree`` (the real root by default). Its own folder counts
    as found, though the loader does not search it: a provider's siblings are loaded by the runtime first."""
    section = dynamic_section(library)
    tree = tree or as_tree(Path("/"))
    loaded = loaded_libraries()
    folders = (os.path.dirname(os.path.abspath(library)), str(Path(library).resolve().parent), *section.search)
    missing = []
    for name in section.needed:
        if any(Path(folder, name).exists() for folder in folders):
            continue
        if any(have == name or have.startswith(name + ".") for have in loaded):
            continue
        if not find_library(tree, name, "").found:
            missing.append(name)
    return missing
