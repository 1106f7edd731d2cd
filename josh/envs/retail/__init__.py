"""τ-bench-style retail environment: copy-on-write database, 16 tools, gold-action goals, outcome reward."""

from josh.envs.retail.db import RetailDataError, RetailDB, load_db
from josh.envs.retail.env import RetailEnv, default_data_dir
from josh.envs.retail.reward import RetailReward, pass_hat_k
from josh.envs.retail.state import RetailState
from josh.envs.retail.tasks import RetailDetails, details_of, load_tasks

__all__ = [
    "RetailDB",
    "RetailDataError",
    "RetailDetails",
    "RetailEnv",
    "RetailReward",
    "RetailState",
    "default_data_dir",
    "details_of",
    "load_db",
    "load_tasks",
    "pass_hat_k",
]
