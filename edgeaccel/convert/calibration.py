"""Calibration data: the samples a quantizer measures activation ranges on, and that ``edgeaccel check``
compares artifacts on.

Sources, each fitted to the model's own input specs (so a wrong shape or dtype is refused here, naming the
file and the input, before any converter sees it):

- a folder of images (PNG/JPEG/...), preprocessed like ``edgeaccel run`` does it (resize, channel order,
  layout; float inputs scaled by ``normalize``; uint8/int8 inputs get raw pixels), following the model's
  pipeline (``edgeaccel.modelfiles.pipeline``): a dynamic-size input takes its declared size, letterboxed when it says;
- a folder of ``.npy`` files, one sample each;
- one ``.npy`` holding N samples stacked on the first axis (or exactly one sample of the input's shape);
- one ``.npz`` keyed by input name, for models with several inputs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConversionError, EdgeAccelError
from ..modelinfo import TensorSpec

log = logging.getLogger("edgeaccel.convert")

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"})
DEFAULT_MAX_SAMPLES = 200  # TensorFlow's guide asks for ~100-500 representative samples; ranges settle by then


@dataclass
class CalibrationSet:
    """Samples in model input order: ``samples[i][k]`` is sample i for input k, batch dimension included."""

    specs: tuple[TensorSpec, ...]
    samples: list[list[np.ndarray]]
    source: str  # what they were read from, for notes and messages
    kind: str = "arrays"  # "images" when decoded and preprocessed here, else "arrays"
    names: list[str] | None = None  # one per sample: the file it came from ("x.npy[3]" for a stacked array)

    def __len__(self) -> int:
        return len(self.samples)

    def feeds(self) -> list[dict[str, np.ndarray]]:
        """One {input name: array} per sample, the shape ONNX Runtime's calibration reader wants."""
        return [{spec.name: array for spec, array in zip(self.specs, sample, strict=True)} for sample in self.samples]

    def stacked(self) -> list[np.ndarray]:
        """One array per input with the samples on axis 0 (what ``save`` writes)."""
        return [np.concatenate([s[k] for s in self.samples], axis=0) if _has_batch(spec)
                else np.stack([s[k] for s in self.samples]) for k, spec in enumerate(self.specs)]

    def save(self, path: Path) -> Path:
        """Write as .npy (one input) or .npz keyed by input name; returns the file written."""
        arrays = self.stacked()
        if len(arrays) == 1:
            path = path.with_suffix(".npy")
            np.save(path, arrays[0], allow_pickle=False)
        else:
            path = path.with_suffix(".npz")
            by_name = {spec.name: a for spec, a in zip(self.specs, arrays, strict=True)}
            np.savez(path, **by_name)  # type: ignore[arg-type]  # numpy's stub reads **arrays as allow_pickle=
        return path

    def nbytes(self) -> int:
        return sum(a.nbytes for sample in self.samples for a in sample)

    def head(self, count: int) -> CalibrationSet:
        return self.subset(range(min(count, len(self))))

    def subset(self, indices) -> CalibrationSet:
        indices = list(indices)
        names = [self.sample_names()[i] for i in indices]
        return CalibrationSet(self.specs, [self.samples[i] for i in indices], self.source, self.kind, names)

    def sample_names(self) -> list[str]:
        """What each sample is called in a manifest: its file, or its index in the source."""
        if self.names is not None and len(self.names) == len(self.samples):
            return list(self.names)
        return [f"{Path(self.source).name}[{i}]" for i in range(len(self.samples))]


HOLDOUT_EVERY = 5  # convert holds back every 5th calibration sample for the post-conversion check


def split_holdout(calib: CalibrationSet, every: int = HOLDOUT_EVERY) -> tuple[CalibrationSet, CalibrationSet | None]:
    """(samples to calibrate on, samples held out for checking): every ``every``-th sample in source order (the
    5th, 10th, ... with the default), and at least one, the last, when there are fewer; deterministic, so that a
    bundle says exactly which samples its artifacts never saw. With one sample, or ``every`` < 2, nothing is held
    out (None): a check then has only the calibration samples, and says so."""
    n = len(calib)
    if every < 2 or n < 2:
        return calib, None
    held = [i for i in range(n) if i % every == every - 1] or [n - 1]
    kept = [i for i in range(n) if i not in held]
    return calib.subset(kept), calib.subset(held)


