"""The GRPO rollout ledger: the tally of online rollouts survives a resume, and ``grpo.max_llm_calls`` stops
training after the step that reaches the budget (no model: the callback on the trainer's own state objects)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from josh.training.grpo.ledger import rollout_ledger
from josh.training.grpo.rollout import RolloutStats


def trainer_state(**fields: Any) -> Any:
    """transformers' ``TrainerState``, imported here: ``transformers.trainer_callback`` pulls in peft, accelerate and
    bitsandbytes (seconds), which every xdist worker would pay just to collect this module."""
    from transformers import TrainerState

    return TrainerState(**fields)


def trainer_control() -> Any:
    """transformers' ``TrainerControl`` (imported here, as in ``trainer_state``)."""
    from transformers import TrainerControl

    return TrainerControl()


def args(tmp_path: Path, process: int = 0) -> SimpleNamespace:
    return SimpleNamespace(output_dir=str(tmp_path), process_index=process)


def step(ledger, stats: RolloutStats, tmp_path: Path, state: Any, calls: int) -> Any:
    """One training step whose rollouts made ``calls`` LLM calls."""
    control = trainer_control()
    stats.llm_calls += calls
    stats.conversations += 2
    state.global_step += 1
    ledger.on_step_end(args(tmp_path), state, control)
    return control


def test_training_stops_after_the_step_that_reaches_the_budget(tmp_path: Path) -> None:
    stats = RolloutStats(max_llm_calls=10)
    ledger, state = rollout_ledger(stats, lambda n: n), trainer_state()
    assert not step(ledger, stats, tmp_path, state, 4).should_training_stop
    assert not step(ledger, stats, tmp_path, state, 5).should_training_stop and not stats.stopped_at_budget
    assert step(ledger, stats, tmp_path, state, 4).should_training_stop  # 13 >= 10: this step finished, no more
    assert stats.stopped_at_budget and stats.max_llm_calls == 10
    assert "13 LLM calls (budget 10, reached)" in stats.line()


def test_the_budget_counts_every_process(tmp_path: Path) -> None:
    stats = RolloutStats(max_llm_calls=10)
    ledger, state = rollout_ledger(stats, lambda n: 4 * n), trainer_state()  # four processes like this one
    assert step(ledger, stats, tmp_path, state, 3).should_training_stop


def test_without_a_budget_nothing_stops(tmp_path: Path) -> None:
    stats = RolloutStats()
    ledger, state = rollout_ledger(stats, lambda n: n), trainer_state()
    assert not step(ledger, stats, tmp_path, state, 10_000).should_training_stop
    assert "budget" not in stats.line()


def test_a_resumed_run_carries_the_tally_of_its_checkpoint(tmp_path: Path) -> None:
    stats = RolloutStats(max_llm_calls=100)
    ledger, state = rollout_ledger(stats, lambda n: n), trainer_state()
    for _ in range(3):
        step(ledger, stats, tmp_path, state, 7)
        (tmp_path / f"checkpoint-{state.global_step}").mkdir()
        ledger.on_save(args(tmp_path), state, trainer_control())
    step(ledger, stats, tmp_path, state, 7)  # after the last checkpoint: lost with the kill, redone on resume
    saved = tmp_path / "checkpoint-3" / "josh_rollouts-0.json"
    assert RolloutStats.model_validate_json(saved.read_text()).llm_calls == 21

    fresh = RolloutStats(max_llm_calls=100)
    resumed, state = rollout_ledger(fresh, lambda n: n), trainer_state(global_step=3)
    resumed.on_train_begin(args(tmp_path), state, trainer_control())
    assert (fresh.llm_calls, fresh.conversations, fresh.max_llm_calls) == (21, 6, 100)
    other = RolloutStats(max_llm_calls=100)
    rollout_ledger(other, lambda n: n).on_train_begin(args(tmp_path, process=1), state, trainer_control())
    assert other.llm_calls == 0  # another process reads only its own tally


def test_a_fresh_run_starts_from_zero_even_beside_old_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "checkpoint-0").mkdir()
    (tmp_path / "checkpoint-0" / "josh_rollouts-0.json").write_text(RolloutStats(llm_calls=99).model_dump_json())
    stats = RolloutStats()
    rollout_ledger(stats, lambda n: n).on_train_begin(args(tmp_path), trainer_state(), trainer_control())
    assert stats.llm_calls == 0
