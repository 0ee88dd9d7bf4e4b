"""The machine section: CPU, memory, operating system, board."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .board import Board, read_board
from .common import Problem
from .cpu import Cpu, read_cpu
from ..devfs import Root, as_tree
from .memory import Memory, read_memory
from .system import OsInfo, read_os


@dataclass(frozen=True)
class Machine:
    cpu: Cpu
    memory: Memory
    os: OsInfo
    board: Board

    def to_dict(self) -> dict:
        return {"cpu": self.cpu.to_dict(), "memory": self.memory.to_dict(), "os": self.os.to_dict(),
                "board": self.board.to_dict()}

    def problems(self) -> list[Problem]:
        found = []
        if self.cpu.reason:
            found.append(Problem("CPU", self.cpu.reason + ": CPU model and features are unknown"))
        if self.memory.reason:
            found.append(Problem("memory", self.memory.reason + ": memory size is unknown"))
        return found


def read_machine(root: Root = Path("/")) -> Machine:
    tree = as_tree(root)
    cpu = read_cpu(tree)
    return Machine(cpu, read_memory(tree), read_os(tree, cpu.arch), read_board(tree, cpu.board_model))