def load(source: str | os.PathLike, specs: Sequence[TensorSpec], *, normalize: str | None = None,
         max_samples: int | None = DEFAULT_MAX_SAMPLES, pipeline=None) -> CalibrationSet:
    """Read calibration samples from ``source`` and fit them to ``specs``; ConversionError names what is wrong.
    ``pipeline`` (an ``edgeaccel.modelfiles.pipeline.ModelPipeline``) says how images become inputs."""
    specs = tuple(specs)
    path = Path(source)
    if not path.exists():
        raise ConversionError(f"calibration data not found: {path}",
                              hint="pass a folder of images, a folder of .npy files, a .npy or an .npz")
    kind = "arrays"
    names = None
    if path.is_dir():
        samples, names = _from_folder(path, specs, normalize, max_samples, pipeline)
        kind = "images" if any(p.suffix.lower() in IMAGE_SUFFIXES for p in path.iterdir()) else "arrays"
    elif path.suffix.lower() == ".npz":
        samples = _from_npz(path, specs)
    elif path.suffix.lower() == ".npy":
        samples = _split(path, _read_npy(path), specs[0], specs) if len(specs) == 1 else _need_npz(path, specs)
    elif path.suffix.lower() in IMAGE_SUFFIXES:
        samples = [_from_image(path, specs, normalize, pipeline)]
        kind = "images"
        names = [path.name]
    else:
        raise ConversionError(f"calibration data {path.name} is neither a folder, an image, a .npy nor an .npz",
                              hint="pass a folder of images, a folder of .npy files, a .npy or an .npz")
    if max_samples is not None and len(samples) > max_samples:
        log.info("using the first %d of %d calibration samples from %s", max_samples, len(samples), path)
        samples = samples[:max_samples]
        names = names[:max_samples] if names else names
    if not samples:
        raise ConversionError(f"calibration data {path} holds no samples",
                              hint="give at least one sample; quantization needs about 100 for stable ranges")
    return CalibrationSet(specs, samples, str(path), kind, names)


def _from_folder(folder: Path, specs: tuple[TensorSpec, ...], normalize: str | None,
                 max_samples: int | None, pipeline=None) -> tuple[list[list[np.ndarray]], list[str]]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    images = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES]
    arrays = [p for p in files if p.suffix.lower() == ".npy"]
    if images and arrays:
        raise ConversionError(f"calibration folder {folder} mixes images and .npy files",
                              hint="keep one kind of sample per folder")
    if not images and not arrays:
        seen = ", ".join(p.name for p in files[:5]) or "nothing"
        raise ConversionError(f"calibration folder {folder} holds no images or .npy files (found: {seen})",
                              hint=f"put images ({', '.join(sorted(IMAGE_SUFFIXES))}) or .npy samples in it")
    chosen = (images or arrays)[: max_samples or None]
    if images:
        return [_from_image(p, specs, normalize, pipeline) for p in chosen], [p.name for p in chosen]
    if len(specs) != 1:
        _need_npz(folder, specs)
    samples: list[list[np.ndarray]] = []
    names: list[str] = []
    for p in chosen:
        split = _split(p, _read_npy(p), specs[0], specs)
        samples.extend(split)
        names.extend([p.name] if len(split) == 1 else [f"{p.name}[{i}]" for i in range(len(split))])
    return samples, names


def _from_image(path: Path, specs: tuple[TensorSpec, ...], normalize: str | None, pipeline=None) -> list[np.ndarray]:
    from ..imageio import image_to_input, read_image

    if len(specs) != 1:
        raise ConversionError(f"the model takes {len(specs)} inputs ({', '.join(s.name for s in specs)}); "
                              f"images can calibrate a single-input model only",
                              hint="pass an .npz keyed by input name")
    try:
        array, _ = image_to_input(read_image(path), specs[0], normalize, pipeline)
    except EdgeAccelError as exc:
        raise ConversionError(f"calibration image {path}: {exc.message}", hint=exc.hint) from exc
    return [array]


