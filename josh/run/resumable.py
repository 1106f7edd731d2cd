"""The one resumable concurrent runner: pieces of work keyed by id, each finished piece one line of a JSONL file.

Evaluation (a conversation per (task, trial)) and rollout (a search tree per task, here or on Ray actors) run
through it, so they resume, fail and report alike. A ``RunSession`` (one command that starts or resumes a run) reads
the file once: a piece whose latest line is a result is skipped, one whose latest line is ``failed`` (an LLM request
failed, see ``josh.llm.health``) is done again and its new line supersedes the old one (the file is appended to
while the run streams; a torn last line is cut off first). Two pieces with the same key are an error
(``DuplicateKeyError``), never merged. ``run_pending`` holds the pending pieces ``concurrency`` at a time, calls the
``guard`` (the failure policy: it raises to stop a run whose backend is down) before each result is written, appends
it, advances the progress display, and on any failure (the guard, Ctrl-C, SIGTERM) cancels the rest before they
write. A session after which every piece of the run is finished compacts the file (``RunSession.compact``,
``josh.util.compaction``): one line per key, in the run's order, written beside the file and renamed over it, so a
finished file holds no superseded line; a resumed run reads either form. Whatever ended the session, its ``finish``
callback writes the run's statistics, with the wall time of the earlier sessions (read from the statistics file)
added.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from josh.util.compaction import ReadKey, beside, compact, latest_lines
from josh.util.interrupt import terminate_like_interrupt
from josh.util.jsonl import JsonlWriter
from josh.util.progress import stage_progress

K = TypeVar("K", bound=Hashable)
W = TypeVar("W")
T = TypeVar("T")


class DuplicateKeyError(ValueError):
    """Two pieces of one run have the same key (e.g. two tasks with one id)."""


class Display(Protocol):
    """What shows a session's progress: a rich ``Progress`` (started while recording) told of each result."""

    progress: Progress

    def add(self, record: Any) -> None: ...


def finished_keys(scan: Iterable[tuple[K, bool]]) -> set[K]:
    """The keys whose latest line is a result, from ``(key, failed)`` for each line of the file in order."""
    latest = dict(scan)
    return {key for key, failed in latest.items() if not failed}


def earlier_wall_s(stats_path: Path) -> float:
    """The wall time the run's earlier sessions recorded in ``stats_path`` (``wall_s``, else ``session_wall_s``;
    0 when there is none to read)."""
    try:
        data = json.loads(stats_path.read_text(encoding="utf-8"))
        earlier = data.get("wall_s") or data.get("session_wall_s", 0.0)
    except (OSError, ValueError, AttributeError):
        return 0.0
    return float(earlier) if isinstance(earlier, int | float) and earlier >= 0 else 0.0


