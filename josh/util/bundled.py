"""Files that ship with josh outside its package in a checkout (``recipes/``, ``envs/toolwoz_mini/``), found in a
checkout or in an installed wheel.

A source checkout holds them at the repository root; the wheel carries copies as package data under
``josh/_bundled/`` with the same relative paths (``setup.py`` copies them in at build time), so ``josh demo``, a
``--recipe recipes/tiny-sft.yaml`` and the mini set work from any folder once the wheel is installed. A file in the
working directory always wins: that is the user's own copy.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
CHECKOUT = PACKAGE.parent
WHEEL_DATA = PACKAGE / "_bundled"
BUNDLED_DIRS = ("recipes", "envs/toolwoz_mini")  # what setup.py copies into the wheel


def bundled(relative: str | Path) -> Path | None:
    """The checkout's copy of ``relative`` (e.g. ``recipes/demo-cpu.yaml``), else the wheel's, else ``None``."""
    for base in (CHECKOUT, WHEEL_DATA):
        candidate = base / relative
        if candidate.exists():
            return candidate
    return None


def recipe_file(path: str | Path) -> Path:
    """``path`` itself when it exists or is not under ``recipes/``; else josh's own copy of that recipe."""
    path = Path(path)
    if path.exists() or path.is_absolute() or not path.parts or path.parts[0] != "recipes":
        return path
    return bundled(path) or path
