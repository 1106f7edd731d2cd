"""Append-only JSON-lines files that survive a crash: one record per line, flushed as it is written (a killed
process loses none) and synced to disk at most once a second and on close (a machine crash loses at most the last
second's records; a line it cuts short is skipped as the bad last line). A bad line anywhere else raises
``CorruptLineError`` naming the file and line, or, inside ``skipping_bad_lines`` (``--skip-bad-lines``), is skipped and
reported."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Awaitable, Callable, Container, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from josh.util.storable import clean_text, is_clean, to_storable


class CorruptLineError(ValueError):
    """A line in the middle of a JSONL file is not valid JSON, or not the record the file holds."""


M = TypeVar("M", bound=BaseModel)
OnSkip = Callable[[int, str], None]

SKIP_ENV = "JOSH_SKIP_BAD_LINES"
SKIP_FIX = "fix or delete that line, or rerun with --skip-bad-lines to skip such lines (each one skipped is reported)"

# The lines skipped inside ``skipping_bad_lines``, by (file, line number): the reason. None: bad lines raise.
_skipped: ContextVar[dict[tuple[str, int], str] | None] = ContextVar("josh_skipped_lines", default=None)


@contextmanager
def skipping_bad_lines(on: bool = True) -> Iterator[dict[tuple[str, int], str]]:
    """Inside the block (``on``), every reader that is not told otherwise skips bad lines instead of raising
    ``CorruptLineError``; yields the lines skipped, ``{(file, line): reason}``. Processes started inside it (``accelerate
    launch``, Ray workers) skip too (``$JOSH_SKIP_BAD_LINES``)."""
    skipped: dict[tuple[str, int], str] = {}
    if not on:
        yield skipped
        return
    token, saved = _skipped.set(skipped), os.environ.get(SKIP_ENV)
    os.environ[SKIP_ENV] = "1"
    try:
        yield skipped
    finally:
        _skipped.reset(token)
        if saved is None:
            os.environ.pop(SKIP_ENV, None)
        else:
            os.environ[SKIP_ENV] = saved


def skip_bad_default() -> bool:
    """Whether readers skip bad lines when not told: inside ``skipping_bad_lines``, or ``$JOSH_SKIP_BAD_LINES=1``."""
    return _skipped.get() is not None or os.environ.get(SKIP_ENV, "") not in ("", "0")


def bad_line(
    path: str | Path, number: int, reason: str, *, skip: bool | None = None, error: type[ValueError] = CorruptLineError
) -> None:
    """A bad line ``number`` of ``path``: raise ``error`` naming the file and line, or (``skip``, by default
    ``skip_bad_default()``) note it among the lines skipped and return."""
    if not (skip_bad_default() if skip is None else skip):
        raise error(f"{path}: line {number} {reason}")
    skipped = _skipped.get()
    if skipped is not None:
        skipped.setdefault((str(path), number), reason)


def written_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of ``path`` as written, for a reader that judges every line itself
    and reports a bad one with ``bad_line`` (the last line included: a finished file ends whole)."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                yield number, line


def brief(exc: ValidationError) -> str:
    """A pydantic error in one line: the first problem with its field, and how many more there are."""
    errors = exc.errors(include_url=False, include_input=False)
    if not errors:
        return "invalid"
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    text = f"{where}: {first['msg']}" if where else str(first["msg"])
    more = len(errors) - 1
    return text + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


class Span(NamedTuple):
    """One JSON line of a file: its number, where its bytes start and end (the newline included), its value."""

    number: int
    start: int
    end: int
    value: Any


def iter_numbered(
    path: str | Path, *, repair: bool = False, skip_bad: bool | None = None, on_skip: OnSkip | None = None
) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each JSON line of ``path``, read as a stream. A bad last line (a crash mid-write)
    is skipped, and with ``repair=True`` cut off the file so appends start clean. A bad line anywhere else raises
    ``CorruptLineError`` naming the file and line, unless ``skip_bad`` (default: ``skip_bad_default()``).
    ``on_skip(line, reason)`` hears of every line skipped."""
    for span in iter_spans(path, repair=repair, skip_bad=skip_bad, on_skip=on_skip):
        yield span.number, span.value


def iter_spans(
    path: str | Path, *, repair: bool = False, skip_bad: bool | None = None, on_skip: OnSkip | None = None
) -> Iterator[Span]:
    """``iter_numbered`` with where each line lies in the file (to copy lines as they are)."""
    path = Path(path)
    if not path.exists():
        return
    pending: tuple[int, int, str] | None = None  # a bad line not yet known to be the last: number, offset, reason
    offset = 0
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            if pending is not None:
                _bad_line(path, *pending, skip_bad, on_skip)
            try:
                value = json.loads(raw)
            except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, nesting past the limit
                pending = (number, start, _json_reason(exc))
                continue
            pending = None
            yield Span(number, start, offset, value)
    if pending is not None:
        if on_skip is not None:
            on_skip(pending[0], f"{pending[2]} (the last line: a write cut short)")
        if repair:
            with path.open("r+b") as f:
                f.truncate(pending[1])


