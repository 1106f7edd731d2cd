"""The agents inside the real ToolWOZ environment (mini set), and a short smoke run with the offline SmolLM2."""

from __future__ import annotations

import json

import pytest

from josh.agents import make_agent
from josh.agents.react import END_MARKER
from josh.core.llm import Sampling
from josh.envs.toolwoz.data import load_toolwoz
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.llm.scripted import ScriptedLLM
from josh.types import user


@pytest.fixture(scope="module")
def toolwoz():
    data = load_toolwoz("mini")
    env = ToolWOZEnv(data.db_dir, data.splits)
    task = next(t for s in data.splits.values() for t in s if t.goals and t.goals[0].name.startswith("search_"))
    return env, task


def goal_call(task, protocol: str) -> str:
    goal = task.goals[0]
    if protocol == "react":
        return f"APICALL {json.dumps({'name': goal.name, 'parameters': goal.parameters})} {END_MARKER}"
    if protocol == "act":
        return "Action: " + json.dumps({"name": goal.name, "arguments": goal.parameters})
    return f"<tool_call>\n{json.dumps({'name': goal.name, 'arguments': goal.parameters})}\n</tool_call>"


SPEAK = {
    "react": f"SPEAK Here is what I found. {END_MARKER}",
    "act": 'Action: {"name": "respond", "arguments": {"content": "Here is what I found."}}',
    "function_calling": "Here is what I found.",
}


@pytest.mark.parametrize("strategy", ["react", "act", "function_calling"])
async def test_goal_call_completes_the_goal_on_a_fork(toolwoz, strategy):
    env, task = toolwoz
    replies = iter([goal_call(task, strategy), SPEAK[strategy]])
    llm = ScriptedLLM(lambda messages, tools, index: next(replies))
    state = env.reset(task)
    [turn] = await make_agent(strategy, env, llm).turn([user("Hello")], state)
    assert turn.reply == "Here is what I found."
    assert 0 in turn.completed_goals and 0 in turn.state.completed
    assert not state.completed and not state.log
    assert turn.errors == []
    assert "booking assistant" in llm.requests[0].messages[0].content.lower() or env.system_prompt(task) in (
        llm.requests[0].messages[0].content
    )


@pytest.mark.slow
async def test_smollm2_react_turn_smoke(toolwoz):
    from josh.llm.hf import HFLLM

    env, task = toolwoz
    llm = HFLLM("smollm2", dtype="float32", device="cpu")
    agent = make_agent(
        "react", env, llm, max_generations=1, examples=1, sampling=Sampling(temperature=0.8, max_new_tokens=24, seed=0)
    )
    turns = await agent.turn([user("I want a cheap restaurant in the centre.")], env.reset(task), n=2)
    assert len(turns) == 2
    for turn in turns:
        assert turn.llm_calls >= 1 and turn.completion_tokens > 0
        assert turn.reply is not None or turn.errors
        assert all(m.role in ("assistant", "user") for m in turn.messages)
