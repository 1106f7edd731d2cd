"""The stages of ``josh loop``, one module each, all implementing the contract of ``josh.stages.base``: settings,
inputs, outputs, done, run. ``josh.loop`` decides which stages run on what (the training-arm policy)."""

from josh.stages.base import Builder, Merger, Stage, StageContext, Trainer, Unfinished
from josh.stages.evaluation import EvalStage, eval_tasks
from josh.stages.extraction import ExtractStage, TreeExtractStage, kto_labels
from josh.stages.merging import MergeStage, merge_with_peft
from josh.stages.rollouts import RolloutStage, rollout_tasks
from josh.stages.training import ENDED, TrainStage, train_with_trl
from josh.stages.warm_start import WarmStartStage, prompt_of

__all__ = [
    "ENDED",
    "Builder",
    "EvalStage",
    "ExtractStage",
    "MergeStage",
    "Merger",
    "RolloutStage",
    "Stage",
    "StageContext",
    "TrainStage",
    "TreeExtractStage",
    "Trainer",
    "Unfinished",
    "WarmStartStage",
    "eval_tasks",
    "kto_labels",
    "merge_with_peft",
    "prompt_of",
    "rollout_tasks",
    "train_with_trl",
]
