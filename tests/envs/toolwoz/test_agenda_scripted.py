"""The scripted replay user: fixed utterances or the original transcript's user turns, then the end."""

from __future__ import annotations

import pytest

from josh.types import Task, assistant, user
from josh.users import make_user
from josh.users.scripted import ScriptedUser


def test_replays_given_utterances_in_order_then_ends() -> None:
    scripted = ScriptedUser(utterances=["first", "second"], goodbye="bye")
    transcript = []
    said = []
    while True:
        turn = scripted.respond(Task(env="toolwoz", id="t"), transcript)
        said.append(turn)
        if turn.done:
            break
        transcript += [user(turn.text), assistant("ok")]
    assert [t.text for t in said] == ["first", "second", "bye"]
    assert [t.done for t in said] == [False, False, True]


def test_defaults_to_the_original_user_turns() -> None:
    task = Task(
        env="toolwoz", id="t", transcript=[user("hello"), assistant("hi, how can I help?"), user("a train please")]
    )
    scripted = ScriptedUser()
    assert scripted.respond(task, []).text == "hello"
    assert scripted.respond(task, [user("hello"), assistant("hi")]).text == "a train please"
    end = scripted.respond(task, [user("hello"), assistant("hi"), user("a train please")])
    assert end.done


def test_counts_user_turns_even_without_agent_replies() -> None:
    scripted = ScriptedUser(utterances=["a", "b", "c"])
    assert scripted.respond(Task(env="toolwoz", id="t"), [user("a"), user("b")]).text == "c"


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no user turns"):
        ScriptedUser().respond(Task(env="toolwoz", id="empty"), [])
    with pytest.raises(ValueError, match="list of strings"):
        ScriptedUser(utterances="just one string")
    with pytest.raises(ValueError, match="list of strings"):
        ScriptedUser(utterances=["fine", 3])


async def test_registered_as_scripted() -> None:
    scripted = make_user("scripted", utterances=["only line"], goodbye="")
    assert isinstance(scripted, ScriptedUser)
    assert (await scripted.reply(Task(env="toolwoz", id="t"), [])).text == "only line"
    assert (await scripted.reply(Task(env="toolwoz", id="t"), [user("only line")])).done
    with pytest.raises(ValueError):
        make_user("scripted", lines=["x"])
