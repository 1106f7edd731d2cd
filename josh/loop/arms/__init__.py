"""The loop's training arms, one module each (``josh.loop.arms.base`` says what an arm is), in the order a round runs
them; the controls (``control_random``, ``control_retrain``, ``control_gate``) train beside them to say what JOSH's
selection (and its judge gate) adds.

Adding an arm: a module with its ``Arm``, registered with ``register_arm``; a loop recipe trains it when its
``arms:`` section holds a training recipe under the arm's key (the "Extending josh" docs show one).
"""

from josh.loop.arms.base import Arm
from josh.loop.arms.control_gate import GateControlArm
from josh.loop.arms.grpo import GRPOArm
from josh.loop.arms.kto import KTOArm
from josh.loop.arms.sft import SFTArm
from josh.loop.arms.tree import TreeArm
from josh.loop.recipe import LoopRecipe

ARMS: list[Arm] = [SFTArm(), KTOArm(), TreeArm(), GRPOArm(), GateControlArm()]


def register_arm(arm: Arm) -> Arm:
    """Add ``arm`` after the arms registered so far (a round runs them in this order); its key must be new."""
    if any(a.key == arm.key for a in ARMS):
        raise ValueError(f"an arm with key {arm.key!r} is already registered")
    ARMS.append(arm)
    return arm


def check_arms(recipe: LoopRecipe) -> None:
    """Raise ``ValueError`` when the recipe's ``arms:`` names an arm nobody registered."""
    known = {a.key for a in ARMS}
    unknown = sorted(set(recipe.arms) - known)
    if unknown:
        raise ValueError(
            f"arms: no registered arm {', '.join(map(repr, unknown))} (registered: {', '.join(sorted(known))}); "
            "register it with josh.loop.arms.register_arm before the loop runs"
        )
