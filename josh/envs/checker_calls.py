"""The calls ``check_env`` makes on an environment: random ones drawn from a task's goals, its gold actions and the
tools' schemas (seeded), and hostile ones (unknown names, malformed arguments, wrongly typed values)."""

from __future__ import annotations

import random
from typing import Any

from josh.core.env import Env
from josh.types import Task, ToolCall

HOSTILE_NAMES = ("", "no_such_tool", "x" * 2000, "__class__", "../../etc/passwd", "名前", "shout\x00", " ")
HOSTILE_ARGUMENTS: tuple[Any, ...] = (
    "{not json",
    "",
    {},
    {"unexpected": 1},
    {"a": {"b": {"c": [None, float("nan"), -(10**30)]}}},
    {"text": "🙂" * 500},
)
HOSTILE_VALUES: tuple[Any, ...] = (None, -1, 10**20, 3.5, float("inf"), "", "x" * 5000, [], {}, True, ["a", 1])
GENERIC_VALUES: tuple[Any, ...] = ("", "yes", "1", 0, 1, 2.5, True, False)
Branch = list[tuple[ToolCall, bool]]  # calls in order, each with whether the user makes it


def _values(task: Task) -> list[Any]:
    """Scalars found in the task (its goals' parameters, its details): plausible argument values."""
    found: list[Any] = list(GENERIC_VALUES)

    def walk(value: Any, depth: int) -> None:
        if isinstance(value, dict) and depth < 4:
            for item in value.values():
                walk(item, depth + 1)
        elif isinstance(value, list) and depth < 4:
            for item in value[:20]:
                walk(item, depth + 1)
        elif isinstance(value, (str, int, float)) and len(found) < 400:
            found.append(value)

    walk([g.parameters for g in task.goals], 0)
    walk(task.details, 0)
    return found


def gold_calls(task: Task) -> list[ToolCall]:
    """The task's goal calls and gold actions (``details["actions"]``)."""
    calls = [ToolCall(name=g.name, arguments=dict(g.parameters)) for g in task.goals]
    for action in task.details.get("actions") or []:
        if isinstance(action, dict) and isinstance(action.get("kwargs") or {}, dict):
            calls.append(ToolCall(name=str(action.get("name", "")), arguments=dict(action.get("kwargs") or {})))
    return calls


def random_call(env: Env, task: Task, rng: random.Random, *, user: bool = False) -> ToolCall:
    """A goal or gold call (half the time, when the task has any), else a tool filled from its schema."""
    gold = [] if user else gold_calls(task)
    if gold and rng.random() < 0.5:
        call = rng.choice(gold)
        return ToolCall(name=call.name, arguments=dict(call.arguments), id=f"c{rng.randrange(10**6)}")
    tool = rng.choice(env.user_tools if user else env.tools)["function"]
    properties = tool.get("parameters", {}).get("properties", {})
    values = _values(task)
    arguments = {key: _value(spec, values, rng) for key, spec in properties.items() if rng.random() < 0.9}
    return ToolCall(name=tool["name"], arguments=arguments, id=f"c{rng.randrange(10**6)}")


def _value(spec: dict[str, Any], values: list[Any], rng: random.Random) -> Any:
    """A value for one parameter: one of its enum, or a value of its type found in the task."""
    if isinstance(spec.get("enum"), list) and spec["enum"] and rng.random() < 0.8:
        return rng.choice(spec["enum"])
    kind = spec.get("type") if isinstance(spec.get("type"), str) else ""
    if kind == "array":
        return [_value(spec.get("items") or {}, values, rng) for _ in range(rng.randrange(3))]
    if kind == "object":
        return {}
    typed = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,)}.get(kind)
    pool = [v for v in values if typed is None or (isinstance(v, typed) and (kind == "boolean") == isinstance(v, bool))]
    return rng.choice(pool or values)


def random_calls(env: Env, task: Task, steps: int, rng: random.Random) -> Branch:
    """``steps`` random calls, each with whether the user makes it (a fifth, when the env has user tools)."""
    calls = []
    for _ in range(steps):
        user = bool(env.user_tools) and rng.random() < 0.2
        calls.append((random_call(env, task, rng, user=user), user))
    return calls


def hostile_calls(tools: list[dict[str, Any]]) -> list[ToolCall]:
    """Unknown names, malformed arguments and wrongly typed values for every parameter (built unvalidated)."""
    make = ToolCall.model_construct
    calls = [make(name=name, arguments={}, id="h") for name in HOSTILE_NAMES]
    for tool in tools:
        name = tool["function"]["name"]
        calls += [make(name=name, arguments=arguments, id="h") for arguments in HOSTILE_ARGUMENTS]
        for key in tool["function"].get("parameters", {}).get("properties", {}):
            calls += [make(name=name, arguments={key: value}, id="h") for value in HOSTILE_VALUES]
    return calls
