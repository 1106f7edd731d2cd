"""Every failure a newcomer meets prints at most three lines (the traceback only with ``josh --verbose``), exits
non-zero, and is caught before any model loads or any result is written."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.serve import free_port
from tests.llm.test_openai import FakeServer

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


@pytest.fixture
def no_model_loads(monkeypatch):
    """Fail the test if anything tries to build a local model."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr("josh.llm.hf.HFLLM.__init__", refuse)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--agent", "wizard"], "unknown agent strategy 'wizard' (--agent)"),
        (["--user", "agendaa"], "unknown user simulator 'agendaa' (--user)"),
        (["--env", "toolwozz"], "unknown environment 'toolwozz' (--env)"),
        (["--backend", "hff"], "unknown backend 'hff'"),
        (["--llm-option", "max_bach_size=4"], "unknown option max_bach_size for the hf backend (--llm-option"),
        (["--llm-option", "max_batch_size=many"], "bad option max_batch_size='many' for the hf backend (--llm-option"),
        (["--backend", "openai", "--model", "m", "--llm-option", "load_in_4bit=true"], "for the openai backend"),
        (["--agent-option", "examples=-1"], "bad option examples=-1 for the react agent (--agent-option"),
        (["--base-url", "http://127.0.0.1:1/v1"], "--base-url http://127.0.0.1:1/v1 only applies to the openai"),
        (["--backend", "scripted"], "needs canned replies: --llm-option 'replies=["),
    ],
)
@pytest.mark.parametrize("command", ["eval", "rollout"])
def test_bad_names_and_settings_are_one_line_before_any_model_loads(command, flags, message, tmp_path, no_model_loads):
    result = run(command, "--out", str(tmp_path / "run"), *flags)
    assert result.exit_code == 2, result.output
    assert len(lines(result.output)) <= 3 and message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "run").exists(), "nothing is written for a command that cannot start"


def test_verbose_shows_the_traceback(tmp_path):
    quiet = run("eval", "--agent", "wizard", "--out", str(tmp_path))
    loud = run("--verbose", "eval", "--agent", "wizard", "--out", str(tmp_path))
    assert "Traceback" not in quiet.output and "Traceback" in loud.output
    assert loud.exit_code == quiet.exit_code == 2


def test_an_unexpected_error_is_two_lines_and_points_at_verbose(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("surprise")

    monkeypatch.setattr("josh.run.components.build_components", broken)
    result = run("eval", "--agent", "oracle", "--out", str(tmp_path))
    assert result.exit_code == 1
    assert lines(result.output) == [
        "error: KeyError: 'surprise'",
        "this looks like a bug in josh: rerun with `josh --verbose ...` for the traceback",
    ]


@pytest.mark.parametrize("command", ["eval", "rollout"])
def test_an_unreachable_base_url_stops_at_once(command, tmp_path):
    url = closed_port_url()
    result = run(command, "--backend", "openai", "--model", "m", "--base-url", url, "--out", str(tmp_path / "r"))
    assert result.exit_code == 2
    assert len(lines(result.output)) == 1 and f"cannot reach {url}" in result.output
    assert not (tmp_path / "r").exists()


def test_a_backend_that_fails_every_request_stops_the_run_and_writes_no_results_as_done(tmp_path):
    server = FakeServer()
    server.behaviours = ["500"] * 1000
    args = ["--backend", "openai", "--model", "m", "--base-url", server.url, "--llm-option", "max_retries=0"]
    result = run("eval", *args, "--limit", "4", "--no-progress", "--out", str(tmp_path / "e"))
    assert result.exit_code == 2, result.output
    assert len(lines(result.output)) == 1
    assert re.search(
        r"error: the LLM backend openai:m at \S+ is down: all \d+ requests failed, none answered", result.output
    )
    written = [json.loads(line) for line in (tmp_path / "e" / "results.jsonl").read_text().splitlines()]
    assert all(record["failed"].startswith("llm_error: ") for record in written)  # none counts as done
    rollout = run("rollout", *args, "--limit", "2", "--no-progress", "--out", str(tmp_path / "r"))
    assert rollout.exit_code == 2 and len(lines(rollout.output)) == 1
    stats = json.loads((tmp_path / "r" / "stats.json").read_text())
    assert stats["tasks"] == 0 and stats["run"]["backend"] == "openai"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
@pytest.mark.parametrize(
    "args",
    [
        ["eval", "--backend", "vllm", "--out", "{tmp}/e"],
        ["rollout", "--backend", "vllm", "--out", "{tmp}/r"],
        [
            "loop",
            "--recipe",
            str(ROOT / "recipes/loop-paper-llama3-8b.yaml"),
            "--set",
            "output_dir={tmp}",
            "--set",
            "setup.data=mini",
        ],  # fmt: skip
    ],
)
def test_a_missing_vllm_is_one_line_with_the_install_command(args, tmp_path):
    result = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 2, result.output
    assert (
        len(lines(result.output)) <= 2 and "pip install 'josh-agents[vllm]'" in result.output
    )  # loop: + its stage line
    assert "Traceback" not in result.output


def test_a_benchmark_without_its_data_says_how_to_get_it(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/taubench_replay.py"), "retail", str(tmp_path / "retail")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 1
    assert lines(done.stdout + done.stderr) == [
        f"error: retail data folder {tmp_path / 'retail'} lacks users.json, orders.json, products.json, policy.md; "
        f"fetch it with `josh data download retail --dest {tmp_path / 'retail'}`"
    ]
