"""τ-bench airline environment: copy-on-write database, 14 tools, gold-action goals, outcome reward."""

from josh.envs.airline.db import AirlineDataError, AirlineDB, load_db
from josh.envs.airline.env import AirlineEnv, default_data_dir
from josh.envs.airline.state import AirlineState
from josh.envs.airline.tasks import AirlineDetails, details_of, load_tasks
from josh.envs.retail.reward import pass_hat_k

__all__ = [
    "AirlineDB",
    "AirlineDataError",
    "AirlineDetails",
    "AirlineEnv",
    "AirlineState",
    "default_data_dir",
    "details_of",
    "load_db",
    "load_tasks",
    "pass_hat_k",
]