def _bad_line(path: Path, number: int, offset: int, reason: str, skip: bool | None, on_skip: OnSkip | None) -> None:
    bad_line(path, number, reason, skip=skip)
    if on_skip is not None:
        on_skip(number, reason)


def _json_reason(exc: ValueError | RecursionError) -> str:
    if isinstance(exc, json.JSONDecodeError):  # some messages end in "at" ("Invalid control character at")
        return f"is not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return f"is not UTF-8 text (byte {exc.start})"
    return "is nested too deeply" if isinstance(exc, RecursionError) else f"is not valid JSON ({exc})"


def iter_jsonl(path: str | Path, *, repair: bool = False) -> Iterator[dict[str, Any]]:
    """The values of ``path``'s lines (see ``iter_numbered``: a bad line before the last raises unless skipping)."""
    for _, value in iter_numbered(path, repair=repair):
        yield value


def read_models(
    path: str | Path,
    model: type[M],
    what: str,
    *,
    repair: bool = False,
    skip_bad: bool | None = None,
    on_skip: OnSkip | None = None,
    lines: Container[int] | None = None,
) -> Iterator[M]:
    """Each line of ``path`` as a ``model`` (``what`` names it in errors: "path: line 3 is not a tree: ..."); bad
    lines are handled as in ``iter_numbered``, lines that are JSON but not a ``model`` too. ``lines``: only these
    line numbers (e.g. the latest record of each key)."""
    for number, value in iter_numbered(path, repair=repair, skip_bad=skip_bad, on_skip=on_skip):
        if lines is not None and number not in lines:
            continue
        try:
            record = model.model_validate(value)
        except ValidationError as exc:
            reason = f"is not {what}: {brief(exc)}"
        else:
            yield record
            continue
        bad_line(path, number, reason, skip=skip_bad)
        if on_skip is not None:
            on_skip(number, reason)


def json_line(record: BaseModel | dict[str, Any] | str) -> tuple[str, bool]:
    """One JSON line for ``record`` and whether it had to be repaired first (see ``josh.util.storable.to_storable``).

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


def count_rows(path: str | Path) -> int:
    """Non-empty lines of a JSONL file (0 when it is missing)."""
    path = Path(path)
    if not path.is_file():
        return 0
    with path.open(encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


class JsonlWriter:
    """Appends one JSON object per line and flushes it to the operating system immediately (another process reads
    it at once; killing this one loses nothing); syncs the file to disk when ``sync_s`` seconds have passed since
    the last sync, and on close (one ``fsync`` per record would cap a writer at a few hundred records a second). A
    record that cannot be serialised as it is (text with lone surrogates, nesting past the serialiser's limit) is
    repaired, never dropped; ``repaired`` counts those."""

    def __init__(self, path: str | Path, sync_s: float = 1.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = self.path.open("a", encoding="utf-8")
        self.repaired = 0
        self.sync_s = sync_s
        self._synced = time.monotonic()
        self._unsynced = False

    def write(self, record: BaseModel | dict[str, Any] | str) -> None:
        line, repaired = json_line(record)
        self.repaired += repaired
        self._file.write(line + "\n")
        self._file.flush()
        self._unsynced = True
        if time.monotonic() - self._synced >= self.sync_s:
            self.sync()

    def sync(self) -> None:
        """Sync what was written to disk."""
        os.fsync(self._file.fileno())
        self._synced, self._unsynced = time.monotonic(), False

    def close(self) -> None:
        if self._unsynced:
            self.sync()
        self._file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def write_as_completed(
    path: str | Path, jobs: Iterable[Awaitable[M]], concurrency: int, guard: Callable[[], None] | None = None
) -> list[M]:
    """Await ``jobs``, at most ``concurrency`` at a time, started in their order (so a scripted or seeded LLM answers
    the same way on every run), appending each result to the JSONL file ``path`` as it finishes (a killed run keeps
    what finished); the results in finishing order. ``guard`` is called before each write and may raise to stop the
    run (a backend that is down, see ``josh.llm.health``): the jobs still running are cancelled."""
    slots = asyncio.Semaphore(concurrency)

    async def bounded(job: Awaitable[M]) -> M:
        async with slots:
            return await job

    tasks = [asyncio.ensure_future(bounded(job)) for job in jobs]
    done: list[M] = []
    try:
        with JsonlWriter(path) as writer:
            for finished in asyncio.as_completed(tasks):
                result = await finished
                if guard is not None:
                    guard()
                done.append(result)
                writer.write(result)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return done
