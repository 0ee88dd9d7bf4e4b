"""Small helpers for text people read: counts with the right noun ("1 box", "2 boxes")."""

from __future__ import annotations

_IRREGULAR = {"box": "boxes", "class": "classes", "match": "matches", "mask": "masks"}


def plural(word: str) -> str:
    return _IRREGULAR.get(word, word + "s")


def counted(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the noun, singular for exactly one: counted(1, "box") -> "1 box", counted(0, "box") -> "0 boxes"."""
    return f"{n} {word if n == 1 else (many or plural(word))}"
