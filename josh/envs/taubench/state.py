"""Per-branch τ-bench state: the shared read-only database plus a copy-on-write overlay of changed records."""

from __future__ import annotations

import hashlib
import json
from typing import Any, ClassVar, cast

from josh.core.env import ConversationState
from josh.types import Task

Record = dict[str, Any]


def copy_record(value: Any) -> Any:
    """A deep copy of a JSON-shaped value (dicts, lists, scalars), much faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {k: copy_record(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_record(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """Canonical text of a record: sorted keys, list order kept, ``57`` and ``57.0`` kept apart (as τ-bench does)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class OverlayState(ConversationState):
    """A conversation over a τ-bench database whose writable ``tables`` (``users`` and e.g. ``orders``) are
    attributes of ``db`` mapping ids to records.

    Reads go to the overlay first, then to the shared database. A write copies the record into this branch's
    overlay on first touch (``writable``); ``add`` stores a new one there. ``fork()`` copies the overlay mappings
    shallowly and makes both sides forget which records they own, so the next write on either side copies the
    record again: a record shared by two branches is never mutated.
    """

    __slots__ = ("db", "overlays", "_owned")
    shared_fields = (*ConversationState.shared_fields, "db")
    branch_fields = (*ConversationState.branch_fields, "overlays", "_owned")
    tables: ClassVar[tuple[str, ...]]

    def __init__(self, task: Task, db: Any) -> None:
        super().__init__(task)
        self.db = db
        self.overlays: dict[str, dict[str, Record]] = {table: {} for table in self.tables}
        self._owned: set[tuple[str, str]] = set()

    def fork(self) -> OverlayState:
        child = cast(OverlayState, super().fork())
        child.overlays = {table: dict(overlay) for table, overlay in self.overlays.items()}  # a level deeper
        child._owned = set()
        self._owned = set()
        return child

    def read(self, table: str, key: str) -> Record | None:
        """The current record (read-only view), or ``None``."""
        found = self.overlays[table].get(key)
        return found if found is not None else getattr(self.db, table).get(key)

    def writable(self, table: str, key: str) -> Record:
        """This branch's own mutable copy of an existing record."""
        if (table, key) not in self._owned:
            overlay = self.overlays[table]
            current = overlay.get(key, getattr(self.db, table).get(key))
            if current is None:
                raise KeyError(f"{table.removesuffix('s')} {key} does not exist")
            overlay[key] = copy_record(current)
            self._owned.add((table, key))
        return self.overlays[table][key]

    def user(self, user_id: str) -> Record | None:
        """The current user record (read-only view), or ``None``."""
        return self.read("users", user_id)

    def writable_user(self, user_id: str) -> Record:
        """This branch's own mutable copy of an existing user record."""
        return self.writable("users", user_id)

    def add(self, table: str, key: str, record: Record) -> None:
        """Store a new record (its id must be free) as owned by this branch."""
        if self.read(table, key) is not None:
            raise KeyError(f"{table.removesuffix('s')} {key} already exists")
        self.overlays[table][key] = record
        self._owned.add((table, key))

    def changes(self) -> dict[str, dict[str, Record]]:
        """The records whose canonical text differs from the pristine database, by table and id."""
        out: dict[str, dict[str, Record]] = {}
        for table, overlay in self.overlays.items():
            base = getattr(self.db, table)
            out[table] = {
                key: record
                for key, record in overlay.items()
                if key not in base or canonical(record) != canonical(base[key])
            }
        return out

    def data_hash(self) -> str:
        """SHA-256 of the changed records; two states have equal hashes iff their full databases are equal."""
        return hashlib.sha256(canonical(self.changes()).encode()).hexdigest()
