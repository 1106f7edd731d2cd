"""The retail environment (τ-bench style): 16 tools over a forkable copy-on-write database, gold-action goals for
JOSH, and the τ-bench outcome reward (final database equals the gold replay's, required outputs spoken); the shared
mechanics and their decisions are ``josh.envs.taubench``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from josh.envs.retail.db import RetailDB, load_db
from josh.envs.retail.state import RetailState
from josh.envs.retail.tasks import details_of, load_tasks
from josh.envs.retail.tools import TOOLS, WRITE_TOOLS
from josh.envs.taubench import TauBenchEnv
from josh.types import Task

DEFAULT_DATA_DIR = Path("envs/retail")
DATA_DIR_VARIABLE = "JOSH_RETAIL_DATA"


def default_data_dir() -> Path:
    """``$JOSH_RETAIL_DATA`` if set, else ``envs/retail`` (where ``josh data download retail`` puts it)."""
    return Path(os.environ.get(DATA_DIR_VARIABLE, DEFAULT_DATA_DIR))


class RetailEnv(TauBenchEnv):
    """τ-bench retail as a josh ``Env``. The database is loaded once per data folder and shared by all states."""

    name = "retail"
    registry = TOOLS
    state_type = RetailState
    details_of = staticmethod(details_of)
    goal_tools = write_tools = frozenset(WRITE_TOOLS)

    def __init__(self, data_dir: Path | str | None = None) -> None:
        super().__init__()
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.db: RetailDB = load_db(self.data_dir)
        self.tools: list[dict[str, Any]] = [tool.schema for tool in TOOLS.values()]
        self._tasks: dict[str, list[Task]] = {}

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``train``, ``dev`` or ``test`` (loaded once)."""
        if split not in self._tasks:
            self._tasks[split] = load_tasks(self.data_dir, split)
        return self._tasks[split]