class RunSession(Generic[W, K]):
    """One session of a resumable run (one command that starts or resumes it): the pieces still to do (``todo``),
    those already finished (``skipped``), the file the results go to (``record``, inside ``recording()``) and the
    session's timing.

    ``scan`` reads the file as ``(key, failed)`` per line (and cuts a torn last line off); ``read_key`` gives the same
    from one line's JSON value (``None``: a line of no piece) for ``compact``; ``what`` names a key in the duplicate
    error (e.g. "task id"); ``display`` makes the progress display for the number of pieces to do; ``on_result`` is
    called after each result is recorded; ``order``: the keys in the order the compacted file lists them (default:
    the pieces')."""

    def __init__(
        self,
        pieces: Sequence[W],
        key: Callable[[W], K],
        path: Path,
        scan: Callable[[Path], Iterable[tuple[K, bool]]],
        stats_path: Path,
        display: Callable[[int], Display],
        *,
        read_key: ReadKey[K],
        what: str = "key",
        on_result: Callable[[Any], Any] | None = None,
        order: Sequence[K] | None = None,
    ) -> None:
        keys = [key(piece) for piece in pieces]
        require_unique(keys, what)
        path.parent.mkdir(parents=True, exist_ok=True)
        beside(path).unlink(missing_ok=True)  # a compaction a crash cut short: the file itself is whole
        self.path, self.on_result, self.read_key = path, on_result, read_key
        self.order: Sequence[K] = keys if order is None else order
        self.wanted: set[K] = set(keys)
        done = finished_keys(scan(path))
        self.todo: list[W] = [piece for piece, k in zip(pieces, keys, strict=True) if k not in done]
        self.skipped = len(self.wanted & done)
        self.earlier_s = earlier_wall_s(stats_path) if done else 0.0
        self.display = display(len(self.todo))
        self.start = time.perf_counter()
        self._writer: JsonlWriter | None = None

    def elapsed(self) -> float:
        """Seconds since the session began."""
        return time.perf_counter() - self.start

    def wall_s(self) -> float:
        """The run's wall time so far: the earlier sessions' and this one's."""
        return round(self.earlier_s + self.elapsed(), 3)

    @contextmanager
    def recording(self) -> Iterator[None]:
        """The file open for ``record`` and the progress shown."""
        with JsonlWriter(self.path) as writer, self.display.progress:
            self._writer = writer
            try:
                yield
            finally:
                self._writer = None

    def compact(self) -> bool:
        """When every piece of the run is finished, rewrite the file as one line per key in the run's order
        (``josh.util.compaction``); whether the file is now so (``False``: pieces are pending or failed)."""
        if self._writer is not None:
            raise RuntimeError("compact() needs the session's recording() to be closed")
        latest = latest_lines(self.path, self.read_key)
        if not self.wanted <= latest.finished():
            return False
        compact(self.path, latest, self.order)
        return True

    def record(self, result: BaseModel, line: str | None = None) -> None:
        """Append a finished piece (``line``: its JSON as it arrived, when it came as text) and show it."""
        if self._writer is None:
            raise RuntimeError("record() needs the session's recording() to be open")
        self._writer.write(result if line is None else line)
        self.display.add(result)
        if self.on_result is not None:
            self.on_result(result)


async def run_pending(
    session: RunSession[W, Any],
    work: Callable[[W], Awaitable[BaseModel]],
    *,
    concurrency: int,
    guard: Callable[[], None] | None = None,
) -> None:
    """Do every piece of ``session.todo``, ``concurrency`` at a time, recording each result as it finishes; the
    ``guard`` is called before each is written (it may raise to stop the run)."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(piece: W) -> None:
        async with gate:
            result = await work(piece)
        if guard is not None:
            guard()
        session.record(result)

    with session.recording():
        jobs = [asyncio.ensure_future(one(piece)) for piece in session.todo]
        try:
            await asyncio.gather(*jobs)
        finally:  # a failed piece (e.g. the guard) stops the others before they write
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)


async def run_session(
    session: RunSession[W, Any],
    work: Callable[[W], Awaitable[BaseModel]],
    finish: Callable[[], T],
    *,
    concurrency: int,
    guard: Callable[[], None] | None = None,
) -> T:
    """``run_pending``, then the file compacted when the run is complete, with Ctrl-C and SIGTERM stopping it alike,
    and ``finish`` (which writes the statistics) called however it ended; returns what ``finish`` returns."""
    with terminate_like_interrupt():
        try:
            await run_pending(session, work, concurrency=concurrency, guard=guard)
            session.compact()
        finally:
            result = finish()
    return result


def require_unique(keys: Iterable[Hashable], what: str = "key") -> None:
    """Raise ``DuplicateKeyError`` naming the keys that appear more than once."""
    twice = [str(k) for k, n in Counter(keys).items() if n > 1]
    if twice:
        more = f" and {len(twice) - 3} more" if len(twice) > 3 else ""
        raise DuplicateKeyError(f"each {what} must appear once in a run; repeated: {', '.join(twice[:3])}{more}")


class Counted:
    """A plain progress display: ``label``, a bar, done of ``total`` and the time left (nothing when disabled)."""

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        self.progress = stage_progress(*columns, enabled=enabled, transient=True)
        self.bar = self.progress.add_task(label, total=total)

    def add(self, record: Any) -> None:
        self.progress.advance(self.bar)
