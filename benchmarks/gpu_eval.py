"""The evaluation stage of ``gpu_check.py``: ``josh eval`` as a GPU user runs it, on a random-weight shape.

The function-calling agent on the model under test against the rule-based agenda user (every LLM request is the
agent's), on the first test tasks of the paper's ToolWOZ (the named source ``toolwoz``, once ``josh data download
toolwoz`` installed it) or of the mini set, all conversations in flight at once, through the backend the check
measures. It runs as its own process (``python -m josh eval``), so the model is loaded as a user's run loads it
and its memory is freed when it ends; the figure is conversations a minute over the evaluation's own wall time
(``summary.json``'s ``wall_s``, the model's load left out), beside how the conversations ended.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TASKS, TURNS, MAX_NEW_TOKENS = 16, 4, 256


def eval_source() -> str:
    """``toolwoz`` (the paper's release) when it is installed, else ``mini``."""
    from josh.envs.toolwoz.paper_data import is_current, paper_dir

    return "toolwoz" if is_current(paper_dir()) else "mini"


def measure_eval(
    model: Path,
    backend: str,
    settings: dict[str, Any],
    out: Path,
    *,
    tasks: int = TASKS,
    turns: int = TURNS,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> dict[str, Any]:
    """``josh eval`` of ``model`` through ``backend`` (with ``settings`` as ``--llm-option``s) on the first ``tasks``
    test tasks, at most ``turns`` agent turns each, into ``out``: its conversations a minute and endings."""
    source = eval_source()
    command = [sys.executable, "-m", "josh", "eval", "--env", "toolwoz", "--data", source, "--split", "test"]
    command += ["--limit", str(tasks), "--agent", "function_calling", "--user", "agenda", "--backend", backend]
    command += ["--model", str(model), "--max-turns", str(turns), "--max-new-tokens", str(max_new_tokens)]
    command += ["--concurrency", str(tasks), "--no-progress", "--out", str(out)]
    for key, value in settings.items():
        command += ["--llm-option", f"{key}={value}"]
    shutil.rmtree(out, ignore_errors=True)  # a reused --workdir: measure a fresh run, not a resumed one
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    process_s = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"josh eval exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    conversations, seconds = summary["conversations"], summary["wall_s"]
    endings = ", ".join(f"{name} {count}" for name, count in sorted(summary["end_reasons"].items()))
    result = {
        "source": source,
        "tasks": tasks,
        "turns": turns,
        "conversations": conversations,
        "failed": summary["failed"],
        "seconds": seconds,
        "per_minute": 60 * conversations / seconds,
        "process_s": process_s,
        "endings": endings,
    }
    print(f"eval {model.name} ({backend}): {describe(result)}", flush=True)
    return result


def describe(result: dict[str, Any]) -> str:
    """The stage's figure in words, as the summary prints it."""
    return (
        f"{result['per_minute']:.1f} conversations/min: {result['conversations']} conversations on the first "
        f"{result['tasks']} {result['source']} test tasks, at most {result['turns']} turns, in {result['seconds']:.1f} s "
        f"({result['process_s']:.0f} s with loading; endings: {result['endings']}; failed: {result['failed']})"
    )
