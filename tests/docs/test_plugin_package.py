"""The whole plugin package of "Extending josh" (``docs/extending.md``, ``examples/plugin-minimal/``): the page shows
every file of it as it is, and the package, built and installed as a user's pip does, runs through the ``josh``
command (``check-env``, ``eval``, ``rollout``) with the scripted agent and user the page names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_install import install_plugin

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "examples" / "plugin-minimal"
RUN = ["--agent", "replay", "--user", "scripted", "--no-progress"]


def shown_files() -> dict[str, str]:
    """The page's code blocks whose first line names a file of the example package, by that file."""
    text = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    return dict(re.findall(r"```\w+\n# (examples/plugin-minimal/\S+)\n(.*?)```", text, re.S))


def package_files() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]


def test_the_page_shows_every_file_of_the_package_as_it_is() -> None:
    shown = shown_files()
    assert sorted(shown) == [str(p.relative_to(ROOT)) for p in package_files()]
    for path, code in shown.items():
        assert code == (ROOT / path).read_text(encoding="utf-8"), f"docs/extending.md shows an old {path}"


def josh(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "josh", *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_the_package_installs_and_runs_through_the_josh_command(tmp_path: Path) -> None:
    """Slow: pip builds the package; each command is a fresh ``python -m josh`` that finds the plugin only by its
    installed entry point (nothing imports it by hand)."""
    site = install_plugin(PACKAGE, tmp_path)
    assert (site / "josh_lending" / "__init__.py").is_file()
    [points] = site.glob("josh_lending-*.dist-info/entry_points.txt")
    assert "lending = josh_lending:register" in points.read_text()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)}

    checked = josh("check-env", "lending", env=env).stdout
    assert "reports agree" in checked and "fork isolation" in checked and "FAIL" not in checked

    josh("eval", "--env", "lending", "--split", "test", *RUN, "--out", str(tmp_path / "eval"), env=env)
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["tasks"] == 1 and summary["average_reward"]["mean"] == 1.0
    [result] = rows(tmp_path / "eval" / "results.jsonl")
    assert result["task_id"] == "lending-test-0" and result["completed_goals"] == [0]
    assert [c["verdict"] for c in result["diagnosis"]["calls"]] == ["correct"]  # from the derived log
    said = [m["content"] for m in result["messages"] if m["role"] == "user"]
    assert said[0] == "Hello, I'd like to borrow Ulysses. My card number is 2001."  # the task's transcript

    josh("rollout", "--env", "lending", "--split", "train", *RUN, "--out", str(tmp_path / "rollout"), env=env)
    trees = rows(tmp_path / "rollout" / "trees.jsonl")
    assert sorted(t["task_id"] for t in trees) == ["lending-train-0", "lending-train-1"]
    assert [(t["error"], t["reward"], t["n_goals"]) for t in trees] == [(None, 1.0, 1)] * 2
