"""Every ``josh`` name a benchmark imports exists (fast): benchmarks import lazily, inside the runs they time, so a
renamed function would otherwise surface only when someone measures."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[2] / "benchmarks").glob("*.py"))


def josh_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every ``from josh... import name`` and (module, None) for every ``import josh...``."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "josh":
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] == "josh"]
    return found


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_every_josh_name_a_benchmark_imports_exists(path: Path) -> None:
    missing = []
    for module_name, name in josh_imports(path):
        module = importlib.import_module(module_name)
        if name is not None and not hasattr(module, name):
            try:
                importlib.import_module(f"{module_name}.{name}")
            except ImportError:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"{path.name} imports names josh no longer has: {missing}"
