"""Our own code calls load() and select() with the option objects, never the keywords they took before
(edgeaccel/load_keywords.py): those still work for users with a DeprecationWarning, but a warning from
edgeaccel's own package or tools would be noise users cannot silence, and the old spellings go away after one
release. Read from the source (calls, and the code strings tools run in child processes); a ``**kwargs`` dict
built for load is checked where the tools run (``python -W error::DeprecationWarning tools/X.py``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from edgeaccel.load_keywords import MOVED

ROOT = Path(__file__).resolve().parents[1]
CALLED = {"load", "select"}  # schedule() takes no older keyword: one would be a TypeError, not a warning
RECEIVERS = {None, "edgeaccel", "loader", "choice"}  # edgeaccel.load(...), load(...) imported from edgeaccel
IN_CODE_STRING = re.compile(r"edgeaccel\.(?:load|select)\(")


def _old_keywords(call: ast.Call) -> list[str]:
    found = [f"{k.arg}=" for k in call.keywords if k.arg in MOVED]
    found += ["task_options={...}" for k in call.keywords if k.arg == "task_options" and isinstance(k.value, ast.Dict)]
    return found


def _top_level_keywords(text: str) -> list[str]:
    """The keyword names of the call whose arguments start ``text`` (nested calls' arguments left out)."""
    depth, args = 1, []
    for ch in text:
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0:
            break
        args.append(ch if depth == 1 else " ")
    return re.findall(r"(?:^|,)\s*(\w+)\s*=(?!=)", "".join(args))


def old_spellings(path: Path) -> list[str]:
    source = path.read_text()
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    tree = ast.parse(source)
    parts = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            receiver = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                else None if isinstance(func, ast.Name) else "?"
            if name in CALLED and receiver in RECEIVERS and _old_keywords(node):
                found.append(f"{shown}:{node.lineno}: {name}({', '.join(_old_keywords(node))})")
        elif isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)
                                                 and id(node) not in parts):  # an f-string is read whole, not again piece by piece
            text = node.value if isinstance(node, ast.Constant) else "".join(
                v.value if isinstance(v, ast.Constant) else "{...}" for v in node.values)
            for match in IN_CODE_STRING.finditer(text):
                old = [f"{k}=" for k in _top_level_keywords(text[match.end():]) if k in MOVED]
                if old:
                    found.append(f"{shown}:{node.lineno}: code string {match.group(0)}"
                                 f"{', '.join(old)})")
    return found


def _sources() -> list[Path]:
    files = sorted((ROOT / "tools").glob("*.py")) + sorted((ROOT / "edgeaccel").rglob("*.py"))
    return [p for p in files if p.name != "load_keywords.py"]


def test_our_package_and_tools_use_the_option_objects():
    found = [line for path in _sources() for line in old_spellings(path)]
    assert not found, ("write these with SelectionOptions/RuntimeOptions/TaskOptions (README, \"load()'s options\"):\n"
                       + "\n".join(found))


def test_the_check_sees_an_old_keyword_in_a_call_and_in_a_child_process_string(tmp_path):
    sample = tmp_path / "tool.py"
    sample.write_text(
        "import edgeaccel\n"
        "edgeaccel.load('m.tflite', executor='litert', cache=False)\n"
        "code = f\"edgeaccel.load({'m'!r}, runtime=edgeaccel.RuntimeOptions(cache=False), threads=2)\"\n"
        "fine = \"edgeaccel.load('m', runtime=edgeaccel.RuntimeOptions(cache_dir=c))\"\n"
        "edgeaccel.schedule('m', 'thermal', power_budget_w=5)\n"
        "edgeaccel.select('m', task_options={'conf': 0.3}, strict=True)\n")
    found = old_spellings(sample)
    assert [line.split(": ", 1)[1] for line in found] == ["load(cache=)", "code string edgeaccel.load(threads=)",
                                                         "select(strict=, task_options={...})"]
