"""The MultiWOZ databases in memory, indexed at load time so a search costs microseconds.

``ToolWOZDB.load(folder)`` reads ``{restaurant,hotel,attraction,train}_db.json``, once per process while the files
are unchanged (an environment is rebuilt at every stage of a loop; the tables are never written). Each ``Table`` keeps its rows in
DB order, the normalised value of every column, an index (column → value → row ids) and, for trains, departure and
arrival times as minutes. Rows are served without ``location``, ``introduction`` and null fields, and their JSON
text is built once. Nothing is copied per call; the DB is shared read-only by every conversation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from types import MappingProxyType
from typing import Any

from josh.envs.toolwoz.normalize import minutes, normalize
from josh.envs.toolwoz.schema import TOOLS
from josh.envs.toolwoz.task import DOMAINS, ENTITY_KEY
from josh.util.filestamps import FolderCache

DROPPED_FIELDS = frozenset({"location", "introduction"})
TIME_FIELDS = ("leaveAt", "arriveBy")
_DAY = 24 * 60
# Columns a search can filter on by equality: every combination of their values is indexed at load time.
SEARCHABLE = {domain: tuple(k for k in TOOLS[f"search_{domain}"].params if k not in TIME_FIELDS) for domain in DOMAINS}


class DBError(ValueError):
    """A database file is missing or holds a record the environment cannot serve."""


class Query:
    """Compiled search constraints: equality on normalised columns plus the train time bounds (minutes).

    ``impossible`` is set when a constraint can match no row (e.g. a train time that is not a clock time).
    """

    __slots__ = ("equal", "leave_from", "arrive_by", "impossible", "timed")

    def __init__(
        self,
        equal: tuple[tuple[str, str], ...] = (),
        leave_from: int | None = None,
        arrive_by: int | None = None,
        impossible: bool = False,
    ) -> None:
        self.equal = equal
        self.leave_from = leave_from
        self.arrive_by = arrive_by
        self.impossible = impossible
        self.timed = leave_from is not None or arrive_by is not None


class Table:
    """One domain's rows with their indices."""

    def __init__(self, domain: str, records: list[dict[str, Any]], searchable: Sequence[str] = ()) -> None:
        self.domain = domain
        self.key = ENTITY_KEY[domain]
        self.rows: tuple[Mapping[str, Any], ...] = tuple(
            MappingProxyType({k: v for k, v in r.items() if k not in DROPPED_FIELDS and v is not None}) for r in records
        )
        self.row_json: tuple[str, ...] = tuple(json.dumps(dict(r), ensure_ascii=False) for r in self.rows)
        self.values: tuple[dict[str, str], ...] = tuple(
            {k: normalize(v) for k, v in r.items() if isinstance(v, (str, int, float))} for r in self.rows
        )
        index: dict[str, dict[str, list[int]]] = {}
        for row_id, values in enumerate(self.values):
            for column, value in values.items():
                index.setdefault(column, {}).setdefault(value, []).append(row_id)
        self.index: dict[str, dict[str, tuple[int, ...]]] = {
            column: {value: tuple(ids) for value, ids in by_value.items()} for column, by_value in index.items()
        }
        self.index_sets: dict[str, dict[str, frozenset[int]]] = {
            column: {value: frozenset(ids) for value, ids in by_value.items()} for column, by_value in index.items()
        }
        self.searchable = frozenset(searchable)
        self.combined = self._combined_index(searchable)
        self.leave: tuple[int, ...] = ()
        self.arrive: tuple[int, ...] = ()
        if domain == "train":
            self.leave = tuple(minutes(v["leaveAt"]) or 0 for v in self.values)
            # An arrival earlier than the departure is after midnight: count it on the next day.
            self.arrive = tuple(
                a + _DAY if a < d else a
                for a, d in zip((minutes(v["arriveBy"]) or 0 for v in self.values), self.leave, strict=True)
            )

    def _combined_index(self, columns: Sequence[str]) -> dict[frozenset[tuple[str, str]], tuple[int, ...]]:
        """Row ids (DB order) for every combination of values of the searchable columns a row has."""
        combined: dict[frozenset[tuple[str, str]], list[int]] = {}
        for row_id, values in enumerate(self.values):
            pairs = [(column, values[column]) for column in columns if column in values]
            for size in range(1, len(pairs) + 1):
                for combo in combinations(pairs, size):
                    combined.setdefault(frozenset(combo), []).append(row_id)
        return {combo: tuple(ids) for combo, ids in combined.items()}

    def __len__(self) -> int:
        return len(self.rows)

    def compile(self, constraints: Mapping[str, str]) -> Query:
        """Turn normalised constraints into a ``Query`` (train times become at-or-after / at-or-before bounds)."""
        leave, arrive = constraints.get("leaveAt"), constraints.get("arriveBy")
        if self.domain != "train" or (leave is None and arrive is None):
            return Query(tuple(constraints.items()))
        leave_from = None if leave is None else minutes(leave)
        arrive_by = None if arrive is None else minutes(arrive)
        if (leave is not None and leave_from is None) or (arrive is not None and arrive_by is None):
            return Query(impossible=True)
        equal = tuple(item for item in constraints.items() if item[0] not in TIME_FIELDS)
        return Query(equal, leave_from, arrive_by)

    def matches(self, row_id: int, query: Query) -> bool:
        """Whether one row satisfies a query."""
        if query.impossible:
            return False
        values = self.values[row_id]
        for column, value in query.equal:
            if values.get(column) != value:
                return False
        return not query.timed or self._within_times(row_id, query)

    def _within_times(self, row_id: int, query: Query) -> bool:
        return (query.leave_from is None or self.leave[row_id] >= query.leave_from) and (
            query.arrive_by is None or self.arrive[row_id] <= query.arrive_by
        )

    def search(self, query: Query) -> Iterable[int]:
        """Ids of the rows matching ``query`` in DB order (equality through the index sets, then time bounds)."""
        if query.impossible:
            return ()
        equal = query.equal
        if not equal:
            every = range(len(self.rows))
            return (r for r in every if self._within_times(r, query)) if query.timed else every
        ids: Sequence[int] | None = self.combined.get(frozenset(equal))
        if ids is None:
            if all(column in self.searchable for column, _ in equal):
                return ()  # every combination of searchable values that occurs is in the combined index
            sets = sorted((self.index_sets.get(c, {}).get(v, frozenset()) for c, v in equal), key=len)
            ids = sorted(sets[0].intersection(*sets[1:]))
        if not query.timed:
            return ids
        low = -1 if query.leave_from is None else query.leave_from
        high = 1 << 30 if query.arrive_by is None else query.arrive_by
        leave, arrive = self.leave, self.arrive
        return [r for r in ids if leave[r] >= low and arrive[r] <= high]

    def match_set(self, query: Query) -> frozenset[int]:
        """Every row id matching ``query``, as a set (built once per goal, then O(1) membership)."""
        return frozenset(self.search(query))

    def rows_with_key(self, value: str) -> tuple[int, ...]:
        """Ids of the rows whose entity key (``name`` / ``trainID``) normalises to ``value``."""
        return self.index.get(self.key, {}).get(value, ())


