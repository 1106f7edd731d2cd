"""Whole-file writes that a crash never leaves half done: the data goes to a hidden file beside the target, which is
then renamed over it (a rename within one folder is atomic), so a reader sees the old file or the new one."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes | Iterable[str], *, errors: str = "strict") -> Path:
    """Write ``data`` (text, bytes, or lines that already end in a newline) to ``path`` all at once; its folder is
    made when missing. ``errors`` is the UTF-8 error handler for text."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
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
