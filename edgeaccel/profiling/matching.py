"""``--all``: the same operator on several executors, matched by name.

Runtimes rename the nodes they fuse: ONNX Runtime appends "_token_N" to a fused QDQ node, OpenVINO
"/WithoutBiases" to a convolution split from its bias add and "_original" to a layout conversion, and the
quantization tools add "_prequant", "_quantize" and "_dequant". Names are compared with those suffixes removed;
several operators of one executor under one name (a convolution and its split-off bias add) count together.
Operators whose name no other executor has are listed per executor as unmatched, never dropped in silence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .schema import ExecutorProfile

_SUFFIXES = re.compile(r"(_token_\d+|/WithoutBiases|_original|_prequant|_quantize|_dequant|/fq_weights_\d+)+$")


def match_key(name: str) -> str:
    """The name with the suffixes runtimes and quantization tools add removed."""
    previous = None
    while previous != name:
        previous, name = name, _SUFFIXES.sub("", name)
    return name


@dataclass
class Matching:
    executors: list[str]
    rows: list[tuple[str, dict[str, float | None]]] = field(default_factory=list)  # key -> executor -> ms
    unmatched: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"executors": self.executors, "how": "operator names compared without runtime suffixes "
                "(_token_N, /WithoutBiases, _original, _prequant, _quantize, _dequant)",
                "matched": [{"name": key, "median_ms": {k: (None if v is None else round(v, 4))
                                                         for k, v in per.items()}} for key, per in self.rows],
                "unmatched": {k: list(v) for k, v in self.unmatched.items()}}


def match_ops(profiles: list[ExecutorProfile]) -> Matching:
    """Operators found on at least two executors (times summed per name, None where a runtime gives none), in
    the first executor's order; per executor the names no other executor has."""
    keyed: dict[str, dict[str, float | None]] = {}  # executor -> key -> ms
    names: dict[str, dict[str, list[str]]] = {}
    order: dict[str, None] = {}  # keys in first-seen order
    for p in profiles:
        per: dict[str, float | None] = {}
        for op in p.ops:
            key = match_key(op.name)
            so_far = per.get(key)
            if so_far is None:
                per[key] = op.median_ms
            elif op.median_ms is not None:
                per[key] = so_far + op.median_ms
            names.setdefault(p.executor, {}).setdefault(key, []).append(op.name)
            order.setdefault(key)
        keyed[p.executor] = per
    matching = Matching([p.executor for p in profiles])
    for key in order:
        holders = [e for e in keyed if key in keyed[e]]
        if len(holders) >= 2:
            matching.rows.append((key, {e: keyed[e].get(key) for e in keyed if key in keyed[e]}))
    for executor, per in keyed.items():
        alone = [n for key in per if all(key not in keyed[o] for o in keyed if o != executor)
                 for n in names[executor][key]]
        matching.unmatched[executor] = alone
    return matching
