"""TRL's GRPOTrainer on a josh environment: SmolLM2 learns on ToolWOZ's mini set, the agenda user answering
between the model's turns. Two steps on the CPU, offline (about 4 CPU-minutes: each step runs two sequences of
about 1,800 tokens, the system prompt and the tool schemas):

    python examples/trl-grpo/train.py --out runs/trl-grpo

The environment is ``josh.run.trl_env.trl_environment``: one instance per rollout, ToolWOZ's tools as methods, the
user reached through the ``talk_to_user`` tool, the reward from ``get_reward`` (no reward function needed). The
model is josh's offline SmolLM2 under josh's ChatML tool template, with the response template that lets TRL read
its ``<tool_call>`` blocks back as tool calls.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL 1.16


def train(out: str, *, steps: int = 2, tasks: int = 2, max_completion_length: int = 8, model: str = "smollm2") -> dict:
    """Train ``steps`` GRPO steps (2 generations per task) of ``model`` (a name or folder) and return the trainer's
    log history."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from josh.cli.serve import CHATML_TOOL_CALLS
    from josh.llm.models import chatml_template, resolve_model
    from josh.run.trl_env import trl_environment

    environment = trl_environment("toolwoz", "mini", user_kind="agenda")
    model = resolve_model(model)
    tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
    tokenizer.chat_template = chatml_template()
    tokenizer.response_template = CHATML_TOOL_CALLS
    config = GRPOConfig(
        output_dir=out, max_steps=steps, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=max_completion_length, logging_steps=1, save_strategy="no", report_to=[],
        use_cpu=True, bf16=False, seed=0, gradient_checkpointing=False,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=config, environment_factory=environment,
        train_dataset=Dataset.from_list(environment.rows("train", limit=tasks)),
    )  # fmt: skip
    trainer.train()
    episodes = [rollout.episode.episode for rollout in trainer._environment_pool[None]]
    return {
        "log": trainer.state.log_history, "steps": trainer.state.global_step,
        "openings": {e.task.id: e.transcript[0].content for e in episodes if e is not None and e.transcript},
    }  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/trl-grpo")
    parser.add_argument("--steps", type=int, default=2)
    done = train(parser.parse_args().out, steps=parser.parse_args().steps)
    print(f"{done['steps']} GRPO steps; rewards: {[round(e['reward'], 3) for e in done['log'] if 'reward' in e]}")
