"""What a ToolWOZ search or booking returns (spec: Serving).

Search is adversarial and returns at most one row: an under-specified search is served a row that breaks the goal
when one exists, so only a search that pins the goal down reliably yields the goal entity. Bookings never touch
the DB: they succeed exactly when the arguments contain a booking goal's parameters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import chain
from typing import NamedTuple

from josh.envs.toolwoz.db import Query, Table
from josh.envs.toolwoz.goals import BookGoal, DomainPlan, booking_matches
from josh.envs.toolwoz.normalize import is_subset


class Served(NamedTuple):
    """A search's outcome: the served row id (None for ``[]``) and whether fail_info blocked it."""

    row: int | None
    blocked: bool = False

    def content(self, table: Table) -> str:
        return "[]" if self.row is None else f"[{table.row_json[self.row]}]"


class Booked(NamedTuple):
    """A booking's outcome: the booking goals it satisfies (empty when it failed) and the JSON the agent sees."""

    goals: tuple[BookGoal, ...]
    content: str


FAILED_BOOKING = json.dumps({"success": False})


def _entity_row(table: Table, plan: DomainPlan, query: Query) -> int | None:
    """U's row, if U matches the query."""
    if plan.entity is None:
        return None
    return next((rid for rid in table.rows_with_key(plan.entity) if table.matches(rid, query)), None)


def _breaking_row(rows: Iterator[int], satisfying: frozenset[int] | None) -> int | None:
    """The first row that does not satisfy G (``satisfying`` = G's rows; None when there is no search goal)."""
    if satisfying is None:
        return None
    return next((rid for rid in rows if rid not in satisfying), None)


def serve_search(table: Table, plan: DomainPlan, args: dict[str, str]) -> Served:
    """Serve one search with normalised ``args`` under the spec's three-way adversarial rule."""
    if plan.fail_only and is_subset(plan.fail_only, args):
        return Served(None, True)
    query = table.compile(args)
    matching = iter(table.search(query))
    first = next(matching, None)
    if first is None or not plan.has_goal:
        return Served(first)
    goal = plan.searches[0] if plan.searches else None
    constraints = goal.constraints if goal else {}
    satisfying = goal.rows if goal else None
    if is_subset(constraints, args):
        if not plan.bookings:
            return Served(first)
        row = _entity_row(table, plan, query)
        return Served(row if row is not None else _breaking_row(chain((first,), matching), satisfying))
    if is_subset(args, constraints):
        row = _breaking_row(chain((first,), matching), satisfying)
        if row is None and plan.bookings:
            row = _entity_row(table, plan, query)
        return Served(row if row is not None else first)
    return Served(first)


def serve_booking(plan: DomainPlan, args: dict[str, str]) -> Booked:
    """Book with normalised ``args``: success (with the dialogue's reference) iff a booking goal ⊆ args."""
    goals = booking_matches(plan, args)
    return Booked(goals, goals[0].content) if goals else Booked((), FAILED_BOOKING)
