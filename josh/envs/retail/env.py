"""The retail environment (τ-bench style): 16 tools over a forkable copy-on-write database, gold-action goals for
JOSH, and the τ-bench outcome reward (final database equals the gold replay's, required outputs spoken); the shared
mechanics and their decisions are ``josh.envs.taubench``. Data: ``$JOSH_RETAIL_DATA``, else ``envs/retail``.
"""

from __future__ import annotations

from josh.envs.retail.db import load_db
from josh.envs.retail.state import RetailState
from josh.envs.retail.tasks import SPLITS, load_tasks
from josh.envs.retail.tools import TOOLS
from josh.envs.taubench.env import TauBenchEnv
from josh.types import Task


class RetailEnv(TauBenchEnv, name="retail", registry=TOOLS, state_type=RetailState, load_db=load_db):
    """τ-bench retail as a josh ``Env``: splits ``train``, ``dev`` and ``test``."""

    splits = SPLITS

    def load_tasks(self, split: str) -> list[Task]:
        return load_tasks(self.data_dir, split)
