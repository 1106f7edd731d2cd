"""Retail task records: ``tasks_<split>.json`` loaded into ``Task``s (see ``josh.envs.taubench.tasks``)."""

from __future__ import annotations

from pathlib import Path

from josh.envs.retail.db import RetailDataError
from josh.envs.retail.tools import WRITE_TOOLS
from josh.envs.taubench.tasks import load_task_file
from josh.types import Task

SPLITS = ("train", "dev", "test")


def load_tasks(data_dir: Path | str, split: str) -> list[Task]:
    """The tasks of one split (``train``, ``dev``, ``test``); ids are ``retail-<split>-<index>``."""
    if split not in SPLITS:
        raise RetailDataError(f"unknown retail split {split!r}; choose one of {', '.join(SPLITS)}")
    return load_task_file("retail", data_dir, split, WRITE_TOOLS, RetailDataError)
