"""Goal completion for ToolWOZ (spec: Goal completion and reward), on a per-task plan compiled once.

``TaskPlan.compile(task, db)`` normalises every goal's parameters and resolves, per domain, the search constraints
G, the booked entity U and the fail_info constraints that serving needs. ``search_completes`` and
``booking_matches`` decide which goals one call completes; the caller skips goals already completed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import ValidationError

from josh.envs.toolwoz.db import Table, ToolWOZDB
from josh.envs.toolwoz.normalize import is_subset, normalize, normalize_args
from josh.envs.toolwoz.task import ENTITY_KEY, details_of
from josh.types import Task


class TaskError(ValueError):
    """A task whose details the ToolWOZ environment cannot use."""


@dataclass(frozen=True)
class SearchGoal:
    """A search goal: its index, its normalised constraints G and the ids of the DB rows that satisfy G."""

    index: int
    constraints: dict[str, str]
    rows: frozenset[int]


@dataclass(frozen=True)
class BookGoal:
    """A booking goal: its index, its normalised parameters (slots + entity key) and what success returns.

    ``content`` is the JSON a successful booking shows the agent: success, the dialogue's reference and the
    entity key.
    """

    index: int
    parameters: dict[str, str]
    returned: dict[str, str]
    content: str


@dataclass(frozen=True)
class DomainPlan:
    """What serving and scoring need for one domain of one task.

    ``entity`` is U, the normalised key of the entity the first booking goal names; ``fail_only`` holds the
    fail_info constraints that differ from the first search goal's.
    """

    domain: str
    searches: tuple[SearchGoal, ...] = ()
    bookings: tuple[BookGoal, ...] = ()
    entity: str | None = None
    fail_only: dict[str, str] = field(default_factory=dict)

    @property
    def has_goal(self) -> bool:
        return bool(self.searches or self.bookings)

    def is_entity(self, table: Table, row_id: int | None) -> bool:
        """Whether a served row is the booked entity U."""
        return row_id is not None and self.entity is not None and table.values[row_id].get(table.key) == self.entity


def _book_goal(task: Task, index: int, key: str, booked: dict[str, str]) -> BookGoal:
    goal = task.goals[index]
    returned = {str(k): str(v) for k, v in {**booked, **(goal.expected_return or {})}.items() if v is not None}
    if key not in returned and goal.parameters.get(key) is not None:
        returned[key] = str(goal.parameters[key])
    body: dict[str, object] = {"success": True}
    body.update((k, returned[k]) for k in ("reference", key) if k in returned)
    return BookGoal(index, normalize_args(goal.parameters), returned, json.dumps(body, ensure_ascii=False))


def _domain_plan(task: Task, table: Table, fail_info: dict[str, str], booked: dict[str, str]) -> DomainPlan:
    domain, key = table.domain, ENTITY_KEY[table.domain]
    searches = []
    for i, goal in enumerate(task.goals):
        if goal.name == f"search_{domain}":
            constraints = normalize_args(goal.parameters)
            searches.append(SearchGoal(i, constraints, table.match_set(table.compile(constraints))))
    bookings = [_book_goal(task, i, key, booked) for i, g in enumerate(task.goals) if g.name == f"book_{domain}"]
    entity = None
    if bookings:
        entity = bookings[0].parameters.get(key) or normalize(bookings[0].returned.get(key)) or None
    info = searches[0].constraints if searches else {}
    fail_only = {k: v for k, v in normalize_args(fail_info).items() if info.get(k) != v}
    return DomainPlan(domain, tuple(searches), tuple(bookings), entity, fail_only)


@dataclass(frozen=True)
class TaskPlan:
    """Every domain's plan for one task."""

    domains: dict[str, DomainPlan]

    @classmethod
    def compile(cls, task: Task, db: ToolWOZDB) -> TaskPlan:
        """Resolve a task's goals against the DB; a task whose details do not validate raises ``TaskError``."""
        try:
            details = details_of(task)
        except ValidationError as exc:
            raise TaskError(f"task {task.id!r}: its details are not ToolWOZ details: {exc}") from None
        plans: dict[str, DomainPlan] = {}
        for domain, table in db.tables.items():
            spec = details.goal.get(domain)
            fail_info = spec.fail_info if spec else {}
            plans[domain] = _domain_plan(task, table, fail_info, details.booked.get(domain, {}))
        return cls(plans)


def search_completes(plan: DomainPlan, table: Table, args: dict[str, str], served: int | None) -> tuple[int, ...]:
    """The search goals a search call completes, given its normalised args and the row it was served.

    A goal completes when G ⊆ args (and, if the domain has a booking goal, the served row is U), or when the
    served row satisfies G (and is U, if a booking goal exists).
    """
    entity_ok = not plan.bookings or plan.is_entity(table, served)
    if not entity_ok:
        return ()
    return tuple(goal.index for goal in plan.searches if is_subset(goal.constraints, args) or served in goal.rows)


def booking_matches(plan: DomainPlan, args: dict[str, str]) -> tuple[BookGoal, ...]:
    """The booking goals whose parameters the normalised args contain; the booking succeeds iff there is one."""
    return tuple(goal for goal in plan.bookings if is_subset(goal.parameters, args))
