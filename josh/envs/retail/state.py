"""Per-branch retail state: the shared read-only database plus a copy-on-write overlay of changed records."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

from josh.envs.base import ConversationState
from josh.envs.retail.db import Record, RetailDB
from josh.types import Task


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


class RetailState(ConversationState):
    """A conversation over the retail database.

    Reads go to the overlay first, then to the shared database. A write copies the record into this branch's
    overlay on first touch (``writable_user`` / ``writable_order``). ``fork()`` copies the overlay mappings
    shallowly and makes both sides forget which records they own, so the next write on either side copies the
    record again: a record shared by two branches is never mutated.
    """

    __slots__ = ("db", "users", "orders", "_owned")

    def __init__(self, task: Task, db: RetailDB) -> None:
        super().__init__(task)
        self.db = db
        self.users: dict[str, Record] = {}
        self.orders: dict[str, Record] = {}
        self._owned: set[tuple[str, str]] = set()

    def fork(self) -> RetailState:
        child = cast(RetailState, super().fork())
        child.db = self.db
        child.users = dict(self.users)
        child.orders = dict(self.orders)
        child._owned = set()
        self._owned = set()
        return child

    def user(self, user_id: str) -> Record | None:
        """The current user record (read-only view), or ``None``."""
        found = self.users.get(user_id)
        return found if found is not None else self.db.users.get(user_id)

    def order(self, order_id: str) -> Record | None:
        """The current order record (read-only view), or ``None``."""
        found = self.orders.get(order_id)
        return found if found is not None else self.db.orders.get(order_id)

    def writable_user(self, user_id: str) -> Record:
        """This branch's own mutable copy of an existing user record."""
        return self._writable("user", user_id, self.users, self.db.users)

    def writable_order(self, order_id: str) -> Record:
        """This branch's own mutable copy of an existing order record."""
        return self._writable("order", order_id, self.orders, self.db.orders)

    def _writable(self, kind: str, key: str, overlay: dict[str, Record], base: dict[str, Record]) -> Record:
        if (kind, key) not in self._owned:
            current = overlay.get(key, base.get(key))
            if current is None:
                raise KeyError(f"{kind} {key} does not exist")
            overlay[key] = copy_record(current)
            self._owned.add((kind, key))
        return overlay[key]

    def changes(self) -> dict[str, dict[str, Record]]:
        """The records whose canonical text differs from the pristine database, by kind and id."""
        out: dict[str, dict[str, Record]] = {"users": {}, "orders": {}}
        for kind, overlay, base in (("users", self.users, self.db.users), ("orders", self.orders, self.db.orders)):
            for key, record in overlay.items():
                if key not in base or canonical(record) != canonical(base[key]):
                    out[kind][key] = record
        return out

    def data_hash(self) -> str:
        """SHA-256 of the changed records; two states have equal hashes iff their full databases are equal."""
        return hashlib.sha256(canonical(self.changes()).encode()).hexdigest()
