"""The prompted agents' shared turn loop, driven under the ReACT, function-calling and ACT protocols with a scripted
LLM."""

from __future__ import annotations

import json

import pytest

from josh.agents import agent_strategies, make_agent
from josh.agents.prompted import PromptedAgent
from josh.agents.react import END_MARKER
from josh.core.llm import Completion, LLMError
from josh.llm.scripted import ScriptedLLM
from josh.types import ErrorCategory, Goal, Task, ToolCall, user
from tests.fakes.conversation import ToyEnv

TASK = Task(id="t1", env="toy", goals=[Goal(name="find"), Goal(name="book")])
HISTORY = [user("Find and book please.")]


def react_call(name: str, **args) -> str:
    return f"PLAN use {name} {END_MARKER}\nAPICALL {json.dumps({'name': name, 'parameters': args})} {END_MARKER}"


def react_speak(text: str) -> str:
    return f"SPEAK {text} {END_MARKER}"


def script(*replies):
    """A policy answering the k-th request of a conversation branch by the number of assistant messages."""

    def policy(messages, tools, index):
        done = sum(m.role == "assistant" for m in messages)
        reply = replies[min(done, len(replies) - 1)]
        return reply(index) if callable(reply) else reply

    return policy


async def test_react_turn_runs_calls_on_a_fork_and_reports_goals():
    env, state = ToyEnv(), ToyEnv().reset(TASK)
    llm = ScriptedLLM(script(react_call("find") + "\n" + react_speak("stale"), react_speak("Found it.")))
    [turn] = await make_agent("react", env, llm).turn(HISTORY, state)
    assert turn.reply == "Found it."
    assert turn.completed_goals == [0] and turn.state.completed == {0}
    assert state.completed == set() and state.log == []
    roles = [m.role for m in turn.messages]
    assert roles == ["assistant", "user", "assistant"]
    assert "stale" not in turn.messages[0].content
    assert turn.messages[1].content.startswith("APIRETURN")
    assert turn.llm_calls == 2 and turn.errors == []
    second = llm.requests[1].messages
    assert second[0].role == "system" and second[1:] == [*HISTORY, *turn.messages[:2]]


async def test_malformed_output_gets_feedback_and_an_error():
    llm = ScriptedLLM(script("I am not following the protocol", react_speak("Sorry, hello.")))
    [turn] = await make_agent("react", ToyEnv(), llm).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.reply == "Sorry, hello."
    assert turn.errors == [ErrorCategory.MALFORMED]
    assert turn.messages[1].role == "user" and turn.messages[1].content.startswith("FEEDBACK")


async def test_malformed_call_is_answered_not_executed():
    llm = ScriptedLLM(script('APICALL {"name": "find", "parameters": {', react_speak("ok")))
    state = ToyEnv().reset(TASK)
    [turn] = await make_agent("react", ToyEnv(), llm).turn(HISTORY, state)
    assert turn.errors == [ErrorCategory.MALFORMED]
    assert turn.state.log == [] and "ERROR" in turn.messages[1].content


async def test_generation_cap_ends_the_turn_without_a_reply():
    llm = ScriptedLLM(script(react_call("find")))
    [turn] = await make_agent("react", ToyEnv(), llm, max_generations=2).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.reply is None
    assert turn.errors == [ErrorCategory.NO_REPLY]
    assert turn.llm_calls == 2 and len(llm.requests) == 2


async def test_calls_per_generation_are_capped():
    many = "\n".join(f'APICALL {{"name": "find", "parameters": {{}}}} {END_MARKER}' for _ in range(5))
    llm = ScriptedLLM(script(many, react_speak("done")))
    [turn] = await make_agent("react", ToyEnv(), llm, max_calls_per_generation=2).turn(HISTORY, ToyEnv().reset(TASK))
    assert len(turn.state.log) == 2


async def test_llm_error_on_the_first_call_gives_error_turns():
    async def policy(messages, tools, index):
        raise LLMError("server down")

    state = ToyEnv().reset(TASK)
    turns = await make_agent("react", ToyEnv(), ScriptedLLM(policy)).turn(HISTORY, state, n=3)
    assert len(turns) == 3
    assert all(t.errors == [ErrorCategory.LLM_ERROR] and t.reply is None for t in turns)
    assert len({id(t.state) for t in turns} | {id(state)}) == 4


async def test_llm_error_mid_turn_keeps_what_happened():
    calls = []

    def policy(messages, tools, index):
        calls.append(1)
        if len(calls) > 1:
            raise LLMError("timeout")
        return react_call("find")

    [turn] = await make_agent("react", ToyEnv(), ScriptedLLM(policy)).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.errors == [ErrorCategory.LLM_ERROR]
    assert turn.completed_goals == [0] and len(turn.messages) == 2


