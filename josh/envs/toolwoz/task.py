"""ToolWOZ task records: the per-domain user goal and the goal API calls derived from it (spec: Tasks and goals)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from josh.types import Goal, Message, Task

DOMAINS = ("restaurant", "hotel", "attraction", "train")
EXCLUDED_DOMAINS = ("taxi", "police", "hospital")
BOOK_SLOTS = {"restaurant": ("time", "day", "people"), "hotel": ("stay", "day", "people"), "train": ("people",)}
ENTITY_KEY = {"restaurant": "name", "hotel": "name", "attraction": "name", "train": "trainID"}
IGNORED_BOOK_KEYS = ("invalid", "pre_invalid")


class DomainGoal(BaseModel):
    """One domain of a MultiWOZ user goal."""

    info: dict[str, str] = Field(default_factory=dict)
    book: dict[str, str] = Field(default_factory=dict)
    fail_info: dict[str, str] = Field(default_factory=dict)
    fail_book: dict[str, str] = Field(default_factory=dict)
    reqt: list[str] = Field(default_factory=list)

    @field_validator("info", "book", "fail_info", "fail_book", mode="before")
    @classmethod
    def _strings_only(cls, value: Any) -> Any:
        """MultiWOZ mixes bookkeeping flags (``invalid``, ``pre_invalid``) into ``book``; keep only slot strings."""
        if not isinstance(value, dict):
            return value
        return {k: str(v) for k, v in value.items() if k not in IGNORED_BOOK_KEYS and v is not None}


class ToolWOZDetails(BaseModel):
    """What ``Task.details`` holds for a ToolWOZ task.

    ``booked`` maps a domain to the entity the original dialogue booked, e.g. ``{"name": ..., "reference": ...}``
    or ``{"trainID": ..., "reference": ...}``; a booking goal exists only for those domains. ``repairs`` says, per
    domain, what the database check changed (``josh.envs.toolwoz.repair``); ``defect`` why the task cannot be
    completed at all (empty for a sound task).
    """

    domains: list[str]
    goal: dict[str, DomainGoal]
    booked: dict[str, dict[str, str]] = Field(default_factory=dict)
    repairs: dict[str, str] = Field(default_factory=dict)
    defect: str = ""


def _clean_book(book: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in book.items() if k not in IGNORED_BOOK_KEYS and v not in (None, "")}


def derive_goals(details: ToolWOZDetails) -> list[Goal]:
    """Search goals for domains with ``info``; booking goals where the dialogue booked an entity."""
    goals: list[Goal] = []
    for domain in details.domains:
        spec = details.goal[domain]
        info = {k: v for k, v in spec.info.items() if v not in (None, "")}
        if info:
            goals.append(Goal(name=f"search_{domain}", parameters=info))
        booked = details.booked.get(domain)
        if domain in BOOK_SLOTS and spec.book and booked and ENTITY_KEY[domain] in booked:
            key = ENTITY_KEY[domain]
            params = {k: v for k, v in _clean_book(spec.book).items() if k in BOOK_SLOTS[domain]}
            params[key] = booked[key]
            goals.append(Goal(name=f"book_{domain}", parameters=params, expected_return=dict(booked)))
    return goals


def derive_expected_failures(details: ToolWOZDetails) -> list[Goal]:
    """The calls a task's user makes fail on purpose: a search with its ``fail_info`` values (over ``info``), and a
    booking of the booked entity with its ``fail_book`` slots (over ``book``); each is tried and refused before the
    user settles for the goal."""
    failures: list[Goal] = []
    for domain in details.domains:
        spec = details.goal[domain]
        info, fail = _clean_book(spec.info), _clean_book(spec.fail_info)
        if fail:
            failures.append(Goal(name=f"search_{domain}", parameters={**info, **fail}))
        booked = details.booked.get(domain)
        fail_book = _clean_book(spec.fail_book)
        if domain in BOOK_SLOTS and fail_book and booked and ENTITY_KEY[domain] in booked:
            slots = {k: v for k, v in {**_clean_book(spec.book), **fail_book}.items() if k in BOOK_SLOTS[domain]}
            key = ENTITY_KEY[domain]
            failures.append(Goal(name=f"book_{domain}", parameters={**slots, key: booked[key]}))
    return failures


def make_task(
    task_id: str,
    goal: dict[str, DomainGoal],
    *,
    booked: dict[str, dict[str, str]] | None = None,
    repairs: dict[str, str] | None = None,
    defect: str = "",
    user_goal: str = "",
    split: str | None = None,
    transcript: list[Message] | None = None,
) -> Task:
    """Build a ToolWOZ ``Task`` from its per-domain goal; domains keep the canonical order."""
    domains = [d for d in DOMAINS if d in goal]
    details = ToolWOZDetails(
        domains=domains, goal={d: goal[d] for d in domains}, booked=booked or {}, repairs=repairs or {}, defect=defect
    )
    return Task(
        id=task_id,
        env="toolwoz",
        split=split,
        user_goal=user_goal,
        goals=derive_goals(details),
        details=details.model_dump(exclude={k for k in ("repairs", "defect") if not getattr(details, k)}),
        transcript=transcript or [],
    )


def task_line(task: Task) -> str:
    """A task as one line of a ToolWOZ task file: defaults and ``env`` left out (every task in it plays ToolWOZ)."""
    return task.model_dump_json(exclude_defaults=True, exclude={"env"}) + "\n"


def details_of(task: Task) -> ToolWOZDetails:
    """The typed ToolWOZ details of a task."""
    return ToolWOZDetails.model_validate(task.details)
