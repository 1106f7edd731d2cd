"""Airline through the unchanged stages: CLI evaluation (scripted and LLM agents), JOSH search, extraction."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from josh.cli.main import app
from josh.envs.airline import AirlineEnv
from josh.envs.airline.tools import TOOLS
from tests.airline_data import write_airline


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--no-progress"] if args[0] in ("eval", "rollout") else list(args))
    assert result.exit_code == 0, result.output
    return result.output


def airline_prompt(data: str) -> str:
    """The airline environment's own system prompt for its first test task."""
    env = AirlineEnv(data)
    return env.system_prompt(env.tasks("test")[0])


def test_replay_agent_eval_rollout_and_extract(tmp_path: Path) -> None:
    data = str(write_airline(tmp_path / "data"))
    common = ["--env", "airline", "--data", data, "--split", "test", "--agent", "replay", "--user", "retail_scripted"]
    invoke("eval", *common, "--trials", "2", "--out", str(tmp_path / "eval"))
    summary = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert summary["conversations"] == 4 and summary["average_reward"]["mean"] == 1.0
    assert summary["pass_k"] == {"1": 1.0, "2": 1.0}

    invoke("rollout", *common, "--beam", "2", "--branching", "2", "--out", str(tmp_path / "rollout"))
    trees = [json.loads(line) for line in (tmp_path / "rollout" / "trees.jsonl").read_text().splitlines()]
    by_id = {t["task_id"]: t for t in trees}
    assert by_id["airline-test-0"]["reward"] == 1.0
    assert by_id["airline-test-1"]["error"] == "task has no goals: nothing to reward"  # a lookup-only task
    invoke("extract", str(tmp_path / "rollout"), "--agent", "function_calling")
    rows = [json.loads(line) for line in (tmp_path / "rollout" / "sft.jsonl").read_text().splitlines()]
    system, opening = rows[0]["messages"][:2]
    assert len(rows) == 1 and opening["content"] == "Hi! I want to cancel reservation BBB222."
    assert system["role"] == "system" and airline_prompt(data) in system["content"]  # the airline's own prompt
    calls = [c["function"]["name"] for m in rows[0]["messages"] for c in m.get("tool_calls") or ()]
    assert calls == ["get_reservation_details", "cancel_reservation"]
    assert {t["function"]["name"] for t in rows[0]["tools"]} == set(TOOLS)


def test_llm_agent_calls_airline_tools(tmp_path: Path) -> None:
    data = str(write_airline(tmp_path / "data"))
    call = 'Action: {"name": "get_reservation_details", "arguments": {"reservation_id": "BBB222"}}'
    replies = f"replies=[{json.dumps(call)}, 'Your reservation BBB222 is in business class. Anything else?']"
    args = ["eval", "--env", "airline", "--data", data, "--agent", "act", "--backend", "scripted"]
    invoke(
        *args, "--llm-option", replies, "--user", "retail_scripted", "--max-turns", "1", "--out", str(tmp_path / "act")
    )
    record = json.loads((tmp_path / "act" / "results.jsonl").read_text().splitlines()[0])
    results = [
        m["content"] for m in record["messages"] if m["role"] in ("tool", "user") and "BBB222" in (m["content"] or "")
    ]
    assert any('"cabin": "business"' in text for text in results), record["messages"]
