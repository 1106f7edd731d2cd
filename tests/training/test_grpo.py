"""A tiny online GRPO run on the offline SmolLM2 (slow): whole conversations with the rule-based user in the mini
ToolWOZ set, two optimisation passes over one batch of rollouts lower the GRPO loss on it, and the adapter loads; the
LLM-call budget is checked on the two-layer model of SmolLM2's architecture."""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path
from typing import Any

import pytest

from josh.training.recipe import load_recipe

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


class ShortReplies:
    """The mini ToolWOZ environment rewarding a short first agent output (fewer characters, more reward; a raw 135M
    model seldom completes a goal, so the goal reward alone would give every rollout 0 and GRPO nothing to learn).
    Two different outputs of the same length still get different rewards (a small checksum term): sampling is
    unseeded, and an equal-reward group would leave the update nothing to raise."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reward(self, state: Any, messages: list[Any]) -> float:
        first = next((m.content or "" for m in messages if m.role == "assistant"), "")
        return 1.0 / (1.0 + len(first)) + zlib.crc32(first.encode()) % 1000 * 1e-6


def test_tiny_grpo_lowers_its_loss_on_its_rollouts_and_saves_a_loadable_adapter(tmp_path, monkeypatch) -> None:
    """The prompt lists no tools (``tool_listing: none``, a 180-token system prompt instead of 492): every pass runs
    the 135M model over whole conversations, and the reward here is the reply's length, so the shorter prompt tests
    the same update at under half the tokens."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    import josh.training.grpo.trainer as grpo
    from josh.llm.models import resolve_model
    from josh.training.runner import train

    real = grpo.tasks_of
    monkeypatch.setattr(grpo, "tasks_of", lambda recipe: (ShortReplies(real(recipe)[0]), real(recipe)[1]))
    settings = [
        f"output_dir={tmp_path}", "optim.max_steps=2", "optim.per_device_train_batch_size=2", "optim.learning_rate=5e-3",
        "grpo.limit=1", "grpo.num_iterations=2", "grpo.max_turns=1", "grpo.max_new_tokens=12",
        "grpo.agent_options={examples: 0, max_generations: 1, tool_listing: none}",
    ]  # fmt: skip
    run_dir = train(load_recipe(ROOT / "recipes/tiny-grpo.yaml", settings), progress=False)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    losses = [entry["loss"] for entry in metrics["loss_curve"]]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert losses[1] < losses[0]  # the second pass over the same rollouts: the update raised the better ones
    rollouts = metrics["rollouts"]
    assert rollouts["conversations"] == 2 and rollouts["trained"] == 2 and rollouts["llm_calls"] >= 2
    assert rollouts["equal_groups"] == 0 and sum(rollouts["skipped"].values()) == 0
    assert metrics["method"] == "grpo" and metrics["tokens"] > 0
    config = json.loads((run_dir / "adapter_config.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(resolve_model(config["base_model_name_or_path"]))
    assert isinstance(PeftModel.from_pretrained(base, run_dir), PeftModel)


def test_grpo_stops_at_its_llm_call_budget(tiny_smollm2: Path, tmp_path: Path) -> None:
    """The budget's bookkeeping, on the two-layer ``tiny_smollm2`` (the test above trains the real SmolLM2)."""
    from josh.training.runner import train

    settings = [
        f"output_dir={tmp_path}", f"model.name={tiny_smollm2}", "optim.per_device_train_batch_size=2", "grpo.limit=2", "grpo.max_turns=1",
        "grpo.max_new_tokens=8", "grpo.agent_options={examples: 0, max_generations: 1}", "grpo.max_llm_calls=1",
    ]  # fmt: skip
    run_dir = train(load_recipe(ROOT / "recipes/tiny-grpo.yaml", settings), progress=False)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["global_step"] == 1  # two tasks, one per step: the first step's rollouts spent the budget
    rollouts = metrics["rollouts"]
    assert rollouts["stopped_at_budget"] and rollouts["max_llm_calls"] == 1 and rollouts["llm_calls"] >= 1
