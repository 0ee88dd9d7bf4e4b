"""What every sink is: ``Sink`` (the base of ``sinks`` and ``video_sink``) and ``rendered``, the frame as a sink
writes it. Apart from ``sinks.py`` because ``sinks.as_sinks`` imports ``video_sink``, which extends ``Sink``.
"""

from __future__ import annotations


class Sink:
    def attach(self, sources: list) -> None:
        """Called once before the first frame with the pipeline's Source objects (their names, frame rates
        and clocks), in the order of ``write``'s ``source`` index."""

    def write(self, frame, source: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def rendered(frame):
    """The frame drawn by its task result (and its lines and zones, when counted), or the frame itself."""
    render = getattr(frame.result, "render", None)
    image = render(frame.image) if render is not None and frame.image is not None else frame.image
    if getattr(frame, "zone_shapes", None) is not None and image is not None:
        from ..vision.overlay import draw_zones

        image = draw_zones(image, frame.zone_shapes, frame.zones)
    return image
