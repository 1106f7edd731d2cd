"""τ-bench-style retail environment: copy-on-write database, 16 tools, gold-action goals, outcome reward."""

from josh.envs.retail.db import RetailDataError, RetailDB, load_db
from josh.envs.retail.env import RetailEnv
from josh.envs.retail.state import RetailState
from josh.envs.retail.tasks import load_tasks
from josh.envs.taubench import details_of

__all__ = [
    "RetailDB",
    "RetailDataError",
    "RetailEnv",
    "RetailState",
    "details_of",
    "load_db",
    "load_tasks",
]
