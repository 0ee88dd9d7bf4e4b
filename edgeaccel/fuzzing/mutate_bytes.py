"""Format-blind byte mutations, seeded. They find what a parser's bounds checks miss (offsets, lengths)."""

from __future__ import annotations

import random
import struct

# Integers that sit on the edges parsers get wrong: zero, sign boundaries, powers of two, all-ones.
INTERESTING_32 = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
                  0xFFFFFFFF, 0xFFFFFFFE)


def mutate(data: bytes, rng: random.Random, count: int | None = None) -> tuple[bytes, list[str]]:
    """Apply 1..4 random byte mutations (``count`` to fix it); return the mutant and what was done."""
    buf = bytearray(data)
    done = []
    for _ in range(count or rng.randint(1, 4)):
        if not buf:
            break
        done.append(rng.choice(_MUTATORS)(buf, rng))
    return bytes(buf), done


def _offset(buf: bytearray, rng: random.Random, width: int = 1) -> int:
    # Half the time aim at the first 4 KiB (headers, tables, offsets) where a flip matters more than in weights,
    # and at the last 4 KiB, where flatbuffers' vtables and protobuf's graph metadata often live.
    span = len(buf) - width
    if span <= 0:
        return 0
    zone = rng.random()
    if zone < 0.35:
        return rng.randint(0, min(span, 4096))
    if zone < 0.5:
        return rng.randint(max(0, span - 4096), span)
    return rng.randint(0, span)


def _bit_flip(buf, rng):
    at = _offset(buf, rng)
    bit = rng.randrange(8)
    buf[at] ^= 1 << bit
    return f"flip bit {bit} at {at}"


def _byte_set(buf, rng):
    at = _offset(buf, rng)
    value = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    buf[at] = value
    return f"byte {at} = {value:#x}"


def _int32_set(buf, rng):
    at = _offset(buf, rng, 4)
    value = rng.choice(INTERESTING_32)
    if at + 4 <= len(buf):
        struct.pack_into("<I", buf, at, value)
    return f"u32 at {at} = {value:#x}"


def _int32_add(buf, rng):
    at = _offset(buf, rng, 4)
    if at + 4 > len(buf):
        return "noop"
    delta = rng.choice((-16, -4, -1, 1, 4, 16, 1 << 16))
    (old,) = struct.unpack_from("<I", buf, at)
    struct.pack_into("<I", buf, at, (old + delta) & 0xFFFFFFFF)
    return f"u32 at {at} += {delta}"


def _truncate(buf, rng):
    keep = rng.randint(len(buf) // 2, len(buf) - 1) if rng.random() < 0.5 else rng.randint(0, len(buf) - 1)
    del buf[keep:]
    return f"truncate to {keep}"


def _splice(buf, rng):
    n = rng.randint(1, min(64, len(buf)))
    src = rng.randint(0, len(buf) - n)
    dst = _offset(buf, rng, n)
    buf[dst : dst + n] = buf[src : src + n]
    return f"copy {n} bytes {src}->{dst}"


def _delete(buf, rng):
    n = rng.randint(1, min(16, len(buf)))
    at = _offset(buf, rng, n)
    del buf[at : at + n]
    return f"delete {n} bytes at {at}"


def _insert(buf, rng):
    n = rng.randint(1, 16)
    at = _offset(buf, rng)
    buf[at:at] = bytes(rng.randrange(256) for _ in range(n))
    return f"insert {n} bytes at {at}"


_MUTATORS = (_bit_flip, _bit_flip, _byte_set, _int32_set, _int32_set, _int32_add, _truncate, _splice, _delete,
             _insert)