async def test_n_samples_share_one_request_and_get_independent_forks():
    first = [react_call("find"), react_call("book"), react_speak("Hi")]
    llm = ScriptedLLM(script(lambda i: first[i], react_speak("done")))
    state = ToyEnv().reset(TASK)
    turns = await make_agent("react", ToyEnv(), llm).turn(HISTORY, state, n=3)
    assert llm.requests[0].n == 3 and all(r.n == 1 for r in llm.requests[1:])
    assert [t.completed_goals for t in turns] == [[0], [1], []]
    assert [t.state.completed for t in turns] == [{0}, {1}, set()]
    assert state.completed == set()
    assert [t.reply for t in turns] == ["done", "done", "Hi"]


async def test_environment_crash_and_termination():
    llm = ScriptedLLM(script(react_call("explode"), react_call("hang_up"), react_speak("never")))
    [turn] = await make_agent("react", ToyEnv(), llm).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.errors == [ErrorCategory.TOOL_ERROR]
    assert turn.terminated and turn.reply is None and turn.llm_calls == 2


async def test_function_calling_native_and_text_calls():
    native = Completion(tool_calls=[ToolCall(name="find", arguments={}, id="call_a")])
    text = '<tool_call>\n{"name": "book", "arguments": {}}\n</tool_call>'
    llm = ScriptedLLM(script(native, text, "All booked."))
    [turn] = await make_agent("function_calling", ToyEnv(), llm).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.reply == "All booked." and turn.completed_goals == [0, 1]
    assert [m.role for m in turn.messages] == ["assistant", "tool", "assistant", "tool", "assistant"]
    # the server's id and the text call's random one give way to ids from the calls' places in the conversation
    at = len(HISTORY)
    assert turn.messages[0].tool_calls[0].id == f"call_{at}_0" and turn.messages[1].tool_call_id == f"call_{at}_0"
    assert (
        turn.messages[2].tool_calls[0].id == f"call_{at + 2}_0" and turn.messages[3].tool_call_id == f"call_{at + 2}_0"
    )
    assert llm.requests[0].tools == ToyEnv.tools


async def test_function_calling_bad_arguments_and_nameless_calls():
    bad_args = Completion(tool_calls=[ToolCall(name="find", arguments="{oops", id="call_b")])
    llm = ScriptedLLM(script(bad_args, "{not json at all", "fine"))
    [turn] = await make_agent("function_calling", ToyEnv(), llm).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.errors == [ErrorCategory.MALFORMED, ErrorCategory.MALFORMED]
    assert turn.messages[1].role == "tool" and turn.messages[1].content.startswith("ERROR")
    assert turn.messages[2].tool_calls is None and turn.messages[3].role == "user"
    assert turn.reply == "fine" and turn.state.log == []


async def test_act_agent_acts_and_responds():
    call = 'Action: {"name": "find", "arguments": {}}'
    respond = 'Action: {"name": "respond", "arguments": {"content": "Found."}}'
    llm = ScriptedLLM(script(call, "no action here", respond))
    [turn] = await make_agent("act", ToyEnv(), llm).turn(HISTORY, ToyEnv().reset(TASK))
    assert turn.reply == "Found." and turn.completed_goals == [0]
    assert turn.errors == [ErrorCategory.MALFORMED]
    assert turn.messages[1].content.startswith("Observation:")


def test_system_prompt_holds_protocol_tools_domain_and_examples():
    prompt = make_agent("react", ToyEnv(), ScriptedLLM(["x"]), examples=1).system_prompt(TASK)
    assert "APICALL" in prompt and "find()" in prompt and "You are a toy agent." in prompt
    assert prompt.count("Customer:") == 1
    assert "Customer:" not in make_agent("react", ToyEnv(), ScriptedLLM(["x"]), examples=0).system_prompt(TASK)


def test_factory():
    llm = ScriptedLLM(["x"])
    assert make_agent("fc", ToyEnv(), llm).protocol.name == "function_calling"
    assert isinstance(make_agent("ReAct", ToyEnv(), llm), PromptedAgent)
    assert {"act", "function_calling", "react"} <= set(agent_strategies())
    with pytest.raises(ValueError, match="unknown agent strategy"):
        make_agent("telepathy", ToyEnv(), llm)
    with pytest.raises(ValueError, match="max_generations"):
        make_agent("react", ToyEnv(), llm, max_generations=0)
    with pytest.raises(ValueError):
        make_agent("act", ToyEnv(), llm, temprature=0.5)
    with pytest.raises(ValueError, match="needs an LLM"):
        make_agent("react", ToyEnv(), None)


async def test_n_must_be_positive():
    with pytest.raises(ValueError, match="n must be"):
        await make_agent("react", ToyEnv(), ScriptedLLM(["x"])).turn(HISTORY, ToyEnv().reset(TASK), n=0)
