"""τ-bench airline environment: copy-on-write database, 14 tools, gold-action goals, outcome reward."""

from josh.envs.airline.db import AirlineDataError, AirlineDB, load_db
from josh.envs.airline.env import AirlineEnv
from josh.envs.airline.state import AirlineState
from josh.envs.airline.tasks import load_tasks
from josh.envs.taubench import details_of

__all__ = [
    "AirlineDB",
    "AirlineDataError",
    "AirlineEnv",
    "AirlineState",
    "details_of",
    "load_db",
    "load_tasks",
]
