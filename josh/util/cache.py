"""Where josh keeps what it fetches or converts once: ``$JOSH_CACHE``, default ``~/.cache/josh``."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache folder (``$JOSH_CACHE`` or ``~/.cache/josh``); it may not exist yet."""
    return Path(os.environ.get("JOSH_CACHE") or Path.home() / ".cache" / "josh")
