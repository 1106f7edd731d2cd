"""The scripted oracle agent: forks, function-calling messages, asking before acting, reveal-only mode, noise."""

from __future__ import annotations

import pytest

from josh.agents import make_agent
from josh.core.env import ConversationState
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.oracle import OracleAgent, UserView, _holds_to_fail
from josh.envs.toolwoz.task import DomainGoal, details_of, make_task
from josh.types import Message, Task, user


def _pick(mini_env: ToolWOZEnv, want) -> Task:
    return next(t for t in mini_env.tasks("test") if want(t))


def _booking_task(mini_env: ToolWOZEnv) -> Task:
    """A mini test task whose first domain has a search goal with 2+ constraints and a booking goal."""

    def fits(task: Task) -> bool:
        d = details_of(task)
        first = d.domains[0]
        return first in d.booked and len(d.goal[first].info) >= 2 and not d.goal[first].fail_info

    return _pick(mini_env, fits)


_WANT = {"restaurant": "a restaurant", "hotel": "a place to stay", "attraction": "an attraction", "train": "a train"}


def _everything_said(task: Task) -> list[Message]:
    """One user utterance naming the first domain and all its search constraints."""
    d = details_of(task)
    domain = d.domains[0]
    values = " and ".join(f"{v}" for v in d.goal[domain].info.values())
    return [user(f"I need {_WANT[domain]}, with {values}, free parking and free internet.")]


def _calls(turn) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for m in turn.messages for c in m.tool_calls or ()]


async def test_turn_runs_on_forks_and_leaves_the_callers_state_alone(mini_env: ToolWOZEnv) -> None:
    task = _booking_task(mini_env)
    state = mini_env.reset(task)
    turns = await OracleAgent(mini_env).turn(_everything_said(task), state, n=3)
    assert state.log == [] and state.completed == set()
    assert len({id(t.state) for t in turns} | {id(state)}) == 4
    for turn in turns:
        assert turn.completed_goals == [0] and turn.state.completed == {0}
        assert len(turn.state.log) == 1


async def test_messages_use_the_function_calling_format(mini_env: ToolWOZEnv) -> None:
    task = _booking_task(mini_env)
    (turn,) = await OracleAgent(mini_env).turn(_everything_said(task), mini_env.reset(task))
    call_msg, result_msg, spoken = turn.messages
    assert call_msg.role == "assistant" and call_msg.content is None and len(call_msg.tool_calls) == 1
    assert result_msg.role == "tool" and result_msg.tool_call_id == call_msg.tool_calls[0].id
    assert spoken.role == "assistant" and not spoken.tool_calls and spoken.content == turn.reply
    booked = details_of(task).booked[details_of(task).domains[0]]
    assert booked["name" if "name" in booked else "trainID"] in turn.reply


async def test_asks_for_missing_details_before_searching(mini_env: ToolWOZEnv) -> None:
    task = _pick(mini_env, lambda t: details_of(t).domains[0] == "restaurant" and len(t.goals[0].parameters) >= 2)
    (turn,) = await OracleAgent(mini_env).turn([user("I'm looking for a restaurant.")], mini_env.reset(task))
    assert _calls(turn) == [] and turn.reply.endswith("?")


async def test_waits_until_a_domain_is_mentioned(mini_env: ToolWOZEnv) -> None:
    task = _booking_task(mini_env)
    (turn,) = await OracleAgent(mini_env).turn([user("Hello there!")], mini_env.reset(task))
    assert _calls(turn) == [] and turn.reply


async def test_searches_after_asking_once_even_if_details_stay_unsaid(mini_env: ToolWOZEnv) -> None:
    task = _booking_task(mini_env)
    agent = OracleAgent(mini_env)
    history = [user(f"I need {_WANT[details_of(task).domains[0]]}.")]
    first = agent.play(history, mini_env.reset(task))
    history += [*first.messages, user("Whatever you think is best.")]
    second = agent.play(history, mini_env.reset(task))
    assert [name for name, _ in _calls(second)] == [task.goals[0].name]
    assert _calls(second)[0][1] == dict(task.goals[0].parameters)


