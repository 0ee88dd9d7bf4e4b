"""``survey_device()``: run every reader below a root, gather problems, and never raise (``edgeaccel.probe()``
is this survey with the runtime survey handed in).

Each reader already turns a missing or odd source into a reason; each is also called behind a last guard
so that a bug in one reader costs its section, reported as a problem, and not the whole survey.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .access import Access, Identity
from .board import Board
from .common import Accelerator, Found, Problem
from .cpu import Cpu
from .edgetpu import read_edgetpu
from .families import summarize
from ..devfs import Tree
from .gpu_intel import read_intel_gpu
from .gpu_nvidia import read_nvidia
from .hailo import read_hailo
from .jetson import read_jetson
from .libraries import LibraryLookup, find_edgetpu_library
from .machine import Machine, read_machine
from .memory import Memory
from .npu_ascend import read_ascend_npu
from .npu_intel import read_intel_npu
from .npu_rockchip import read_rockchip_npu
from .pci import read_pci
from .qualcomm import read_qualcomm
from .report import ProbeReport
from .runtimes import RuntimeSurveyHook, helper_packages, skipped_runtimes, survey_runtimes
from .system import OsInfo
from .telemetry_sources import TelemetrySources, telemetry_problems, telemetry_sources
from .tpu import read_tpu

T = TypeVar("T")
BUG_FIX = "this is a bug in edgeaccel: report it with the output of `edgeaccel probe --json`"


def _guarded(what: str, problems: list[Problem], fallback: T, call: Callable[[], T]) -> T:
    try:
        return call()
    except Exception as exc:
        problems.append(Problem("probe", f"reading {what} failed: {type(exc).__name__}: {exc}", BUG_FIX))
        return fallback


def survey_device(root: str | os.PathLike = Path("/"), *, runtimes: bool | None = None, telemetry: bool = True,
                  identity: Identity | None = None, runtime_survey: RuntimeSurveyHook | None = None) -> ProbeReport:
    """Survey the device below ``root``: machine, accelerators, runtimes, telemetry sources, problems.

    ``runtimes``: import the runtimes to see what each reaches (False skips it; never done for a root
    other than "/", whose Python environment is not this one), through ``runtime_survey``, which the layer that
    knows the executors hands in (without one the section says it was not surveyed). ``identity``: whose access
    to device nodes to judge (default: this process). ``telemetry``: False skips the telemetry section (what
    load() does: choosing an executor needs the accelerators, not the sensors). Never raises: what cannot be
    read is reported with a reason.
    """
    started = time.perf_counter()
    timings: dict[str, float] = {}
    problems: list[Problem] = []
    tree = Tree(root)
    access = Access(tree, identity)

    mark = time.perf_counter()
    machine = _guarded("the machine", problems, _unknown_machine(), lambda: read_machine(tree))
    problems.extend(machine.problems())
    timings["machine"] = _ms(mark)

    mark = time.perf_counter()
    pci, _ = _guarded("PCI devices", problems, ([], None), lambda: read_pci(tree))
    no_library = LibraryLookup("Edge TPU delegate (libedgetpu)", "libedgetpu.so.1", None, None, (), "lookup failed")
    library = _guarded("the Edge TPU library", problems, no_library, lambda: find_edgetpu_library(tree))
    survey = tree.is_real and runtimes is not False and runtime_survey is not None
    packages = _guarded("package versions", problems, {}, helper_packages) if tree.is_real else {}
    libtpu_reason = ("libtpu is not installed" if packages.get("libtpu") is None else None) if tree.is_real \
        else "not checked (the probed root is not this machine's Python environment)"
    family, model = machine.board.family, machine.board.model
    readers: list[tuple[str, Callable[[], Found]]] = [
        ("NVIDIA GPUs", lambda: read_nvidia(tree, access, pci)),
        ("Jetson", lambda: read_jetson(tree, access, model)),
        ("Edge TPUs", lambda: read_edgetpu(tree, access, pci, library, family)),
        ("Intel NPU", lambda: read_intel_npu(tree, access, pci)),
        ("Intel GPU", lambda: read_intel_gpu(tree, access)),
        ("Rockchip NPU", lambda: read_rockchip_npu(tree, access)),
        ("Hailo", lambda: read_hailo(tree, access, pci)),
        ("Qualcomm DSP", lambda: read_qualcomm(tree, access)),
        ("Ascend NPU", lambda: read_ascend_npu(tree, access, pci)),
        ("Cloud TPU", lambda: read_tpu(tree, access, pci, packages.get("libtpu"), libtpu_reason)),
    ]
    accelerators: list[Accelerator] = []
    looked = []
    for what, read in readers:
        found = _guarded(what, problems, Found(), read)
        looked.extend(found.looked)
        accelerators.extend(found.accelerators)
        problems.extend(p for p in (a.problem() for a in found.accelerators) if p)
        problems.extend(found.problems)
    timings["accelerators"] = _ms(mark)

    mark = time.perf_counter()
    if not survey:
        why = ("not surveyed: the probed root is not /" if not tree.is_real else "not surveyed: turned off"
               if runtimes is False else "not surveyed: no runtime survey was handed in (edgeaccel.probe() does)")
        runtime_section = skipped_runtimes(why, library)
    else:
        runtime_section = _guarded("runtimes", problems, skipped_runtimes("survey failed", library),
                                   lambda: survey_runtimes(library, runtime_survey))
        runtime_section = dataclasses.replace(runtime_section, packages={**runtime_section.packages, **packages})
        problems.extend(runtime_survey.problems(runtime_section, accelerators))
        accelerators = runtime_survey.views(runtime_section, accelerators)
    timings["runtimes"] = _ms(mark)

    mark = time.perf_counter()
    if telemetry:
        sources = _guarded("telemetry sources", problems, TelemetrySources(reasons={"all": "survey failed"}),
                           lambda: telemetry_sources(tree, identity))
        problems.extend(telemetry_problems(sources))
    else:
        sources = TelemetrySources(reasons={"all": "not surveyed: turned off"})
    timings["telemetry"] = _ms(mark)
    timings["total"] = _ms(started)
    families = summarize(accelerators, looked)
    report = ProbeReport(str(root), machine, tuple(accelerators), runtime_section, sources, tuple(problems), timings,
                         families)
    return report.with_plugins(runtime_survey.plugins()) if survey else report


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def _unknown_machine() -> Machine:
    reason = "survey failed"
    return Machine(Cpu(None, None, None, None, None, None, None, {}, {}, "/proc/cpuinfo", reason),
                   Memory(None, None, None, "/proc/meminfo", reason), OsInfo(None, None, None, "?", reason),
                   Board(None, None, (), None, None, None, reason))
