"""The GRPO rollout ledger: what the online rollouts cost, kept across checkpoints, and the LLM-call budget.

``RolloutStats`` (``josh.training.grpo.rollout``) counts the conversations, LLM calls and skips of this process.
The ledger is a ``TrainerCallback`` that writes them into every checkpoint and reads them back when training resumes
(one file per process, ``josh_rollouts-<process>.json``), so ``metrics.json`` counts the whole run, not only its last
stretch. With a budget (``RolloutStats.max_llm_calls``, from ``grpo.max_llm_calls``) it also stops training after the
step whose rollouts bring the calls of all processes to it (that step finishes: the overshoot is at most one step's
calls), which is how GRPO is run at the cost of a JOSH search.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from josh.training.grpo.rollout import RolloutStats
from josh.util.atomic import write_atomic


def ledger_file(args: Any, state: Any) -> Path:
    """This process's tally in the checkpoint of the current step."""
    return Path(args.output_dir) / f"checkpoint-{state.global_step}" / f"josh_rollouts-{args.process_index}.json"


def restore(stats: RolloutStats, saved: Path) -> None:
    """Load the tally written into a checkpoint into ``stats`` (in place: the rollout function holds it); the budget
    stays the current recipe's."""
    loaded = RolloutStats.model_validate_json(saved.read_text(encoding="utf-8"))
    for name in RolloutStats.model_fields:
        if name != "max_llm_calls":
            setattr(stats, name, getattr(loaded, name))


def rollout_ledger(stats: RolloutStats, total_calls: Any) -> Any:
    """The callback; ``total_calls(n)`` sums this process's ``n`` over all processes."""
    from transformers import TrainerCallback  # optional: the train extra

    class RolloutLedger(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            saved = ledger_file(args, state)
            if state.global_step and saved.is_file():
                restore(stats, saved)

        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            budget = stats.max_llm_calls
            if budget is not None and total_calls(stats.llm_calls) >= budget:
                stats.stopped_at_budget = True
                control.should_training_stop = True

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            path = ledger_file(args, state)
            if path.parent.is_dir():
                write_atomic(path, stats.model_dump_json(indent=2))

    return RolloutLedger()
