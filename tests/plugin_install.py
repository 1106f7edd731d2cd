"""A plugin package installed the way a user's pip does, without a download: ``pip install --no-deps
--no-build-isolation --target`` from a copy of its folder (so the build leaves nothing in the checkout). The target
folder holds the package and its ``.dist-info`` with ``entry_points.txt``, which josh reads; put it on ``sys.path``
or ``$PYTHONPATH`` to use it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def install_plugin(source: Path, root: Path) -> Path:
    """Install the package at ``source`` into ``root / "site"`` (built from ``root / "src"``); the site folder."""
    copy, target = root / "src", root / "site"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run([*pip, "--disable-pip-version-check", "--target", str(target), str(copy)], check=True)
    return target
