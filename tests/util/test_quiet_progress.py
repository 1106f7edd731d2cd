"""Library noise goes to the run's log file, josh's own progress stays on the terminal, and progress prints plain
lines at a sane rate where output is not a terminal."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import TextColumn

from josh.util import errors as cli_errors
from josh.util.progress import LineProgress, stage_progress
from josh.util.quiet import noise_to

ROOT = Path(__file__).resolve().parents[2]


SCRIPT = """
import logging, sys, warnings
from josh.util.quiet import noise_to, terminal
with noise_to(sys.argv[1]):
    warnings.warn("gradient_checkpointing is deprecated", FutureWarning, stacklevel=1)
    logging.getLogger("josh.agents.prompted").warning("agent LLM call failed: boom")
    handler = logging.StreamHandler()  # created inside the block, like Ray's at `import ray`
    sys.stderr.write("Truncating train dataset: 100%\\n")
    print("still on the terminal", file=terminal())
handler.stream.write("after the block\\n")
"""


def test_warnings_logging_and_stray_writes_go_to_the_log_file(tmp_path):
    log = tmp_path / "run" / "eval.log"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert "FutureWarning" in text and "agent LLM call failed" in text and "Truncating" in text
    assert done.stderr.splitlines() == ["still on the terminal", "after the block"]


DEEPSPEED = """
import sys
from josh.util.quiet import noise_to
with noise_to(sys.argv[1]):
    import deepspeed  # on a machine without a GPU its logger warns "Setting accelerator to CPU" on sys.stdout
print("stdout after the block")
"""


def test_deepspeeds_stdout_logger_writes_into_the_log_file(tmp_path):
    """DeepSpeed's import is real (it is what ``make demo`` printed to the terminal); a few seconds."""
    pytest.importorskip("deepspeed")
    log = tmp_path / "run" / "loop.log"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", DEEPSPEED, str(log)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "Setting accelerator to CPU" in log.read_text()
    assert done.stdout == "stdout after the block\n" and "accelerator" not in done.stderr


def test_blocks_nest_and_verbose_leaves_everything_on_the_terminal(tmp_path, capsys, monkeypatch):
    with noise_to(tmp_path / "outer.log"):
        with noise_to(tmp_path / "inner.log"):
            sys.stderr.write("inner noise\n")
        sys.stderr.write("outer noise\n")
    assert "inner noise" in (tmp_path / "inner.log").read_text()
    assert "outer noise" in (tmp_path / "outer.log").read_text()
    assert "inner noise" not in (tmp_path / "outer.log").read_text()
    monkeypatch.setattr(cli_errors, "_verbose", True)
    with noise_to(tmp_path / "verbose.log") as log:
        sys.stderr.write("loud\n")
    assert log is None and not (tmp_path / "verbose.log").exists() and "loud" in capsys.readouterr().err


def test_line_progress_prints_the_first_update_then_every_interval_then_the_end():
    out = io.StringIO()
    progress = LineProgress(TextColumn("x"), console=Console(file=out, width=200), every_s=3600)
    task = progress.add_task("conversations", total=5, goals="0/0")
    progress.start()
    for done in range(5):
        progress.update(task, advance=1, goals=f"{done + 1}/9")
    progress.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("conversations 1/5  goals 1/9  ") and "elapsed" in lines[0]
    assert lines[1].startswith("conversations 5/5  goals 5/9  ") and "left" not in lines[1]


def test_stage_progress_is_live_on_a_terminal_and_lines_elsewhere():
    assert isinstance(stage_progress(TextColumn("x"), console=Console(file=io.StringIO())), LineProgress)
    live = stage_progress(TextColumn("x"), console=Console(file=io.StringIO(), force_terminal=True))
    assert not isinstance(live, LineProgress)
    assert stage_progress(TextColumn("x"), enabled=False).disable


def test_stderr_and_the_stdout_loggers_are_as_they_were_after_a_josh_command(tmp_path, capsys):
    """``josh eval`` called in this process (not through ``CliRunner``, which would put its own streams back) leaves
    ``sys.stderr`` the very object it found and no filter on DeepSpeed's logger; its library noise went to its log."""
    import logging

    from josh.cli.main import app

    stderr, filters = sys.stderr, list(logging.getLogger("DeepSpeed").filters)
    args = ["eval", "--agent", "oracle", "--user", "agenda", "--limit", "1", "--no-progress", "--out", str(tmp_path)]
    try:
        app(args, standalone_mode=False)
    finally:
        leaked = sys.stderr
        sys.stderr = stderr
    assert leaked is stderr
    assert logging.getLogger("DeepSpeed").filters == filters
    assert (tmp_path / "results.jsonl").is_file() and list(tmp_path.glob("*.log"))
