"""End to end with no LLM: the oracle agent and the agenda user reach reward 1.0 on every mini test task and on
hand-built tasks over the real MultiWOZ database."""

from __future__ import annotations

from pathlib import Path

import pytest

from josh.agents import make_agent
from josh.envs.toolwoz.agenda import AgendaUser
from josh.envs.toolwoz.data import load_toolwoz
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.oracle import OracleAgent
from josh.envs.toolwoz.task import DomainGoal, details_of, make_task
from josh.run.conversation import run_conversation
from josh.search.algorithm import search
from josh.types import Task
from josh.users import make_user
from josh.users.scripted import ScriptedUser


@pytest.fixture(scope="module")
def mini() -> ToolWOZEnv:
    data = load_toolwoz("mini")
    return ToolWOZEnv(data.db_dir, tasks=data.splits)


async def _failures(env: ToolWOZEnv, tasks: list[Task], agent: OracleAgent) -> list[str]:
    failed = []
    for task in tasks:
        record = await run_conversation(env, task, agent, AgendaUser())
        if record.reward != 1.0 or record.end_reason != "user_done":
            failed.append(f"{task.id}: reward {record.reward:.2f}, {record.end_reason}, {record.error}")
    return failed


async def test_oracle_and_agenda_user_solve_every_mini_test_task(mini: ToolWOZEnv) -> None:
    tasks = mini.tasks("test")
    assert len(tasks) >= 20
    assert await _failures(mini, tasks, OracleAgent(mini)) == []


async def test_reveal_only_oracle_solves_them_from_what_the_user_said(mini: ToolWOZEnv) -> None:
    assert await _failures(mini, mini.tasks("test"), OracleAgent(mini, reveal_only=True)) == []


async def test_agenda_user_says_every_goal_value_verbatim(mini: ToolWOZEnv) -> None:
    for task in mini.tasks("test")[:25]:
        record = await run_conversation(mini, task, OracleAgent(mini), AgendaUser())
        said = " ".join(m.content or "" for m in record.transcript if m.role == "user").lower()
        for domain, spec in details_of(task).goal.items():
            for slot, value in {**spec.info, **spec.book}.items():
                if slot not in ("parking", "internet"):
                    assert value.lower() in said, f"{task.id}: {domain}.{slot}={value!r} never said"


async def test_full_noise_costs_reward(mini: ToolWOZEnv) -> None:
    rewards = []
    for task in mini.tasks("test")[:15]:
        record = await run_conversation(mini, task, OracleAgent(mini, noise=1.0), AgendaUser())
        rewards.append(record.reward)
    assert sum(rewards) / len(rewards) < 0.5


async def test_factories_and_the_scripted_user_drive_a_conversation(mini: ToolWOZEnv) -> None:
    task = mini.tasks("test")[0]
    record = await run_conversation(mini, task, make_agent("oracle", mini), make_user("agenda"))
    assert record.success
    replay = await run_conversation(
        mini, task, make_agent("oracle", mini), ScriptedUser(utterances=record_lines(record))
    )
    assert replay.end_reason == "user_done"
    assert [m.content for m in replay.transcript if m.role == "user"][:-1] == record_lines(record)


def record_lines(record) -> list[str]:
    return [m.content for m in record.transcript if m.role == "user"][:-1]


def _real_tasks() -> list[Task]:
    """Hand-built tasks whose entities exist in the MultiWOZ database."""
    italian = DomainGoal(
        info={"food": "italian", "area": "centre", "pricerange": "moderate"},
        book={"time": "18:30", "day": "friday", "people": "3"},
        fail_book={"time": "20:00"},
        reqt=["phone"],
    )
    rosas = DomainGoal(
        info={"type": "guesthouse", "area": "south", "pricerange": "cheap"},
        fail_info={"type": "guesthouse", "area": "south", "pricerange": "expensive"},
        book={"stay": "2", "day": "tuesday", "people": "2"},
    )
    museum = DomainGoal(info={"type": "museum", "area": "west"}, reqt=["entrance fee", "postcode"])
    stansted = DomainGoal(
        info={"departure": "cambridge", "destination": "stansted airport", "day": "friday", "leaveAt": "09:15"},
        book={"people": "4"},
        reqt=["price"],
    )
    bistro = DomainGoal(
        info={"name": "hotel du vin and bistro"}, book={"time": "19:00", "day": "sunday", "people": "2"}
    )
    arms = DomainGoal(info={"name": "university arms hotel"}, reqt=["phone", "postcode"])
    kings = DomainGoal(info={"name": "king's college"}, reqt=["address"])
    unbooked = DomainGoal(
        info={"area": "north", "stars": "4", "parking": "yes", "internet": "yes", "type": "guesthouse"},
        book={"stay": "3", "day": "monday", "people": "1"},
    )
    return [
        make_task(
            "real_restaurant",
            {"restaurant": italian},
            booked={"restaurant": {"name": "pizza express Fen Ditton", "reference": "ITAL0001"}},
        ),
        make_task(
            "real_hotel_fail_info",
            {"hotel": rosas},
            booked={"hotel": {"name": "rosa's bed and breakfast", "reference": "ROSA0002"}},
        ),
        make_task(
            "real_museum_train",
            {"attraction": museum, "train": stansted},
            booked={"train": {"trainID": "TR2048", "reference": "STAN0003"}},
        ),
        make_task(
            "real_names",
            {"restaurant": bistro, "hotel": arms, "attraction": kings},
            booked={"restaurant": {"name": "hotel du vin and bistro", "reference": "VIN00004"}},
        ),
        make_task("real_unbooked_hotel", {"hotel": unbooked}),
    ]


async def test_oracle_and_agenda_user_on_the_real_multiwoz_db(shared_data: Path) -> None:
    env = ToolWOZEnv(shared_data / "multiwoz" / "db")
    tasks = _real_tasks()
    assert [len(t.goals) for t in tasks] == [2, 2, 3, 4, 1]
    assert await _failures(env, tasks, OracleAgent(env)) == []
    assert await _failures(env, tasks, OracleAgent(env, reveal_only=True)) == []


async def test_noisy_oracle_siblings_give_the_josh_search_something_to_prune(mini: ToolWOZEnv) -> None:
    tasks = mini.tasks("test")[:20]
    agent = OracleAgent(mini, noise=0.5, seed=0)
    trees = [await search(task, mini, agent, AgendaUser()) for task in tasks]
    plain = [await run_conversation(mini, task, agent, AgendaUser()) for task in tasks]
    assert any(node.pruned for tree in trees for node in tree.nodes)
    assert sum(t.reward for t in trees) > sum(r.reward for r in plain)