def _read_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConversionError(f"cannot read calibration data {path}: {exc}",
                              hint="write it with numpy.save (no pickled objects)") from exc


def _from_npz(path: Path, specs: tuple[TensorSpec, ...]) -> list[list[np.ndarray]]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConversionError(f"cannot read calibration data {path}: {exc}") from exc
    with archive:
        keys = list(archive.files)
        names = [s.name for s in specs]
        if len(specs) == 1 and len(keys) == 1:
            per_input = [archive[keys[0]]]
        else:
            missing = [n for n in names if n not in keys]
            if missing:
                raise ConversionError(f"calibration data {path.name} has no array for input {missing[0]!r} "
                                      f"(it holds {keys})", hint=f"key the arrays by input name: {names}")
            per_input = [archive[n] for n in names]
    split = [_split(path, a, spec, specs) for a, spec in zip(per_input, specs, strict=True)]
    counts = {len(s) for s in split}
    if len(counts) != 1:
        raise ConversionError(f"calibration data {path.name} holds different sample counts per input: "
                              + ", ".join(f"{n}={len(s)}" for n, s in zip(names, split, strict=True)))
    return [[s[i][0] for s in split] for i in range(counts.pop())]


def _need_npz(path: Path, specs: tuple[TensorSpec, ...]) -> list:
    raise ConversionError(f"the model takes {len(specs)} inputs ({', '.join(s.name for s in specs)}); "
                          f"{path.name} can feed only one", hint="pass an .npz keyed by input name")


def _split(path: Path, array: np.ndarray, spec: TensorSpec, specs: tuple[TensorSpec, ...]) -> list[list[np.ndarray]]:
    """An array of N stacked samples (or one sample) -> N single-sample arrays fitted to ``spec``."""
    array = _fit_dtype(path, array, spec)
    want = spec.shape
    if array.ndim == len(want) and _has_batch(spec) and _matches(array.shape[1:], want[1:]):
        return [[array[i : i + 1]] for i in range(array.shape[0])]  # N samples on the batch axis
    if array.ndim == len(want) and _matches(array.shape, want):
        return [[array]]
    if array.ndim == len(want) + 1 and _matches(array.shape[1:], want):
        return [[array[i]] for i in range(array.shape[0])]
    dims = "x".join("?" if d is None else str(d) for d in want)
    sample = "x".join("?" if d is None else str(d) for d in (want[1:] if _has_batch(spec) else want))
    hint = f"give an array of shape (N, {sample.replace('x', ', ')}) with N samples"
    if array.ndim == len(want) and sorted(array.shape[1:]) == sorted(d for d in want[1:] if d is not None):
        hint += "; the dimensions look transposed (NCHW vs NHWC?)"
    raise ConversionError(f"calibration data {path.name} has shape {list(array.shape)}; input {spec.name!r} "
                          f"takes {dims}", hint=hint)


def _fit_dtype(path: Path, array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    want = spec.dtype
    if array.dtype == want:
        pass
    elif array.dtype.kind == "f" and want.kind == "f":
        array = array.astype(want)
    else:
        hint = "save the samples with the dtype the model takes"
        if want.kind == "f" and array.dtype == np.uint8:
            hint = "these look like raw pixels: scale them the way the model expects (e.g. x / 255) and save as float32"
        raise ConversionError(f"calibration data {path.name} is {array.dtype}; input {spec.name!r} takes {want}",
                              hint=hint)
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        raise ConversionError(f"calibration data {path.name} holds NaN or Inf",
                              hint="ranges measured on NaN are meaningless; clean the samples first")
    return array


def _matches(shape: Sequence[int], want: Sequence[int | None]) -> bool:
    return len(shape) == len(want) and all(w is None or s == w for s, w in zip(shape, want, strict=True))


def _has_batch(spec: TensorSpec) -> bool:
    """A leading dimension of 1 (or dynamic) is the batch: samples are stacked along it."""
    return len(spec.shape) > 1 and spec.shape[0] in (1, None)
