"""Write runtimes/README.md: every built-in runtime's devices, kinds, precisions and what installs them, read
from the executor classes (the one place those facts live). tests/test_registry.py checks the file is current.

    python tools/runtimes_table.py            # rewrite runtimes/README.md
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "runtimes" / "README.md"
HEAD = """# Runtimes

Every fact edgeaccel knows about a runtime lives on its executor class in `edgeaccel/executors/` (formats,
devices and their kinds, precisions, what installs it, its survey and its error rules): the selector, the probe
report, the scheduler and the CLI read them through `edgeaccel.executors.registry` and name no runtime.
Third-party runtimes arrive as executor plug-ins (README: Write an executor plug-in) and are shaped the same.

This table is generated from the classes by `python tools/runtimes_table.py`; a test fails when it is stale.
"Default" is what runs when no precision is asked for ("model's own": the model's precision, f32 math for float
layers); "opt-in" precisions change answers and are used only when asked for or admitted by calibration.

| runtime | device | kind | default | opt-in | formats | installs with | how it is reached |
| --- | --- | --- | --- | --- | --- | --- | --- |
"""


def table() -> str:
    sys.path.insert(0, str(ROOT))
    from edgeaccel.executors.registry import BUILTIN, load_class

    rows = []
    for name, target in BUILTIN.items():
        cls = load_class(target, name)
        for t in cls.device_specs:
            formats = t.formats or cls.formats
            kind = t.kind + (" (planned)" if t.planned else "")
            via = " ".join(t.via.split()).replace("|", "\\|")
            default = t.default_precision or "model's own"
            rows.append(f"| {name} | {t.name} | {kind} | {default} | "
                        f"{', '.join(t.precisions) or '-'} | {', '.join(sorted(f.value for f in formats))} | "
                        f"{cls.install_hint(t.name).replace('|', '/')} | {via or '-'} |")
    return HEAD + "\n".join(rows) + "\n"


if __name__ == "__main__":
    OUT.write_text(table())
    print(f"wrote {OUT}")
