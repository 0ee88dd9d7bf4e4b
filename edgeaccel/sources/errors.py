"""Errors of live sources: one that cannot be opened or read, and one that stayed down past its timeout."""

from __future__ import annotations

from ..errors import InputError, RuntimeNotInstalledError


class SourceError(InputError):
    """A source cannot be opened or read: not a video, no such camera, a refused stream, a missing codec."""


class SourceLostError(SourceError):
    """A network source stayed down for longer than its ``reconnect_timeout``; the other sources go on."""


def import_av():
    """PyAV (``import av``), imported only when a video, camera or stream is opened."""
    try:
        import av
    except ImportError as exc:
        raise RuntimeNotInstalledError(
            "reading video files, cameras and streams needs PyAV (FFmpeg bundled)",
            hint="pip install 'edgeaccel[video]'",
        ) from exc
    return av
