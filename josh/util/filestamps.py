"""Loads kept in memory while the files they read are unchanged: a folder's load is keyed by the modification time
and size of each file it reads, so a file edited, replaced or removed in the same process is read again."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
Stamp = tuple[int, int] | None


def stamp(path: Path) -> Stamp:
    """What tells a changed file: its modification time and size (``None``: not there)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


class FolderCache(Generic[T]):
    """``load(folder)`` once per folder while its files ``names`` keep their stamps; a failed load is not kept (the
    next call tries again)."""

    def __init__(self, load: Callable[[Path], T], names: Iterable[str], maxsize: int = 8) -> None:
        self._names = tuple(names)
        self._loaded = lru_cache(maxsize)(self._load_once)
        self._load = load

    def _load_once(self, folder: Path, stamps: tuple[Stamp, ...]) -> T:
        return self._load(folder)

    def __call__(self, folder: Path) -> T:
        folder = folder.resolve()
        return self._loaded(folder, tuple(stamp(folder / name) for name in self._names))

    def clear(self) -> None:
        """Forget every load."""
        self._loaded.cache_clear()