def _check_record(path: Path, position: int, record: Any, domain: str) -> None:
    where = f"{path}: record {position}"
    if not isinstance(record, dict):
        raise DBError(f"{where}: expected a JSON object, got {type(record).__name__}")
    key = ENTITY_KEY[domain]
    if not isinstance(record.get(key), str) or not record[key].strip():
        raise DBError(f"{where}: missing or empty {key!r}")
    where = f"{where} ({record[key]})"
    for column in SEARCHABLE[domain]:
        value = record.get(column, "")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise DBError(f"{where}: {column}={_short(value)} is not a string or a number")
    if domain == "train":
        for column in (*TIME_FIELDS, "day", "departure", "destination"):
            if not isinstance(record.get(column), str):
                raise DBError(f"{where}: missing {column!r}")
        for column in TIME_FIELDS:
            if minutes(normalize(record[column])) is None:
                raise DBError(f"{where}: {column}={record[column]!r} is not an HH:MM time")


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def load_table(path: Path, domain: str) -> Table:
    """Read and index one ``<domain>_db.json``; any problem is one ``DBError`` naming the file and record."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DBError(f"{path}: file not found (expected a MultiWOZ {domain} database)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DBError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DBError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    if not isinstance(records, list):
        raise DBError(f"{path}: expected a JSON list of records, got {type(records).__name__}")
    for position, record in enumerate(records):
        _check_record(path, position, record, domain)
    return Table(domain, records, SEARCHABLE[domain])


class ToolWOZDB:
    """The four domain tables, loaded once and shared read-only."""

    def __init__(self, tables: Mapping[str, Table]) -> None:
        self.tables = dict(tables)

    @classmethod
    def load(cls, folder: str | Path) -> ToolWOZDB:
        """Load ``{restaurant,hotel,attraction,train}_db.json`` from a MultiWOZ ``db`` folder."""
        root = Path(folder)
        if not root.is_dir():
            raise DBError(f"{root}: not a folder (expected the MultiWOZ db folder with <domain>_db.json files)")
        return _loaded(root)

    def __getitem__(self, domain: str) -> Table:
        return self.tables[domain]


TABLE_FILES = tuple(f"{domain}_db.json" for domain in DOMAINS)


def _read(folder: Path) -> ToolWOZDB:
    return ToolWOZDB(
        {domain: load_table(folder / name, domain) for domain, name in zip(DOMAINS, TABLE_FILES, strict=True)}
    )


_loaded: FolderCache[ToolWOZDB] = FolderCache(_read, TABLE_FILES)
