"""What a command does with its files and how it exits (issue 63 items 7 and 8): every command that reads JSONL
names a bad line with its fix and takes ``--skip-bad-lines``; an extraction with no rows of a format writes no file
``datasets`` cannot load; a failed start leaves no half-made ``--out``; bad input exits 2; tables print whole in a
pipe; the commands whose summary is a table print it as JSON with ``--json``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.toolwoz.data import SHIPPED_MINI
from josh.util.errors import EXIT_CODES
from josh.util.width import LOG_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--agent", "oracle", "--user", "agenda", "--no-progress"]
READERS = {  # every command that reads a JSONL file (run files, task files, training rows)
    "rollout", "eval", "extract", "view", "loop", "demo", "report", "compare", "matrix", "judge", "arena",
    "export tau2", "data stats", "data show", "check-env", "train sft", "train kto", "train dpo", "train tree",
}  # fmt: skip


def _invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _corrupt(path: Path, at: int = 1) -> None:
    """Put a line that is not JSON at line ``at + 1`` of ``path`` (mid-file: not a write cut short)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    lines.insert(at, '{"task_id": "broken", "note": "cut')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _options(command) -> dict[str, set[str]]:
    """Every command's path and its option names, walked from the app."""
    found: dict[str, set[str]] = {}

    def walk(cmd, path: str) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            found[path] = {opt for p in cmd.params for opt in getattr(p, "opts", [])}

    walk(command, "")
    return found


def test_every_command_that_reads_jsonl_takes_skip_bad_lines():
    options = _options(get_command(app))
    lacking = sorted(c for c in READERS if "--skip-bad-lines" not in options[c])
    assert not lacking, f"no --skip-bad-lines on {lacking}"


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rollout") / "run"
    result = _invoke("rollout", *RUN, "--limit", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_view_names_the_bad_line_and_the_fix_and_skips_it_when_told(trees, tmp_path):
    run = shutil.copytree(trees, tmp_path / "run")
    _corrupt(run / "trees.jsonl")
    strict = _invoke("view", str(run))
    assert strict.exit_code == 2
    message = _one_line(strict.output)
    assert f"{run / 'trees.jsonl'}: line 2 is not valid JSON (Invalid control character at column" in message
    assert "at at" not in message and "rerun with --skip-bad-lines" in message
    skipping = _invoke("view", str(run), "--skip-bad-lines")
    assert skipping.exit_code == 0, skipping.output
    assert "2 tasks" in skipping.output and (run / "view" / "index.html").is_file()
    assert f"skipped 1 bad line (--skip-bad-lines): {run / 'trees.jsonl'}: line 2" in _one_line(skipping.output)


@pytest.mark.parametrize(("command", "record"), [("rollout", "trees.jsonl"), ("eval", "results.jsonl")])
def test_a_resumed_run_names_the_bad_line_and_the_fix_and_skips_it_when_told(tmp_path, command, record):
    out = tmp_path / "run"
    assert _invoke(command, *RUN, "--limit", "2", "--out", str(out)).exit_code == 0
    _corrupt(out / record)
    strict = _invoke(command, *RUN, "--limit", "3", "--out", str(out))
    assert strict.exit_code == 2
    assert f"{out / record}: line 2 is not valid JSON" in _one_line(strict.output)
    assert "--skip-bad-lines" in strict.output
    skipping = _invoke(command, *RUN, "--limit", "3", "--out", str(out), "--skip-bad-lines")
    assert skipping.exit_code == 0, skipping.output
    assert "skipped 1 bad line" in skipping.output and "line 2" in skipping.output


def test_data_stats_names_a_bad_task_line_exits_2_and_skips_it_when_told(tmp_path):
    data = shutil.copytree(SHIPPED_MINI, tmp_path / "data")
    _corrupt(data / "tasks_val.jsonl", at=3)
    strict = _invoke("data", "stats", str(data))
    assert strict.exit_code == 2
    assert f"{data / 'tasks_val.jsonl'}: line 4 is not valid JSON" in _one_line(strict.output)
    assert "--skip-bad-lines" in strict.output
    skipping = _invoke("data", "stats", str(data), "--skip-bad-lines", "--json")
    assert skipping.exit_code == 0, skipping.output
    shipped = len((SHIPPED_MINI / "tasks_val.jsonl").read_text(encoding="utf-8").splitlines())
    assert json.loads(skipping.stdout)["splits"]["val"]["tasks"] == shipped  # every task, the bad line left out
    assert "skipped 1 bad line" in skipping.stderr


def test_bad_input_exits_2_everywhere(tmp_path):
    assert _invoke("data", "stats", str(tmp_path / "absent")).exit_code == 2
    assert _invoke("view", str(tmp_path / "absent")).exit_code == 2
    assert _invoke("extract", str(tmp_path / "absent")).exit_code == 2
    assert _invoke("eval", *RUN, "--data", str(tmp_path / "absent"), "--out", str(tmp_path / "e")).exit_code == 2


def test_the_cli_reference_lists_the_exit_codes():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning} |" in page, "regenerate it: python scripts/cli_reference.py > docs/cli.md"


