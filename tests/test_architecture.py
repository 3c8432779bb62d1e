"""Data flows one way: app → analyzer → parsers. Parsers import neither; the analyzer never imports app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "traceview"
FORBIDDEN = {
    "parsers": ("traceview.analyzer", "traceview.app"),
    "analyzer": ("traceview.app",),
}
# The analyzer stays pure: no printing, plotting, CLI or web frameworks.
ANALYZER_FORBIDDEN_LIBRARIES = ("rich", "typer", "plotly", "dash", "click")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_import_direction(layer):
    files = sorted((PACKAGE / layer).rglob("*.py"))
    assert files
    for path in files:
        for name in _imports(path):
            assert not name.startswith(FORBIDDEN[layer]), f"{path.relative_to(PACKAGE)} imports {name}"
            if layer == "analyzer":
                assert name.split(".")[0] not in ANALYZER_FORBIDDEN_LIBRARIES, f"{path.name} imports {name}"


def test_analyzer_does_not_print():
    for path in (PACKAGE / "analyzer").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "print"]
        assert not calls, f"{path.name} prints"
