"""What the τ-bench domains (retail, airline) share: the environment mechanics, copy-on-write state, the tool
wrapper and its schema check, task-file loading, the outcome reward and pass^k, and a scripted customer."""

from josh.envs.taubench.env import TauBenchEnv
from josh.envs.taubench.reward import OutcomeReward, outputs_found
from josh.envs.taubench.state import OverlayState, canonical, copy_record
from josh.envs.taubench.tasks import TauDetails, details_of
from josh.envs.taubench.tools import Tool

__all__ = [
    "OutcomeReward",
    "OverlayState",
    "TauBenchEnv",
    "TauDetails",
    "Tool",
    "canonical",
    "copy_record",
    "details_of",
    "outputs_found",
]
