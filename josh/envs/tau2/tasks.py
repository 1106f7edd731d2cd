"""τ² tasks from the installed package as josh ``Task``s: splits, ids and the gold write actions as JOSH goals.

A josh task id is ``tau2-<domain>-<tau2 id>`` whatever the split, so a task keeps its id in ``base`` and in
``train``/``test``. ``details`` holds what josh's scripted agents and users read: the assistant's gold calls
(``actions``, as ``{name, kwargs}``), the strings the agent must say (``outputs``, τ²'s ``communicate_info``), the
user-side gold calls (``user_actions``, telecom) and the user's ``instruction``.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from importlib import import_module
from typing import Any

from josh.envs.tau2.package import Tau2Error
from josh.types import Goal, Task

SPLITS = {
    "airline": ("train", "test", "base"),
    "retail": ("train", "test", "base"),
    "telecom": ("train", "test", "base", "small", "full"),
}


def env_name(domain: str) -> str:
    return f"tau2-{domain}"


def task_id(domain: str, tau2_id: str) -> str:
    return f"{env_name(domain)}-{tau2_id}"


def load_tau2_tasks(domain: str, split: str) -> list[Any]:
    """τ²'s own ``Task`` objects of ``split``; an unknown split raises ``Tau2Error``."""
    if split not in SPLITS[domain]:
        raise Tau2Error(f"unknown {env_name(domain)} split {split!r}; choose one of {', '.join(SPLITS[domain])}")
    tasks = _read_tasks(domain, split)
    if not tasks:
        raise Tau2Error(f"{env_name(domain)} split {split!r} holds no tasks")
    return list(tasks)


@functools.cache
def _read_tasks(domain: str, split: str) -> tuple[Any, ...]:
    """τ²'s ``get_tasks(split)``: the domain's tasks whose ids τ²'s split file lists for ``split``, in file order."""
    ids = set(_split_ids(domain)[split])
    return tuple(task for task in _all_tasks(domain) if task.id in ids)


@functools.cache
def _all_tasks(domain: str) -> tuple[Any, ...]:
    """τ²'s ``get_tasks(None)``, once per process for every split: τ² reads and validates the domain's whole task
    file on every call (telecom's 14 MB: about half a second, twice over), and josh only reads the tasks."""
    return tuple(import_module(f"tau2.domains.{domain}.environment").get_tasks(None))


@functools.cache
def _split_ids(domain: str) -> dict[str, list[str]]:
    """τ²'s split file of ``domain``: split name -> task ids."""
    return import_module(f"tau2.domains.{domain}.environment").get_tasks_split()


def _call(action: Any) -> dict[str, Any]:
    return {"name": action.name, "kwargs": dict(action.arguments)}


def instruction_text(tau2_task: Any) -> str:
    """The user scenario's instructions as one text (τ² keeps them structured or as a string)."""
    instructions = tau2_task.user_scenario.instructions
    if isinstance(instructions, str):
        return instructions
    parts = (instructions.reason_for_call, instructions.known_info, instructions.unknown_info)
    return " ".join(part for part in parts if part)


def to_task(domain: str, tau2_task: Any, split: str, writes: Collection[str]) -> Task:
    """A josh task for one τ² task; its goals are the assistant's gold calls of write tools (``writes``)."""
    criteria = tau2_task.evaluation_criteria
    actions = list(criteria.actions or []) if criteria is not None else []
    agent_actions = [a for a in actions if a.requestor == "assistant"]
    goals = [Goal(name=a.name, parameters=dict(a.arguments)) for a in agent_actions if a.name in writes]
    instruction = instruction_text(tau2_task)
    return Task(
        id=task_id(domain, tau2_task.id),
        env=env_name(domain),
        split=split,
        user_goal=instruction,
        goals=goals,
        details={
            "tau2_id": tau2_task.id,
            "instruction": instruction,
            "actions": [_call(a) for a in agent_actions],
            "user_actions": [_call(a) for a in actions if a.requestor == "user"],
            "outputs": list(criteria.communicate_info or []) if criteria is not None else [],
        },
    )
