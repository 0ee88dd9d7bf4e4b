"""Content hashes for models and cache keys: BLAKE2b-256 from CPython's own _blake2 module.

hashlib would load OpenSSL's libcrypto, 3.5 MB of resident memory that a device app running one small model
notices (the target is a peak RSS within 1.2x of the raw runtime's); _blake2 is built into CPython, cryptographic
(the validation memo trusts it), and hashes at ~600 MB/s here.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # an interpreter without the builtin module
    from hashlib import blake2b


def digest(data) -> str:
    """Hex BLAKE2b-256 of bytes or any buffer (an mmap of a model file)."""
    return blake2b(data, digest_size=32).hexdigest()


def short(text: str, length: int = 32) -> str:
    """A short key for a text (cache file names)."""
    return blake2b(text.encode(), digest_size=length // 2).hexdigest()
