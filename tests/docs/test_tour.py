"""The README's walk-through, read from the README itself and run exactly as written, in a fresh folder.

The documentation site's tour (``docs/tour.md``) holds the same block, which is checked to be identical. The
model-free commands (rollout, extract, view) run in the fast suite; the whole chain, SmolLM2 training and the
evaluation of its checkpoint included, is the slow test. Both also check that the terminal stays quiet."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- walkthrough:"
NOISE = ("Warning", "Traceback", "Truncating", "{'loss'", "it/s]")


def walkthrough(page: str = "README.md") -> list[list[str]]:
    """The commands of the fenced block after a page's walk-through marker (``\\`` continuations joined)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    after = text[text.index(MARKER) :]
    start = after.index("```bash\n") + len("```bash\n")
    block = after[start : after.index("```", start)].replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]


def needs_model(argv: list[str]) -> bool:
    return argv[1] == "train" or "hf" in argv


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert argv[0] == "josh", f"a walk-through line that is not a josh command: {argv}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "josh", *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{shlex.join(argv)} failed:\n{output}"
    assert not [word for word in NOISE if word in output], f"{shlex.join(argv)} was noisy:\n{output}"
    return done


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A working folder that looks like the repository root to the commands (they use ``recipes/...``)."""
    (tmp_path / "recipes").symlink_to(ROOT / "recipes")
    return tmp_path


def test_the_walkthrough_is_there_and_covers_the_pipeline():
    commands = [argv[1] for argv in walkthrough()]
    assert commands == ["rollout", "extract", "train", "eval", "view"]


def test_the_docs_tour_is_the_readme_walkthrough():
    assert walkthrough("docs/tour.md") == walkthrough()


def test_the_model_free_walkthrough_commands_run_as_written(checkout):
    for argv in walkthrough():
        if not needs_model(argv):
            run(argv, checkout)
    assert len((checkout / "rollouts/walk/sft.jsonl").read_text().splitlines()) == 4
    stats = json.loads((checkout / "rollouts/walk/stats.json").read_text())
    assert stats["run"]["agent"] == "oracle" and stats["llm_errors"] == 0
    assert (checkout / "rollouts/walk/view/index.html").is_file()


@pytest.mark.slow
def test_the_whole_walkthrough_runs_as_written(checkout):
    for argv in walkthrough():
        run(argv, checkout)
    card = (checkout / "checkpoints/walk/README.md").read_text()
    assert "base_model: smollm2" in card and "rollouts/walk/sft.jsonl" in card
    summary = json.loads((checkout / "runs/walk/summary.json").read_text())
    assert summary["conversations"] == 2
    assert summary["run"]["model"] == "smollm2" and summary["run"]["adapter"].endswith("checkpoints/walk")
    assert "llm_error" not in summary["error_counts"]
