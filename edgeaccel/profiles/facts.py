"""DeviceFacts from the probe's report: the one place that turns a hardware survey into what profile
matching and the selector need (pure: tests build reports from fake trees)."""

from __future__ import annotations

from .match import DeviceFacts


def facts_from_probe(report) -> DeviceFacts:
    """``report`` is an ``edgeaccel.probe.ProbeReport``. CPU flags are the ISA features the probe names
    (avx512_bf16, amx_bf16, asimddp, ...); devices are those present, usable or not, so that the executor
    that tries one can say exactly why it cannot open it."""
    machine = report.machine
    cpu, board, os_info = machine.cpu, machine.board, machine.os
    return DeviceFacts(
        arch=os_info.arch or "",
        cpu_model=cpu.model or "",
        cpu_flags=frozenset(name for name, present in (cpu.isa or {}).items() if present),
        board=board.model or cpu.board_model or "",
        devices=report.present_devices(),
        compatible=tuple(board.compatible),
    )
