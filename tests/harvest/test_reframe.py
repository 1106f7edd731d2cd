"""Rows train what is evaluated: ``josh extract --agent`` frames a scripted agent's trees with the system prompt,
examples and tools the named agent uses at evaluation time, and the environment's own ``system_prompt`` is kept."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from josh.agents import agent_prompt, make_agent
from josh.cli.main import app
from josh.envs.toolwoz.agenda import AgendaUser
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.oracle import OracleAgent
from josh.harvest.extract import extract
from josh.harvest.reframe import Reframe
from josh.llm.scripted import ScriptedLLM
from josh.run.conversation import run_conversation
from josh.search.algorithm import SearchConfig, search
from josh.search.tree import Tree
from josh.types import Task


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def eval_time_request(env, task: Task, agent: str, **options) -> tuple[str, list | None]:
    """The system prompt and tools the prompted ``agent`` sends its model on ``task`` in an evaluation's
    conversation (``josh eval`` runs each with ``run_conversation``)."""
    llm = ScriptedLLM(["Goodbye."])
    asyncio.run(run_conversation(env, task, make_agent(agent, env, llm, **options), AgendaUser(), max_turns=1))
    first = llm.requests[0]
    assert first.messages[0].role == "system"
    return first.messages[0].content or "", first.tools


@pytest.fixture(scope="module")
def oracle_rollout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``josh rollout --agent oracle --user agenda`` on three mini train tasks."""
    out = tmp_path_factory.mktemp("oracle") / "rollout"
    args = ["rollout", "--agent", "oracle", "--user", "agenda", "--limit", "3", "--out", str(out), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def test_extract_with_agent_puts_the_eval_time_system_prompt_first(
    oracle_rollout: Path, mini_env, tmp_path: Path
) -> None:
    flags = ["--agent", "function_calling", "--agent-option", "examples=1"]
    result = CliRunner().invoke(app, ["extract", str(oracle_rollout), "--out", str(tmp_path), *flags])
    assert result.exit_code == 0, result.output
    sft, kto = rows(tmp_path / "sft.jsonl"), rows(tmp_path / "kto.jsonl")
    tasks = {t.id: t for t in mini_env.tasks("train")}
    trees = [Tree.model_validate_json(line) for line in (oracle_rollout / "trees.jsonl").read_text().splitlines()]
    assert sft and all(tree.system is None for tree in trees)  # the oracle records no prompt of its own
    system, tools = eval_time_request(mini_env, tasks[trees[0].task_id], "function_calling", examples=1)
    first = sft[0]["messages"][0]
    assert first == {"role": "system", "content": system}
    assert sft[0]["tools"] == tools and all(r["tools"] == tools for r in kto)
    assert all(r["prompt"][0] == first for r in kto)  # ToolWOZ's prompt is the same for every task
    calls = [m for m in sft[0]["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    assert calls  # the oracle's calls, written in the function-calling protocol
    assert "| rows framed for | the function_calling agent" in (tmp_path / "README.md").read_text()


def test_extract_refuses_a_scripted_agents_trees_without_agent(oracle_rollout: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["extract", str(oracle_rollout), "--out", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert "record no system prompt" in result.output and "--agent function_calling" in result.output
    assert not (tmp_path / "d" / "sft.jsonl").exists()
    kept = CliRunner().invoke(
        app, ["extract", str(oracle_rollout), "--out", str(tmp_path / "r"), "--agent", "recorded"]
    )
    assert kept.exit_code == 0, kept.output
    assert all(r["messages"][0]["role"] == "user" for r in rows(tmp_path / "r" / "sft.jsonl"))
    other = CliRunner().invoke(app, ["extract", str(oracle_rollout), "--agent", "oracle", "--out", str(tmp_path / "o")])
    assert other.exit_code == 2 and "not prompted" in other.output


class OwnPromptEnv(ToolWOZEnv):
    """ToolWOZ with a system prompt of its own per task, as a plugin environment writes one."""

    def system_prompt(self, task: Task) -> str:
        return f"House rules for {task.id}: greet the guest by the name of the town."


def test_an_environments_own_system_prompt_is_kept(mini_env, tmp_path: Path) -> None:
    env = OwnPromptEnv(mini_env.db, {"train": mini_env.tasks("train")[:2]})
    trees = [asyncio.run(search(t, env, OracleAgent(env), AgendaUser(), SearchConfig())) for t in env.tasks("train")]
    (tmp_path / "trees.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in trees))
    stats = extract(tmp_path, tmp_path / "rows", reframe=Reframe(agent_prompt("react", env), env, ["train"]))
    assert stats.sft == 2 and stats.unrenderable == 0
    for row, task in zip(rows(tmp_path / "rows" / "sft.jsonl"), env.tasks("train"), strict=True):
        system, _ = eval_time_request(env, task, "react")
        assert row["messages"][0] == {"role": "system", "content": system}
        assert f"House rules for {task.id}" in system


def test_trees_of_another_prompted_agent_are_refused(mini_env) -> None:
    tree = Tree(task_id=mini_env.tasks("train")[0].id, system="react prompt", protocol="react")
    reframe = Reframe(agent_prompt("function_calling", mini_env), mini_env, ["train"])
    with pytest.raises(ValueError, match="--agent react"):
        reframe(tree)
    assert reframe(tree.model_copy(update={"protocol": "function_calling"})).system != "react prompt"
    with pytest.raises(ValueError, match="older than the field"):
        reframe(tree.model_copy(update={"protocol": None}))
