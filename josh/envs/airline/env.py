"""The τ-bench airline domain as a josh environment: 14 tools, the airline policy as the system prompt, JOSH goals
from the gold write actions, and τ-bench's outcome reward (final database equal to the gold replay's, required
outputs said); the shared mechanics are ``josh.envs.taubench``. The decided semantics are in ``SPEC.md`` beside
this file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from josh.envs.airline.db import AirlineDB, load_db
from josh.envs.airline.state import AirlineState
from josh.envs.airline.tasks import details_of, load_tasks
from josh.envs.airline.tools import TOOLS, WRITE_TOOLS
from josh.envs.taubench import TauBenchEnv
from josh.types import Task

DEFAULT_DATA_DIR = Path("envs/airline")
DATA_DIR_VARIABLE = "JOSH_AIRLINE_DATA"


def default_data_dir() -> Path:
    """``$JOSH_AIRLINE_DATA`` if set, else ``envs/airline`` (where ``josh data download airline`` puts it)."""
    return Path(os.environ.get(DATA_DIR_VARIABLE, DEFAULT_DATA_DIR))


class AirlineEnv(TauBenchEnv):
    """τ-bench airline as a josh ``Env``. The database is loaded once per data folder and shared by all states."""

    name = "airline"
    registry = TOOLS
    state_type = AirlineState
    details_of = staticmethod(details_of)
    goal_tools = write_tools = frozenset(WRITE_TOOLS)

    def __init__(self, data_dir: Path | str | None = None) -> None:
        super().__init__()
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        self.db: AirlineDB = load_db(self.data_dir)
        self.tools: list[dict[str, Any]] = [tool.schema for tool in TOOLS.values()]
        self._tasks: dict[str, list[Task]] = {}

    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``test``, the only airline split (loaded and checked once)."""
        if split not in self._tasks:
            self._tasks[split] = load_tasks(self.data_dir, split, self.db.users)
        return self._tasks[split]
