"""Whole-file and whole-folder writes that a crash never leaves half done: the data goes to a hidden file or folder
beside the target, which is then renamed into its place (a rename within one folder is atomic), so a reader sees the
old file or the new one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
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
