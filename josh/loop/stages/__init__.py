"""The stages of ``josh loop``, one module each, all implementing the contract of ``josh.loop.stages.base``: settings,
inputs, outputs, done, run. ``josh.loop.runner`` decides which stages run on what (the training-arm policy)."""

from josh.loop.stages.base import Builder, Merger, Planned, Stage, StageContext, Trainer, Unfinished
from josh.loop.stages.evaluation import EvalStage, eval_tasks
from josh.loop.stages.extraction import ExtractStage, TreeExtractStage
from josh.loop.stages.merging import MergeStage, merge_with_peft
from josh.loop.stages.rollouts import RolloutStage, rollout_tasks
from josh.loop.stages.training import ENDED, TrainStage, train_with_trl
from josh.loop.stages.warm_start import RowsStage, WarmStartStage, prompt_of

__all__ = [
    "ENDED",
    "Builder",
    "EvalStage",
    "ExtractStage",
    "MergeStage",
    "Merger",
    "RolloutStage",
    "RowsStage",
    "Stage",
    "StageContext",
    "TrainStage",
    "TreeExtractStage",
    "Trainer",
    "Unfinished",
    "Planned",
    "WarmStartStage",
    "eval_tasks",
    "merge_with_peft",
    "prompt_of",
    "rollout_tasks",
    "train_with_trl",
]
