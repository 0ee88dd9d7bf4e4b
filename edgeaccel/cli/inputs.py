"""--input for the commands that run a model: images (resized and laid out for the model), .npy files, or
seeded random data."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", "-i", action="append", default=[], metavar="SOURCE",
                   help="an image (PNG/JPEG), a .npy file, or 'random'; repeat per model input, in order, "
                        "or name=SOURCE (default: random)")
    p.add_argument("--normalize", type=normalize_arg, metavar="MODE", help=NORMALIZE_HELP)
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs")
    add_pipeline_arguments(p)


def add_pipeline_arguments(p: argparse.ArgumentParser) -> None:
    """--imgsz and --letterbox: what the model's pipeline (edgeaccel.modelfiles.pipeline) says, overridden."""
    p.add_argument("--imgsz", type=imgsz_arg, metavar="SIZE",
                   help="image size to feed a dynamic-size input: 640 or HEIGHTxWIDTH (default: the size the "
                        "model declares, e.g. Ultralytics' imgsz metadata)")
    p.add_argument("--letterbox", action=argparse.BooleanOptionalAction, default=None,
                   help="keep the image's aspect ratio and pad (YOLO) instead of stretching it (default: what the "
                        "model declares; Ultralytics detect/segment/pose exports letterbox)")


def imgsz_arg(text: str) -> tuple[int, int]:
    from ..errors import ConfigError
    from ..modelfiles.pipeline import parse_imgsz

    try:
        return parse_imgsz(text, "--imgsz")
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not an image size: use 640 or HEIGHTxWIDTH") from exc


def user_pipeline(args) -> dict:
    """The pipeline fields the command line gives (None where it gives none)."""
    return {"imgsz": getattr(args, "imgsz", None), "letterbox": getattr(args, "letterbox", None)}


def pipeline_for(model, args):
    """The model's pipeline (a loaded Model's, or read from a ModelInfo) under the command line's fields."""
    from ..modelfiles.describe import pipeline_of
    from ..modelinfo import ModelInfo

    if isinstance(model, ModelInfo) or hasattr(model, "pipeline"):
        return pipeline_of(model, user_pipeline(args))
    return pipeline_of(None, user_pipeline(args))


NORMALIZE_HELP = ("how image pixels become float inputs: 0,1 (the default), -1,1, imagenet (mean/std) or raw "
                  "(0..255); type them as shown, e.g. --normalize -1,1; integer inputs always get raw pixels")
# what people type -> the mode: the help's forms, ranges written with "..", brackets, and "minus one"
_NORMALIZE_FORMS = {"0,1": "0,1", "0..1": "0,1", "-1,1": "-1,1", "-1..1": "-1,1", "m1,1": "-1,1",
                    "imagenet": "imagenet", "raw": "raw", "0,255": "raw", "0..255": "raw"}


def normalize_arg(text: str) -> str:
    """argparse ``type=`` for --normalize: one of NORMALIZATIONS, from the forms people type."""
    key = text.strip().lower().replace(" ", "").strip("[]()")
    if key in _NORMALIZE_FORMS:
        return _NORMALIZE_FORMS[key]
    raise argparse.ArgumentTypeError(f"{text!r} is not a normalization; use 0,1 or -1,1 or imagenet or raw")


def join_negative_values(argv: list[str], options=("--normalize",)) -> list[str]:
    """``--normalize -1,1`` as typed: argparse takes a value starting with '-' for an option, so the value is
    joined to its option (``--normalize=-1,1``) before parsing."""
    out: list[str] = []
    it = iter(range(len(argv)))
    for i in it:
        if argv[i] in options and i + 1 < len(argv) and argv[i + 1].startswith("-") and argv[i + 1][1:2].isdigit():
            out.append(f"{argv[i]}={argv[i + 1]}")
            next(it, None)
        else:
            out.append(argv[i])
    return out


def prepare_inputs(model, args) -> tuple[list, list[str]]:
    """The arrays for --input sources (random where none is given), and a line saying how each was made."""
    import numpy as np

    from ..errors import InputCountError

    specs = model.inputs
    sources: list[str | None] = [None] * len(specs)
    names = [s.name for s in specs]
    for source in args.input:
        name, sep, _ = source.partition("=")
        if sep and name not in names and not Path(source).exists():
            from ..errors import InputNameError

            raise InputNameError(f"--input {source}: the model has no input named {name!r}; its inputs are {names}",
                                 hint=f"use --input {names[0]}=SOURCE, or give sources in input order without names")
    positional = [s for s in args.input if not ("=" in s and s.split("=", 1)[0] in names)]
    if len(positional) > len(specs):
        raise InputCountError(f"{len(positional)} --input given, the model takes {len(specs)}: {names}")
    for i, source in enumerate(positional):
        sources[i] = source
    for source in args.input:
        name, sep, value = source.partition("=")
        if sep and name in names:
            sources[names.index(name)] = value
    rng = np.random.default_rng(args.seed) if None in sources or "random" in sources else None
    pipeline = pipeline_for(model, args)
    arrays, described = [], []
    for spec, source in zip(specs, sources, strict=True):
        array, how = _one_input(spec, source, args, rng, np, pipeline)
        arrays.append(array)
        described.append(how)
    return arrays, described


def _one_input(spec, source, args, rng, np, pipeline):
    from ..errors import InputError
    from ..imageio import image_to_input, read_image
    from ..modelfiles.pipeline import check_given_size, declared_shape
    from ..tensors import random_array

    check_given_size(spec, pipeline)
    if source in (None, "random"):
        shape = declared_shape(spec, pipeline)
        if shape is None:
            raise InputError(f"input {spec.name!r} has dynamic dimensions {list(spec.shape)}; random data needs a size",
                             hint="pass --imgsz 640 (or HEIGHTxWIDTH) for an image input, or --input name=file.npy "
                                  "with the shape you want")
        array = random_array(spec, rng, shape)
        return array, f"random {spec.dtype} {'x'.join(map(str, shape))} (seed {args.seed})"
    path = Path(source)
    if path.suffix.lower() == ".npy":
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from exc
        return array, f"{path.name} ({array.dtype} {'x'.join(map(str, array.shape))})"
    array, how = image_to_input(read_image(path), spec, args.normalize, pipeline)
    return array, f"{path.name}: {how}"
