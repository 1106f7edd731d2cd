"""Scripted warm-start data: oracle conversations rewritten in a prompted agent's protocol, read back by its parser."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from josh.agents import make_agent
from josh.components import build_env
from josh.llm.base import Completion
from josh.types import Message, ToolCall, assistant, tool_result, user
from josh.warmstart import RenderError, WarmStartConfig, render_messages, scripted_conversations, warm_start

PROTOCOLS = ["act", "react", "function_calling"]


class NoLLM:
    async def chat(self, *args, **kwargs):
        raise AssertionError("the warm start must not call a model")


@pytest.fixture(scope="module")
def env():
    return build_env("toolwoz", "mini")


@pytest.fixture(scope="module")
def records(env):
    return asyncio.run(scripted_conversations(env, env.tasks("train")[:12], WarmStartConfig(tasks=12)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rendered_turns_read_back_as_the_oracle_calls(env, records, protocol: str) -> None:
    agent = make_agent(protocol, env, NoLLM())
    for record in records:
        rendered = render_messages(agent, record.messages)
        oracle_calls = [(c.name, c.arguments) for m in record.messages for c in (m.tool_calls or ())]
        oracle_replies = [m.content for m in record.messages if m.role == "assistant" and not m.tool_calls]
        calls, replies = [], []
        for message in rendered:
            if message.role != "assistant":
                continue
            parsed = agent.read(Completion(text=message.content or "", tool_calls=list(message.tool_calls or ())))
            calls += [(c.call.name, c.call.arguments) for c in parsed.calls]
            replies += [parsed.reply] if parsed.reply is not None else []
        assert calls == oracle_calls
        assert replies == oracle_replies
        assert [m.content for m in rendered if m.role == "user" and not _is_result(m, protocol)] == [
            m.content for m in record.messages if m.role == "user"
        ]


def _is_result(message: Message, protocol: str) -> bool:
    return protocol != "function_calling" and (message.content or "").startswith(("Observation:", "APIRETURN"))


def test_act_rows_are_what_the_agent_sees(env, tmp_path: Path) -> None:
    agent = make_agent("act", env, NoLLM(), examples=0)
    stats = warm_start(env, env.tasks("train"), agent, tmp_path, WarmStartConfig(tasks=5, skip=3))
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert stats.rows == len(rows) == 5 and stats.mean_reward == 1.0
    task = env.tasks("train")[3]
    first = rows[0]["messages"]
    assert first[0] == {"role": "system", "content": agent.system_prompt(task)}
    assert rows[0]["tools"] == []  # act describes tools in its prompt and passes none to the backend
    assert first[2]["content"].startswith("Action: {")
    assert json.loads((tmp_path / "warmstart_stats.json").read_text())["rows"] == 5


def test_function_calling_rows_carry_native_calls_and_tools(env, tmp_path: Path) -> None:
    agent = make_agent("function_calling", env, NoLLM())
    warm_start(env, env.tasks("train"), agent, tmp_path, WarmStartConfig(tasks=3))
    row = json.loads((tmp_path / "sft.jsonl").read_text().splitlines()[0])
    assert row["tools"] == env.tools
    calls = [m for m in row["messages"] if m.get("tool_calls")]
    results = {m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"}
    assert calls and {c["id"] for m in calls for c in m["tool_calls"]} == results


def test_short_horizon_keeps_prefixes_only_when_asked(env, tmp_path: Path) -> None:
    agent = make_agent("act", env, NoLLM())
    strict = warm_start(env, env.tasks("train"), agent, tmp_path / "a", WarmStartConfig(tasks=10, max_turns=1))
    loose = warm_start(
        env, env.tasks("train"), agent, tmp_path / "b", WarmStartConfig(tasks=10, max_turns=1, min_reward=0.0)
    )
    assert strict.rows + strict.below_reward == 10 and strict.below_reward > 0
    assert loose.rows == 10


def test_empty_selection_and_unknown_protocol_are_refused(env, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no tasks"):
        warm_start(env, env.tasks("train"), make_agent("act", env, NoLLM()), tmp_path, WarmStartConfig(skip=10_000))

    class Other:
        protocol = "xml"

    with pytest.raises(RenderError, match="xml"):
        render_messages(Other(), [user("hi"), assistant(None, [ToolCall(name="f", arguments={}, id="c1")])])


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(str.strip),
    value=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
)
def test_any_reply_and_argument_round_trip_in_act(env, text: str, value: str) -> None:
    agent = make_agent("act", env, NoLLM())
    call = ToolCall(name="search_restaurant", arguments={"food": value}, id="c1")
    messages = [user("hello"), assistant(None, [call]), tool_result("c1", "[]"), assistant(text.strip())]
    rendered = render_messages(agent, messages)
    assert agent.read(Completion(text=rendered[1].content)).calls[0].call.arguments == {"food": value}
    assert agent.read(Completion(text=rendered[-1].content)).reply == text.strip()
