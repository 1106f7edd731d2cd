"""The LLM user simulators: prompts, role flips, stop markers, guide quotes and LLM failures."""

from __future__ import annotations

import pytest

from josh.core.llm import Completion, LLMError
from josh.llm.scripted import ScriptedLLM
from josh.types import Task, assistant, user
from josh.users import make_user, user_kinds
from josh.users.goal import GoalUser, customer_view
from josh.users.guide import GuideUser, extract_quote, label_transcript
from josh.users.instruction import InstructionUser

TASK = Task(
    id="MUL0001",
    env="toolwoz",
    user_goal="You want a cheap hotel in the north. Book it for 2 nights.",
    transcript=[user("I need a cheap hotel up north."), assistant("The Acorn Guest House fits. Book it?")],
)
SO_FAR = [user("Hi, I need a hotel."), assistant("Sure, which area?")]


async def fails(*_):
    raise LLMError("rate limited")


async def test_goal_user_prompt_and_role_flip():
    llm = ScriptedLLM(["In the north, please."])
    turn = await GoalUser(llm).reply(TASK, SO_FAR)
    assert (turn.text, turn.done, turn.error, turn.llm_calls) == ("In the north, please.", False, None, 1)
    sent = llm.requests[0].messages
    assert sent[0].role == "system" and TASK.user_goal in sent[0].content and "END_CONVERSATION" in sent[0].content
    assert [(m.role, m.content) for m in sent[2:]] == [
        ("assistant", "Hi, I need a hotel."),
        ("user", "Sure, which area?"),
    ]
    assert sent[1].role == "user"
    assert llm.requests[0].sampling.temperature == 0.0


def test_customer_view_merges_repeated_sides_and_skips_tool_traffic():
    view = customer_view([user("a"), user("b"), assistant("c"), assistant(None)])
    assert [(m.role, m.content) for m in view[1:]] == [("assistant", "a\nb"), ("user", "c")]


@pytest.mark.parametrize(
    ("output", "text", "done"),
    [
        ("Thanks, that's all. END_CONVERSATION", "Thanks, that's all.", True),
        ("END_CONVERSATION", "", True),
        ("Customer: Do you have parking?", "Do you have parking?", False),
        ("Great END_CONVERSATION END_CONVERSATION", "Great", True),
    ],
)
async def test_goal_user_stop_marker(output, text, done):
    turn = await GoalUser(ScriptedLLM([output])).reply(TASK, SO_FAR)
    assert (turn.text, turn.done) == (text, done)
    assert "END_CONVERSATION" not in turn.text


async def test_goal_user_empty_output_and_llm_errors_end_with_a_reason():
    empty = await GoalUser(ScriptedLLM([Completion(text="  ")])).reply(TASK, SO_FAR)
    assert empty.done and empty.error
    broken = await GoalUser(ScriptedLLM(fails)).reply(TASK, SO_FAR)
    assert broken.done and "rate limited" in broken.error and broken.text == ""
    no_goal = await GoalUser(ScriptedLLM(["x"])).reply(Task(env="toolwoz", id="x"), [])
    assert no_goal.done and "no user goal" in no_goal.error


async def test_instruction_user_uses_its_own_marker_and_prompt():
    llm = ScriptedLLM(["Everything is done. ###STOP###"])
    turn = await InstructionUser(llm).reply(TASK, SO_FAR)
    assert (turn.text, turn.done) == ("Everything is done.", True)
    assert "###STOP###" in llm.requests[0].messages[0].content
    assert "END_CONVERSATION" not in llm.requests[0].messages[0].content


@pytest.mark.parametrize(
    ("advice", "quote"),
    [
        ('Ask for the area first.\nSuggested quote: "I need a hotel in the north."', "I need a hotel in the north."),
        ("Advice.\nSuggested quote: one\nSuggested quote: “two”", "two"),
        ('suggested QUOTE: "Yes please."\n\nThat should do it.', "Yes please."),
        ('Say that you want the north, e.g. "north side please", and then wait.', "north side please"),
        ("Mention the price range.\nI want something cheap.", "I want something cheap."),
        ("", ""),
    ],
)
def test_extract_quote(advice, quote):
    assert extract_quote(advice) == quote


def test_label_transcript_names_the_sides_correctly():
    text = label_transcript(SO_FAR)
    assert text == "customer: Hi, I need a hotel.\nagent: Sure, which area?"
    assert label_transcript([]) == "(not started yet)"


async def test_guide_user_builds_one_prompt_and_speaks_the_quote():
    llm = ScriptedLLM(['Give the area.\nSuggested quote: "The north, please."'])
    turn = await GuideUser(llm).reply(TASK, SO_FAR)
    assert (turn.text, turn.done, turn.error) == ("The north, please.", False, None)
    [sent] = llm.requests[0].messages
    assert sent.role == "user"
    assert "customer: I need a cheap hotel up north." in sent.content
    assert "agent: Sure, which area?" in sent.content and TASK.user_goal in sent.content


async def test_guide_user_stop_and_failures():
    done = await GuideUser(ScriptedLLM(['All set.\nSuggested quote: "END_CONVERSATION"'])).reply(TASK, SO_FAR)
    assert done.done and done.text == ""
    broken = await GuideUser(ScriptedLLM(fails)).reply(TASK, SO_FAR)
    assert broken.done and broken.error
    no_source = await GuideUser(ScriptedLLM(["x"])).reply(Task(env="toolwoz", id="x", user_goal="g"), [])
    assert no_source.done and "transcript" in no_source.error


def test_user_factory():
    llm = ScriptedLLM(["x"])
    assert isinstance(make_user("goal", llm), GoalUser)
    assert isinstance(make_user("instruction", llm), InstructionUser)
    assert isinstance(make_user("guide", llm, sampling={"temperature": 0.7}), GuideUser)
    assert {"goal", "guide", "instruction"} <= set(user_kinds())
    with pytest.raises(ValueError, match="unknown user simulator"):
        make_user("psychic", llm)
    with pytest.raises(ValueError, match="needs an LLM"):
        make_user("goal")
    with pytest.raises(ValueError):
        make_user("goal", llm, temperature=0.3)