async def test_reveal_only_uses_only_values_the_user_said(mini_env: ToolWOZEnv) -> None:
    task = _pick(mini_env, lambda t: details_of(t).domains[0] == "restaurant" and len(t.goals[0].parameters) >= 2)
    said_key, said_value = next(iter(task.goals[0].parameters.items()))
    agent = OracleAgent(mini_env, reveal_only=True)
    history = [user(f"I'm looking for a restaurant, {said_value} please.")]
    first = agent.play(history, mini_env.reset(task))
    history += [*first.messages, user("No other preferences.")]
    (name, args), *_ = _calls(agent.play(history, mini_env.reset(task)))
    assert name == "search_restaurant" and args == {said_key: said_value}


async def test_noise_drops_a_constraint_and_siblings_differ_reproducibly(mini_env: ToolWOZEnv) -> None:
    task = _booking_task(mini_env)
    history, goal = _everything_said(task), task.goals[0]
    always = await OracleAgent(mini_env, noise=1.0).turn(history, mini_env.reset(task), n=2)
    for turn in always:
        (_, args), *_ = _calls(turn)
        assert len(args) == len(goal.parameters) - 1 and 0 not in turn.state.completed
    agent = OracleAgent(mini_env, noise=0.5, seed=3)
    siblings = await agent.turn(history, mini_env.reset(task), n=8)
    again = await agent.turn(history, mini_env.reset(task), n=8)
    outcomes = [tuple(sorted(_calls(t)[0][1])) for t in siblings]
    assert len(set(outcomes)) > 1
    assert outcomes == [tuple(sorted(_calls(t)[0][1])) for t in again]


def test_bad_options_and_foreign_tasks_are_clear_errors(mini_env: ToolWOZEnv) -> None:
    with pytest.raises(ValueError, match="noise"):
        OracleAgent(mini_env, noise=1.5)
    with pytest.raises(ValueError):
        make_agent("oracle", mini_env, nonsense=True)
    assert isinstance(make_agent("oracle", mini_env, reveal_only=True), OracleAgent)
    with pytest.raises(ValueError, match="ToolWOZ"):
        OracleAgent(mini_env).play([user("hi")], ConversationState(Task(id="r1", env="retail")))


def test_focus_is_the_domain_mentioned_last_ignoring_other_domains_names() -> None:
    task = make_task(
        "focus",
        {
            "restaurant": DomainGoal(info={"name": "hotel du vin and bistro"}),
            "hotel": DomainGoal(info={"name": "university arms hotel"}),
        },
    )
    details = details_of(task)
    dinner = UserView([user("Find me a restaurant called hotel du vin and bistro.")], details)
    assert dinner.focus(details.domains)[0] == "restaurant"
    stay = UserView([user("Thanks. Now, is the university arms hotel available?")], details)
    assert stay.focus(details.domains)[0] == "hotel"
    both = UserView([user("I need a restaurant."), user("Also somewhere to stay.")], details)
    assert both.focus(details.domains) == ("hotel", both.starts[1] + len("also "))


def test_a_value_inside_a_longer_value_and_numbers_without_their_unit_are_not_mentions() -> None:
    task = make_task(
        "mentions",
        {
            "restaurant": DomainGoal(info={"food": "european"}, fail_info={"food": "northern european"}),
            "hotel": DomainGoal(info={"stars": "4"}, fail_info={"stars": "2"}, book={"stay": "2", "people": "5"}),
        },
    )
    details = details_of(task)
    northern = UserView([user("I'd like northern european food.")], details)  # PMUL2314: holds to the fail value
    assert northern.slot_mention("food", "european", ["northern european"]) == -1
    assert _holds_to_fail(northern, {"food": "european"}, {"food": "northern european"})
    changed = UserView([user("I'd like northern european food."), user("How about european food instead?")], details)
    assert not _holds_to_fail(changed, {"food": "european"}, {"food": "northern european"})
    booking = UserView([user("A hotel with a 4 star rating."), user("Book it for 2 nights for 5 people.")], details)
    assert booking.slot_mention("stars", "2") == -1 and booking.slot_mention("stay", "2") >= 0  # MUL0186, SNG0809
    assert not _holds_to_fail(booking, {"stars": "4"}, {"stars": "2"})
