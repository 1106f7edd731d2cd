"""Whole runs whose prompts outgrow the model's context finish (issue 66): ``josh eval`` and ``josh rollout`` against
an OpenAI-compatible server that answers HTTP 400 ``context_length_exceeded`` once a conversation grows, and the
issue's reproduction on the hf backend. Each run exits 0 with every conversation or tree finished, the overflow
recorded as its ending, and a rerun runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.agents import make_agent
from josh.cli.main import app
from josh.envs import build_env
from josh.llm.scripted import ScriptedLLM
from josh.types import user
from tests.fault_server import FaultServer
from tests.run.test_backend_outage import KEY, _local, react_reply  # noqa: F401 (_local: the autouse fixture)

FAST = ("--llm-option", "max_retries=2", "--llm-option", "timeout_s=5", "--llm-option", "backoff_s=0.01")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def josh(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def opening_messages() -> int:
    """How many messages the ReAct agent's first request on a mini task holds (its prompt and the user's opening)."""
    env = build_env("toolwoz", "mini")
    agent = make_agent("react", env, ScriptedLLM(["unused"]))
    return len(agent.prompt([user("hello")], env.tasks("test")[0]))


@pytest.mark.parametrize("command", ["eval", "rollout"])
def test_a_server_refusing_long_prompts_ends_conversations_not_the_run(tmp_path, command):
    """The server takes a first agent turn (its call, then its reply after the result) and refuses every longer
    prompt: every conversation (tree) is finished, with its overflow recorded; the run exits 0; a rerun sends
    nothing."""
    server = FaultServer(react_reply, api_key=KEY, rate=0.0, context_messages=opening_messages() + 2)
    out = tmp_path / "run"
    args = [command, "--backend", "openai", "--base-url", server.url, "--model", "fake", "--agent", "react"]
    args += ["--user", "agenda", "--no-progress", "--out", str(out), "--limit", "4", "--concurrency", "2", *FAST]
    args += ["--max-turns", "3"] if command == "eval" else ["--max-depth", "3", "--beam", "2", "--branching", "2"]
    try:
        code, output = josh(*args)
        sent = len(server.log)
        again, output_again = josh(*args)
    finally:
        server.close()
    assert code == 0 and again == 0, output + output_again
    assert "too long" in server.log and len(server.log) == sent, "the rerun sent no request"
    if command == "eval":
        records = lines(out / "results.jsonl")
        assert len(records) == 4 and not any(r.get("failed") for r in records)
        assert {r["end_reason"] for r in records} <= {"context_length", "user_done"}
        assert any(r["end_reason"] == "context_length" for r in records)
        summary = json.loads((out / "summary.json").read_text())
        assert summary["failed"] == 0 and summary["pending"] == 0 and summary["end_reasons"]["context_length"] >= 1
        assert "context_length" in output  # the endings row of the summary table
    else:
        trees = lines(out / "trees.jsonl")
        assert len(trees) == 4 and not any(t.get("failed") for t in trees)
        endings = [n["ending"] for t in trees for n in t["nodes"] if n.get("ending")]
        assert endings and set(endings) == {"context_length"}
        stats = json.loads((out / "stats.json").read_text())
        assert stats["endings"] == {"context_length": len(endings)} and stats["pending"] == 0
        assert "branches ended on a prompt longer than its model's context: context_length" in output


@pytest.mark.slow
def test_the_issues_reproduction_on_the_hf_backend_finishes_with_context_length_endings(tmp_path):
    """SmolLM2 behind the hf backend with ``max_prompt_tokens=1500``: every first prompt (the function-calling agent's
    tools and the user's opening, about 1,800 tokens) is too long; all 6 conversations end ``context_length``."""
    out = tmp_path / "run"
    args = ["eval", "--env", "toolwoz", "--data", "mini", "--split", "test", "--agent", "function_calling"]
    args += ["--user", "agenda", "--backend", "hf", "--llm-option", "max_prompt_tokens=1500", "--limit", "6"]
    args += ["--max-turns", "3", "--no-progress", "--out", str(out)]
    code, output = josh(*args)
    assert code == 0, output
    records = lines(out / "results.jsonl")
    assert len(records) == 6 and {r["end_reason"] for r in records} == {"context_length"}
    assert not any(r.get("failed") for r in records)
    assert all("over the limit of 1500" in r["error"] for r in records)
    before = (out / "results.jsonl").read_text()
    code, output = josh(*args)
    assert code == 0, output
    assert (out / "results.jsonl").read_text() == before
    assert "6 of 6 conversations already done" in output
