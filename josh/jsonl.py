"""Append-only JSON-lines files that survive a crash: one record per line, flushed as it is written."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from josh.storable import clean_text, is_clean, to_storable


class CorruptLineError(ValueError):
    """A line in the middle of a JSONL file is not valid JSON."""


def iter_jsonl(path: str | Path, *, repair: bool = False) -> Iterator[dict[str, Any]]:
    """Yield the records of ``path``. A torn final line (a crash mid-write) is skipped, and with ``repair=True``
    cut off the file so appends start clean; a bad line anywhere else raises ``CorruptLineError``."""
    path = Path(path)
    if not path.exists():
        return
    with path.open("rb") as f:
        lines = f.read().split(b"\n")
    offset = 0
    for i, raw in enumerate(lines):
        last = i == len(lines) - 1
        if raw.strip():
            try:
                yield json.loads(raw)
            except json.JSONDecodeError as exc:
                if not (last or (i == len(lines) - 2 and not lines[-1].strip())):
                    raise CorruptLineError(f"{path}: line {i + 1} is not valid JSON: {exc}") from exc
                if repair:
                    with path.open("r+b") as f:
                        f.truncate(offset)
                return
        offset += len(raw) + 1


def json_line(record: BaseModel | dict[str, Any] | str) -> tuple[str, bool]:
    """One JSON line for ``record`` and whether it had to be repaired first (see ``josh.storable.to_storable``).

    A string is taken as JSON text already: lone surrogates are replaced and line breaks (only white space in
    valid JSON) become spaces."""
    if isinstance(record, str):
        line = clean_text(record).replace("\n", " ")
        return line, line != record
    try:
        if isinstance(record, BaseModel):
            return record.model_dump_json(), False
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        if is_clean(line):
            return line, False
    except (ValueError, RecursionError, PydanticSerializationError):  # UnicodeEncodeError is a ValueError
        pass
    return json.dumps(to_storable(record), ensure_ascii=False), True


class JsonlWriter:
    """Appends one JSON object per line and flushes it to disk immediately. A record that cannot be serialised
    as it is (text with lone surrogates, nesting past the serialiser's limit) is repaired, never dropped;
    ``repaired`` counts those."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = self.path.open("a", encoding="utf-8")
        self.repaired = 0

    def write(self, record: BaseModel | dict[str, Any] | str) -> None:
        line, repaired = json_line(record)
        self.repaired += repaired
        self._file.write(line + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
