"""Every install hint names the distribution, ``josh-agents[EXTRA]`` (``josh`` on the package index is an unrelated
2013 package), and every extra a hint names is one ``pyproject.toml`` declares."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WRONG = "josh" + "["  # spelt in two pieces so this file does not match itself
HINT = re.compile(r"josh-agents\[([a-z0-9_,\- ]+)\]")


def tracked_texts() -> dict[str, str]:
    """The text of every tracked file that reads as UTF-8."""
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    texts = {}
    for name in names.splitlines():
        try:
            texts[name] = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
    return texts


def test_no_hint_names_the_unrelated_josh_package() -> None:
    texts = tracked_texts()
    assert len(texts) > 100, "git ls-files found the checkout's files"
    found = [
        f"{name}:{n}" for name, text in texts.items() for n, line in enumerate(text.splitlines(), 1) if WRONG in line
    ]
    assert not found, f"{WRONG}...] names an unrelated package; write josh-agents[...]: {found}"


def test_every_extra_a_hint_names_is_declared() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {
        (name, extra.strip())
        for name, text in tracked_texts().items()
        for match in HINT.finditer(text)
        for extra in match.group(1).split(",")
    }
    assert named, "the tree holds install hints"
    assert not {(name, extra) for name, extra in named if extra not in declared}
