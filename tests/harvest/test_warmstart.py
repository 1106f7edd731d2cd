"""Scripted warm-start data: oracle conversations rewritten in a prompted agent's protocol, read back by its parser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.agents import agent_prompt
from josh.core.llm import Completion
from josh.harvest.warmstart import RenderError, WarmStartConfig, scripted_conversations, warm_start
from josh.types import Message, ToolCall, assistant, tool_result, user

PROTOCOLS = ["act", "react", "function_calling"]


@pytest.fixture(scope="module")
def records(mini_env):
    return asyncio.run(scripted_conversations(mini_env, mini_env.tasks("train")[:12], WarmStartConfig(tasks=12)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rendered_turns_read_back_as_the_oracle_calls(mini_env, records, protocol: str) -> None:
    agent = agent_prompt(protocol, mini_env)
    for record in records:
        rendered = agent.render(record.messages)
        oracle_calls = [(c.name, c.arguments) for m in record.messages for c in (m.tool_calls or ())]
        oracle_replies = [m.content for m in record.messages if m.role == "assistant" and not m.tool_calls]
        calls, replies = [], []
        for message in rendered:
            if message.role != "assistant":
                continue
            parsed = agent.protocol.parse(
                Completion(text=message.content or "", tool_calls=list(message.tool_calls or ()))
            )
            calls += [(c.call.name, c.call.arguments) for c in parsed.calls]
            replies += [parsed.reply] if parsed.reply is not None else []
        assert calls == oracle_calls
        assert replies == oracle_replies
        assert [m.content for m in rendered if m.role == "user" and not _is_result(m, protocol)] == [
            m.content for m in record.messages if m.role == "user"
        ]


def _is_result(message: Message, protocol: str) -> bool:
    return protocol != "function_calling" and (message.content or "").startswith(("Observation:", "APIRETURN"))


def test_act_rows_are_what_the_agent_sees(mini_env, tmp_path: Path) -> None:
    agent = agent_prompt("act", mini_env, examples=0)
    stats = warm_start(mini_env, mini_env.tasks("train"), agent, tmp_path, WarmStartConfig(tasks=5, skip=3))
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert stats.rows == len(rows) == 5 and stats.mean_reward == 1.0
    task = mini_env.tasks("train")[3]
    first = rows[0]["messages"]
    assert first[0] == {"role": "system", "content": agent.system_prompt(task)}
    assert rows[0]["tools"] == []  # act describes tools in its prompt and passes none to the backend
    assert first[2]["content"].startswith("Action: {")
    assert json.loads((tmp_path / "warmstart_stats.json").read_text())["rows"] == 5


def test_rows_carry_the_agents_tool_listing(mini_env, tmp_path: Path) -> None:
    agent = agent_prompt("act", mini_env, examples=0, tool_listing="brief")
    warm_start(mini_env, mini_env.tasks("train"), agent, tmp_path, WarmStartConfig(tasks=2))
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    system = rows[0]["messages"][0]["content"]
    assert system == agent.system_prompt(mini_env.tasks("train")[0]) and "Tools (name: arguments):" in system


def test_function_calling_rows_carry_native_calls_and_tools(mini_env, tmp_path: Path) -> None:
    agent = agent_prompt("function_calling", mini_env)
    warm_start(mini_env, mini_env.tasks("train"), agent, tmp_path, WarmStartConfig(tasks=3))
    row = json.loads((tmp_path / "sft.jsonl").read_text().splitlines()[0])
    assert row["tools"] == mini_env.tools
    calls = [m for m in row["messages"] if m.get("tool_calls")]
    results = {m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"}
    assert calls and {c["id"] for m in calls for c in m["tool_calls"]} == results


def test_short_horizon_keeps_prefixes_only_when_asked(mini_env, tmp_path: Path) -> None:
    agent = agent_prompt("act", mini_env)
    strict = warm_start(
        mini_env, mini_env.tasks("train"), agent, tmp_path / "a", WarmStartConfig(tasks=10, max_turns=1)
    )
    loose = warm_start(
        mini_env, mini_env.tasks("train"), agent, tmp_path / "b", WarmStartConfig(tasks=10, max_turns=1, min_reward=0.0)
    )
    assert strict.rows + strict.below_reward == 10 and strict.below_reward > 0
    assert loose.rows == 10


def test_empty_selection_unprompted_agents_and_unfaithful_renderings_are_refused(mini_env, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no tasks"):
        warm_start(
            mini_env, mini_env.tasks("train"), agent_prompt("act", mini_env), tmp_path, WarmStartConfig(skip=10_000)
        )
    with pytest.raises(ValueError, match="the oracle agent is not prompted"):
        agent_prompt("oracle", mini_env)
    with pytest.raises(RenderError, match="react"):  # ReACT would read the reply as two commands
        agent_prompt("react", mini_env).render([user("hi"), assistant("one <COMMAND_END> APICALL {}")])


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(str.strip),
    value=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
)
def test_any_reply_and_argument_round_trip_in_act(mini_env, text: str, value: str) -> None:
    agent = agent_prompt("act", mini_env)
    call = ToolCall(name="search_restaurant", arguments={"food": value}, id="c1")
    messages = [user("hello"), assistant(None, [call]), tool_result("c1", "[]"), assistant(text.strip())]
    rendered = agent.render(messages)
    assert agent.protocol.parse(Completion(text=rendered[1].content)).calls[0].call.arguments == {"food": value}
    assert agent.protocol.parse(Completion(text=rendered[-1].content)).reply == text.strip()
