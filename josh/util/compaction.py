"""A streamed JSON-lines file made whole: the latest line of each key, in the run's order, one line per key.

While a run streams, a later line of a key supersedes an earlier one (a failed piece done again). When the run
completes, ``compact`` rewrites the file with the latest line of each key, the keys in the order given (keys the order
does not name after them, in the order they first appear; lines of no key last), each line copied byte for byte.
The new file is written beside the old one (``beside``), synced to disk and renamed over it: a crash during the
rewrite leaves the old file whole (the next run removes the file beside it), a crash after leaves the new one, and
either is read the same way, the latest line of each key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from josh.util.atomic import replace_synced
from josh.util.jsonl import iter_spans

K = TypeVar("K", bound=Hashable)

ReadKey = Callable[[Any], tuple[K, bool] | None]
"""A line's key and whether it is a failed piece (done again on rerun), from its JSON value; ``None``: no key."""


@dataclass(frozen=True)
class Line:
    """Where one line lies in the file, and whether it records a failed piece."""

    start: int
    end: int
    failed: bool = False


@dataclass
class Latest(Generic[K]):
    """The latest line of each key of a file (in the order the keys first appear), its lines of no key, and how
    many lines it has."""

    keyed: dict[K, Line] = field(default_factory=dict)
    loose: list[Line] = field(default_factory=list)
    lines: int = 0

    def finished(self) -> set[K]:
        """The keys whose latest line is not a failed piece."""
        return {key for key, line in self.keyed.items() if not line.failed}


def beside(path: Path) -> Path:
    """The hidden file a compaction of ``path`` writes before renaming it into place."""
    return path.with_name(f".{path.name}.compacting")


def latest_lines(path: Path, read_key: ReadKey[K]) -> Latest[K]:
    """The latest line of each key of ``path`` (a bad last line, a write cut short, is left out; a bad line before
    it is a ``CorruptLineError``)."""
    latest: Latest[K] = Latest()
    for span in iter_spans(path):
        latest.lines += 1
        found = read_key(span.value)
        if found is None:
            latest.loose.append(Line(span.start, span.end))
            continue
        key, failed = found
        latest.keyed[key] = Line(span.start, span.end, failed)
    return latest


def _plan(latest: Latest[K], order: Iterable[K]) -> list[Line]:
    named = [key for key in dict.fromkeys(order) if key in latest.keyed]
    taken = set(named)
    rest = [key for key in latest.keyed if key not in taken]
    return [latest.keyed[key] for key in [*named, *rest]] + latest.loose


def compact(path: Path, latest: Latest[K], order: Iterable[K]) -> bool:
    """Rewrite ``path`` as one line per key (see the module docstring) from ``latest`` (``latest_lines`` of the file
    as it is now); ``False`` when the file is already so and is left untouched."""
    plan = _plan(latest, order)
    if len(plan) == latest.lines and all(a.start < b.start for a, b in zip(plan, plan[1:], strict=False)):
        return False
    tmp = beside(path)
    try:
        with path.open("rb") as src, tmp.open("wb") as out:
            for line in plan:
                src.seek(line.start)
                raw = src.read(line.end - line.start)
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
        replace_synced(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return True
