"""Whole-file and whole-folder writes that a crash never leaves half done: the data goes to a hidden file or folder
beside the target, which is then renamed into its place (a rename within one folder is atomic), so a reader sees the
old file or the new one. A command's output folder that it made and then failed in before writing anything is
removed (``no_half_made``)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes | Iterable[str], *, errors: str = "strict") -> Path:
    """Write ``data`` (text, bytes, or lines that already end in a newline) to ``path`` all at once; its folder is
    made when missing. ``errors`` is the UTF-8 error handler for text."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # per process: ranks writing one file do not collide
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            with tmp.open("w", encoding="utf-8", errors=errors) as f:
                f.writelines([data] if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def replace_synced(written: Path, path: Path) -> None:
    """Put the file ``written`` (beside ``path``) in ``path``'s place so that even a machine crash leaves the old
    file or the whole new one: its data synced to disk, the rename, then the folder's entry synced."""
    with written.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(written, path)
    if hasattr(os, "O_DIRECTORY"):  # POSIX: a folder is synced through a descriptor of its own
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def write_folder_atomic(target: str | Path, fill: Callable[[Path], object]) -> Path:
    """Let ``fill`` write a fresh hidden folder beside ``target`` (readable by all), then put it in ``target``'s
    place; the fresh folder is removed when ``fill`` fails."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    tmp.chmod(0o755)
    try:
        fill(tmp)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return target


@contextmanager
def no_half_made(folder: str | Path) -> Iterator[None]:
    """Run a command that writes into ``folder``: if the block fails (an error, Ctrl-C) and the folder was made by it
    and holds nothing but logs and empty files, the folder (and the missing parents made for it) is removed, so a
    command that failed before its first record leaves nothing behind. A folder that was there before is left as it
    is, and so is one with a record in it (rerunning the command resumes)."""
    made = Path(folder)
    if made.exists():
        yield
        return
    while not made.parent.exists():
        made = made.parent
    try:
        yield
    except BaseException:
        if made.is_dir() and not _holds_records(made):
            shutil.rmtree(made, ignore_errors=True)
        raise


def _holds_records(folder: Path) -> bool:
    """Whether ``folder`` holds a non-empty file other than a log."""
    return any(p.is_file() and p.suffix != ".log" and p.stat().st_size for p in folder.rglob("*"))
