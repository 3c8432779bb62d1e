"""Every regular expression in the package, tried on long adversarial lines: a pattern whose backtracking grows with
the square of a line (or worse) hangs on a damaged file's 1 MB line, and real files have such lines.

The patterns are the package's module-level compiled ones and every literal pattern passed to `re` in its source
(found by walking the syntax tree). Each is run, as its call runs it (`match`, `fullmatch`, else `search`), on lines
of one repeated piece (digits, spaces, tabs, letters, separators) with and without a prefix and a suffix that makes a
match fail at the very end, which is what drives backtracking. A pattern is slow when one run takes over
`--limit` seconds. polars' patterns run in its own linear-time engine and are not audited here.

    python tests/regex_audit.py [--chars 200000] [--limit 1.0]
prints one line per slow pattern and exits 1 when there is any; each pattern's name goes to stderr before it runs, so
a run killed by its caller's time limit shows which pattern hung.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import pkgutil
import re
import sys
import time
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "traceview"
PIECES = ("1", " ", "\t", "a", ".", ",", "1.", "1 ", "a ", "a:", "=", "-", "(", "1,", "_")
PREFIXES = ("", "1 ", "Processing [x] with [")
SUFFIXES = ("", "\x00", " x")


def module_patterns() -> dict[str, re.Pattern[str]]:
    """Return the compiled patterns held by the package's modules (also inside their tuples and dicts), by name."""
    import traceview

    found: dict[str, re.Pattern[str]] = {}

    def add(name: str, value: object) -> None:
        if isinstance(value, re.Pattern):
            found[name] = value
        elif isinstance(value, (tuple, list)):
            for index, item in enumerate(value):
                add(f"{name}[{index}]", item)
        elif isinstance(value, dict):
            for key, item in value.items():
                add(f"{name}[{key!r}]", item)

    for info in pkgutil.walk_packages(traceview.__path__, "traceview."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for attribute, value in vars(module).items():
            add(f"{info.name}.{attribute}", value)
    return found


def literal_patterns() -> dict[str, tuple[re.Pattern[str], str]]:
    """Return every literal pattern passed to a `re` function in the package's source, with the call that runs it."""
    found: dict[str, tuple[re.Pattern[str], str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "re" and node.args):
                continue
            try:
                text = ast.literal_eval(node.args[0])
            except ValueError:
                continue
            if isinstance(text, str):
                try:
                    found[f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"] = (re.compile(text), node.func.attr)
                except re.error:
                    continue
    return found


def slowest_run(pattern: re.Pattern[str], how: str, chars: int) -> tuple[float, str]:
    """Return the longest time one run of the pattern took (s) over the adversarial lines, and which line."""
    run = getattr(pattern, how if how in ("match", "fullmatch") else "search")
    worst = (0.0, "")
    for piece in PIECES:
        body = (piece * (chars // len(piece) + 1))[:chars]
        for prefix in PREFIXES:
            for suffix in SUFFIXES:
                line = prefix + body + suffix
                start = time.perf_counter()
                run(line.encode() if isinstance(pattern.pattern, bytes) else line)
                took = time.perf_counter() - start
                if took > worst[0]:
                    worst = (took, f"{prefix!r} + {piece!r} × {chars:,} + {suffix!r}")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=200_000)
    parser.add_argument("--limit", type=float, default=1.0)
    options = parser.parse_args()
    patterns = {name: (pattern, "search") for name, pattern in module_patterns().items()} | literal_patterns()
    slow = []
    for name, (pattern, how) in patterns.items():
        print(name, file=sys.stderr, flush=True)
        took, line = slowest_run(pattern, how, options.chars)
        if took > options.limit:
            slow.append(f"{name}: {took:.1f} s on {line}")
    for line in slow:
        print(line)
    print(f"{len(patterns)} patterns, {len(slow)} slow", file=sys.stderr)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