def test_an_extraction_without_pairs_writes_only_files_datasets_loads(trees, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "data"
    out.mkdir()
    (out / "dpo.jsonl").write_text('{"stale": "an earlier extraction"}\n')
    result = _invoke("extract", str(trees), "--out", str(out), "--agent", "function_calling", "--json")
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["dpo"] == 0 and stats["sft"] > 0  # the oracle's trees have no sibling to pair
    assert not (out / "dpo.jsonl").exists()
    assert "| dpo.jsonl (not written: no rows) | 0 pairs |" in (out / "README.md").read_text()
    for name in ("sft", "kto"):
        rows = datasets.load_dataset(
            "json", data_files=str(out / f"{name}.jsonl"), split="train", cache_dir=str(tmp_path / "c")
        )
        assert len(rows) == (stats["sft"] if name == "sft" else stats["kto_desirable"] + stats["kto_undesirable"])


def test_a_command_that_fails_before_its_first_record_leaves_no_out_folder(tmp_path):
    missing = ["--data", str(tmp_path / "absent")]
    for command in ("eval", "rollout"):
        out = tmp_path / command / "run"
        result = _invoke(command, "--agent", "react", "--backend", "hf", "--model", str(tmp_path / "no-model"),
                         "--user", "agenda", "--limit", "1", "--no-progress", "--out", str(out))  # fmt: skip
        assert result.exit_code == 2, result.output
        assert not (tmp_path / command).exists()
        assert _invoke(command, *RUN, *missing, "--out", str(out)).exit_code == 2
        assert not (tmp_path / command).exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert _invoke("eval", *RUN, *missing, "--out", str(kept)).exit_code == 2
    assert kept.is_dir()


@pytest.mark.parametrize("command", ["rollout", "eval"])
def test_json_prints_the_summary_alone_on_stdout(tmp_path, command):
    out = tmp_path / "run"
    result = _invoke(command, *RUN, "--limit", "2", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    written = json.loads((out / ("stats.json" if command == "rollout" else "summary.json")).read_text())
    key = "tasks" if command == "rollout" else "conversations"
    assert printed[key] == written[key] == 2


def test_json_on_check_env_and_matrix_is_their_report(tmp_path):
    checked = _invoke("check-env", "toolwoz", "--data", "mini", "--json")
    assert checked.exit_code == 0, checked.output
    assert {c["name"] for c in json.loads(checked.stdout)["checks"]} and "check" not in checked.stdout.split("{")[0]
    matrix = _invoke("matrix", "--out", str(tmp_path / "m"), "--agent", "oracle", "--user", "agenda", "--limit", "2",
                     "--no-progress", "--json")  # fmt: skip
    assert matrix.exit_code == 0, matrix.output
    assert json.loads(matrix.stdout) == json.loads((tmp_path / "m" / "matrix.json").read_text())


def _piped(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "josh", *args], capture_output=True, text=True, env=env, cwd=ROOT, check=True
    )
    return done.stdout


def test_tables_and_help_print_whole_into_a_pipe():
    stats = _piped("data", "stats")
    assert "…" not in stats
    header = next(line for line in stats.splitlines() if "split" in line)
    assert all(f" {column} " in header for column in ("fail_info", "fail_book", "attraction", "repaired", "defects"))
    assert max(map(len, stats.splitlines())) <= LOG_COLUMNS
    assert "…" not in _piped("eval", "--help")
