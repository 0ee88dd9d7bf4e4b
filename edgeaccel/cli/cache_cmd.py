"""edgeaccel's cache folder: where it is, what it holds, and clearing it.

  edgeaccel cache info               the folder, the size of each part, every kept calibration and its choice
  edgeaccel cache clear              delete everything edgeaccel keeps there
  edgeaccel cache clear --calibration   only the measurements of `edgeaccel tune` (they change choices)

The folder is $EDGEACCEL_CACHE_DIR, else $XDG_CACHE_HOME/edgeaccel, else ~/.cache/edgeaccel (or --cache-dir).
Compiled models and validation results only make loads faster; calibration measurements change which executor
`run` and `edgeaccel.load` choose. Any command that loads a model takes --no-cache to ignore all of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

HELP = "show where edgeaccel's cache is and what it holds, or clear it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="cache_command", metavar="ACTION")
    info = sub.add_parser("info", help="the cache folder, its parts and sizes, and the kept calibrations")
    info.add_argument("--cache-dir", help="the cache folder (default: $EDGEACCEL_CACHE_DIR or ~/.cache/edgeaccel)")
    info.add_argument("--json", action="store_true", help="one JSON document (schema edgeaccel.cache/1)")
    clear = sub.add_parser("clear", help="delete what edgeaccel keeps in the cache folder")
    clear.add_argument("--cache-dir", help="the cache folder (default: $EDGEACCEL_CACHE_DIR or ~/.cache/edgeaccel)")
    clear.add_argument("--calibration", action="store_true",
                       help="only the measurements of `edgeaccel tune` (keep compiled models)")


def main(args: argparse.Namespace) -> int:
    from ..cachedir import cache_root

    root = cache_root(getattr(args, "cache_dir", None))
    if getattr(args, "cache_command", None) == "clear":
        return _clear(root, args.calibration)
    return _info(root, getattr(args, "json", False))


def _info(root, as_json: bool) -> int:
    from ..cachedir import CACHE_PARTS, max_bytes, usage
    from ..selection.cache import calibration_entries

    parts = usage(root)
    report = {"schema": "edgeaccel.cache/1", "folder": str(root), "exists": root.is_dir(),
              "compiled_limit_bytes": max_bytes(),
              "parts": {name: {**parts[name], "what": CACHE_PARTS[name]} for name in CACHE_PARTS},
              "calibrations": calibration_entries(root)}
    if as_json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    print(f"folder      {root}{'' if report['exists'] else ' (not created yet)'}")
    for name, part in report["parts"].items():
        print(f"  {name:<12} {part['files']:>5} files {_size(part['bytes']):>10}  {part['what']}")
    print(f"compiled models are trimmed to {report['compiled_limit_bytes'] >> 20} MiB ($EDGEACCEL_CACHE_MAX_MB)")
    for entry in report["calibrations"]:
        if "error" in entry:
            print(f"calibration {entry['file']}: {entry['error']}")
            continue
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["measured_at"])) if entry["measured_at"] else "?"
        names = ", ".join(a.rsplit("/", 1)[-1] for a in entry["artifacts"]) or "?"
        print(f"calibration {names} (measured {when})")
        print(f"            eligible: {', '.join(entry['eligible']) or 'none'}")
        for name, why in entry["refused"].items():
            print(f"            refused {name}: {(why or '').splitlines()[0][:160] if why else ''}")
    print("clear it with `edgeaccel cache clear` (or `--calibration` for the measurements only); "
          "--no-cache ignores it for one command")
    return 0


def _clear(root, calibration_only: bool) -> int:
    from ..cachedir import clear

    freed = clear(root, ["calibration"] if calibration_only else None)
    what = "calibration measurements" if calibration_only else "edgeaccel's cache"
    print(f"cleared {what} in {root} ({_size(freed)})")
    return 0


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"
