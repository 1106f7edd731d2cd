"""The τ-bench airline domain as a josh environment: 14 tools, the airline policy as the system prompt, JOSH goals
from the gold write actions, and τ-bench's outcome reward (final database equal to the gold replay's, required
outputs said); the shared mechanics are ``josh.envs.taubench``. The decided semantics are in ``SPEC.md`` beside
this file. Data: ``$JOSH_AIRLINE_DATA``, else ``envs/airline``.
"""

from __future__ import annotations

from josh.envs.airline.db import load_db
from josh.envs.airline.state import AirlineState
from josh.envs.airline.tasks import SPLITS, load_tasks
from josh.envs.airline.tools import TOOLS
from josh.envs.taubench.env import TauBenchEnv
from josh.types import Task


class AirlineEnv(TauBenchEnv, name="airline", registry=TOOLS, state_type=AirlineState, load_db=load_db):
    """τ-bench airline as a josh ``Env``: one split, ``test``."""

    splits = SPLITS

    def load_tasks(self, split: str) -> list[Task]:
        return load_tasks(self.data_dir, split, self.db.users)
