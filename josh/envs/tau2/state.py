"""Per-branch τ² state: a τ² ``Environment`` shared copy-on-write between branches, and the executed calls.

``fork()`` shares the environment object and makes both sides forget that they own it; the first call that may
change it (a ``WRITE`` tool, a call of the user's device, or any call on an environment that syncs the user's side
after every call: telecom) makes the branch its own environment first (``own``), so an environment shared by two
branches is never mutated. Owning copies as little as τ²'s data allows:

- a database whose fields are all tables (dicts of pydantic records: airline, retail) gets a new ``Environment``
  and toolkit around a new DB whose tables are shallow copies of the parent's (``Table``: the records stay shared,
  ~0.1 ms); while a state-changing call runs, every record the tool reaches through a table (``[]``, ``get``,
  ``values``, ``items``, ``pop``) is deep-copied into the branch's table on first touch, so tools that mutate
  records in place after a lookup only ever mutate the branch's copies;
- anything else (telecom: list tables and the user's device) is deep-copied whole (under 1 ms).

Reads, think and calculate on airline and retail run on the shared records. ``calls`` are the (josh call id, τ²
``ToolCall``, τ² ``ToolMessage``) triples in execution order, the user's own calls included: the trajectory the
final reward replays. ``ended`` is why the conversation ended, as josh's runner sets it before the final reward
(``None``: by the user).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from tau2.environment.environment import Environment

from josh.core.env import ConversationState
from josh.types import Task


class Table(dict[Any, Any]):
    """One table of a branch's DB: the parent's records shared until a state-changing call reaches one (``writing``),
    which then gets the branch's own deep copy; records the branch stored or copied are its own (``owned``)."""

    __slots__ = ("writing", "owned")

    def __init__(self, records: Iterable[Any] = ()) -> None:
        super().__init__(records)
        self.writing = False
        self.owned: set[Any] = set()

    def _record(self, key: Any) -> Any:
        record = dict.__getitem__(self, key)
        if self.writing and key not in self.owned:
            record = copy.deepcopy(record)
            dict.__setitem__(self, key, record)
            self.owned.add(key)
        return record

    def __reduce__(self) -> Any:  # a copied or unpickled table owns no record yet: at worst one is copied again
        return type(self), (dict(self),)

    def __getitem__(self, key: Any) -> Any:
        return self._record(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self.owned.add(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self._record(key) if key in self else default

    def values(self) -> Any:
        return [self._record(key) for key in list(self)] if self.writing else dict.values(self)

    def items(self) -> Any:
        return [(key, self._record(key)) for key in list(self)] if self.writing else dict.items(self)

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:
            self._record(key)
            self.owned.discard(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self._record(key)
        self[key] = default
        return default


def tabular(environment: Any) -> bool:
    """Whether record-level copy-on-write covers everything a call can change: no user side, no sync, and a DB of
    tables only."""
    db = environment.tools.db if environment.tools is not None else None
    return (
        db is not None
        and environment.user_tools is None
        and not syncs(environment)
        and all(isinstance(getattr(db, name), dict) for name in type(db).model_fields)
    )


def branch(environment: Any) -> Any:
    """A copy of ``environment`` that a branch may change without touching ``environment`` (see the module
    docstring): over shared records where the DB is tabular, else a deep copy."""
    if not tabular(environment):
        return copy.deepcopy(environment)
    db = environment.tools.db
    tools = copy.copy(environment.tools)
    tools.db = db.model_copy(update={name: Table(getattr(db, name)) for name in type(db).model_fields})
    own = copy.copy(environment)
    own.tools = tools
    return own


def syncs(environment: Any) -> bool:
    """Whether every call may change ``environment``: τ² syncs the user's side after each call (telecom)."""
    return type(environment).sync_tools is not Environment.sync_tools


@contextmanager
def writing(environment: Any) -> Iterator[None]:
    """Copy every record a call reaches through ``environment``'s tables while the block runs."""
    tables = [t for t in vars(environment.tools.db).values() if isinstance(t, Table)] if environment.tools else []
    for table in tables:
        table.writing = True
    try:
        yield
    finally:
        for table in tables:
            table.writing = False


class Tau2State(ConversationState):
    """A conversation on a τ² environment (see the module docstring)."""

    __slots__ = ("environment", "calls", "_owned")
    shared_fields = (*ConversationState.shared_fields, "environment")
    branch_fields = (*ConversationState.branch_fields, "calls", "_owned")

    def __init__(self, task: Task, environment: Any) -> None:
        super().__init__(task)
        self.environment = environment
        self.calls: list[tuple[str, Any, Any]] = []
        self._owned = False

    def fork(self) -> Tau2State:
        child = cast(Tau2State, super().fork())
        child._owned = self._owned = False  # the environment is copied on the next write on either side
        return child

    def own(self) -> Any:
        """This branch's own environment, made (``branch``) on first use after a fork or a reset."""
        if not self._owned:
            self.environment = branch(self.environment)
            self._owned = True
        return self.environment

    def respond(self, call: Any, changes: bool) -> Any:
        """τ²'s ``ToolMessage`` for the τ² ``call`` on this branch; ``changes``: the call may change the environment
        (a write tool, a user call), so it runs on the branch's own environment, copying the records it reaches."""
        if not (changes or syncs(self.environment)):
            return self.environment.get_response(call)
        environment = self.own()
        with writing(environment):
            return environment.get_response(call)
