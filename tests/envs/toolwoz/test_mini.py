"""The shipped mini set: reproducible byte for byte, MultiWOZ-shaped, and every goal reachable in the env."""

from __future__ import annotations

import json
import re
from pathlib import Path

from josh.envs.toolwoz.data import SHIPPED_MINI, load_toolwoz
from josh.envs.toolwoz.env import ToolWOZEnv
from josh.envs.toolwoz.generator import check_task, load_db
from josh.envs.toolwoz.mini import SPLIT_SIZES, write_mini
from josh.types import ToolCall


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.suffix in (".json", ".jsonl")
    }


def test_regenerating_gives_the_shipped_bytes(tmp_path):
    write_mini(tmp_path, seed=0)
    shipped = _files(SHIPPED_MINI)
    assert set(shipped) >= {"db/train_db.json", "tasks_train.jsonl", "tasks_val.jsonl", "tasks_test.jsonl"}
    assert _files(tmp_path) == shipped
    assert sum(len(b) for b in shipped.values()) < 400_000


def test_every_shipped_task_is_valid():
    data = load_toolwoz("mini")
    db = load_db(data.db_dir)
    assert {s: len(t) for s, t in data.splits.items()} == SPLIT_SIZES
    ids = [t.id for tasks in data.splits.values() for t in tasks]
    assert len(ids) == len(set(ids))
    for tasks in data.splits.values():
        for task in tasks:
            assert check_task(task, db) == []


def test_db_follows_the_multiwoz_conventions():
    db = load_db(SHIPPED_MINI / "db")
    assert 20 <= len(db["restaurant"]) <= 40 and 10 <= len(db["hotel"]) <= 20
    assert 20 <= len(db["attraction"]) <= 30 and 120 <= len(db["train"]) <= 200
    for row in db["train"]:
        assert re.fullmatch(r"TR\d{4}", row["trainID"])
        assert re.fullmatch(r"\d\d:\d\d", row["leaveAt"]) and re.fullmatch(r"\d\d:\d\d", row["arriveBy"])
    for row in db["hotel"]:
        assert set(row["price"]) == {"single", "double", "family"} and isinstance(row["location"], list)
    for rows in db.values():
        for row in rows:
            for key, value in row.items():
                if isinstance(value, str) and key not in ("trainID", "introduction", "openhours"):
                    assert value == value.lower(), (key, value)


def test_db_has_the_real_multiwoz_columns(shared_data):
    real = load_db(shared_data / "multiwoz" / "db")
    mini = load_db(SHIPPED_MINI / "db")
    for domain, rows in real.items():
        real_keys = set().union(*(r.keys() for r in rows)) - {"signature"}
        assert set(mini[domain][0]) == real_keys, domain


def test_goal_calls_complete_every_goal_in_the_env():
    data = load_toolwoz("mini")
    env = ToolWOZEnv(data.db_dir, tasks=data.splits)
    for task in env.tasks("test"):
        state = env.reset(task)
        for goal in task.goals:
            env.call(state, ToolCall(name=goal.name, arguments=dict(goal.parameters)))
        assert state.goal_reward == 1.0, task.id


def test_fail_info_searches_find_nothing_in_the_env():
    data = load_toolwoz("mini")
    env = ToolWOZEnv(data.db_dir, tasks=data.splits)
    checked = 0
    for task in data.splits["train"]:
        for domain, spec in task.details["goal"].items():
            if spec["fail_info"]:
                result = env.call(env.reset(task), ToolCall(name=f"search_{domain}", arguments=spec["fail_info"]))
                assert json.loads(result.content) == [], result.content
                checked += 1
    assert checked >= 5
