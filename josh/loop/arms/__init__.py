"""The loop's training arms, one module each (``josh.loop.arms.base`` says what an arm is), in the order a round runs
them; the controls (``control_random``, ``control_retrain``) train beside them to say what JOSH's selection adds.
Adding an arm: a module with its ``Arm`` and one line in ``ARMS``."""

from josh.loop.arms.base import Arm
from josh.loop.arms.grpo import GRPOArm
from josh.loop.arms.kto import KTOArm
from josh.loop.arms.sft import SFTArm
from josh.loop.arms.tree import TreeArm

ARMS: tuple[Arm, ...] = (SFTArm(), KTOArm(), TreeArm(), GRPOArm())
