"""The loop's training arms, one module each (``josh.loop.arms.base`` says what an arm is), in the order a round runs
them; the controls (``control_random``, ``control_retrain``, ``control_gate``) train beside them to say what JOSH's
selection (and its judge gate) adds. The warm start (``warm_start``) trains, before the rounds, the policy that
searches the first.

Adding an arm: a module with its ``Arm``, registered with ``register_arm``, or another package's entry point in
the ``josh.arms`` group (pointing at the ``Arm`` or at a function that registers it; loaded when a loop checks its
recipe); a loop recipe trains it when its ``arms:`` section holds a training recipe under the arm's key (the
"Extending josh" docs show one).
"""

from josh.loop.arms.base import Arm
from josh.loop.arms.control_gate import GateControlArm
from josh.loop.arms.grpo import GRPOArm
from josh.loop.arms.kto import KTOArm
from josh.loop.arms.sft import SFTArm
from josh.loop.arms.tree import TreeArm
from josh.loop.recipe import LoopRecipe
from josh.plugins import GROUPS, Plugins

ARMS: list[Arm] = [SFTArm(), KTOArm(), TreeArm(), GRPOArm(), GateControlArm()]
PLUGINS = Plugins(GROUPS["arm"])


def register_arm(arm: Arm) -> Arm:
    """Add ``arm`` after the arms registered so far (a round runs them in this order); its key must be new."""
    if any(a.key == arm.key for a in ARMS):
        raise ValueError(f"an arm with key {arm.key!r} is already registered")
    ARMS.append(arm)
    return arm


def registered_arms() -> list[Arm]:
    """Every arm, the ``josh.arms`` plugins loaded first (a failing one is reported by name and left out)."""
    PLUGINS.scan({a.key for a in ARMS})
    PLUGINS.load_all(register_arm, lambda key: any(a.key == key for a in ARMS))
    return ARMS


def check_arms(recipe: LoopRecipe) -> list[Arm]:
    """Every registered arm (as ``registered_arms``); raise ``ValueError`` when the recipe's ``arms:`` names an arm
    nobody registered (``PluginError`` when it names a plugin that failed to load)."""
    arms = list(registered_arms())
    known = {a.key for a in arms}
    for key in set(recipe.arms) - known:
        PLUGINS.check(key)
    unknown = sorted(set(recipe.arms) - known)
    if unknown:
        raise ValueError(
            f"arms: no registered arm {', '.join(map(repr, unknown))} (registered: {', '.join(sorted(known))}); "
            "register it with josh.loop.arms.register_arm before the loop runs"
        )
    return arms
