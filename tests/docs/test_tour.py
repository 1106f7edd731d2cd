"""The README's walk-through, read from the README itself and run exactly as written, in a fresh folder.

The documentation site's tour (``docs/tour.md``) holds the same block, which is checked to be identical. The
model-free commands (rollout, extract, view) run once per module and are checked in the fast suite; the slow test
runs the rest of the chain, SmolLM2 training and the evaluation of its checkpoint, in the same folder. Every command
is also checked to keep the terminal quiet."""

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


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working folder that looks like the repository root to the commands (they use ``recipes/...``), where the
    model-free commands (rollout, extract, view) ran as written, once for both tests: the model commands read only
    what rollout and extract wrote, and view only the rollout."""
    folder = tmp_path_factory.mktemp("walk")
    (folder / "recipes").symlink_to(ROOT / "recipes")
    for argv in walkthrough():
        if not needs_model(argv):
            run(argv, folder)
    return folder


def test_the_walkthrough_is_there_and_covers_the_pipeline():
    commands = [argv[1] for argv in walkthrough()]
    assert commands == ["rollout", "extract", "train", "eval", "view"]


def test_the_docs_tour_is_the_readme_walkthrough():
    assert walkthrough("docs/tour.md") == walkthrough()


def test_the_model_free_walkthrough_commands_run_as_written(walked):
    assert len((walked / "rollouts/walk/sft.jsonl").read_text().splitlines()) == 4
    stats = json.loads((walked / "rollouts/walk/stats.json").read_text())
    assert stats["run"]["agent"] == "oracle" and stats["llm_errors"] == 0
    assert (walked / "rollouts/walk/view/index.html").is_file()


@pytest.mark.slow
def test_the_whole_walkthrough_runs_as_written(walked):
    """The model commands after the model-free ones (``walked``): SmolLM2 trains one step on a ~2,000-token oracle
    row and is evaluated, as the README says; that step is most of this test's cost and is the README's to change."""
    for argv in walkthrough():
        if needs_model(argv):
            run(argv, walked)
    card = (walked / "checkpoints/walk/README.md").read_text()
    assert "base_model: smollm2" in card and "rollouts/walk/sft.jsonl" in card
    summary = json.loads((walked / "runs/walk/summary.json").read_text())
    assert summary["conversations"] == 2
    assert summary["run"]["model"] == "smollm2" and summary["run"]["adapter"].endswith("checkpoints/walk")
    assert "llm_error" not in summary["error_counts"]
