"""Per-branch airline state: the shared read-only database plus a copy-on-write overlay of changed records."""

from __future__ import annotations

import hashlib
from typing import cast

from josh.envs.airline.db import AirlineDB, Record
from josh.envs.base import ConversationState
from josh.envs.retail.state import canonical, copy_record
from josh.types import Task


class AirlineState(ConversationState):
    """A conversation over the airline database.

    Reads go to the overlay first, then to the shared database. A write copies the user or reservation into this
    branch's overlay on first touch (``writable_user`` / ``writable_reservation``); ``add_reservation`` puts a new
    one there. ``fork()`` copies the overlay mappings shallowly and makes both sides forget which records they own,
    so the next write on either side copies the record again: a record shared by two branches is never mutated.
    Flights are never written (no tool changes seats or prices), so they stay in the shared database.
    """

    __slots__ = ("db", "users", "reservations", "_owned")

    def __init__(self, task: Task, db: AirlineDB) -> None:
        super().__init__(task)
        self.db = db
        self.users: dict[str, Record] = {}
        self.reservations: dict[str, Record] = {}
        self._owned: set[tuple[str, str]] = set()

    def fork(self) -> AirlineState:
        child = cast(AirlineState, super().fork())
        child.db = self.db
        child.users = dict(self.users)
        child.reservations = dict(self.reservations)
        child._owned = set()
        self._owned = set()
        return child

    def user(self, user_id: str) -> Record | None:
        """The current user record (read-only view), or ``None``."""
        found = self.users.get(user_id)
        return found if found is not None else self.db.users.get(user_id)

    def reservation(self, reservation_id: str) -> Record | None:
        """The current reservation record (read-only view), or ``None``."""
        found = self.reservations.get(reservation_id)
        return found if found is not None else self.db.reservations.get(reservation_id)

    def writable_user(self, user_id: str) -> Record:
        """This branch's own mutable copy of an existing user record."""
        return self._writable("user", user_id, self.users, self.db.users)

    def writable_reservation(self, reservation_id: str) -> Record:
        """This branch's own mutable copy of an existing reservation record."""
        return self._writable("reservation", reservation_id, self.reservations, self.db.reservations)

    def add_reservation(self, reservation: Record) -> None:
        """Store a new reservation (its id must be free) as owned by this branch."""
        key = reservation["reservation_id"]
        if self.reservation(key) is not None:
            raise KeyError(f"reservation {key} already exists")
        self.reservations[key] = reservation
        self._owned.add(("reservation", key))

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
        out: dict[str, dict[str, Record]] = {"users": {}, "reservations": {}}
        tables = (("users", self.users, self.db.users), ("reservations", self.reservations, self.db.reservations))
        for kind, overlay, base in tables:
            for key, record in overlay.items():
                if key not in base or canonical(record) != canonical(base[key]):
                    out[kind][key] = record
        return out

    def data_hash(self) -> str:
        """SHA-256 of the changed records; two states have equal hashes iff their full databases are equal."""
        return hashlib.sha256(canonical(self.changes()).encode()).hexdigest()
