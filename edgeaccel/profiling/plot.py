"""``--plot``: time per layer as a PNG, one panel per executor (matplotlib, the ``plot`` extra, imported here
only), and with ``--compare`` one more panel: the error each layer adds. Layers in execution order, so a slow
(or lossy) stretch of the network shows where it is; an executor without per-operator times gets a panel that
says so."""

from __future__ import annotations

from pathlib import Path

from .schema import ExecutorProfile


def pyplot():
    """matplotlib's pyplot on the file-only backend, or a RuntimeNotInstalledError naming the extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        from ..errors import RuntimeNotInstalledError

        raise RuntimeNotInstalledError("--plot needs matplotlib, which is not installed",
                                       hint="pip install 'edgeaccel[plot]', or drop --plot") from exc
    return plt


def plot_layers(profiles: list[ExecutorProfile], path: str | Path, comparison=None) -> Path:
    plt = pyplot()
    panels = len(profiles) + (comparison is not None)
    fig, axes = plt.subplots(panels, 1, figsize=(11, 2.6 * panels), squeeze=False)
    if comparison is not None:
        _plot_error(axes[-1, 0], comparison)
    for ax, profile in zip(axes[:len(profiles), 0], profiles, strict=True):
        title = f"{profile.executor}: whole model {profile.whole_model_ms:.3f} ms (median of {profile.runs} runs)"
        if not profile.per_op_available:
            ax.text(0.5, 0.5, profile.note, ha="center", va="center", wrap=True, fontsize=9)
            ax.set_axis_off()
            ax.set_title(title, fontsize=10)
            continue
        times = [op.median_ms or 0.0 for op in profile.ops]
        devices = sorted({op.device for op in profile.ops})
        colours = {d: f"C{i}" for i, d in enumerate(devices)}
        ax.bar(range(len(times)), times, color=[colours[op.device] for op in profile.ops], width=0.9)
        for device in devices:  # one legend entry per device
            ax.bar([0], [0], color=colours[device], label=device)
        ax.legend(fontsize=8, loc="upper right")
        ax.set_xlabel("operator, in execution order")
        ax.set_ylabel("median ms")
        coverage = (f"; operators account for {profile.coverage:.0%} of a run (median)"
                    if profile.coverage is not None else "")
        ax.set_title(title + coverage, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def _plot_error(ax, comparison) -> None:
    """The error each matched layer adds (``LayerError.added_error``), in graph order; the worst five named."""
    rows = comparison.rows
    added = [row.added_error or 0.0 for row in rows]
    ax.bar(range(len(added)), added, color="C3", width=0.9)
    for row in comparison.worst(5):
        ax.annotate(row.name[-40:], (rows.index(row), row.added_error or 0.0), fontsize=7, rotation=20)
    ax.set_xlabel("matched tensor, in graph order")
    ax.set_ylabel("relative error added")
    ax.set_title(f"error each layer adds: {Path(comparison.model).name} against {Path(comparison.float_model).name}",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
